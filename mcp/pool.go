package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/troupe-dev/troupe/agents"
)

// PoolConfig configures a Pool. Its zero value works.
type PoolConfig struct {
	// LookupEnv is the worker's environment as the pool sees it: it
	// supplies the PATH, HOME, USER, LANG, TERM and TMPDIR that stdio
	// servers inherit, and resolves the ${NAME} references in
	// MCPServer.Env and Headers values. Nil means os.LookupEnv. A
	// reference to an unset variable is an error that names the variable;
	// it is never expanded to an empty string.
	LookupEnv func(string) (string, bool)
	// Logger receives the pool's diagnostics and the stderr of stdio
	// servers (at debug level, bounded). Nil discards them.
	Logger *slog.Logger
	// ClientName and ClientVersion identify the client to servers; they
	// default to "troupe" and "dev".
	ClientName, ClientVersion string
}

// Pool holds one worker's MCP sessions: one per server declaration, keyed
// by a hash of the declaration's connection fields (Name, Command, Env,
// Dir, URL, Headers), so agents that declare the same server share its
// session. A session starts on first use and starts again after the server
// died. A Pool is safe for concurrent use.
type Pool struct {
	lookupEnv func(string) (string, bool)
	logger    *slog.Logger
	impl      *sdk.Implementation

	// closing is cancelled by Close, with cause ErrClosed, to cut short
	// the sessions that are still starting.
	closing       context.Context
	cancelClosing context.CancelCauseFunc
	// stops counts what Close waits for: sessions being closed (by Close,
	// or after they broke or were replaced) and sessions being started.
	// Every Add happens with a server's mu held before Close marks that
	// server closed, or in Close itself, so before Close waits.
	stops sync.WaitGroup
	// closeDone is closed when Close has stopped everything.
	closeDone chan struct{}

	mu      sync.Mutex
	servers map[string]*server
	closed  bool
}

