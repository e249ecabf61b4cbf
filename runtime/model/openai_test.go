package model_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/model"
)

// wire records what an httptest server received and answers with a canned
// body. Tests assert on the decoded request, not on openai-go's structs,
// so a change in what goes over the wire shows up here.
type wire struct {
	mu       sync.Mutex
	requests int
	path     string
	header   http.Header
	raw      []byte
	body     map[string]any

	status     int
	response   string
	respHeader map[string]string
}

// serve starts a server that answers every request with status and body.
func serve(t *testing.T, status int, body string) (*httptest.Server, *wire) {
	t.Helper()
	w := &wire{status: status, response: body}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		w.mu.Lock()
		w.requests++
		w.path = r.URL.Path
		w.header = r.Header.Clone()
		w.raw = raw
		w.body = nil
		if err := json.Unmarshal(raw, &w.body); err != nil {
			t.Errorf("request body is not JSON: %v\n%s", err, raw)
		}
		status, response, hdr := w.status, w.response, w.respHeader
		w.mu.Unlock()
		for k, v := range hdr {
			rw.Header().Set(k, v)
		}
		if rw.Header().Get("Content-Type") == "" {
			rw.Header().Set("Content-Type", "application/json")
		}
		rw.WriteHeader(status)
		_, _ = io.WriteString(rw, response)
	}))
	t.Cleanup(srv.Close)
	return srv, w
}

// count returns how many requests the server saw.
func (w *wire) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.requests
}

// last returns the path and headers of the last request.
func (w *wire) last() (string, http.Header) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.path, w.header
}

// setHeader makes the server send these headers from now on.
func (w *wire) setHeader(h map[string]string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.respHeader = h
}

func newModel(t *testing.T, api model.API, baseURL string) model.Model {
	t.Helper()
	m, err := model.New(model.Config{API: api, BaseURL: baseURL + "/v1", APIKey: "sk-test"})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

// assertJSON compares a decoded JSON value with the JSON text want.
func assertJSON(t *testing.T, label string, got any, want string) {
	t.Helper()
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: bad want JSON: %v", label, err)
	}
	if !reflect.DeepEqual(got, w) {
		g, _ := json.MarshalIndent(got, "", "  ")
		wi, _ := json.MarshalIndent(w, "", "  ")
		t.Errorf("%s:\n got %s\nwant %s", label, g, wi)
	}
}

// assertBody checks the listed top-level members of the request body and
// that the absent ones were not sent.
func assertBody(t *testing.T, w *wire, want map[string]string, absent []string) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, v := range want {
		got, ok := w.body[k]
		if !ok {
			t.Errorf("request has no %q member; body: %s", k, w.raw)
			continue
		}
		assertJSON(t, k, got, v)
	}
	for _, k := range absent {
		if v, ok := w.body[k]; ok {
			t.Errorf("request has %q = %v, want it absent", k, v)
		}
	}
}

