package mcp

// One live connection to a server, and how it starts and ends.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/troupe-dev/troupe/agents"
)

// minSetupTimeout is the least time a session gets to start and list its
// tools, whatever the declaration's call timeout: starting a server (npx
// may download it first) can take longer than a quick tool call.
const minSetupTimeout = 30 * time.Second

// setupTimeout bounds starting a session and listing its tools.
func setupTimeout(srv *agents.MCPServer) time.Duration {
	return max(srv.CallTimeout(), minSetupTimeout)
}

// stopGrace is how long a stdio server has to exit after its stdin closes,
// before it is signalled.
const stopGrace = 2 * time.Second

// session is one connection to a server: for a stdio server, one process.
type session struct {
	cs     *sdk.ClientSession
	proc   *process // nil for an HTTP server
	logger *slog.Logger

	done    chan struct{} // closed when the session has ended
	endOnce sync.Once
	cause   string // why it ended, set before done closes

	mu     sync.Mutex
	calls  map[*int]context.CancelCauseFunc // calls in flight, to interrupt on close
	closed error                            // the cause close was given, once it runs

	closeOnce sync.Once
}

// refusedGrace is how long connecting to an HTTP server that refuses
// connections is tried again: long enough for a server to restart.
const refusedGrace = 15 * time.Second

// refused reports whether err is a refused TCP connection.
func refused(err error) bool {
	return err != nil && (errors.Is(err, syscall.ECONNREFUSED) || strings.Contains(err.Error(), "connection refused"))
}

// connect starts a session with srv.
func (p *Pool) connect(ctx context.Context, e *server, srv *agents.MCPServer) (*session, error) {
	s := &session{
		logger: p.logger.With("mcp_server", srv.Name),
		done:   make(chan struct{}),
		calls:  map[*int]context.CancelCauseFunc{},
	}
	var transport sdk.Transport
	if len(srv.Command) > 0 {
		env, err := serverEnv(srv.Env, p.lookupEnv)
		if err != nil {
			return nil, err
		}
		proc, err := startProcess(srv, env, s.logger)
		if err != nil {
			return nil, fmt.Errorf("starting %s: %w", srv.Command[0], err)
		}
		s.proc = proc
		transport = &sdk.IOTransport{Reader: proc.stdout, Writer: proc.stdin}
	} else {
		headers, err := expandMap(srv.Headers, "Headers", p.lookupEnv)
		if err != nil {
			return nil, err
		}
		endpoint, err := url.Parse(srv.URL)
		if err != nil {
			return nil, err
		}
		own := origin(endpoint)
		transport = &sdk.StreamableClientTransport{
			Endpoint: srv.URL,
			HTTPClient: &http.Client{
				Transport: &headerTransport{
					base:    http.DefaultTransport,
					origin:  own,
					headers: headers,
					lost:    s.end,
				},
				CheckRedirect: sameOriginRedirect(own),
			},
			// One reconnect of a broken stream, not five with growing
			// delays: a server that went away should fail the call within
			// seconds, and the next call starts a new session anyway.
			MaxRetries: 1,
		}
	}

	cctx, cancel := context.WithTimeout(ctx, setupTimeout(srv))
	defer cancel()
	cs, err := e.client.Connect(cctx, transport, nil)
	// An HTTP server that refuses connections may be restarting: it gets
	// refusedGrace to come back before the call fails.
	for wait, until := 100*time.Millisecond, time.Now().Add(refusedGrace); s.proc == nil && refused(err) && time.Now().Before(until); wait = min(2*wait, time.Second) {
		select {
		case <-cctx.Done():
		case <-time.After(wait):
			cs, err = e.client.Connect(cctx, transport, nil)
			continue
		}
		break
	}
	if err != nil {
		if s.proc != nil {
			if s.proc.waitExit(200 * time.Millisecond) {
				err = fmt.Errorf("%s: %w", s.proc.exitReason(), err)
			}
			s.proc.kill()
			s.logStderr("MCP server failed to start")
		}
		return nil, err
	}
	s.cs = cs
	go func() {
		err := cs.Wait()
		if err != nil {
			s.end("the connection closed: " + err.Error())
		} else {
			s.end("the connection closed")
		}
	}()
	if s.proc != nil {
		go func() {
			<-s.proc.exited
			s.end(s.proc.exitReason())
			// Children the server left behind would hold its stdout open
			// and keep calls waiting for answers that cannot come.
			signalGroup(s.proc.cmd, sigkill)
		}()
	}
	return s, nil
}

// end marks the session as ended; the first cause wins.
func (s *session) end(cause string) {
	s.endOnce.Do(func() {
		s.cause = cause
		close(s.done)
	})
}

