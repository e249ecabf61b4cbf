package model_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/model/scripted"
)

// streamScenario is what the scripted server answers in the streaming
// tests.
const streamScenario = `
rules:
  - name: story
    match: {input: "^tell"}
    respond: {text: "The quick brown fox jumps over the lazy dog, then naps in the sun for the rest of the afternoon."}
  - name: unicode
    match: {input: "^greet"}
    respond: {text: "Grüße aus Köln — ünïcödé ✓✓✓, 日本語のテキスト, and emoji 🦊🦊🦊 cut across pieces."}
  - name: weather
    match: {input: "^weather"}
    respond:
      calls:
        - {name: get_weather, arguments: {city: Paris}}
        - {name: get_weather, arguments: {city: "Oslo, a city whose name makes the arguments long enough to stream in pieces"}}
  - name: forecast
    match: {has_output_schema: true}
    respond: {json: {sky: "clear with a few clouds in the late afternoon", temp: 21}}
  - name: slow
    match: {input: "^slow"}
    respond: {text: "worth the wait, every piece of it", delay_ms: 150}
  - name: hang
    match: {input: "^hang"}
    respond: {text: "never", delay_ms: 60000}
  - name: rogue
    match: {input: "^rogue"}
    respond: {calls: [{name: launch, arguments: {}}]}
`

var forecastSchema = json.RawMessage(`{"type":"object","properties":{"sky":{"type":"string"},"temp":{"type":"integer"}},"required":["sky","temp"],"additionalProperties":false}`)

// scriptedServer starts the scripted model server for streamScenario over
// HTTP; wrap, when set, stands between it and the client.
func scriptedServer(t *testing.T, wrap func(http.Handler) http.Handler) (*scripted.Server, string) {
	t.Helper()
	sc, err := scripted.ParseScenario([]byte(streamScenario))
	if err != nil {
		t.Fatal(err)
	}
	s := scripted.New(sc)
	var h http.Handler = s
	if wrap != nil {
		h = wrap(s)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return s, srv.URL
}

// unstreamed rewrites each request so it asks for a whole answer (no
// stream, no stream_options): the scripted server then answers with one
// JSON document, which the adapters read as a non-streamed call's
// answer. The streamed and whole answers of one request must be the same
// Response.
func unstreamed(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m map[string]json.RawMessage
		if err := json.Unmarshal(body, &m); err == nil {
			delete(m, "stream")
			delete(m, "stream_options")
			body, _ = json.Marshal(m)
		}
		r2 := r.Clone(r.Context())
		r2.Body = io.NopCloser(bytes.NewReader(body))
		r2.ContentLength = int64(len(body))
		next.ServeHTTP(w, r2)
	})
}

// cutAfter lets the first n writes of each answer through (a streamed
// answer writes one event at a time), then ends it: with tail written
// and the rest dropped, or, when tail is empty, by cutting the
// connection mid-stream.
func cutAfter(n int, tail string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(&cutWriter{ResponseWriter: w, left: n, tail: tail}, r)
		})
	}
}

type cutWriter struct {
	http.ResponseWriter
	left int
	tail string
	cut  bool
}

func (c *cutWriter) Write(b []byte) (int, error) {
	if c.cut {
		return len(b), nil
	}
	if c.left == 0 {
		if c.tail == "" {
			panic(http.ErrAbortHandler) // the connection drops
		}
		c.cut = true
		_, _ = io.WriteString(c.ResponseWriter, c.tail)
		c.Flush()
		return len(b), nil
	}
	c.left--
	return c.ResponseWriter.Write(b)
}

func (c *cutWriter) Flush() { c.ResponseWriter.(http.Flusher).Flush() }

// collect records the deltas of a call.
type collect struct{ got []model.Delta }

func (c *collect) ctx(parent context.Context) context.Context {
	return model.WithDeltas(parent, func(d model.Delta) { c.got = append(c.got, d) })
}

