//go:build unix

package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/troupe-dev/troupe/agents"
)

// longCall is a call of server-everything's long-running tool that lasts
// far longer than any test waits for it (see hang).
const longCall = `{"duration":600,"steps":600}`

func names(l *Listing) []string {
	var out []string
	for _, t := range l.Tools {
		out = append(out, t.Name)
	}
	return out
}

func findTool(t *testing.T, l *Listing, name string) Tool {
	t.Helper()
	for _, tool := range l.Tools {
		if tool.Name == name {
			return tool
		}
	}
	t.Fatalf("no tool %q in %v", name, names(l))
	return Tool{}
}

// currentSession returns srv's live session in p, or nil.
func currentSession(p *Pool, srv *agents.MCPServer) *session {
	p.mu.Lock()
	e := p.servers[serverKey(srv)]
	p.mu.Unlock()
	if e == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sess
}

func TestTools(t *testing.T) {
	for _, tr := range transports() {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			p := newTestPool(t, PoolConfig{})
			tests := []struct {
				name string
				edit func(*agents.MCPServer)
				want []string // nil: check the full listing below
			}{
				{"all", func(*agents.MCPServer) {}, nil},
				{"allow keeps the server's order", func(s *agents.MCPServer) { s.Allow = []string{"get-sum", "echo"} }, []string{"echo", "get-sum"}},
				{"deny wins over allow", func(s *agents.MCPServer) { s.Allow = []string{"get-sum", "echo"}; s.Deny = []string{"echo"} }, []string{"get-sum"}},
				{"prefix", func(s *agents.MCPServer) { s.Allow = []string{"echo", "get-sum"}; s.Prefix = "ev." }, []string{"ev_echo", "ev_get-sum"}},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					srv := tr.server(t)
					tt.edit(srv)
					l, err := p.Tools(ctx, srv)
					if err != nil {
						t.Fatalf("Tools: %v", err)
					}
					if l.Server != "everything" || l.Version < 1 {
						t.Errorf("listing of %q version %d", l.Server, l.Version)
					}
					got := names(l)
					if tt.want != nil {
						if !slices.Equal(got, tt.want) {
							t.Errorf("tools = %v, want %v", got, tt.want)
						}
						return
					}
					for i, name := range []string{"echo", "get-sum", "trigger-long-running-operation"} {
						j := slices.Index(got, name)
						if j < 0 || (i > 0 && j < slices.Index(got, "echo")) {
							t.Errorf("tools %v lack %s or are out of the server's order", got, name)
						}
					}
				})
			}

			t.Run("schemas", func(t *testing.T) {
				l, err := p.Tools(ctx, tr.server(t))
				if err != nil {
					t.Fatalf("Tools: %v", err)
				}
				echo := findTool(t, l, "echo")
				wantEcho := `{"type":"object","properties":{"message":{"type":"string","description":"Message to echo"}},"required":["message"],"additionalProperties":false}`
				if !echo.Spec.Strict || echo.Remote != "echo" || echo.Spec.Name != "echo" || echo.Spec.Description != "Echoes back the input string" ||
					!jsonEqualOrdered(string(echo.Spec.Parameters), wantEcho) {
					t.Errorf("echo = %+v, parameters %s", echo, echo.Spec.Parameters)
				}
				long := findTool(t, l, "trigger-long-running-operation")
				var params struct {
					Properties map[string]struct {
						Type        []string `json:"type"`
						Description string   `json:"description"`
					} `json:"properties"`
					Required []string `json:"required"`
				}
				if err := json.Unmarshal(long.Spec.Parameters, &params); err != nil {
					t.Fatal(err)
				}
				d := params.Properties["duration"]
				if !long.Spec.Strict || !slices.Equal(d.Type, []string{"number", "null"}) ||
					d.Description != "Duration of the operation in seconds. Default: 10." || !slices.Equal(params.Required, []string{"duration", "steps"}) {
					t.Errorf("long-running tool parameters = %s", long.Spec.Parameters)
				}
				structured := findTool(t, l, "get-structured-content")
				if !bytes.Contains(structured.OutputSchema, []byte(`"temperature"`)) {
					t.Errorf("output schema = %s", structured.OutputSchema)
				}
			})

			t.Run("non-strict", func(t *testing.T) {
				srv := tr.server(t)
				srv.NonStrict = true
				l, err := p.Tools(ctx, srv)
				if err != nil {
					t.Fatalf("Tools: %v", err)
				}
				echo := findTool(t, l, "echo")
				if echo.Spec.Strict || !bytes.Contains(echo.Spec.Parameters, []byte(`"$schema"`)) ||
					bytes.Contains(echo.Spec.Parameters, []byte("additionalProperties")) {
					t.Errorf("non-strict echo = %+v, parameters %s", echo, echo.Spec.Parameters)
				}
			})
		})
	}
}

