package server

// This file keeps the calls in flight, by session and JSON-RPC request id,
// so that a client's notifications/cancelled can cancel the right run and
// a closed session or a shutdown can release the handlers without
// cancelling any run.

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Causes with which a call's wait ends while its run goes on.
var (
	errShutdown     = errors.New("the MCP server is shutting down")
	errDisconnected = errors.New("the session ended")
)

// linger is how long a call whose wait was cut short stays findable by
// its key, and how long the cancellation of a request not seen yet is
// kept. go-sdk ends a cancelled request's context before the
// notifications/cancelled reaches the middleware, so the handler may be
// gone by then; its run must still be cancelled. And go-sdk may handle the
// notification before the handler of the request it cancels has begun;
// that handler must not start the run.
const linger = time.Minute

// maxTombstones bounds the cancellations of unknown requests kept, so a
// client cannot grow the registry without end by cancelling made-up ids.
const maxTombstones = 4096

// callKey names a request: its session's id and its JSON-RPC id as
// stamped (see requestKeyJSON).
type callKey struct{ session, request string }

// call is a tools/call in flight.
type call struct {
	key     callKey // zero when the request cannot be addressed
	release context.CancelCauseFunc

	// Guarded by calls.mu.
	workflowID string
	cancelled  bool
	ended      time.Time // when the handler returned, before its run ended
	tombstone  bool      // a cancellation that came before its request
}

type calls struct {
	cancelRun func(ctx context.Context, workflowID string) error
	log       *slog.Logger

	mu         sync.Mutex
	all        map[*call]struct{}
	byKey      map[callKey]*call
	tombstones int
}

// newCalls returns an empty registry that cancels runs with cancelRun.
func newCalls(cancelRun func(ctx context.Context, workflowID string) error, log *slog.Logger) *calls {
	return &calls{cancelRun: cancelRun, log: log, all: map[*call]struct{}{}, byKey: map[callKey]*call{}}
}

// add registers a call and returns it with the context its handler waits
// under: ctx, ended also when the call is released. The call is cancelled
// from the start (wasCancelled) when the client cancelled its request
// before the handler got here.
func (cs *calls) add(ctx context.Context, key callKey) (*call, context.Context) {
	wctx, release := context.WithCancelCause(ctx)
	cl := &call{key: key, release: release}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.purgeLocked()
	cs.all[cl] = struct{}{}
	if key != (callKey{}) {
		if old, taken := cs.byKey[key]; taken {
			switch {
			case old.tombstone:
				cl.cancelled = true
				cs.tombstones--
			case old.ended.IsZero():
				// go-sdk rejects a request id in use, so this is a
				// client reusing ids across connections of one session
				// id: the newer call is the one cancellations address.
				cs.log.Warn("mcp: request id in use", "session", key.session, "request", key.request)
			}
		}
		cs.byKey[key] = cl
	}
	return cl, wctx
}

// remove forgets a call whose handler returned. A call that stopped
// waiting before its run ended (interrupted) lingers, findable by its key:
// a cancellation may still be on its way.
func (cs *calls) remove(cl *call, interrupted bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	delete(cs.all, cl)
	if cs.byKey[cl.key] == cl {
		if interrupted {
			cl.ended = time.Now()
		} else {
			delete(cs.byKey, cl.key)
		}
	}
	cl.release(nil)
}

// purgeLocked forgets the calls and tombstones that have lingered long
// enough.
func (cs *calls) purgeLocked() {
	for key, cl := range cs.byKey {
		if !cl.ended.IsZero() && time.Since(cl.ended) > linger {
			delete(cs.byKey, key)
			if cl.tombstone {
				cs.tombstones--
			}
		}
	}
}

// started records the call's workflow, and cancels it when the client
// cancelled the call before the start returned.
func (cs *calls) started(cl *call, workflowID string) {
	cs.mu.Lock()
	cl.workflowID = workflowID
	cancel := cl.cancelled
	cs.mu.Unlock()
	if cancel {
		cs.cancelWorkflow(workflowID)
	}
}

// wasCancelled reports whether the client cancelled the call.
func (cs *calls) wasCancelled(cl *call) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cl.cancelled
}

// cancel handles a client's notifications/cancelled for request (as
// stamped) of session: the call's run is cancelled (now, or as soon as it
// has started). A request not seen yet leaves a tombstone, so that its
// handler, should it come within linger, starts no run; finished requests
// and those that never were ours leave the same, to no effect.
func (cs *calls) cancel(session, request, reason string) {
	if session == "" || request == "" {
		return // no session to scope the request id by, or no id
	}
	key := callKey{session, request}
	cs.mu.Lock()
	cs.purgeLocked()
	cl := cs.byKey[key]
	var workflowID string
	switch {
	case cl != nil:
		cl.cancelled = true
		workflowID = cl.workflowID
	case cs.tombstones < maxTombstones:
		cs.byKey[key] = &call{key: key, cancelled: true, ended: time.Now(), tombstone: true}
		cs.tombstones++
	}
	cs.mu.Unlock()
	if cl == nil {
		cs.log.Debug("mcp: cancellation of a request not in flight", "session", session, "request", request, "reason", reason)
		return
	}
	cs.log.Info("mcp: call cancelled by the client", "session", session, "request", request, "reason", reason, "run", workflowID)
	if workflowID != "" {
		cs.cancelWorkflow(workflowID)
	}
}

func (cs *calls) cancelWorkflow(workflowID string) {
	// Not on the caller's goroutine: go-sdk handles a session's
	// notifications in order, and a slow Temporal must not hold them up.
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := cs.cancelRun(ctx, workflowID); err != nil {
			cs.log.Warn("mcp: cancel run", "run", workflowID, "error", err)
		}
	}()
}

// releaseSession ends the waits of a session's calls (their runs go on).
func (cs *calls) releaseSession(session string, cause error) {
	if session == "" {
		return
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for cl := range cs.all {
		if cl.key.session == session {
			cl.release(cause)
		}
	}
}

// releaseAll ends the waits of all calls (their runs go on).
func (cs *calls) releaseAll(cause error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for cl := range cs.all {
		cl.release(cause)
	}
}

// interceptCancel is a receiving middleware: it sees a session's
// notifications/cancelled before go-sdk's no-op handler does, and cancels
// the named call's run. (go-sdk has already ended the call's context by
// then, when it holds the call; that alone cannot be told from a dropped
// connection.) It reads the cancelled request's stamp: our transports
// take the requestId out of the cancellation of a request go-sdk does not
// hold (see held).
func (s *Server) interceptCancel(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "notifications/cancelled" {
			p, _ := req.GetParams().(*mcp.CancelledParams)
			ss, _ := req.GetSession().(*mcp.ServerSession)
			if p != nil && ss != nil {
				// The id as our transports stamped it: p.RequestID went
				// through a float64.
				id, _ := p.Meta[metaRequestID].(string)
				s.calls.cancel(ss.ID(), id, p.Reason)
			}
		}
		return next(ctx, method, req)
	}
}
