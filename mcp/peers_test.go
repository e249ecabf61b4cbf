//go:build unix

package mcp

// The real peers the tests run against: the reference server
// @modelcontextprotocol/server-everything (installed by scripts/setup.sh)
// over stdio and streamable HTTP, and small go-sdk servers for what it
// cannot do (add a tool at runtime). The test binary doubles as a stdio
// go-sdk server when TROUPE_MCP_TEST_SERVER is set.

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/troupe-dev/troupe/agents"
)

// testServerEnv makes the test binary run a go-sdk stdio server: "grow",
// or "grow-lingering", which lingers a second after its stdin closes, so
// that stopping it takes a while.
const testServerEnv = "TROUPE_MCP_TEST_SERVER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(testServerEnv); mode == "grow" || mode == "grow-lingering" {
		if err := newGrowServer().Run(context.Background(), &sdk.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if mode == "grow-lingering" {
			time.Sleep(time.Second)
		}
		os.Exit(0)
	}
	code := m.Run()
	sharedHTTP.stop()
	os.Exit(code)
}

// everythingBin returns server-everything's launcher, failing the test
// when setup has not installed it.
func everythingBin(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(filepath.Dir(file), "..", "tools", "mcp", "node_modules", ".bin", "mcp-server-everything")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("server-everything is not installed (%v): run scripts/setup.sh", err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not on PATH (%v): run scripts/setup.sh", err)
	}
	return bin
}

// transport is one way of reaching server-everything.
type transport struct {
	name string
	// server declares server-everything; each call may start a new peer
	// for HTTP only when the test asks for its own.
	server func(t *testing.T) *agents.MCPServer
}

// transports reaches server-everything over stdio and over streamable
// HTTP (one shared server process).
func transports() []transport {
	return []transport{
		{"stdio", func(t *testing.T) *agents.MCPServer {
			return &agents.MCPServer{Name: "everything", Command: []string{everythingBin(t), "stdio"}}
		}},
		{"http", func(t *testing.T) *agents.MCPServer {
			return &agents.MCPServer{Name: "everything", URL: sharedHTTP.url(t)}
		}},
	}
}

// httpEverything is server-everything serving streamable HTTP from a
// process the test controls.
type httpEverything struct {
	mu     sync.Mutex
	port   int
	cmd    *exec.Cmd
	exited chan error // cmd.Wait's result
	once   sync.Once
	err    error
}

// sharedHTTP is the HTTP server the tests share; it stops in TestMain.
var sharedHTTP = &httpEverything{}

func (h *httpEverything) url(t testing.TB) string {
	bin := everythingBin(t)
	h.once.Do(func() { h.err = h.start(bin) })
	if h.err != nil {
		t.Fatalf("starting server-everything over HTTP: %v", h.err)
	}
	return fmt.Sprintf("http://127.0.0.1:%d/mcp", h.port)
}

// newHTTPEverything starts a server of the test's own.
func newHTTPEverything(t *testing.T) *httpEverything {
	h := &httpEverything{}
	t.Cleanup(h.stop)
	h.url(t)
	return h
}

// usedPorts are the ports handed to HTTP servers in this test process: a
// server stopped for a while keeps its port for its restart.
var usedPorts sync.Map

// freePort returns a loopback port no server of this process had.
func freePort() (int, error) {
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if _, taken := usedPorts.LoadOrStore(port, true); !taken {
			return port, nil
		}
	}
}

// start starts the server, on the port it had before if any, and waits
// until it accepts connections.
func (h *httpEverything) start(bin string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.port == 0 {
		port, err := freePort()
		if err != nil {
			return err
		}
		h.port = port
	}
	cmd := exec.Command(bin, "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", h.port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	h.cmd, h.exited = cmd, exited
	deadline := time.Now().Add(hang)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			h.cmd = nil
			return fmt.Errorf("server-everything exited (%v): %s", err, stderr.String())
		default:
		}
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", h.port), time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		time.Sleep(30 * time.Millisecond)
	}
	return fmt.Errorf("server-everything did not listen on port %d", h.port)
}