func TestCall(t *testing.T) {
	for _, tr := range transports() {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			p := newTestPool(t, PoolConfig{})
			srv := tr.server(t)
			tests := []struct {
				name, tool, args string
				check            func(t *testing.T, r *Result)
			}{
				{"echo", "echo", `{"message":"hello"}`, func(t *testing.T, r *Result) {
					if r.Text != "Echo: hello" || r.IsError {
						t.Errorf("result = %+v", r)
					}
				}},
				{"sum", "get-sum", `{"a":2,"b":3}`, func(t *testing.T, r *Result) {
					if r.Text != "The sum of 2 and 3 is 5." {
						t.Errorf("result = %+v", r)
					}
				}},
				{"null for an optional argument means the server's default", "trigger-long-running-operation", `{"duration":0.1,"steps":null}`, func(t *testing.T, r *Result) {
					if r.IsError || !strings.Contains(r.Text, "Steps: 5.") {
						t.Errorf("result = %+v", r)
					}
				}},
				{"structured content", "get-structured-content", `{"location":"Chicago"}`, func(t *testing.T, r *Result) {
					var weather struct{ Temperature float64 }
					if err := json.Unmarshal(r.Structured, &weather); err != nil || weather.Temperature != 36 {
						t.Errorf("structured = %s (%v)", r.Structured, err)
					}
					if !strings.Contains(r.Text, "Light rain") {
						t.Errorf("text = %q", r.Text)
					}
				}},
				{"image", "get-tiny-image", `{}`, func(t *testing.T, r *Result) {
					if len(r.Images) != 1 || r.Images[0].MIMEType != "image/png" || !bytes.HasPrefix(r.Images[0].Data, []byte("\x89PNG")) {
						t.Errorf("images = %+v", r.Images)
					}
					if r.Text != "Here's the image you requested:\nThe image above is the MCP logo." {
						t.Errorf("text = %q", r.Text)
					}
				}},
				{"embedded resource", "get-resource-reference", `{"resourceType":"Text","resourceId":1}`, func(t *testing.T, r *Result) {
					if !strings.Contains(r.Text, "\n[resource ") || r.IsError {
						t.Errorf("text = %q", r.Text)
					}
				}},
				{"resource links", "get-resource-links", `{"count":2}`, func(t *testing.T, r *Result) {
					if strings.Count(r.Text, "[resource link") != 2 {
						t.Errorf("text = %q", r.Text)
					}
				}},
				{"the tool reports an error", "get-resource-reference", `{"resourceType":"Text","resourceId":-1}`, func(t *testing.T, r *Result) {
					if !r.IsError || !strings.Contains(r.Text, "Invalid resourceId") {
						t.Errorf("result = %+v", r)
					}
				}},
				{"the server rejects the arguments", "echo", `{}`, func(t *testing.T, r *Result) {
					if !r.IsError || !strings.Contains(r.Text, "message") {
						t.Errorf("result = %+v", r)
					}
				}},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					r, err := p.Call(ctx, srv, tt.tool, tt.args)
					if err != nil {
						t.Fatalf("Call: %v", err)
					}
					if r.Version < 1 {
						t.Errorf("version = %d", r.Version)
					}
					tt.check(t, r)
				})
			}

			denied := tr.server(t)
			denied.Deny = []string{"echo"}
			errTests := []struct {
				name string
				srv  *agents.MCPServer
				tool string
				args string
				is   func(error) bool
			}{
				{"unknown tool", srv, "no-such-tool", `{}`, func(err error) bool { return errors.Is(err, ErrUnknownTool) }},
				{"denied tool", denied, "echo", `{"message":"x"}`, func(err error) bool { return errors.Is(err, ErrUnknownTool) }},
				{"arguments not an object", srv, "echo", `[1,2]`, func(err error) bool {
					var ae *agents.ToolArgsError
					return errors.As(err, &ae) && ae.Tool == "echo"
				}},
			}
			for _, tt := range errTests {
				t.Run(tt.name, func(t *testing.T) {
					r, err := p.Call(ctx, tt.srv, tt.tool, tt.args)
					if err == nil || !tt.is(err) {
						t.Errorf("Call = %+v, %v", r, err)
					}
				})
			}
		})
	}
}

