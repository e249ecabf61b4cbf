package scripted

// This file writes answers in the Responses API's shapes: a response object,
// or the server-sent events of a streamed one, in the order OpenAI sends them.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"
)

type responseJSON struct {
	ID                 string          `json:"id"`
	Object             string          `json:"object"`
	CreatedAt          int64           `json:"created_at"`
	Status             string          `json:"status"`
	Background         bool            `json:"background"`
	CompletedAt        *int64          `json:"completed_at"`
	Error              any             `json:"error"`
	IncompleteDetails  any             `json:"incomplete_details"`
	Instructions       json.RawMessage `json:"instructions"`
	MaxOutputTokens    any             `json:"max_output_tokens"`
	Model              string          `json:"model"`
	Output             []any           `json:"output"`
	ParallelToolCalls  bool            `json:"parallel_tool_calls"`
	PreviousResponseID any             `json:"previous_response_id"`
	Reasoning          map[string]any  `json:"reasoning"`
	ServiceTier        string          `json:"service_tier"`
	Store              bool            `json:"store"`
	Temperature        float64         `json:"temperature"`
	Text               json.RawMessage `json:"text"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	Tools              json.RawMessage `json:"tools"`
	TopP               float64         `json:"top_p"`
	Truncation         string          `json:"truncation"`
	Usage              *responseUsage  `json:"usage"`
	User               any             `json:"user"`
	Metadata           map[string]any  `json:"metadata"`
}

type responseUsage struct {
	InputTokens         int            `json:"input_tokens"`
	InputTokensDetails  map[string]int `json:"input_tokens_details"`
	OutputTokens        int            `json:"output_tokens"`
	OutputTokensDetails map[string]int `json:"output_tokens_details"`
	TotalTokens         int            `json:"total_tokens"`
}

type outputMessage struct {
	ID      string       `json:"id"`
	Type    string       `json:"type"`
	Status  string       `json:"status"`
	Role    string       `json:"role"`
	Content []outputText `json:"content"`
}

type outputText struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
	Logprobs    []any  `json:"logprobs"`
}

type functionCall struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Status    string `json:"status"`
	Arguments string `json:"arguments"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
}

func newOutputText(text string) outputText {
	return outputText{Type: "output_text", Text: text, Annotations: []any{}, Logprobs: []any{}}
}

func messageID(rep *reply) string { return id(rep.digest, "msg_", "msg|0", 32) }

func functionCallID(rep *reply, i int) string {
	return id(rep.digest, "fc_", "fc|"+strconv.Itoa(i), 32)
}

// outputItems returns the answer's output items in their final state.
func outputItems(rep *reply) []any {
	if len(rep.calls) == 0 {
		return []any{outputMessage{ID: messageID(rep), Type: "message", Status: "completed", Role: "assistant",
			Content: []outputText{newOutputText(rep.text)}}}
	}
	items := make([]any, len(rep.calls))
	for i, c := range rep.calls {
		items[i] = functionCall{ID: functionCallID(rep, i), Type: "function_call", Status: "completed",
			Arguments: c.arguments, CallID: c.callID, Name: c.name}
	}
	return items
}

// responseObject is the response in the given status: "in_progress" (no
// output yet, no usage) or "completed".
func responseObject(c *conversation, rep *reply, status string, now time.Time) responseJSON {
	orNull := func(raw json.RawMessage, def string) json.RawMessage {
		if len(raw) == 0 || jsonKind(raw) == "null" {
			return json.RawMessage(def)
		}
		return raw
	}
	created := now.Unix()
	r := responseJSON{
		ID:                id(rep.digest, "resp_", "resp", 32),
		Object:            "response",
		CreatedAt:         created,
		Status:            status,
		Instructions:      orNull(c.rawInstructions, "null"),
		Model:             c.model,
		Output:            []any{},
		ParallelToolCalls: c.parallelToolCalls,
		Reasoning:         map[string]any{"effort": nil, "summary": nil},
		ServiceTier:       "default",
		Temperature:       1,
		Text:              orNull(c.rawText, `{"format":{"type":"text"}}`),
		ToolChoice:        orNull(c.rawToolChoice, `"auto"`),
		Tools:             orNull(c.rawTools, `[]`),
		TopP:              1,
		Truncation:        "disabled",
		Metadata:          map[string]any{},
	}
	if status == "completed" {
		r.CompletedAt = &created
		r.Output = outputItems(rep)
		r.Usage = &responseUsage{
			InputTokens:         rep.inputTokens,
			InputTokensDetails:  map[string]int{"cached_tokens": 0},
			OutputTokens:        rep.outputTokens,
			OutputTokensDetails: map[string]int{"reasoning_tokens": 0},
			TotalTokens:         rep.inputTokens + rep.outputTokens,
		}
	}
	return r
}