func TestNewValidatesConfig(t *testing.T) {
	tests := []struct {
		name    string
		cfg     model.Config
		wantErr string
	}{
		{name: "zero value", cfg: model.Config{}},
		{name: "responses", cfg: model.Config{API: model.APIResponses}},
		{name: "chat", cfg: model.Config{API: model.APIChat, BaseURL: "http://localhost:8000/v1"}},
		{name: "unknown API", cfg: model.Config{API: "completions"}, wantErr: `unknown API "completions": valid values are "responses" and "chat"`},
		{name: "relative base URL", cfg: model.Config{BaseURL: "localhost:8000"}, wantErr: "not an absolute http or https URL"},
		{name: "other scheme", cfg: model.Config{BaseURL: "ftp://example.com"}, wantErr: "not an absolute http or https URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := model.New(tt.cfg)
			if tt.wantErr == "" {
				if err != nil || m == nil {
					t.Fatalf("New = %v, %v; want a model", m, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("New error = %v; want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestConfigFromEnv(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want model.Config
	}{
		{name: "nothing set", want: model.Config{}},
		{
			name: "all set",
			env:  map[string]string{"OPENAI_API_KEY": "sk-1", "OPENAI_BASE_URL": "http://vllm:8000/v1", "TROUPE_MODEL_API": "chat"},
			want: model.Config{APIKey: "sk-1", BaseURL: "http://vllm:8000/v1", API: model.APIChat},
		},
		{
			name: "API is normalized",
			env:  map[string]string{"TROUPE_MODEL_API": " Responses "},
			want: model.Config{API: model.APIResponses},
		},
		{
			name: "invalid API is kept for New to report",
			env:  map[string]string{"TROUPE_MODEL_API": "grpc"},
			want: model.Config{API: "grpc"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{"OPENAI_API_KEY", "OPENAI_BASE_URL", "TROUPE_MODEL_API"} {
				t.Setenv(k, tt.env[k])
			}
			got := model.ConfigFromEnv()
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ConfigFromEnv() = %+v; want %+v", got, tt.want)
			}
			_, err := model.New(got)
			if wantErr := tt.want.API == "grpc"; (err != nil) != wantErr {
				t.Fatalf("New(ConfigFromEnv()) error = %v; want error: %v", err, wantErr)
			}
		})
	}
}

// TestConfigReadsNoEnvironment proves that New, unlike openai.NewClient,
// does not pick up OPENAI_* variables the caller did not pass in.
func TestConfigReadsNoEnvironment(t *testing.T) {
	other, otherWire := serve(t, 200, responsesOK)
	t.Setenv("OPENAI_API_KEY", "sk-from-env")
	t.Setenv("OPENAI_BASE_URL", other.URL+"/v1")
	srv, w := serve(t, 200, responsesOK)

	m, err := model.New(model.Config{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Respond(context.Background(), model.Request{Input: []agents.Item{agents.UserMessage("hi")}}); err != nil {
		t.Fatal(err)
	}
	if w.count() != 1 || otherWire.count() != 0 {
		t.Fatalf("requests: configured server %d, env server %d; want 1, 0", w.count(), otherWire.count())
	}
	if _, h := w.last(); h.Get("Authorization") != "" {
		t.Fatalf("Authorization = %q; want none", h.Get("Authorization"))
	}
}

func TestAPIKeyAndPath(t *testing.T) {
	tests := []struct {
		api      model.API
		response string
		path     string
	}{
		{model.APIResponses, responsesOK, "/v1/responses"},
		{model.APIChat, chatOK, "/v1/chat/completions"},
	}
	for _, tt := range tests {
		t.Run(string(tt.api), func(t *testing.T) {
			srv, w := serve(t, 200, tt.response)
			m := newModel(t, tt.api, srv.URL)
			if _, err := m.Respond(context.Background(), model.Request{Input: []agents.Item{agents.UserMessage("hi")}}); err != nil {
				t.Fatal(err)
			}
			path, h := w.last()
			if path != tt.path {
				t.Errorf("path = %q; want %q", path, tt.path)
			}
			if got := h.Get("Authorization"); got != "Bearer sk-test" {
				t.Errorf("Authorization = %q; want %q", got, "Bearer sk-test")
			}
		})
	}
}

// TestErrorClassification checks the mapping of error answers onto
// APIError, and that openai-go's retries are off: whatever the status,
// exactly one HTTP request is made, because Temporal does the retrying.
func TestErrorClassification(t *testing.T) {
	openAIError := func(typ, code, msg string) string {
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"type": typ, "code": code, "message": msg, "param": nil}})
		return string(b)
	}
	tests := []struct {
		name      string
		status    int
		body      string
		header    map[string]string
		want      model.APIError
		retryable bool
	}{
		{
			name:   "400 bad request",
			status: 400,
			body:   openAIError("invalid_request_error", "invalid_value", "Invalid schema for function 'f'."),
			want:   model.APIError{StatusCode: 400, Type: "invalid_request_error", Code: "invalid_value", Message: "Invalid schema for function 'f'."},
		},
		{
			name:   "401 unauthorized",
			status: 401,
			body:   openAIError("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
			want:   model.APIError{StatusCode: 401, Type: "invalid_request_error", Code: "invalid_api_key", Message: "Incorrect API key provided."},
		},
		{
			name:   "404 unknown model",
			status: 404,
			body:   openAIError("invalid_request_error", "model_not_found", "The model `gpt-9` does not exist."),
			want:   model.APIError{StatusCode: 404, Type: "invalid_request_error", Code: "model_not_found", Message: "The model `gpt-9` does not exist."},
		},
		{
			name:      "408 request timeout",
			status:    408,
			body:      openAIError("timeout", "", "Request timed out."),
			want:      model.APIError{StatusCode: 408, Type: "timeout", Message: "Request timed out."},
			retryable: true,
		},
		{
			name:      "409 conflict",
			status:    409,
			body:      openAIError("conflict", "", "Conflict."),
			want:      model.APIError{StatusCode: 409, Type: "conflict", Message: "Conflict."},
			retryable: true,
		},
		{
			name:      "429 rate limited, even with retry-after",
			status:    429,
			header:    map[string]string{"Retry-After": "0", "x-should-retry": "true"},
			body:      openAIError("requests", "rate_limit_exceeded", "Rate limit reached."),
			want:      model.APIError{StatusCode: 429, Type: "requests", Code: "rate_limit_exceeded", Message: "Rate limit reached."},
			retryable: true,
		},
		{
			name:      "429 with retry-after-ms",
			status:    429,
			header:    map[string]string{"retry-after-ms": "420", "Retry-After": "1"},
			body:      openAIError("requests", "rate_limit_exceeded", "Rate limit reached. Please try again in 420ms."),
			want:      model.APIError{StatusCode: 429, Type: "requests", Code: "rate_limit_exceeded", Message: "Rate limit reached. Please try again in 420ms.", RetryAfter: 420 * time.Millisecond},
			retryable: true,
		},
		{
			name:   "429 quota spent",
			status: 429,
			body:   openAIError("insufficient_quota", "insufficient_quota", "You exceeded your current quota."),
			want:   model.APIError{StatusCode: 429, Type: "insufficient_quota", Code: "insufficient_quota", Message: "You exceeded your current quota."},
		},
		{
			name:      "500 server error",
			status:    500,
			body:      openAIError("server_error", "", "The server had an error."),
			want:      model.APIError{StatusCode: 500, Type: "server_error", Message: "The server had an error."},
			retryable: true,
		},
		{
			name:      "502 with an HTML body",
			status:    502,
			header:    map[string]string{"Content-Type": "text/html"},
			body:      "<html>Bad gateway</html>",
			want:      model.APIError{StatusCode: 502, Message: "<html>Bad gateway</html>"},
			retryable: true,
		},
		{
			name:   "400 in vLLM's shape",
			status: 400,
			body:   `{"object":"error","message":"max_tokens is too large","type":"BadRequestError","param":null,"code":400}`,
			want:   model.APIError{StatusCode: 400, Message: "max_tokens is too large"},
		},
		{
			name:   "400 with a string error",
			status: 400,
			body:   `{"error":"model is required"}`,
			want:   model.APIError{StatusCode: 400, Message: "model is required"},
		},
		{
			name:      "503 with an empty body",
			status:    503,
			body:      "",
			want:      model.APIError{StatusCode: 503, Message: "Service Unavailable"},
			retryable: true,
		},
	}
	for _, api := range []model.API{model.APIResponses, model.APIChat} {
		for _, tt := range tests {
			t.Run(string(api)+"/"+tt.name, func(t *testing.T) {
				srv, w := serve(t, tt.status, tt.body)
				w.setHeader(tt.header)
				m := newModel(t, api, srv.URL)
				_, err := m.Respond(context.Background(), model.Request{Input: []agents.Item{agents.UserMessage("hi")}})
				var ae *model.APIError
				if !errors.As(err, &ae) {
					t.Fatalf("error = %T %v; want *model.APIError", err, err)
				}
				if *ae != tt.want {
					t.Errorf("APIError = %+v; want %+v", *ae, tt.want)
				}
				if got := model.IsRetryable(err); got != tt.retryable {
					t.Errorf("IsRetryable = %v; want %v", got, tt.retryable)
				}
				if n := w.count(); n != 1 {
					t.Errorf("server saw %d requests; want exactly 1 (openai-go retries must be off)", n)
				}
			})
		}
	}
}

func TestNetworkErrorIsRetryable(t *testing.T) {
	// A listener that is closed at once: connections are refused.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	for _, api := range []model.API{model.APIResponses, model.APIChat} {
		t.Run(string(api), func(t *testing.T) {
			m := newModel(t, api, "http://"+addr)
			_, err := m.Respond(context.Background(), model.Request{Input: []agents.Item{agents.UserMessage("hi")}})
			var ae *model.APIError
			if !errors.As(err, &ae) || ae.StatusCode != 0 {
				t.Fatalf("error = %T %v; want *model.APIError with StatusCode 0", err, err)
			}
			if !model.IsRetryable(err) {
				t.Fatalf("IsRetryable(%v) = false; want true", err)
			}
		})
	}
}

func TestMalformedResponseIsRetryable(t *testing.T) {
	srv, _ := serve(t, 200, `{"id": "resp_1", "output": [`)
	m := newModel(t, model.APIResponses, srv.URL)
	_, err := m.Respond(context.Background(), model.Request{Input: []agents.Item{agents.UserMessage("hi")}})
	var ae *model.APIError
	if !errors.As(err, &ae) || ae.StatusCode != 0 || !model.IsRetryable(err) {
		t.Fatalf("error = %T %v; want a retryable *model.APIError with StatusCode 0", err, err)
	}
}

func TestContextEndsCall(t *testing.T) {
	tests := []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{
			name: "canceled",
			ctx: func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				time.AfterFunc(50*time.Millisecond, cancel)
				return ctx, cancel
			},
			want: context.Canceled,
		},
		{
			name: "deadline",
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 50*time.Millisecond)
			},
			want: context.DeadlineExceeded,
		},
	}
	for _, api := range []model.API{model.APIResponses, model.APIChat} {
		for _, tt := range tests {
			t.Run(string(api)+"/"+tt.name, func(t *testing.T) {
				release := make(chan struct{})
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					select {
					case <-r.Context().Done():
					case <-release:
					}
				}))
				defer srv.Close()
				defer close(release)

				ctx, cancel := tt.ctx()
				defer cancel()
				m := newModel(t, api, srv.URL)
				_, err := m.Respond(ctx, model.Request{Input: []agents.Item{agents.UserMessage("hi")}})
				if !errors.Is(err, tt.want) {
					t.Fatalf("error = %v; want errors.Is(err, %v)", err, tt.want)
				}
				var ae *model.APIError
				if errors.As(err, &ae) {
					t.Fatalf("error = %v is an APIError; want the context's error", err)
				}
				if tt.want == context.Canceled && model.IsRetryable(err) {
					t.Fatalf("IsRetryable(%v) = true; want false", err)
				}
			})
		}
	}
}