// killCase is a server declaration whose server a test can kill and bring
// back.
type killCase struct {
	name    string
	setup   func(t *testing.T) (srv *agents.MCPServer, kill func(p *Pool), revive func())
	revives bool
}

func killCases() []killCase {
	return []killCase{
		{"stdio", func(t *testing.T) (*agents.MCPServer, func(*Pool), func()) {
			srv := &agents.MCPServer{Name: "everything", Command: []string{everythingBin(t), "stdio"}}
			return srv, func(p *Pool) {
				if err := syscall.Kill(stdioPid(t, p, srv), syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
			}, func() {}
		}, false},
		{"http", func(t *testing.T) (*agents.MCPServer, func(*Pool), func()) {
			h := newHTTPEverything(t)
			srv := &agents.MCPServer{Name: "everything", URL: h.url(t)}
			return srv, func(*Pool) { h.stop() }, func() {
				if err := h.start(everythingBin(t)); err != nil {
					t.Fatal(err)
				}
			}
		}, true},
	}
}

func TestServerDiesDuringCall(t *testing.T) {
	for _, tc := range killCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			srv, kill, revive := tc.setup(t)
			p := newTestPool(t, PoolConfig{})
			before, err := p.Tools(ctx, srv)
			if err != nil {
				t.Fatalf("Tools: %v", err)
			}
			first := currentSession(p, srv)

			errc := inBackground(func() error {
				_, err := p.Call(ctx, srv, "trigger-long-running-operation", longCall)
				return err
			})
			waitForCall(t, first)
			kill(p)
			err = await(t, errc, "the call's return after the server died")
			var se *ServerError
			if !errors.Is(err, ErrServerDied) || !errors.As(err, &se) || se.Server != "everything" || se.Op != "call trigger-long-running-operation" {
				t.Fatalf("Call error = %v, want a *ServerError wrapping ErrServerDied", err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "MCP server everything died during the call to trigger-long-running-operation: ") ||
				!strings.HasSuffix(msg, "; it will be restarted on the next call") {
				t.Errorf("message = %q", msg)
			}
			t.Logf("error for the model: %s", msg)

			revive()
			r, err := p.Call(ctx, srv, "echo", `{"message":"again"}`)
			if err != nil {
				t.Fatalf("Call after the restart: %v", err)
			}
			if r.Text != "Echo: again" || r.Version <= before.Version {
				t.Errorf("result after the restart = %+v, listing version before %d", r, before.Version)
			}
			if second := currentSession(p, srv); second == nil || second == first {
				t.Errorf("the session was not replaced")
			}
		})
	}
}

func TestServerDiesBetweenCalls(t *testing.T) {
	for _, tc := range killCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			srv, kill, revive := tc.setup(t)
			p := newTestPool(t, PoolConfig{})
			if _, err := p.Call(ctx, srv, "echo", `{"message":"one"}`); err != nil {
				t.Fatalf("Call: %v", err)
			}
			first := currentSession(p, srv)
			kill(p)
			// The pool notices when the process exits, or when the HTTP
			// stream's one reconnect fails.
			eventually(t, "the pool noticing that the server died", func() bool { return !first.alive() })
			revive()
			r, err := p.Call(ctx, srv, "echo", `{"message":"two"}`)
			if err != nil || r.Text != "Echo: two" {
				t.Fatalf("Call after the server came back = %+v, %v", r, err)
			}
		})
	}
}

