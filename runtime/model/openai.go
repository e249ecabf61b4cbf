// This file holds what both OpenAI adapters share: Config and its defaults,
// New, the HTTP client, and the mapping of openai-go errors onto APIError.
// The wire mappings live in responses.go (Responses API) and chat.go (Chat
// Completions).

package model

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// API names the OpenAI wire protocol a Model speaks.
type API string

// The wire protocols New accepts.
const (
	// APIResponses is the OpenAI Responses API (POST /responses), the
	// default. Reasoning items round-trip through it.
	APIResponses API = "responses"
	// APIChat is Chat Completions (POST /chat/completions), for
	// OpenAI-compatible servers such as vLLM, Ollama and llama.cpp.
	APIChat API = "chat"
)

// DefaultModel is the model name used when neither Request.Model nor
// Config.DefaultModel is set.
const DefaultModel = "gpt-4.1"

// DefaultBaseURL is OpenAI's API root, used when Config.BaseURL is empty.
const DefaultBaseURL = "https://api.openai.com/v1/"

// defaultResponseHeaderTimeout bounds the wait for response headers. A
// non-streamed call gets its headers only once the whole answer is
// generated, and reasoning models can think for minutes, so this is long;
// it exists so that a server that accepts a connection and never answers
// does not hold an activity until its own timeout.
const defaultResponseHeaderTimeout = 10 * time.Minute

// ErrInvalidRequest marks a Request that cannot be sent as it stands: an
// item of an unknown type or role, a function call output whose OutputRef
// was not resolved, a tool or output schema that is not a JSON object.
// Retrying such a request cannot help.
var ErrInvalidRequest = errors.New("model: invalid request")

// Config says how to reach an OpenAI-compatible server. The zero value
// works: it talks to OpenAI's Responses API without an API key (set one,
// or use ConfigFromEnv). Nothing is read from the environment unless the
// caller asks for it with ConfigFromEnv.
type Config struct {
	// APIKey is sent as a bearer token. It may be empty for local servers
	// that need none.
	APIKey string
	// BaseURL is the API root, such as "http://localhost:8000/v1" for a
	// local vLLM server. Empty means DefaultBaseURL.
	BaseURL string
	// API picks the wire protocol. Empty means APIResponses.
	API API
	// HTTPClient sends the requests. Nil means a shared client built from
	// http.DefaultTransport, with a response-header timeout of ten minutes
	// and no overall timeout: the caller's context (the activity's
	// deadline) bounds each call.
	HTTPClient *http.Client
	// DefaultModel is the model used when Request.Model is empty. Empty
	// means DefaultModel ("gpt-4.1").
	DefaultModel string
}

// ConfigFromEnv returns a Config filled from the environment:
// OPENAI_API_KEY, OPENAI_BASE_URL, and TROUPE_MODEL_API ("responses" or
// "chat"). Unset variables leave their fields empty, so New applies its
// defaults. ConfigFromEnv never fails; an invalid TROUPE_MODEL_API value is
// reported by New.
func ConfigFromEnv() Config {
	return Config{
		APIKey:  os.Getenv("OPENAI_API_KEY"),
		BaseURL: strings.TrimSpace(os.Getenv("OPENAI_BASE_URL")),
		API:     API(strings.ToLower(strings.TrimSpace(os.Getenv("TROUPE_MODEL_API")))),
	}
}