// NewPool returns an empty Pool. Close it to stop its servers.
func NewPool(cfg PoolConfig) *Pool {
	p := &Pool{
		lookupEnv: cfg.LookupEnv,
		logger:    cfg.Logger,
		impl:      &sdk.Implementation{Name: cfg.ClientName, Version: cfg.ClientVersion},
		closeDone: make(chan struct{}),
		servers:   map[string]*server{},
	}
	p.closing, p.cancelClosing = context.WithCancelCause(context.Background())
	if p.lookupEnv == nil {
		p.lookupEnv = os.LookupEnv
	}
	if p.logger == nil {
		p.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if p.impl.Name == "" {
		p.impl.Name = "troupe"
	}
	if p.impl.Version == "" {
		p.impl.Version = "dev"
	}
	return p
}

// Listing is a server's tools as the model sees them.
type Listing struct {
	// Server is the declaration's Name.
	Server string
	// Version changes whenever the listing may have changed: when the
	// server sends notifications/tools/list_changed and when its session
	// starts again. It only grows.
	Version int64
	// Tools are in the server's order, without the tools the
	// declaration's Allow and Deny lists leave out.
	Tools []Tool
}

// Tool is one of a server's tools.
type Tool struct {
	// Name is the model-facing name: the declaration's Prefix and the
	// server's name for the tool, with characters outside [a-zA-Z0-9_-]
	// replaced by '_' and cut to 64 characters.
	Name string
	// Remote is the server's name for the tool.
	Remote string
	// Spec is what the model sees. Spec.Parameters is the OpenAI-strict
	// form of the input schema when Spec.Strict (see ConvertSchema), and
	// the server's schema otherwise.
	Spec agents.ToolSpec
	// OutputSchema is the server's outputSchema for the tool, if any.
	OutputSchema json.RawMessage
}

// Tools returns srv's tools as the model sees them, connecting (or
// reconnecting) first when needed. The listing is cached in the pool and
// fetched again after the server sends notifications/tools/list_changed or
// its session starts again. Two tools whose names are the same after
// sanitizing are an error.
func (p *Pool) Tools(ctx context.Context, srv *agents.MCPServer) (*Listing, error) {
	_, rl, err := p.listing(ctx, srv)
	if err != nil {
		return nil, err
	}
	l, _, err := rl.view(srv)
	return l, err
}

// listing returns srv's session entry and its server's listing,
// connecting and listing first when needed.
func (p *Pool) listing(ctx context.Context, srv *agents.MCPServer) (*server, *remoteListing, error) {
	if err := srv.Validate(); err != nil {
		return nil, nil, err
	}
	e, err := p.server(srv)
	if err != nil {
		return nil, nil, err
	}
	rl, err := e.listing(ctx, p, srv)
	return e, rl, err
}

// MetaIdempotencyKey is the _meta member of a tools/call request that
// holds the call's idempotency key (agents.IdempotencyKey): the same for
// every attempt of one model's call, so a server that keeps the keys it
// has seen can make a call repeated by a client's crash take effect once.
const MetaIdempotencyKey = "dev.troupe/idempotency-key"

// Call calls the tool whose model-facing name is name, with the model's
// JSON arguments (an object; empty means {}). Arguments that the strict
// conversion made nullable and that the model set to null are removed
// again, at any depth, before the call. The call is bounded by
// srv.CallTimeout() and by ctx: when either ends, the server is sent
// notifications/cancelled. When ctx carries a tool call's RunContext
// (agents.WithRunContext), the request's _meta holds the call's
// idempotency key under MetaIdempotencyKey.
//
// A tool that reports an error (isError) is a Result with IsError set, not
// an error. The errors are: ErrUnknownTool (wrapped) for a name the listing
// lacks; *agents.ToolArgsError for arguments that are not a JSON object;
// and a *ServerError for the rest, wrapping ErrServerDied when the server
// went away (the call is not retried; the next Tools or Call starts a new
// session), context.DeadlineExceeded on timeout, or ctx's error.
func (p *Pool) Call(ctx context.Context, srv *agents.MCPServer, name string, args string) (*Result, error) {
	e, rl, err := p.listing(ctx, srv)
	if err != nil {
		return nil, err
	}
	_, byName, err := rl.view(srv)
	if err != nil {
		return nil, err
	}
	t, ok := byName[name]
	if !ok {
		return nil, fmt.Errorf("%w %q: MCP server %s offers no such tool", ErrUnknownTool, name, srv.Name)
	}
	raw, err := callArguments(args)
	if err != nil {
		return nil, &agents.ToolArgsError{Tool: name, Err: err}
	}
	if t.strict {
		if raw, err = stripNulls(raw, t.remote.nulls); err != nil {
			return nil, &agents.ToolArgsError{Tool: name, Err: err}
		}
	}

	op := "call " + t.remote.name
	sess := rl.sess
	base, cancelBase := context.WithCancelCause(ctx)
	defer cancelBase(nil)
	untrack := sess.track(cancelBase)
	defer untrack()
	callCtx, cancel := context.WithTimeout(base, srv.CallTimeout())
	defer cancel()

	params := &sdk.CallToolParams{Name: t.remote.name, Arguments: raw}
	if key := agents.IdempotencyKey(ctx); key != "" {
		params.Meta = sdk.Meta{MetaIdempotencyKey: key}
	}
	res, err := sess.cs.CallTool(callCtx, params)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return nil, &ServerError{Server: srv.Name, Op: op, Err: ctx.Err()}
		case errors.Is(context.Cause(base), ErrClosed):
			return nil, &ServerError{Server: srv.Name, Op: op, Err: ErrClosed}
		case errors.Is(callCtx.Err(), context.DeadlineExceeded):
			return nil, &ServerError{Server: srv.Name, Op: op,
				Err: fmt.Errorf("no answer within %s: %w", srv.CallTimeout(), context.DeadlineExceeded)}
		case sess.gone(err):
			cause := sess.deathCause(err)
			e.retire(p, sess)
			return nil, &ServerError{Server: srv.Name, Op: op, Err: fmt.Errorf("%w: %s", ErrServerDied, cause)}
		default:
			return nil, &ServerError{Server: srv.Name, Op: op, Err: err}
		}
	}
	r, err := newResult(res)
	if err != nil {
		return nil, &ServerError{Server: srv.Name, Op: op, Err: err}
	}
	r.Version = e.version.Load()
	return r, nil
}

// callArguments checks that args is a JSON object.
func callArguments(args string) (json.RawMessage, error) {
	if strings.TrimSpace(args) == "" {
		return json.RawMessage(`{}`), nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(args), &obj); err != nil {
		return nil, fmt.Errorf("arguments must be a JSON object: %w", err)
	}
	if obj == nil {
		return json.RawMessage(`{}`), nil
	}
	return json.RawMessage(args), nil
}

// Close ends every session, stopping stdio servers and their process
// groups, and interrupts calls in flight with ErrClosed. Sessions still
// starting are cut short and stopped too. Close returns once every process
// the pool started has been stopped, including those of sessions that
// broke or were replaced earlier and are still stopping; a second Close
// waits for the first. The pool cannot be used afterwards.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.closeDone
		return nil
	}
	p.closed = true
	servers := make([]*server, 0, len(p.servers))
	for _, e := range p.servers {
		servers = append(servers, e)
	}
	p.mu.Unlock()

	for _, e := range servers {
		e.mu.Lock()
		e.closed = true
		if sess := e.sess; sess != nil {
			p.stops.Go(func() { sess.close(ErrClosed) })
		}
		e.sess, e.tools = nil, nil
		e.mu.Unlock()
	}
	// With every server closed, no start or retirement adds to stops any
	// more; the starts in flight see the cancellation and stop what they
	// started.
	p.cancelClosing(ErrClosed)
	p.stops.Wait()
	close(p.closeDone)
	return nil
}

// server is the pool's state for one declaration.
type server struct {
	client *sdk.Client
	// version counts the events that may change the listing.
	version atomic.Int64
	// starts counts the sessions started.
	starts atomic.Int64
	// sem is held while connecting or listing, so that concurrent callers
	// start one session and fetch one listing.
	sem chan struct{}

	mu     sync.Mutex
	sess   *session
	tools  *remoteListing // the listing of sess
	closed bool
}

