package scripted

// This file holds the HTTP side: routing, authentication, OpenAI-shaped
// errors, the record of answered requests, and the standalone entry point.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Server answers OpenAI API requests from a Scenario. It is an http.Handler,
// so it can be mounted anywhere (httptest.NewServer(s), say), or it can listen
// on its own with Start. It is safe for concurrent use.
type Server struct {
	rules []*rule
	log   io.Writer

	mu       sync.Mutex
	calls    []Call
	inFlight map[string]int // rule name → requests matched, not yet recorded
	srv      *http.Server
	serveErr chan error

	// limits are the rate limits the server keeps (limits.go); stats,
	// throttles, running, arrived and admitted count what it saw.
	limits    Limits
	stats     Stats
	throttles []Throttle
	running   int
	arrived   []time.Time // model requests in the last window
	admitted  []time.Time // those let in
}

// Call records one request that a rule matched: answered, or abandoned by its
// client before the answer was sent. Rejected requests are not recorded.
type Call struct {
	// Rule is the name of the rule that answered.
	Rule string
	// API is APIResponses ("responses") or APIChat ("chat").
	API string
	// Model is the model the request named.
	Model string
	// Turn is the model turn of the request, starting at 1.
	Turn int
	// Stream reports whether the answer was streamed.
	Stream bool
	// Start is when the request arrived; End is when its answer was sent
	// (or when the client went away).
	Start, End time.Time
	// Canceled reports that the client went away (its context was canceled
	// or the connection dropped) before the whole answer was sent, as when a
	// test kills a worker during a delay.
	Canceled bool
	// Digest is the SHA-256 of the request body, in hex. A request sent
	// again has the digest of the first: a model call that its client
	// made again, as a Temporal worker does when the workflow task of a
	// local activity timed out while the call ran (at least once).
	Digest string
}

// Option configures a Server.
type Option func(*Server)

// WithLog makes the Server write one line per request to w: the rule that
// answered it, or why it was rejected. The default is no log.
func WithLog(w io.Writer) Option {
	return func(s *Server) {
		if w != nil {
			s.log = w
		}
	}
}

// New returns a Server for sc. Scenarios from ParseScenario and LoadScenario
// are valid; New panics if a scenario built in Go is not, so call
// sc.Validate first when in doubt.
func New(sc *Scenario, opts ...Option) *Server {
	rules, err := compileScenario(sc)
	if err != nil {
		panic(err)
	}
	s := &Server{rules: rules, log: io.Discard}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Calls returns the record of answered requests, in the order their answers
// finished.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// Count returns how many requests the named rule answered completely
// (canceled ones are not counted).
func (s *Server) Count(rule string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		if c.Rule == rule && !c.Canceled {
			n++
		}
	}
	return n
}

// InFlight returns how many requests the named rule matched whose answer
// is not yet sent: a test that must interrupt a client in the middle of a
// call (kill its process, say) waits for this to be positive, and the
// rule's delay_ms is the window it has.
func (s *Server) InFlight(rule string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inFlight[rule]
}

// Requests returns how many different requests the named rule answered
// completely: requests with the same body (Call.Digest) count once.
// Count counts each time one was answered. A test of what a client asks
// (one call per model turn) counts Requests, since a client that runs its
// calls at least once may send one again; a test of how often a client
// asks counts Count.
func (s *Server) Requests(rule string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]bool{}
	for _, c := range s.calls {
		if c.Rule == rule && !c.Canceled {
			seen[c.Digest] = true
		}
	}
	return len(seen)
}

// Start listens on addr (for example "127.0.0.1:0" for any free port; "" means
// that) and serves in the background until Close. It returns the base URL
// that clients take as OPENAI_BASE_URL, for example
// "http://127.0.0.1:41234/v1". A Server can be started once.
func (s *Server) Start(addr string) (baseURL string, err error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return "", errors.New("scripted: server already started")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("scripted: %w", err)
	}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	s.serveErr = make(chan error, 1)
	go func(srv *http.Server, errc chan<- error) {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- err
		}
		close(errc)
	}(s.srv, s.serveErr)
	return "http://" + dialable(ln.Addr()) + "/v1", nil
}

// dialable turns a listening address into one a client can dial: an
// unspecified host (":8080", "0.0.0.0:8080") becomes the loopback address.
func dialable(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// Close stops a started Server at once, cutting requests in flight. It is a
// no-op for a Server that was never started.
func (s *Server) Close() error {
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	return srv.Close()
}

// Serve loads the scenario at scenarioPath, serves it on addr until ctx is
// done, and returns nil then. It writes to log (which may be nil) a line
// "OPENAI_BASE_URL=<base URL>" once it listens, and one line per request. It
// is the entry point of the CLI's scripted model server.
func Serve(ctx context.Context, scenarioPath, addr string, log io.Writer) error {
	if log == nil {
		log = io.Discard
	}
	sc, err := LoadScenario(scenarioPath)
	if err != nil {
		return err
	}
	s := New(sc, WithLog(log))
	baseURL, err := s.Start(addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "scripted: serving %d rules from %s\nOPENAI_BASE_URL=%s\n", len(sc.Rules), scenarioPath, baseURL)
	select {
	case <-ctx.Done():
		return s.Close()
	case err := <-s.serveErr:
		_ = s.Close()
		return err
	}
}

// ServeHTTP answers POST /v1/responses, POST /v1/chat/completions,
// GET /v1/models and GET /v1/models/{id}. The /v1 prefix is optional. Every
// request needs an Authorization: Bearer header with any non-empty key.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	path := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1"), "/")
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || strings.TrimSpace(key) == "" {
		s.reject(w, r, &apiError{status: http.StatusUnauthorized, msg: "You didn't provide an API key. You need to " +
			"provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."})
		return
	}
	route := func(method string, handle func()) {
		if r.Method != method {
			s.reject(w, r, &apiError{status: http.StatusMethodNotAllowed,
				msg: fmt.Sprintf("Invalid method for URL (%s %s).", r.Method, r.URL.Path)})
			return
		}
		handle()
	}
	switch {
	case path == "/responses":
		route(http.MethodPost, func() { s.respond(w, r, start, APIResponses) })
	case path == "/chat/completions":
		route(http.MethodPost, func() { s.respond(w, r, start, APIChat) })
	case path == "/models":
		route(http.MethodGet, func() {
			writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{modelObject(ModelName)}})
		})
	case strings.HasPrefix(path, "/models/"):
		route(http.MethodGet, func() { writeJSON(w, http.StatusOK, modelObject(strings.TrimPrefix(path, "/models/"))) })
	default:
		s.reject(w, r, &apiError{status: http.StatusNotFound, msg: fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path)})
	}
}