func TestCallCancelled(t *testing.T) {
	for _, tr := range transports() {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			srv := tr.server(t)
			p := newTestPool(t, PoolConfig{})
			if _, err := p.Tools(t.Context(), srv); err != nil {
				t.Fatalf("Tools: %v", err)
			}
			first := currentSession(p, srv)
			ctx, cancel := context.WithCancel(t.Context())
			errc := inBackground(func() error {
				_, err := p.Call(ctx, srv, "trigger-long-running-operation", longCall)
				return err
			})
			waitForCall(t, first)
			cancel()
			err := await(t, errc, "the cancelled call's return")
			if !errors.Is(err, context.Canceled) || errors.Is(err, ErrServerDied) {
				t.Fatalf("Call error = %v, want context.Canceled", err)
			}
			r, err := p.Call(t.Context(), srv, "echo", `{"message":"still here"}`)
			if err != nil || r.Text != "Echo: still here" {
				t.Fatalf("Call after the cancellation = %+v, %v", r, err)
			}
			if currentSession(p, srv) != first {
				t.Errorf("the cancellation restarted the session")
			}
		})
	}
}

func TestCallTimeout(t *testing.T) {
	for _, tr := range transports() {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			srv := tr.server(t)
			srv.Timeout = 500 * time.Millisecond
			p := newTestPool(t, PoolConfig{})
			if _, err := p.Tools(t.Context(), srv); err != nil {
				t.Fatalf("Tools: %v", err)
			}
			start := time.Now()
			errc := inBackground(func() error {
				_, err := p.Call(t.Context(), srv, "trigger-long-running-operation", longCall)
				return err
			})
			err := await(t, errc, "the timed-out call's return")
			// Only a lower bound: a slow machine makes the call late, never
			// early, and ending early would mean some other deadline than
			// the declared timeout ended it.
			if took := time.Since(start); took < srv.Timeout {
				t.Errorf("the call gave up after %v, before its %v timeout", took, srv.Timeout)
			}
			if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrServerDied) {
				t.Fatalf("Call error = %v, want context.DeadlineExceeded", err)
			}
			if want := "MCP server everything: the call to trigger-long-running-operation failed: no answer within 500ms"; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("message = %q, want it to start with %q", err, want)
			}
			if r, err := p.Call(t.Context(), srv, "echo", `{"message":"x"}`); err != nil || r.Text != "Echo: x" {
				t.Fatalf("Call after the timeout = %+v, %v", r, err)
			}
		})
	}
}

func TestConcurrentFirstUse(t *testing.T) {
	for _, tr := range transports() {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			srv := tr.server(t)
			p := newTestPool(t, PoolConfig{})
			const n = 16
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for i := range n {
				wg.Go(func() {
					args, _ := json.Marshal(map[string]any{"a": i, "b": 1})
					r, err := p.Call(t.Context(), srv, "get-sum", string(args))
					if err == nil && r.IsError {
						err = errors.New(r.Text)
					}
					errs <- err
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Errorf("concurrent Call: %v", err)
				}
			}
			p.mu.Lock()
			e := p.servers[serverKey(srv)]
			p.mu.Unlock()
			if got := e.starts.Load(); got != 1 {
				t.Errorf("%d sessions started, want 1", got)
			}
		})
	}
}