// TestInvalidRequests checks that a request that cannot be sent fails
// before any HTTP request, with ErrInvalidRequest.
func TestInvalidRequests(t *testing.T) {
	tests := []struct {
		name string
		req  model.Request
		want string
	}{
		{
			name: "unresolved output reference",
			req: model.Request{Input: []agents.Item{
				agents.FunctionCall("call_1", "f", "{}"),
				{Type: agents.ItemFunctionCallOutput, CallID: "call_1", OutputRef: "blobs/out/1"},
			}},
			want: `output of call "call_1" is still a reference (blobs/out/1)`,
		},
		{
			name: "unresolved message reference",
			req:  model.Request{Input: []agents.Item{agents.UserMessageRef("inputs/run-1/9f86d0")}},
			want: `input item 0: message is still a reference (inputs/run-1/9f86d0)`,
		},
		{
			name: "unknown item type",
			req:  model.Request{Input: []agents.Item{{Type: "image", Content: "x"}}},
			want: `input item 0: unknown type "image"`,
		},
		{
			name: "unknown role",
			req:  model.Request{Input: []agents.Item{{Type: agents.ItemMessage, Role: "tool", Content: "x"}}},
			want: `input item 0: message role "tool"`,
		},
		{
			name: "tool parameters not an object",
			req:  model.Request{Tools: []agents.ToolSpec{{Name: "f", Parameters: json.RawMessage(`[1]`)}}},
			want: `tool "f": parameters are not a JSON object`,
		},
		{
			name: "output schema missing",
			req:  model.Request{Output: &agents.OutputSpec{Name: "Report"}},
			want: `output "Report": schema is not a JSON object`,
		},
	}
	for _, api := range []model.API{model.APIResponses, model.APIChat} {
		for _, tt := range tests {
			t.Run(string(api)+"/"+tt.name, func(t *testing.T) {
				srv, w := serve(t, 200, responsesOK)
				m := newModel(t, api, srv.URL)
				_, err := m.Respond(context.Background(), tt.req)
				if !errors.Is(err, model.ErrInvalidRequest) {
					t.Fatalf("error = %v; want ErrInvalidRequest", err)
				}
				if !strings.Contains(err.Error(), tt.want) {
					t.Errorf("error = %q; want it to contain %q", err, tt.want)
				}
				if n := w.count(); n != 0 {
					t.Errorf("server saw %d requests; want none", n)
				}
			})
		}
	}
}

// TestSchemaKeyOrderIsKept checks that nested schema objects reach the
// wire in their original key order: strict structured output generates
// fields in schema order.
func TestSchemaKeyOrderIsKept(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"string"}},"required":["zeta","alpha"],"additionalProperties":false}`)
	for _, api := range []model.API{model.APIResponses, model.APIChat} {
		t.Run(string(api), func(t *testing.T) {
			resp := responsesOK
			if api == model.APIChat {
				resp = chatOK
			}
			srv, w := serve(t, 200, resp)
			m := newModel(t, api, srv.URL)
			_, err := m.Respond(context.Background(), model.Request{
				Tools:  []agents.ToolSpec{{Name: "f", Parameters: schema, Strict: true}},
				Output: &agents.OutputSpec{Name: "Out", Schema: schema, Strict: true},
			})
			if err != nil {
				t.Fatal(err)
			}
			w.mu.Lock()
			raw := string(w.raw)
			w.mu.Unlock()
			if n := strings.Count(raw, `"properties":{"zeta":{"type":"string"},"alpha":{"type":"string"}}`); n != 2 {
				t.Fatalf("properties in original order appear %d times; want 2 (tool and output)\n%s", n, raw)
			}
		})
	}
}