// ModelName is the model GET /v1/models lists. Requests may name any model;
// the name is echoed back and plays no part in matching.
const ModelName = "scripted"

func modelObject(id string) map[string]any {
	return map[string]any{"id": id, "object": "model", "created": 0, "owned_by": "troupe"}
}

// maxBody bounds a request body; histories larger than this are a bug.
const maxBody = 64 << 20

func (s *Server) respond(w http.ResponseWriter, r *http.Request, start time.Time, api string) {
	done, turned, header := s.admit(start)
	if turned != nil {
		for k, v := range header {
			w.Header()[k] = v
		}
		s.reject(w, r, turned)
		return
	}
	// The request leaves the count in flight just before its answer's
	// last piece is written: a client that read it may start another at
	// once, which must not find this one still counted.
	end := sync.OnceFunc(done)
	defer end()
	w = &endingWriter{ResponseWriter: w, end: end}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		s.reject(w, r, &apiError{status: http.StatusBadRequest, msg: "scripted: reading the request body: " + err.Error()})
		return
	}
	var c *conversation
	var aerr *apiError
	if api == APIResponses {
		c, aerr = parseResponses(body)
	} else {
		c, aerr = parseChat(body)
	}
	if aerr != nil {
		s.reject(w, r, aerr)
		return
	}
	rep, aerr := answer(s.rules, c)
	if aerr != nil {
		s.reject(w, r, aerr)
		return
	}
	sum := sha256.Sum256(body)
	call := Call{Rule: rep.rule.Name, API: api, Model: c.model, Turn: rep.turn, Stream: c.stream, Start: start, Digest: hex.EncodeToString(sum[:])}
	s.mu.Lock()
	if s.inFlight == nil {
		s.inFlight = map[string]int{}
	}
	s.inFlight[call.Rule]++
	s.mu.Unlock()
	if d := rep.rule.delay; d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			s.record(call, true)
			return
		}
	}
	// Whether the client left is judged before the answer's last write: one
	// that read it whole may close its connection at once, which cancels the
	// request's context, and that answer was still given.
	ctx := r.Context()
	var left bool
	switch {
	case api == APIResponses && c.stream:
		left = streamResponse(ctx, w, c, rep)
	case api == APIResponses:
		left = ctx.Err() != nil
		end()
		writeJSON(w, http.StatusOK, responseObject(c, rep, "completed", time.Now()))
	case c.stream:
		left = streamChat(ctx, w, c, rep)
	default:
		left = ctx.Err() != nil
		end()
		writeJSON(w, http.StatusOK, chatCompletion(c, rep, time.Now()))
	}
	s.record(call, left)
}

func (s *Server) record(c Call, canceled bool) {
	c.End = time.Now()
	c.Canceled = canceled
	s.mu.Lock()
	s.calls = append(s.calls, c)
	s.inFlight[c.Rule]--
	s.mu.Unlock()
	state := "answered"
	if canceled {
		state = "canceled"
	}
	fmt.Fprintf(s.log, "scripted: %s turn %d: rule %q %s in %s (stream=%v)\n",
		c.API, c.Turn, c.Rule, state, c.End.Sub(c.Start).Round(time.Millisecond), c.Stream)
}

func (s *Server) reject(w http.ResponseWriter, r *http.Request, e *apiError) {
	fmt.Fprintf(s.log, "scripted: %s %s: %d %s\n", r.Method, r.URL.Path, e.status, e.msg)
	e.write(w)
}

// apiError is an error answer in OpenAI's shape.
type apiError struct {
	status int
	msg    string
	typ    string // default invalid_request_error
	param  string // "" is sent as null
	code   string // "" is sent as null
}

func (e *apiError) write(w http.ResponseWriter) {
	typ := e.typ
	if typ == "" {
		typ = "invalid_request_error"
	}
	nullable := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	writeJSON(w, e.status, map[string]any{"error": map[string]any{
		"message": e.msg, "type": typ, "param": nullable(e.param), "code": nullable(e.code),
	}})
}

func missingParam(param string) *apiError {
	return &apiError{status: 400, param: param, code: "missing_required_parameter",
		msg: fmt.Sprintf("Missing required parameter: '%s'.", param)}
}

func invalidType(param, want string, got []byte) *apiError {
	return &apiError{status: 400, param: param, code: "invalid_type",
		msg: fmt.Sprintf("Invalid type for '%s': expected %s, but got %s instead.", param, want, jsonKind(got))}
}

// emptyParam rejects an empty string or array; kind is "string" or "array".
func emptyParam(param, kind string) *apiError {
	return &apiError{status: 400, param: param, code: "empty_" + kind,
		msg: fmt.Sprintf("Invalid '%s': empty %s. Expected %s with minimum length 1, but got an empty %s instead.",
			param, kind, map[string]string{"string": "a string", "array": "an array"}[kind], kind)}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