func TestHTTPHeadersFromEnv(t *testing.T) {
	target, err := url.Parse(sharedHTTP.url(t))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []http.Header
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: target.Host})
	proxy.FlushInterval = -1 // stream server-sent events at once
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	env := map[string]string{"TROUPE_TEST_TOKEN": "s3cret", "TEAM": "red"}
	p := newTestPool(t, PoolConfig{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})

	srv := &agents.MCPServer{Name: "everything", URL: ts.URL + "/mcp", Headers: map[string]string{
		"Authorization": "Bearer ${TROUPE_TEST_TOKEN}",
		"X-Troupe-Team": "${TEAM}-blue",
	}}
	if r, err := p.Call(t.Context(), srv, "echo", `{"message":"through the proxy"}`); err != nil || r.Text != "Echo: through the proxy" {
		t.Fatalf("Call = %+v, %v", r, err)
	}
	mu.Lock()
	requests := slices.Clone(seen)
	mu.Unlock()
	if len(requests) < 3 {
		t.Fatalf("the proxy saw %d requests", len(requests))
	}
	for i, h := range requests {
		if h.Get("Authorization") != "Bearer s3cret" || h.Get("X-Troupe-Team") != "red-blue" {
			t.Errorf("request %d headers: Authorization %q, X-Troupe-Team %q", i, h.Get("Authorization"), h.Get("X-Troupe-Team"))
		}
	}

	t.Run("unset variable", func(t *testing.T) {
		srv := &agents.MCPServer{Name: "unset", URL: ts.URL + "/mcp", Headers: map[string]string{"Authorization": "Bearer ${TROUPE_UNSET_TOKEN}"}}
		_, err := p.Tools(t.Context(), srv)
		if err == nil || !strings.Contains(err.Error(), "TROUPE_UNSET_TOKEN") || !strings.Contains(err.Error(), `Headers["Authorization"]`) {
			t.Fatalf("Tools error = %v, want one naming the unset variable", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(seen) != len(requests) {
			t.Errorf("requests were sent without the header")
		}
	})
}

func TestHTTPRedirects(t *testing.T) {
	// other is another origin; it must never see the secret.
	var mu sync.Mutex
	var leaked []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		leaked = append(leaked, r.Header.Get("Authorization"))
		mu.Unlock()
		http.Error(w, "not here", http.StatusNotFound)
	}))
	t.Cleanup(other.Close)
	var authorized []string // the Authorization of the MCP requests
	mcpHandler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return newGrowServer() }, nil)
	mux := http.NewServeMux()
	mux.HandleFunc("/elsewhere", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/mcp", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/mcp", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		authorized = append(authorized, r.Header.Get("Authorization"))
		mu.Unlock()
		mcpHandler.ServeHTTP(w, r)
	})
	endpoint := httptest.NewServer(mux)
	t.Cleanup(endpoint.Close)
	env := map[string]string{"TOKEN": "s3cret"}
	p := newTestPool(t, PoolConfig{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	declare := func(path string) *agents.MCPServer {
		return &agents.MCPServer{Name: "grow", URL: endpoint.URL + path, Headers: map[string]string{"Authorization": "Bearer ${TOKEN}"}}
	}

	t.Run("to another origin", func(t *testing.T) {
		_, err := p.Tools(t.Context(), declare("/elsewhere"))
		otherOrigin := other.URL // http://127.0.0.1:port
		if err == nil || !strings.Contains(err.Error(), "refusing the redirect to "+otherOrigin) {
			t.Errorf("Tools error = %v, want the redirect to %s refused", err, otherOrigin)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(leaked) > 0 {
			t.Errorf("the other origin got %d requests, with Authorization %q", len(leaked), leaked)
		}
	})

	t.Run("within the origin", func(t *testing.T) {
		r, err := p.Call(t.Context(), declare("/moved"), "grow", `{}`)
		if err != nil || !strings.HasPrefix(r.Text, "added grown_") {
			t.Fatalf("Call = %+v, %v", r, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(authorized) == 0 {
			t.Fatal("no request reached the endpoint")
		}
		for i, a := range authorized {
			if a != "Bearer s3cret" {
				t.Errorf("request %d to the endpoint had Authorization %q", i, a)
			}
		}
	})

	t.Run("headers stay with the origin", func(t *testing.T) {
		// However a request for another origin comes about, the
		// transport does not give it the headers.
		mu.Lock()
		leaked = nil
		mu.Unlock()
		u, err := url.Parse(endpoint.URL)
		if err != nil {
			t.Fatal(err)
		}
		tr := &headerTransport{base: http.DefaultTransport, origin: origin(u), headers: map[string]string{"Authorization": "Bearer s3cret"}, lost: func(string) {}}
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, other.URL+"/direct", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		mu.Lock()
		defer mu.Unlock()
		if len(leaked) != 1 || leaked[0] != "" {
			t.Errorf("the other origin saw Authorization %q", leaked)
		}
	})
}

func TestOrigin(t *testing.T) {
	tests := []struct {
		a, b string
		same bool
	}{
		{"http://127.0.0.1:8080/mcp", "http://127.0.0.1:8080/other?x=1", true},
		{"https://Example.com/mcp", "https://example.com:443/mcp", true},
		{"http://example.com/mcp", "http://example.com:80/", true},
		{"http://example.com/mcp", "https://example.com/mcp", false},
		{"http://127.0.0.1:8080/mcp", "http://127.0.0.1:8081/mcp", false},
		{"http://example.com/mcp", "http://evil.example.com/mcp", false},
	}
	for _, tt := range tests {
		t.Run(tt.a+" "+tt.b, func(t *testing.T) {
			a, err := url.Parse(tt.a)
			if err != nil {
				t.Fatal(err)
			}
			b, err := url.Parse(tt.b)
			if err != nil {
				t.Fatal(err)
			}
			if got := origin(a) == origin(b); got != tt.same {
				t.Errorf("same origin = %v (%s, %s), want %v", got, origin(a), origin(b), tt.same)
			}
		})
	}
}

func TestStdioEnvironment(t *testing.T) {
	t.Setenv("TROUPE_MCP_TEST_SECRET", "hunter2")
	t.Setenv("LANG", "C.UTF-8")
	// The pool's environment, not the process's, is the worker's: the
	// server gets this PATH and HOME, and no LANG.
	env := map[string]string{"WHO": "world", "PATH": os.Getenv("PATH"), "HOME": "/home/troupe-test"}
	p := newTestPool(t, PoolConfig{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	srv := &agents.MCPServer{
		Name:    "everything",
		Command: []string{everythingBin(t), "stdio"},
		Env:     map[string]string{"GREETING": "hello ${WHO}", "PLAIN": "a$b"},
		Dir:     t.TempDir(),
	}
	r, err := p.Call(t.Context(), srv, "get-env", `{}`)
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	var got map[string]string
	if err := json.Unmarshal([]byte(r.Text), &got); err != nil {
		t.Fatalf("get-env output %q: %v", r.Text, err)
	}
	if got["GREETING"] != "hello world" || got["PLAIN"] != "a$b" || got["PATH"] != env["PATH"] || got["HOME"] != env["HOME"] {
		t.Errorf("environment = %v", got)
	}
	allowed := []string{"PATH", "HOME", "GREETING", "PLAIN"}
	for k := range got {
		if !slices.Contains(allowed, k) {
			t.Errorf("the server sees the worker's variable %s", k)
		}
	}

	t.Run("unset variable", func(t *testing.T) {
		srv := &agents.MCPServer{Name: "unset", Command: []string{everythingBin(t), "stdio"}, Env: map[string]string{"TOKEN": "${TROUPE_NOT_SET}"}}
		_, err := p.Tools(t.Context(), srv)
		if err == nil || !strings.Contains(err.Error(), "TROUPE_NOT_SET") || !strings.Contains(err.Error(), `Env["TOKEN"]`) {
			t.Fatalf("Tools error = %v, want one naming the unset variable", err)
		}
	})
}

func TestListChanged(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		server func(t *testing.T) *agents.MCPServer
	}{
		{"stdio", func(t *testing.T) *agents.MCPServer {
			return &agents.MCPServer{Name: "grow", Command: []string{exe}, Env: map[string]string{testServerEnv: "grow"}}
		}},
		{"http", func(t *testing.T) *agents.MCPServer {
			return &agents.MCPServer{Name: "grow", URL: serveHTTP(t, newGrowServer())}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			srv := tc.server(t)
			p := newTestPool(t, PoolConfig{})
			before, err := p.Tools(ctx, srv)
			if err != nil {
				t.Fatalf("Tools: %v", err)
			}
			if got := names(before); !slices.Equal(got, []string{"grow"}) {
				t.Fatalf("tools = %v", got)
			}
			r, err := p.Call(ctx, srv, "grow", `{}`)
			if err != nil || r.Text != "added grown_1" {
				t.Fatalf("Call = %+v, %v", r, err)
			}
			var after *Listing
			eventually(t, "the listing with the new tool", func() bool {
				if after, err = p.Tools(ctx, srv); err != nil {
					t.Fatalf("Tools: %v", err)
				}
				return slices.Contains(names(after), "grown_1")
			})
			if !slices.Equal(names(after), []string{"grow", "grown_1"}) || after.Version <= before.Version {
				t.Fatalf("listing after the change = %v version %d, before version %d", names(after), after.Version, before.Version)
			}
			if r, err := p.Call(ctx, srv, "grown_1", `{}`); err != nil || r.Text != "I grew." {
				t.Fatalf("Call of the new tool = %+v, %v", r, err)
			}
		})
	}
}

func TestCloseStopsProcessGroup(t *testing.T) {
	log := &recordingLogger{}
	p := NewPool(PoolConfig{Logger: slog.New(log)})
	// The shell leaves a child behind in the server's process group.
	srv := &agents.MCPServer{Name: "everything", Command: []string{"sh", "-c", `sleep 300 & exec "$0" stdio`, everythingBin(t)}}
	if _, err := p.Tools(t.Context(), srv); err != nil {
		t.Fatalf("Tools: %v", err)
	}
	pgid := stdioPid(t, p, srv)
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// The child was sent SIGKILL; it dies as soon as the kernel gets to
	// it.
	eventually(t, "the server's process group ending", func() bool { return len(liveGroupMembers(t, pgid)) == 0 })
	if !log.contains("Starting default (STDIO) server...") {
		t.Errorf("the server's stderr did not reach the logger: %q", log.records)
	}
	if _, err := p.Tools(t.Context(), srv); !errors.Is(err, ErrClosed) {
		t.Errorf("Tools after Close = %v, want ErrClosed", err)
	}
}

func TestCloseInterruptsCalls(t *testing.T) {
	for _, tr := range transports() {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			srv := tr.server(t)
			p := NewPool(PoolConfig{})
			if _, err := p.Tools(t.Context(), srv); err != nil {
				t.Fatalf("Tools: %v", err)
			}
			errc := inBackground(func() error {
				_, err := p.Call(t.Context(), srv, "trigger-long-running-operation", longCall)
				return err
			})
			waitForCall(t, currentSession(p, srv))
			if err := await(t, inBackground(p.Close), "Close"); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if err := await(t, errc, "the interrupted call's return"); !errors.Is(err, ErrClosed) {
				t.Errorf("Call error = %v, want ErrClosed", err)
			}
		})
	}
}

func TestCloseWaitsForEveryProcess(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	lingering := &agents.MCPServer{Name: "grow", Command: []string{exe}, Env: map[string]string{testServerEnv: "grow-lingering"}}
	tests := []struct {
		name string
		// setup leaves p owning a process that is starting or stopping,
		// and returns its process group.
		setup func(t *testing.T, p *Pool) (pgid int)
	}{
		{"a session still connecting", func(t *testing.T, p *Pool) int {
			// A server that never answers the handshake.
			pidFile := filepath.Join(t.TempDir(), "pid")
			srv := &agents.MCPServer{Name: "mute", Command: []string{"sh", "-c", `echo $$ > "$0.tmp" && mv "$0.tmp" "$0" && exec sleep 300`, pidFile}}
			errc := inBackground(func() error { _, err := p.Tools(t.Context(), srv); return err })
			t.Cleanup(func() {
				if err := await(t, errc, "Tools"); !errors.Is(err, ErrClosed) {
					t.Errorf("Tools error = %v, want ErrClosed", err)
				}
			})
			var pid int
			eventually(t, "the server process starting", func() bool {
				b, err := os.ReadFile(pidFile)
				pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
				return err == nil && pid > 0
			})
			return pid
		}},
		{"a retired session", func(t *testing.T, p *Pool) int {
			if _, err := p.Tools(t.Context(), lingering); err != nil {
				t.Fatalf("Tools: %v", err)
			}
			pgid := stdioPid(t, p, lingering)
			p.mu.Lock()
			e := p.servers[serverKey(lingering)]
			p.mu.Unlock()
			e.retire(p, currentSession(p, lingering))
			return pgid
		}},
		{"a replaced session", func(t *testing.T, p *Pool) int {
			if _, err := p.Tools(t.Context(), lingering); err != nil {
				t.Fatalf("Tools: %v", err)
			}
			pgid := stdioPid(t, p, lingering)
			currentSession(p, lingering).end("the test ended it")
			if _, err := p.Tools(t.Context(), lingering); err != nil {
				t.Fatalf("Tools after the session ended: %v", err)
			}
			replacement := currentSession(p, lingering)
			if replacement.proc.cmd.Process.Pid == pgid {
				t.Fatal("the session was not replaced")
			}
			// Only the replaced session is left to stop slowly.
			if err := syscall.Kill(replacement.proc.cmd.Process.Pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			await(t, replacement.proc.exited, "the replacement's exit")
			return pgid
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := NewPool(PoolConfig{})
			pgid := tt.setup(t, p)
			if err := await(t, inBackground(p.Close), "Close"); err != nil {
				t.Fatalf("Close: %v", err)
			}
			// The process was stopped and reaped before Close returned;
			// the group had no other member.
			if live := liveGroupMembers(t, pgid); len(live) > 0 {
				t.Errorf("processes %v live on after Close", live)
			}
		})
	}
}

// liveGroupMembers lists the processes of a process group that have not
// exited; zombies (exited, not yet reaped by an init that may never reap
// them) do not count.
func liveGroupMembers(t *testing.T, pgid int) []string {
	t.Helper()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		if errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH) {
			return nil
		}
		return []string{"some"}
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var live []string
	for _, e := range entries {
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) >= 3 && fields[2] == strconv.Itoa(pgid) && fields[0] != "Z" {
			live = append(live, e.Name()+string(stat[:i+1]))
		}
	}
	return live
}

func TestConnectFailure(t *testing.T) {
	tests := []struct {
		name    string
		command []string
		want    string
	}{
		{"no such program", []string{"/nonexistent/mcp-server"}, "no such file"},
		{"the server exits at once", []string{"sh", "-c", "echo boom >&2; exit 3"}, "exit status 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newTestPool(t, PoolConfig{})
			_, err := p.Tools(t.Context(), &agents.MCPServer{Name: "broken", Command: tt.command})
			var se *ServerError
			if !errors.As(err, &se) || se.Op != "connect" || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Tools error = %v, want a connect *ServerError mentioning %q", err, tt.want)
			}
		})
	}
}

func TestToolNameClash(t *testing.T) {
	s := sdk.NewServer(&sdk.Implementation{Name: "clash", Version: "1"}, nil)
	for _, name := range []string{"a.b", "a_b"} {
		s.AddTool(&sdk.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: name}}}, nil
			})
	}
	u := serveHTTP(t, s)
	p := newTestPool(t, PoolConfig{})
	_, err := p.Tools(t.Context(), &agents.MCPServer{Name: "clash", URL: u})
	if err == nil || !strings.Contains(err.Error(), `"a.b" and "a_b"`) {
		t.Fatalf("Tools error = %v, want a clash", err)
	}
	srv := &agents.MCPServer{Name: "clash", URL: u, Deny: []string{"a.b"}}
	if r, err := p.Call(t.Context(), srv, "a_b", ""); err != nil || r.Text != "a_b" {
		t.Fatalf("Call with the clash denied = %+v, %v", r, err)
	}
}