// New returns a Model that calls the server described by cfg. It fills
// cfg's defaults and rejects an unknown API or a BaseURL that is not an
// absolute http or https URL.
//
// openai-go's own retries are off: each Respond makes exactly one HTTP
// request, and a failed call is retried by Temporal, which retries the
// model activity according to IsRetryable.
func New(cfg Config) (Model, error) {
	if cfg.API == "" {
		cfg.API = APIResponses
	}
	if cfg.API != APIResponses && cfg.API != APIChat {
		return nil, fmt.Errorf("model: unknown API %q: valid values are %q and %q", cfg.API, APIResponses, APIChat)
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("model: BaseURL %q is not an absolute http or https URL", cfg.BaseURL)
	}
	if cfg.DefaultModel == "" {
		cfg.DefaultModel = DefaultModel
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = sharedHTTPClient()
	}

	// The services are built directly rather than through openai.NewClient,
	// which would read OPENAI_* variables behind the caller's back.
	opts := []option.RequestOption{
		option.WithBaseURL(cfg.BaseURL),
		option.WithHTTPClient(cfg.HTTPClient),
		option.WithMaxRetries(0),
		option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			resp, err := next(r)
			if hook, ok := r.Context().Value(sendHookKey{}).(func()); ok {
				hook()
			}
			return resp, err
		}),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	if cfg.API == APIChat {
		return &chatModel{cfg: cfg, svc: openai.NewChatCompletionService(opts...)}, nil
	}
	return newResponsesModel(cfg, opts), nil
}

// sharedHTTPClient is the client of every Config that names none, so that
// models built by New share one connection pool.
var sharedHTTPClient = sync.OnceValue(func() *http.Client {
	t, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		// http.DefaultTransport was replaced (for tracing, say): keep it.
		return &http.Client{Transport: http.DefaultTransport}
	}
	t = t.Clone()
	t.ResponseHeaderTimeout = defaultResponseHeaderTimeout
	return &http.Client{Transport: t}
})

// modelName returns the model a request asks for, or the configured default.
func modelName(cfg Config, req Request) string {
	if req.Model != "" {
		return req.Model
	}
	return cfg.DefaultModel
}

// invalid returns an error wrapping ErrInvalidRequest.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidRequest, fmt.Sprintf(format, args...))
}

// jsonObject decodes a JSON object into its members, each kept as raw JSON,
// so that openai-go re-encodes nested objects (a schema's "properties") in
// their original key order: strict structured output generates fields in
// schema order, and sorting them would change what the model writes first.
// An empty document yields fallback.
func jsonObject(raw json.RawMessage, fallback map[string]any) (map[string]any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return fallback, nil
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return nil, err
	}
	if members == nil { // the document was null
		return fallback, nil
	}
	out := make(map[string]any, len(members))
	for k, v := range members {
		out[k] = v
	}
	return out, nil
}

// emptyParameters is the schema of a tool that takes no arguments.
func emptyParameters(strict bool) map[string]any {
	m := map[string]any{"type": "object", "properties": map[string]any{}}
	if strict {
		m["additionalProperties"] = false
		m["required"] = []string{}
	}
	return m
}

// apiError turns what openai-go returned into the error Respond returns:
//
//   - the caller's context ended: the context's error, wrapped, so that
//     errors.Is(err, context.Canceled) holds and the activity stops;
//   - the server answered with an error status: an *APIError with that
//     status and the provider's type, code and message;
//   - no usable answer arrived (connection refused, reset, timed out, or a
//     body that was not the JSON expected): an *APIError with StatusCode 0,
//     which is retryable.
//
// resp is the last HTTP response, captured with option.WithResponseInto,
// or nil when none arrived.
func apiError(ctx context.Context, err error, resp *http.Response) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("model: %w", ctxErr)
	}
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("model: %w", err)
	}
	var oe *openai.Error
	if errors.As(err, &oe) {
		ae := &APIError{StatusCode: oe.StatusCode, Type: oe.Type, Code: oe.Code, Param: oe.Param, Message: oe.Message}
		if ae.Message == "" {
			ae.Message = bodyMessage(oe.Response, oe.StatusCode)
		}
		if oe.Response != nil {
			ae.RetryAfter = RetryDelay(oe.Response.Header, time.Now())
		}
		return ae
	}
	// openai-go returns a JSON decoding error, not an *openai.Error, when an
	// error status comes with a body it cannot parse ({"error": "text"}).
	if resp != nil && resp.StatusCode >= 400 {
		return &APIError{StatusCode: resp.StatusCode, Message: bodyMessage(resp, resp.StatusCode),
			RetryAfter: RetryDelay(resp.Header, time.Now())}
	}
	return &APIError{Message: err.Error(), Err: err}
}

