// Package model holds the Model interface the agent loop calls once per
// turn, and its implementations over openai-go: the OpenAI Responses API
// (the default) and Chat Completions (for OpenAI-compatible servers such as
// vLLM, Ollama and llama.cpp).
//
// openai-go's own retries are turned off: a model call runs inside a
// Temporal activity, and Temporal retries it. Errors are classified so the
// activity layer can tell a retryable failure (408, 409, 429, 5xx, network,
// a stream cut short) from one a retry cannot fix (other 4xx).
//
// Both adapters stream every call (server-sent events), so that the text
// of a turn can be shown as it is generated: a caller that puts a func in
// the call's context with WithDeltas gets each piece as it arrives.
// Respond still returns the whole turn, the same Response a non-streamed
// call gives.
package model

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/troupe-dev/troupe/agents"
)

// Model answers one turn of an agent.
type Model interface {
	// Respond sends the request and returns the model's output items.
	Respond(ctx context.Context, req Request) (*Response, error)
}

// Request is one turn's input to a model.
type Request struct {
	// Model is the provider's model name, e.g. "gpt-4.1".
	Model string
	// Instructions is the system prompt of the agent.
	Instructions string
	// Input is the transcript so far.
	Input []agents.Item
	// Tools are the tools the model may call (function tools, agent tools
	// and transfer_to_<agent> handoff tools alike).
	Tools []agents.ToolSpec
	// Output, when set, asks for a JSON final output matching its schema.
	Output *agents.OutputSpec
	// Settings tune the call.
	Settings agents.ModelSettings
}

// Response is the model's answer to one Request.
type Response struct {
	// ID is the provider's response id.
	ID string
	// Model is the model that answered, as the provider names it.
	Model string
	// FinishReason is why the model stopped, in the Chat Completions
	// API's terms: stop, tool_calls, length or content_filter (the
	// Responses API's status and incomplete reason, mapped onto them).
	FinishReason string
	// Output holds the items the model produced: messages, function calls
	// and reasoning items, in order.
	Output []agents.Item
	// Usage counts the tokens of this call.
	Usage Usage
}

// Usage counts requests and tokens.
type Usage struct {
	Requests    int `json:"requests"`
	InputTokens int `json:"input_tokens"`
	// CachedInputTokens are the input tokens the provider served from its
	// prompt cache (counted in InputTokens too), which cost less.
	CachedInputTokens int `json:"cached_input_tokens,omitempty"`
	OutputTokens      int `json:"output_tokens"`
	TotalTokens       int `json:"total_tokens"`
}

// Add returns the sum of u and o.
func (u Usage) Add(o Usage) Usage {
	return Usage{
		Requests:          u.Requests + o.Requests,
		InputTokens:       u.InputTokens + o.InputTokens,
		CachedInputTokens: u.CachedInputTokens + o.CachedInputTokens,
		OutputTokens:      u.OutputTokens + o.OutputTokens,
		TotalTokens:       u.TotalTokens + o.TotalTokens,
	}
}

// APIError is an error answered by the model provider.
type APIError struct {
	// StatusCode is the HTTP status, or 0 when no answer arrived whole:
	// none at all, one that could not be read, or a stream that broke or
	// ended early.
	StatusCode int
	// Type and Code are the provider's error type and code, when given.
	Type, Code string
	// Param is the provider's param: the request parameter at fault, or,
	// for the scripted server's CodeScenarioNoMatch, the scenario file to
	// add a rule to.
	Param string
	// Message is the provider's message.
	Message string
	// Err is what kept the request from an answer (StatusCode 0): the
	// connection refused, the timeout, the stream cut short.
	Err error
	// RetryAfter is how long the provider asked to wait before the next
	// request, from the answer's headers (see RetryDelay); 0 when it did
	// not say.
	RetryAfter time.Duration
}

// Unwrap returns Err.
func (e *APIError) Unwrap() error { return e.Err }

func (e *APIError) Error() string {
	if e.StatusCode == 0 {
		return "model: " + e.Message
	}
	return fmt.Sprintf("model: HTTP %d %s: %s", e.StatusCode, e.Type, e.Message)
}

// Retryable reports whether a retry may succeed: no response at all,
// 408, 409, 429 and 5xx are retryable; other 4xx are not, nor is a 429
// that says the account's quota is spent (code insufficient_quota), which
// no wait mends.
func (e *APIError) Retryable() bool {
	switch {
	case e.StatusCode == 0:
		return true
	case e.StatusCode == 429:
		return e.Code != CodeInsufficientQuota
	case e.StatusCode == 408, e.StatusCode == 409:
		return true
	case e.StatusCode >= 500:
		return true
	}
	return false
}

// RateLimited reports whether the provider turned the request away for
// its rate limits (429, but for a spent quota): a wait, not a repair,
// lets it through, and the wait is RetryAfter when the provider said.
func (e *APIError) RateLimited() bool {
	return e.StatusCode == 429 && e.Code != CodeInsufficientQuota
}

// CodeInsufficientQuota is the code with which OpenAI answers 429 when
// the account's quota or credit is spent, rather than a rate limit hit.
const CodeInsufficientQuota = "insufficient_quota"

// RateLimited reports whether err is a provider's rate-limit answer
// (APIError.RateLimited), and if so how long it asked to wait (0 when it
// did not say).
func RateLimited(err error) (time.Duration, bool) {
	var ae *APIError
	if errors.As(err, &ae) && ae.RateLimited() {
		return ae.RetryAfter, true
	}
	return 0, false
}

// CodeScenarioNoMatch is the error code with which the scripted model
// server (runtime/model/scripted) answers a request no rule of its
// scenario matches. It is not a failure of the model: the offline script
// has no answer for what was said.
const CodeScenarioNoMatch = "scripted_no_match"

// ScenarioNoMatch reports whether err is the scripted server's answer to
// a request its scenario has no rule for, and if so the scenario file to
// add a rule to (empty when the server did not say).
func ScenarioNoMatch(err error) (source string, ok bool) {
	var ae *APIError
	if errors.As(err, &ae) && ae.StatusCode == 400 && ae.Code == CodeScenarioNoMatch {
		return ae.Param, true
	}
	return "", false
}

// IsRetryable reports whether err is worth retrying. A request the
// adapter could not build (ErrInvalidRequest) is not; other errors that are
// not APIErrors (network failures, timeouts) are.
func IsRetryable(err error) bool {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Retryable()
	}
	if errors.Is(err, ErrInvalidRequest) {
		return false
	}
	return !errors.Is(err, context.Canceled)
}