// server returns the state for srv's declaration.
func (p *Pool) server(srv *agents.MCPServer) (*server, error) {
	key := serverKey(srv)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	if e, ok := p.servers[key]; ok {
		return e, nil
	}
	e := &server{sem: make(chan struct{}, 1)}
	e.client = sdk.NewClient(p.impl, &sdk.ClientOptions{
		Logger: p.logger.With("mcp_server", srv.Name),
		// No roots, sampling or elicitation: the worker has none to
		// offer, and servers then leave out the tools that need them.
		Capabilities: &sdk.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			e.version.Add(1)
		},
	})
	p.servers[key] = e
	return e, nil
}

// serverKey hashes a declaration's connection fields.
func serverKey(srv *agents.MCPServer) string {
	b, _ := json.Marshal(struct {
		Name    string
		Command []string
		Env     map[string]string
		Dir     string
		URL     string
		Headers map[string]string
	}{srv.Name, srv.Command, srv.Env, srv.Dir, srv.URL, srv.Headers})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// lock takes the server's semaphore, or gives up with ctx.
func (e *server) lock(ctx context.Context) error {
	select {
	case e.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (e *server) unlock() { <-e.sem }

// current returns the live session and its listing if that is up to date.
func (e *server) current() (*session, *remoteListing) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.sess == nil || !e.sess.alive() {
		return nil, nil
	}
	if e.tools == nil || e.tools.sess != e.sess || e.tools.version != e.version.Load() {
		return e.sess, nil
	}
	return e.sess, e.tools
}

// listing returns the server's listing, fetching it (and starting a
// session) when the cached one is out of date.
func (e *server) listing(ctx context.Context, p *Pool, srv *agents.MCPServer) (*remoteListing, error) {
	if _, rl := e.current(); rl != nil {
		return rl, nil
	}
	if err := e.lock(ctx); err != nil {
		return nil, &ServerError{Server: srv.Name, Op: "list tools", Err: err}
	}
	defer e.unlock()
	// Listing is idempotent: a session found dead on the way is replaced
	// once.
	for attempt := 0; ; attempt++ {
		sess, rl := e.current()
		if rl != nil {
			return rl, nil
		}
		if sess == nil {
			var err error
			if sess, err = e.start(ctx, p, srv); err != nil {
				return nil, err
			}
		}
		version := e.version.Load()
		tools, err := listTools(ctx, sess, srv)
		if err == nil {
			rl := &remoteListing{sess: sess, version: version, tools: tools}
			e.mu.Lock()
			if e.sess == sess {
				e.tools = rl
			}
			e.mu.Unlock()
			return rl, nil
		}
		if ctx.Err() != nil || !sess.gone(err) {
			return nil, &ServerError{Server: srv.Name, Op: "list tools", Err: err}
		}
		cause := sess.deathCause(err)
		e.retire(p, sess)
		if attempt > 0 {
			return nil, &ServerError{Server: srv.Name, Op: "list tools", Err: fmt.Errorf("%w: %s", ErrServerDied, cause)}
		}
	}
}

// start starts a session; e.sem is held. Close waits for it, and cuts
// the connecting short.
func (e *server) start(ctx context.Context, p *Pool, srv *agents.MCPServer) (*session, error) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, ErrClosed
	}
	if old := e.sess; old != nil {
		p.stops.Go(func() { old.close(ErrServerDied) })
	}
	e.sess, e.tools = nil, nil
	p.stops.Add(1)
	e.mu.Unlock()
	defer p.stops.Done()

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stopCancel := context.AfterFunc(p.closing, func() { cancel(ErrClosed) })
	defer stopCancel()
	sess, err := p.connect(ctx, e, srv)
	if err != nil {
		if p.closing.Err() != nil {
			return nil, ErrClosed
		}
		return nil, &ServerError{Server: srv.Name, Op: "connect", Err: err}
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		sess.close(ErrClosed)
		return nil, ErrClosed
	}
	e.sess = sess
	e.version.Add(1)
	e.starts.Add(1)
	e.mu.Unlock()
	return sess, nil
}

// retire drops a session that broke, so the next use starts another, and
// stops it in the background; Close waits for that.
func (e *server) retire(p *Pool, sess *session) {
	sess.end("the connection broke")
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		// Close took the server's session and stops it; any other
		// session is already being stopped by an earlier retirement or
		// start.
		return
	}
	if e.sess == sess {
		e.sess, e.tools = nil, nil
	}
	p.stops.Go(func() { sess.close(ErrServerDied) })
}

// listTools fetches every page of the server's tools and converts them.
func listTools(ctx context.Context, sess *session, srv *agents.MCPServer) ([]*remoteTool, error) {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout(srv))
	defer cancel()
	var tools []*remoteTool
	for t, err := range sess.cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		rt, err := newRemoteTool(t)
		if err != nil {
			sess.logger.Warn("skipping MCP tool", "tool", t.Name, "error", err)
			continue
		}
		tools = append(tools, rt)
	}
	return tools, nil
}