// text is the concatenation of the deltas of output item i.
func (c *collect) text(i int) string {
	var b strings.Builder
	for _, d := range c.got {
		if d.Item == i {
			b.WriteString(d.Text)
		}
	}
	return b.String()
}

func TestStreamedAnswers(t *testing.T) {
	weather := agents.ToolSpec{Name: "get_weather", Description: "Looks up the weather.", Parameters: weatherParams, Strict: true}
	tests := []struct {
		name string
		req  model.Request
		// want checks the Response; the deltas are checked against it.
		want func(t *testing.T, res *model.Response)
		// minDeltas is how many deltas the answer comes in, at least.
		minDeltas int
	}{
		{
			name: "text",
			req:  model.Request{Input: []agents.Item{agents.UserMessage("tell me a story")}},
			want: func(t *testing.T, res *model.Response) {
				wantMessage(t, res, "The quick brown fox jumps over the lazy dog, then naps in the sun for the rest of the afternoon.")
				if res.FinishReason != "stop" || res.Model == "" {
					t.Errorf("FinishReason, Model = %q, %q; want stop and the model's name", res.FinishReason, res.Model)
				}
			},
			minDeltas: 5,
		},
		{
			name: "text in many scripts, cut between runes",
			req:  model.Request{Input: []agents.Item{agents.UserMessage("greet me")}},
			want: func(t *testing.T, res *model.Response) {
				wantMessage(t, res, "Grüße aus Köln — ünïcödé ✓✓✓, 日本語のテキスト, and emoji 🦊🦊🦊 cut across pieces.")
			},
			minDeltas: 5,
		},
		{
			name: "parallel tool calls",
			req:  model.Request{Input: []agents.Item{agents.UserMessage("weather in two cities")}, Tools: []agents.ToolSpec{weather}},
			want: func(t *testing.T, res *model.Response) {
				if len(res.Output) != 2 {
					t.Fatalf("Output = %+v; want two function calls", res.Output)
				}
				for i, city := range []string{"Paris", "Oslo, a city whose name makes the arguments long enough to stream in pieces"} {
					it := res.Output[i]
					var args struct{ City string }
					if it.Type != agents.ItemFunctionCall || it.Name != "get_weather" || it.CallID == "" {
						t.Errorf("Output[%d] = %+v; want a call of get_weather with a call id", i, it)
					}
					if err := json.Unmarshal([]byte(it.Arguments), &args); err != nil || args.City != city {
						t.Errorf("Output[%d].Arguments = %s (%v); want city %q", i, it.Arguments, err, city)
					}
				}
				if res.Output[0].CallID == res.Output[1].CallID {
					t.Errorf("both calls have call id %s", res.Output[0].CallID)
				}
				if res.FinishReason != "tool_calls" {
					t.Errorf("FinishReason = %q; want tool_calls", res.FinishReason)
				}
			},
		},
		{
			name: "structured output",
			req: model.Request{Input: []agents.Item{agents.UserMessage("forecast?")},
				Output: &agents.OutputSpec{Name: "Forecast", Schema: forecastSchema, Strict: true}},
			want: func(t *testing.T, res *model.Response) {
				if len(res.Output) != 1 || res.Output[0].Type != agents.ItemMessage {
					t.Fatalf("Output = %+v; want one message", res.Output)
				}
				var f struct {
					Sky  string
					Temp int
				}
				if err := json.Unmarshal([]byte(res.Output[0].Content), &f); err != nil || f.Sky != "clear with a few clouds in the late afternoon" || f.Temp != 21 {
					t.Errorf("Content = %s (%v); want the forecast document", res.Output[0].Content, err)
				}
			},
			minDeltas: 3,
		},
		{
			name: "a rule with a delay",
			req:  model.Request{Input: []agents.Item{agents.UserMessage("slow answer please")}},
			want: func(t *testing.T, res *model.Response) {
				wantMessage(t, res, "worth the wait, every piece of it")
			},
			minDeltas: 2,
		},
	}
	for _, api := range []model.API{model.APIResponses, model.APIChat} {
		for _, tt := range tests {
			t.Run(string(api)+"/"+tt.name, func(t *testing.T) {
				srv, url := scriptedServer(t, nil)
				var d collect
				res, err := newModel(t, api, url).Respond(d.ctx(context.Background()), tt.req)
				if err != nil {
					t.Fatal(err)
				}
				tt.want(t, res)
				// Usage: counted by the server, sent in the stream's last
				// event (Responses) or its usage chunk (Chat Completions).
				u := res.Usage
				if u.Requests != 1 || u.InputTokens <= 0 || u.OutputTokens <= 0 || u.TotalTokens != u.InputTokens+u.OutputTokens {
					t.Errorf("Usage = %+v; want one request and the server's token counts", u)
				}
				if res.ID == "" {
					t.Error("ID is empty")
				}
				// The deltas: as many as the server sent pieces, in order,
				// adding up to each message's text, and none for calls.
				if len(d.got) < tt.minDeltas {
					t.Errorf("%d deltas; want at least %d", len(d.got), tt.minDeltas)
				}
				for i, it := range res.Output {
					want := ""
					if it.Type == agents.ItemMessage {
						want = it.Content
					}
					if got := d.text(i); got != want {
						t.Errorf("deltas of item %d add up to %q; want %q", i, got, want)
					}
				}
				for _, x := range d.got {
					if x.Item < 0 || x.Item >= len(res.Output) || x.Text == "" {
						t.Errorf("delta %+v: want a non-empty piece of an output item", x)
					}
				}
				// The server records a call once its handler returns, which
				// may be just after the client has read the end.
				calls := srv.Calls()
				for len(calls) == 0 {
					time.Sleep(5 * time.Millisecond)
					calls = srv.Calls()
				}
				if len(calls) != 1 || !calls[0].Stream || calls[0].API != string(api) {
					t.Errorf("server calls = %+v; want one streamed %s call", calls, api)
				}

				// The same request answered whole is the same Response.
				_, wholeURL := scriptedServer(t, unstreamed)
				var none collect
				whole, err := newModel(t, api, wholeURL).Respond(none.ctx(context.Background()), tt.req)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(res, whole) {
					t.Errorf("streamed Response differs from the whole one:\nstreamed %+v\n   whole %+v", res, whole)
				}
				// A whole answer's text comes as one delta per message.
				for i, it := range whole.Output {
					if it.Type == agents.ItemMessage && none.text(i) != it.Content {
						t.Errorf("whole answer: delta of item %d = %q; want %q", i, none.text(i), it.Content)
					}
				}
			})
		}
	}
}