// maxMessageBytes bounds an error message taken from a response body.
const maxMessageBytes = 512

// bodyMessage finds a human-readable message in an error response whose
// body openai-go could not read as {"error": {...}}: the "message" or
// "error" member of a JSON body (vLLM and llama.cpp answer this way), the
// text of another body, or else the status text.
func bodyMessage(resp *http.Response, status int) string {
	if resp != nil && resp.Body != nil {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body = io.NopCloser(bytes.NewReader(b)) // leave it readable for others
		var body struct {
			Message string          `json:"message"`
			Error   json.RawMessage `json:"error"`
		}
		if json.Unmarshal(b, &body) == nil {
			var s string
			switch {
			case body.Message != "":
				return truncate(body.Message)
			case json.Unmarshal(body.Error, &s) == nil && s != "":
				return truncate(s)
			}
		}
		if s := strings.TrimSpace(string(b)); s != "" {
			return truncate(s)
		}
	}
	if s := http.StatusText(status); s != "" {
		return s
	}
	return fmt.Sprintf("HTTP status %d", status)
}

func truncate(s string) string {
	if len(s) <= maxMessageBytes {
		return s
	}
	return strings.ToValidUTF8(s[:maxMessageBytes], "") + "…"
}

// RetryDelay is how long an answer's headers ask a client to wait before
// its next request, or 0 when they do not say: retry-after-ms (OpenAI's,
// in milliseconds), else Retry-After (seconds, or an HTTP date, taken
// against now), else the latest of x-ratelimit-reset-requests and
// x-ratelimit-reset-tokens whose x-ratelimit-remaining-* is 0 (or the
// latest of both when neither remaining is given), in OpenAI's form
// ("1s", "6m0s", "120ms"). Unreadable and negative values are ignored.
func RetryDelay(h http.Header, now time.Time) time.Duration {
	if ms, err := strconv.ParseFloat(h.Get("retry-after-ms"), 64); err == nil && ms > 0 && ms < 1e12 {
		return time.Duration(ms * float64(time.Millisecond))
	}
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil {
			if s > 0 && s < 1e9 {
				return time.Duration(s * float64(time.Second))
			}
		} else if t, err := http.ParseTime(v); err == nil && t.After(now) {
			return t.Sub(now)
		}
	}
	var wait time.Duration
	anyExhausted := h.Get("x-ratelimit-remaining-requests") == "0" || h.Get("x-ratelimit-remaining-tokens") == "0"
	for _, kind := range []string{"requests", "tokens"} {
		if anyExhausted && h.Get("x-ratelimit-remaining-"+kind) != "0" {
			continue
		}
		if d, err := time.ParseDuration(strings.TrimSpace(h.Get("x-ratelimit-reset-" + kind))); err == nil && d > wait {
			wait = d
		}
	}
	return wait
}

// Endpoint is implemented by a Model that can say which server it calls,
// so that limits on a model endpoint (a base URL and a model) can be kept
// by every worker that calls the same one.
type Endpoint interface {
	// BaseURL is the API root the model calls.
	BaseURL() string
}

// BaseURL returns the API root of m (Endpoint), or "" when m does not
// say.
func BaseURL(m Model) string {
	if e, ok := m.(Endpoint); ok {
		return e.BaseURL()
	}
	return ""
}

// BaseURL implements Endpoint.
func (m *chatModel) BaseURL() string { return m.cfg.BaseURL }

// BaseURL implements Endpoint.
func (m *responsesModel) BaseURL() string { return m.cfg.BaseURL }

type sendHookKey struct{}

// WithSendHook returns a context whose model calls run hook once their
// HTTP request was sent and its answer began (its headers came) or it
// failed: by then the provider has seen the request, so a limit on
// requests per window that counts a call from its start until a window
// after the hook counts it over every window in which the provider
// counts it, however long the request took to get there. The Models of
// New call it; others may not.
func WithSendHook(ctx context.Context, hook func()) context.Context {
	return context.WithValue(ctx, sendHookKey{}, hook)
}
