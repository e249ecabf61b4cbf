package scripted

// This file writes answers in the Chat Completions shapes: a chat.completion
// object, or a stream of chat.completion.chunk objects ending in [DONE].

import (
	"context"
	"net/http"
	"time"
)

type chatCompletionObject struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	Choices           []chatChoice `json:"choices"`
	Usage             *chatUsage   `json:"usage"`
	ServiceTier       string       `json:"service_tier"`
	SystemFingerprint string       `json:"system_fingerprint"`
}

type chatChoice struct {
	Index        int         `json:"index"`
	Message      chatMessage `json:"message"`
	Logprobs     any         `json:"logprobs"`
	FinishReason string      `json:"finish_reason"`
}

type chatMessage struct {
	Role        string         `json:"role"`
	Content     *string        `json:"content"`
	Refusal     *string        `json:"refusal"`
	ToolCalls   []chatToolCall `json:"tool_calls,omitempty"`
	Annotations []any          `json:"annotations"`
}

type chatToolCall struct {
	Index    *int             `json:"index,omitempty"` // chunks only
	ID       string           `json:"id,omitempty"`
	Type     string           `json:"type,omitempty"`
	Function chatFunctionCall `json:"function"`
}

type chatFunctionCall struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type chatUsage struct {
	PromptTokens            int            `json:"prompt_tokens"`
	CompletionTokens        int            `json:"completion_tokens"`
	TotalTokens             int            `json:"total_tokens"`
	PromptTokensDetails     map[string]int `json:"prompt_tokens_details"`
	CompletionTokensDetails map[string]int `json:"completion_tokens_details"`
}

type chatChunk struct {
	ID                string            `json:"id"`
	Object            string            `json:"object"`
	Created           int64             `json:"created"`
	Model             string            `json:"model"`
	ServiceTier       string            `json:"service_tier"`
	SystemFingerprint string            `json:"system_fingerprint"`
	Choices           []chatChunkChoice `json:"choices"`
	Usage             *chatUsage        `json:"usage,omitempty"`
}

type chatChunkChoice struct {
	Index        int       `json:"index"`
	Delta        chatDelta `json:"delta"`
	Logprobs     any       `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

type chatDelta struct {
	Role      string         `json:"role,omitempty"`
	Content   *string        `json:"content,omitempty"`
	Refusal   *string        `json:"refusal,omitempty"`
	ToolCalls []chatToolCall `json:"tool_calls,omitempty"`
}

const systemFingerprint = "fp_scripted"

func chatID(rep *reply) string { return id(rep.digest, "chatcmpl-", "chatcmpl", 29) }

func chatUsageOf(rep *reply) *chatUsage {
	return &chatUsage{
		PromptTokens:            rep.inputTokens,
		CompletionTokens:        rep.outputTokens,
		TotalTokens:             rep.inputTokens + rep.outputTokens,
		PromptTokensDetails:     map[string]int{"cached_tokens": 0},
		CompletionTokensDetails: map[string]int{"reasoning_tokens": 0},
	}
}

func finishReason(rep *reply) string {
	if len(rep.calls) > 0 {
		return "tool_calls"
	}
	return "stop"
}

func chatCompletion(c *conversation, rep *reply, now time.Time) chatCompletionObject {
	msg := chatMessage{Role: "assistant", Annotations: []any{}}
	if len(rep.calls) == 0 {
		text := rep.text
		msg.Content = &text
	}
	for _, call := range rep.calls {
		msg.ToolCalls = append(msg.ToolCalls, chatToolCall{ID: call.callID, Type: "function",
			Function: chatFunctionCall{Name: call.name, Arguments: call.arguments}})
	}
	return chatCompletionObject{
		ID:                chatID(rep),
		Object:            "chat.completion",
		Created:           now.Unix(),
		Model:             c.model,
		Choices:           []chatChoice{{Message: msg, FinishReason: finishReason(rep)}},
		Usage:             chatUsageOf(rep),
		ServiceTier:       "default",
		SystemFingerprint: systemFingerprint,
	}
}

// streamChat writes the answer as Chat Completions streams it: a first chunk
// with the role, content pieces or, per tool call, a chunk with its id and
// name followed by argument pieces; a last chunk with the finish reason; a
// usage chunk when stream_options.include_usage asks for it; and [DONE]. It
// reports whether the client left before the whole answer was written.
func streamChat(ctx context.Context, w http.ResponseWriter, c *conversation, rep *reply) (left bool) {
	s := newSSE(ctx, w)
	base := chatChunk{ID: chatID(rep), Object: "chat.completion.chunk", Created: time.Now().Unix(), Model: c.model,
		ServiceTier: "default", SystemFingerprint: systemFingerprint}
	send := func(delta chatDelta, finish *string) {
		ch := base
		ch.Choices = []chatChunkChoice{{Delta: delta, FinishReason: finish}}
		b, _ := marshal(ch)
		s.data(b)
	}
	empty := ""
	if len(rep.calls) == 0 {
		send(chatDelta{Role: "assistant", Content: &empty}, nil)
		for j, p := range pieces(rep.text) {
			if j > 0 && rep.rule.pace > 0 {
				time.Sleep(rep.rule.pace)
			}
			send(chatDelta{Content: &p}, nil)
		}
	} else {
		send(chatDelta{Role: "assistant"}, nil)
		for i, call := range rep.calls {
			send(chatDelta{ToolCalls: []chatToolCall{{Index: &i, ID: call.callID, Type: "function",
				Function: chatFunctionCall{Name: call.name}}}}, nil)
			for _, p := range pieces(call.arguments) {
				send(chatDelta{ToolCalls: []chatToolCall{{Index: &i, Function: chatFunctionCall{Arguments: p}}}}, nil)
			}
		}
	}
	reason := finishReason(rep)
	send(chatDelta{}, &reason)
	if c.includeUsage {
		ch := base
		ch.Choices = []chatChunkChoice{}
		ch.Usage = chatUsageOf(rep)
		b, _ := marshal(ch)
		s.data(b)
	}
	s.data([]byte("[DONE]"))
	return s.left
}
