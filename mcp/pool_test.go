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
// far longer than any test waits for it.
const longCall = `{"duration":30,"steps":30}`

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

			errc := make(chan error, 1)
			go func() {
				_, err := p.Call(ctx, srv, "trigger-long-running-operation", longCall)
				errc <- err
			}()
			time.Sleep(500 * time.Millisecond)
			killed := time.Now()
			kill(p)
			select {
			case err = <-errc:
			case <-time.After(10 * time.Second):
				t.Fatal("the call did not return after the server died")
			}
			if waited := time.Since(killed); waited > 5*time.Second {
				t.Errorf("the call returned %v after the server died", waited)
			}
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
			// Give the pool time to notice (the process exits; the HTTP
			// stream's one reconnect fails).
			deadline := time.Now().Add(5 * time.Second)
			for first.alive() && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if first.alive() {
				t.Fatal("the pool did not notice that the server died")
			}
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
			time.AfterFunc(300*time.Millisecond, cancel)
			start := time.Now()
			_, err := p.Call(ctx, srv, "trigger-long-running-operation", longCall)
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("the cancelled call took %v", took)
			}
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
			_, err := p.Call(t.Context(), srv, "trigger-long-running-operation", longCall)
			took := time.Since(start)
			if took < 500*time.Millisecond || took > 2*time.Second {
				t.Errorf("the call took %v with a 500ms timeout", took)
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

func TestStdioEnvironment(t *testing.T) {
	t.Setenv("TROUPE_MCP_TEST_SECRET", "hunter2")
	env := map[string]string{"WHO": "world"}
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
	if got["GREETING"] != "hello world" || got["PLAIN"] != "a$b" || got["PATH"] != os.Getenv("PATH") {
		t.Errorf("environment = %v", got)
	}
	allowed := append(slices.Clone(minimalEnv), "GREETING", "PLAIN")
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
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				if after, err = p.Tools(ctx, srv); err != nil {
					t.Fatalf("Tools: %v", err)
				}
				if slices.Contains(names(after), "grown_1") {
					break
				}
			}
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
	deadline := time.Now().Add(3 * time.Second)
	for len(liveGroupMembers(t, pgid)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if live := liveGroupMembers(t, pgid); len(live) > 0 {
		t.Errorf("processes %v of the server's group live on after Close", live)
	}
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
			errc := make(chan error, 1)
			go func() {
				_, err := p.Call(t.Context(), srv, "trigger-long-running-operation", longCall)
				errc <- err
			}()
			time.Sleep(300 * time.Millisecond)
			start := time.Now()
			if err := p.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("Close took %v", took)
			}
			select {
			case err := <-errc:
				if !errors.Is(err, ErrClosed) {
					t.Errorf("Call error = %v, want ErrClosed", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Close did not interrupt the call")
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