// alive reports whether the session can take calls.
func (s *session) alive() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// gone reports whether err, from a request on the session, means the
// session is gone: it ended (the process exited, the connection closed or
// the server forgot it), or err is a broken connection. A protocol error
// on a live session is an answer, not a death. It waits a moment for the
// end to show, since a broken pipe fails the request before the process is
// reaped or the connection is torn down.
func (s *session) gone(err error) bool {
	// The SDK wraps an HTTP request that failed to reach the server in a
	// protocol error too (jsonrpc2's ErrRejected); the connection failure
	// inside decides.
	var wire *jsonrpc.Error
	if errors.As(err, &wire) && s.alive() && !connectionBroke(err) {
		return false
	}
	t := time.NewTimer(500 * time.Millisecond)
	defer t.Stop()
	select {
	case <-s.done:
		return true
	case <-t.C:
	}
	return connectionBroke(err)
}

// connectionBroke reports whether err is the failure of a connection
// rather than an answer.
func connectionBroke(err error) bool {
	var urlErr *url.Error
	var netErr *net.OpError
	return errors.As(err, &urlErr) || errors.As(err, &netErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, os.ErrClosed) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, sdk.ErrConnectionClosed) || errors.Is(err, sdk.ErrSessionMissing) ||
		// The SDK's answer to a stream that ended without the response.
		strings.Contains(err.Error(), "request terminated without response")
}

// deathCause explains why the session is gone, given the error a request
// on it failed with.
func (s *session) deathCause(err error) string {
	if s.proc != nil && s.proc.waitExit(time.Second) {
		return s.proc.exitReason()
	}
	if !s.alive() && s.cause != "" {
		return s.cause
	}
	return err.Error()
}

// track registers a call's cancel func, so close can interrupt it; the
// returned func unregisters it. A call on a session that is closing is
// interrupted at once.
func (s *session) track(cancel context.CancelCauseFunc) func() {
	key := new(int)
	s.mu.Lock()
	if s.closed != nil {
		cancel(s.closed)
	}
	s.calls[key] = cancel
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		delete(s.calls, key)
		s.mu.Unlock()
	}
}

// close ends the session: calls in flight fail with cause, a stdio server
// is stopped with its process group. It is safe to call more than once and
// from many goroutines; every call returns once the session is closed.
func (s *session) close(cause error) {
	s.closeOnce.Do(func() {
		s.end("the session was closed")
		s.mu.Lock()
		s.closed = cause
		for _, cancel := range s.calls {
			cancel(cause)
		}
		s.mu.Unlock()
		if s.proc != nil {
			died := s.proc.hasExited() && s.proc.exitErr != nil
			s.proc.stop(stopGrace)
			if died {
				s.logStderr("MCP server exited")
			}
		}
		// With the calls interrupted and the process gone, Close does not
		// wait for answers.
		if err := s.cs.Close(); err != nil && !errors.Is(err, sdk.ErrConnectionClosed) {
			s.logger.Debug("closing MCP session", "error", err)
		}
	})
}

// logStderr logs the last lines a stdio server wrote to stderr.
func (s *session) logStderr(msg string) {
	if s.proc == nil {
		return
	}
	if lines := s.proc.lastStderr(); len(lines) > 0 {
		s.logger.Warn(msg, "stderr", strings.Join(lines, "\n"))
	}
}

// origin is a URL's scheme, host and port, with the scheme's default port
// made explicit: the unit that a declaration's headers are meant for.
func origin(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// maxRedirects is how many redirects a request may follow, as many as
// net/http's default policy allows.
const maxRedirects = 10

// sameOriginRedirect is the redirect policy of a session with the server
// at endpoint (an origin): redirects within it are followed, a redirect to
// another origin is refused, since the declaration's headers often carry a
// secret meant for that server alone.
func sameOriginRedirect(endpoint string) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if to := origin(req.URL); to != endpoint {
			return fmt.Errorf("refusing the redirect to %s: an MCP server's requests (and their headers) stay with its own origin, %s", to, endpoint)
		}
		if len(via) >= maxRedirects {
			return fmt.Errorf("stopped after %d redirects", maxRedirects)
		}
		return nil
	}
}

// headerTransport adds a declaration's headers to the requests for the
// server's origin, and notices when the server no longer knows the session
// (it was restarted): the SDK keeps such a session, but no call on it can
// succeed.
type headerTransport struct {
	base    http.RoundTripper
	origin  string // the server's; no other origin gets the headers
	headers map[string]string
	lost    func(cause string)
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 && origin(req.URL) == t.origin {
		req = req.Clone(req.Context())
		for k, v := range t.headers {
			req.Header.Set(k, v)
		}
	}
	resp, err := t.base.RoundTrip(req)
	if err == nil && req.Method != http.MethodDelete && req.Header.Get("Mcp-Session-Id") != "" &&
		(resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusBadRequest) {
		t.lost(fmt.Sprintf("the server no longer knows the session (HTTP %s)", resp.Status))
	}
	return resp, err
}