// sse writes server-sent events and flushes each one, so a streaming client
// sees them as they are written.
type sse struct {
	ctx     context.Context // the request's
	w       http.ResponseWriter
	flusher http.Flusher
	seq     int
	// left is set when the client had gone before a piece was written: the
	// answer did not reach it whole. It is looked at before each write, never
	// after the last, since a client that read the whole answer may close its
	// connection at once and cancel the request's context.
	left bool
}

func newSSE(ctx context.Context, w http.ResponseWriter) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &sse{ctx: ctx, w: w, flusher: f}
}

// event writes a Responses event: its type and sequence number are added to
// fields.
func (s *sse) event(typ string, fields map[string]any) {
	fields["type"] = typ
	fields["sequence_number"] = s.seq
	s.seq++
	s.look()
	if typ == "response.completed" {
		ending(s.w)
	}
	b, _ := marshal(fields)
	fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", typ, b)
	s.flush()
}

// data writes a bare data line, as Chat Completions streams do.
func (s *sse) data(b []byte) {
	s.look()
	if string(b) == "[DONE]" {
		ending(s.w)
	}
	fmt.Fprintf(s.w, "data: %s\n\n", b)
	s.flush()
}

// look notes whether the client has gone, before a write.
func (s *sse) look() {
	if s.ctx.Err() != nil {
		s.left = true
	}
}

func (s *sse) flush() {
	if s.flusher != nil {
		s.flusher.Flush()
	}
}

// deltaSize is the size, in bytes, of the pieces a streamed text or
// arguments string is cut into.
const deltaSize = 16

// pieces cuts s into pieces of about deltaSize bytes without splitting a
// UTF-8 sequence.
func pieces(s string) []string {
	var out []string
	for len(s) > 0 {
		n := min(deltaSize, len(s))
		for n < len(s) && !utf8.RuneStart(s[n]) {
			n++
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// streamResponse writes the answer as the Responses API streams it:
// response.created, response.in_progress, then for each output item
// response.output_item.added, its content or argument deltas and their done
// events, response.output_item.done, and finally response.completed. It
// reports whether the client left before the whole answer was written.
func streamResponse(ctx context.Context, w http.ResponseWriter, c *conversation, rep *reply) (left bool) {
	s := newSSE(ctx, w)
	now := time.Now()
	s.event("response.created", map[string]any{"response": responseObject(c, rep, "in_progress", now)})
	s.event("response.in_progress", map[string]any{"response": responseObject(c, rep, "in_progress", now)})
	final := outputItems(rep)
	for i, it := range final {
		switch it := it.(type) {
		case outputMessage:
			added := it
			added.Status, added.Content = "in_progress", []outputText{}
			s.event("response.output_item.added", map[string]any{"output_index": i, "item": added})
			s.event("response.content_part.added", map[string]any{
				"item_id": it.ID, "output_index": i, "content_index": 0, "part": newOutputText("")})
			for j, p := range pieces(rep.text) {
				if j > 0 && rep.rule.pace > 0 {
					time.Sleep(rep.rule.pace)
				}
				s.event("response.output_text.delta", map[string]any{
					"item_id": it.ID, "output_index": i, "content_index": 0, "delta": p, "logprobs": []any{}})
			}
			s.event("response.output_text.done", map[string]any{
				"item_id": it.ID, "output_index": i, "content_index": 0, "text": rep.text, "logprobs": []any{}})
			s.event("response.content_part.done", map[string]any{
				"item_id": it.ID, "output_index": i, "content_index": 0, "part": it.Content[0]})
		case functionCall:
			added := it
			added.Status, added.Arguments = "in_progress", ""
			s.event("response.output_item.added", map[string]any{"output_index": i, "item": added})
			for _, p := range pieces(it.Arguments) {
				s.event("response.function_call_arguments.delta", map[string]any{
					"item_id": it.ID, "output_index": i, "delta": p})
			}
			s.event("response.function_call_arguments.done", map[string]any{
				"item_id": it.ID, "output_index": i, "name": it.Name, "arguments": it.Arguments})
		}
		s.event("response.output_item.done", map[string]any{"output_index": i, "item": it})
	}
	s.event("response.completed", map[string]any{"response": responseObject(c, rep, "completed", now)})
	return s.left
}