// stop kills the server process (and its group) at once.
func (h *httpEverything) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cmd == nil {
		return
	}
	_ = syscall.Kill(-h.cmd.Process.Pid, syscall.SIGKILL)
	<-h.exited
	h.cmd = nil
}

// newGrowServer is a go-sdk server whose "grow" tool adds a tool named
// grown_N, so that the server sends notifications/tools/list_changed.
func newGrowServer() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "grow", Version: "1"}, nil)
	var n atomic.Int32
	type none struct{}
	sdk.AddTool(s, &sdk.Tool{Name: "grow", Description: "Adds a tool."},
		func(ctx context.Context, req *sdk.CallToolRequest, _ none) (*sdk.CallToolResult, any, error) {
			name := fmt.Sprintf("grown_%d", n.Add(1))
			sdk.AddTool(s, &sdk.Tool{Name: name, Description: "A tool grown at runtime."},
				func(context.Context, *sdk.CallToolRequest, none) (*sdk.CallToolResult, any, error) {
					return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "I grew."}}}, nil, nil
				})
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "added " + name}}}, nil, nil
		})
	return s
}

// serveHTTP serves s over streamable HTTP on a loopback test server.
func serveHTTP(t *testing.T, s *sdk.Server) string {
	t.Helper()
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	t.Cleanup(ts.Close)
	return ts.URL
}

// newTestPool returns a pool closed at the end of the test, logging to the
// test at warning level.
func newTestPool(t *testing.T, cfg PoolConfig) *Pool {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	p := NewPool(cfg)
	t.Cleanup(func() { p.Close() })
	return p
}

// stdioPid returns the pid of srv's stdio server process in p.
func stdioPid(t *testing.T, p *Pool, srv *agents.MCPServer) int {
	t.Helper()
	p.mu.Lock()
	e := p.servers[serverKey(srv)]
	p.mu.Unlock()
	if e == nil {
		t.Fatal("no session for the server")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.sess == nil || e.sess.proc == nil {
		t.Fatal("no stdio process for the server")
	}
	return e.sess.proc.cmd.Process.Pid
}

// hang bounds the waits for what should happen soon: long enough that only
// a hang reaches it, never a slow or loaded machine. Pass/fail tests assert
// on events and their order, not on how long things take.
const hang = time.Minute

// await returns what c delivers, failing the test when nothing comes
// within hang.
func await[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(hang):
		t.Fatalf("%s: nothing within %v", what, hang)
		var zero T
		return zero
	}
}

// eventually waits until cond holds, failing the test when it does not
// within hang.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(hang); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, hang)
		}
	}
}

// inBackground runs f in a goroutine and delivers its error.
func inBackground(f func() error) <-chan error {
	c := make(chan error, 1)
	go func() { c <- f() }()
	return c
}

// waitForCall waits until a call is in flight on sess.
func waitForCall(t *testing.T, sess *session) {
	t.Helper()
	eventually(t, "a call in flight", func() bool {
		sess.mu.Lock()
		defer sess.mu.Unlock()
		return len(sess.calls) > 0
	})
}

// recordingLogger collects log records for assertions.
type recordingLogger struct {
	mu      sync.Mutex
	records []string
}

func (r *recordingLogger) Enabled(context.Context, slog.Level) bool { return true }
func (r *recordingLogger) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recordingLogger) WithGroup(string) slog.Handler            { return r }
func (r *recordingLogger) Handle(_ context.Context, rec slog.Record) error {
	var b strings.Builder
	b.WriteString(rec.Message)
	rec.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	r.mu.Lock()
	r.records = append(r.records, b.String())
	r.mu.Unlock()
	return nil
}

func (r *recordingLogger) contains(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.records {
		if strings.Contains(rec, s) {
			return true
		}
	}
	return false
}