func wantMessage(t *testing.T, res *model.Response, text string) {
	t.Helper()
	if len(res.Output) != 1 {
		t.Fatalf("Output = %+v; want one message", res.Output)
	}
	it := res.Output[0]
	if it.Type != agents.ItemMessage || it.Role != agents.RoleAssistant || it.Content != text {
		t.Errorf("Output[0] = %+v; want the assistant's message %q", it, text)
	}
}

func TestStreamedErrors(t *testing.T) {
	hi := model.Request{Input: []agents.Item{agents.UserMessage("tell me a story")}}
	errorEvent := map[model.API]string{
		model.APIResponses: "event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"The server had an error while processing your request.\",\"param\":null,\"sequence_number\":6}\n\n",
		model.APIChat:      "data: {\"error\":{\"message\":\"The server had an error while processing your request.\",\"type\":\"server_error\",\"param\":null,\"code\":null}}\n\n",
	}
	tests := []struct {
		name string
		req  model.Request
		// wrap stands between the server and the client, for an API.
		wrap   func(api model.API) func(http.Handler) http.Handler
		noKey  bool
		cancel bool // the context ends while the server waits
		// status is the APIError's StatusCode; code, its Code (when set);
		// ctxErr, the context error wanted instead of an APIError.
		status    int
		code      string
		ctxErr    error
		retryable bool
		// partial: deltas arrived before the failure.
		partial bool
	}{
		{name: "no rule matches", req: model.Request{Input: []agents.Item{agents.UserMessage("nothing matches this")}},
			status: 400, code: "scripted_no_match"},
		{name: "no API key", req: hi, noKey: true, status: 401},
		{name: "a call of a tool not offered", req: model.Request{Input: []agents.Item{agents.UserMessage("rogue agent")}},
			status: 400, code: "scripted_unknown_tool"},
		{name: "connection cut mid-stream", req: hi, retryable: true, partial: true,
			wrap: func(model.API) func(http.Handler) http.Handler { return cutAfter(6, "") }},
		{name: "stream ends early", req: hi, retryable: true, partial: true,
			wrap: func(model.API) func(http.Handler) http.Handler { return cutAfter(6, "\n") }},
		{name: "error event mid-stream", req: hi, retryable: true, partial: true,
			wrap: func(api model.API) func(http.Handler) http.Handler { return cutAfter(6, errorEvent[api]) }},
		{name: "cancelled while the model thinks", req: model.Request{Input: []agents.Item{agents.UserMessage("hang on")}},
			cancel: true, ctxErr: context.Canceled},
	}
	for _, api := range []model.API{model.APIResponses, model.APIChat} {
		for _, tt := range tests {
			t.Run(string(api)+"/"+tt.name, func(t *testing.T) {
				var d collect
				ctx, cancel := context.WithCancel(d.ctx(context.Background()))
				defer cancel()
				var wrap func(http.Handler) http.Handler
				switch {
				case tt.wrap != nil:
					wrap = tt.wrap(api)
				case tt.cancel:
					wrap = cancelOnArrival(cancel)
				}
				_, url := scriptedServer(t, wrap)
				cfg := model.Config{API: api, BaseURL: url + "/v1", APIKey: "sk-test"}
				if tt.noKey {
					cfg.APIKey = ""
				}
				m, err := model.New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				res, err := m.Respond(ctx, tt.req)
				if err == nil {
					t.Fatalf("Respond = %+v; want an error", res)
				}
				if got := model.IsRetryable(err); got != tt.retryable {
					t.Errorf("IsRetryable(%v) = %v; want %v", err, got, tt.retryable)
				}
				var ae *model.APIError
				switch {
				case tt.ctxErr != nil:
					if !errors.Is(err, tt.ctxErr) || errors.As(err, &ae) {
						t.Errorf("error = %v; want the context's %v", err, tt.ctxErr)
					}
				case !errors.As(err, &ae):
					t.Errorf("error = %T %v; want an *APIError", err, err)
				default:
					if ae.StatusCode != tt.status {
						t.Errorf("StatusCode = %d; want %d (%v)", ae.StatusCode, tt.status, err)
					}
					if tt.code != "" && ae.Code != tt.code {
						t.Errorf("Code = %q; want %q (%v)", ae.Code, tt.code, err)
					}
				}
				story := "The quick brown fox jumps over the lazy dog, then naps in the sun for the rest of the afternoon."
				got := d.text(0)
				if tt.partial && (got == "" || got == story || !strings.HasPrefix(story, got)) {
					t.Errorf("deltas before the failure add up to %q; want a proper start of %q", got, story)
				}
				if !tt.partial && len(d.got) > 0 {
					t.Errorf("deltas %+v; want none", d.got)
				}
			})
		}
	}
}

// cancelOnArrival calls cancel once a request has arrived whole, then
// hands it to the server, which waits out its rule's delay.
func cancelOnArrival(cancel func()) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			cancel()
			next.ServeHTTP(w, r)
		})
	}
}
