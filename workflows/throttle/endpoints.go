package throttle

// This file holds the worker's side: a gate per endpoint that lets calls
// through within the worker's share, and the loop that renews the share.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/model"
)

// RenewEvery is how often a worker renews its lease on an endpoint's
// limit while it calls the endpoint. A worker with no share renews at
// once when a call comes.
const RenewEvery = time.Second

// idleRelease is how long a worker keeps a share it does not use before
// it gives it back.
const idleRelease = 10 * time.Second

// renewTimeout bounds one renewal, releaseTimeout the giving back of a
// share (which the limiter reclaims anyway, later, should it not come).
const (
	renewTimeout   = 10 * time.Second
	releaseTimeout = 2 * time.Second
)

// ErrBusy reports a call that found no room in its worker's share of the
// endpoint's limit within the wait it was given.
var ErrBusy = errors.New("throttle: no room within the model endpoint's limit")

// ErrLapsed is the cause of the cancellation of a call in flight when its
// worker's lease lapsed (it could not renew it): the limiter may give
// the share to another worker.
var ErrLapsed = errors.New("throttle: this worker's share of the model endpoint's limit lapsed (the limiter could not be reached)")

// Endpoints keeps one worker's calls to its model endpoints within their
// limits. Its zero value is not usable: use New. It is safe for
// concurrent use.
type Endpoints struct {
	mu     sync.Mutex
	c      client.Client
	queue  string
	id     string
	gates  map[string]*gate
	closed chan struct{}
	wg     sync.WaitGroup
}

// New returns the Endpoints of one worker process: standalone (each limit
// kept by this process alone) until Connect.
func New() *Endpoints {
	return &Endpoints{id: uuid.NewString(), gates: map[string]*gate{}, closed: make(chan struct{})}
}

// Connect shares the limits with every worker of queue, through the
// limiter workflows that c reaches (the workers of queue must register
// LimiterWorkflow). Call it before the first Acquire.
func (e *Endpoints) Connect(c client.Client, queue string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.c, e.queue = c, queue
}

// Close gives back the shares this worker holds and stops renewing them.
func (e *Endpoints) Close() {
	e.mu.Lock()
	select {
	case <-e.closed:
	default:
		close(e.closed)
	}
	e.mu.Unlock()
	e.wg.Wait()
}

// Acquire waits, at most wait, for room for one call to endpoint within
// limit (with the other workers of the queue, once connected). It returns
// the context the call must run in, which is canceled with cause
// ErrLapsed if this worker's share lapses meanwhile, and the func that
// ends the call, to call once its answer is read. Past wait it fails with
// an error wrapping ErrBusy that says what it waited for. A limit that
// limits nothing lets every call through at once.
func (e *Endpoints) Acquire(ctx context.Context, endpoint string, limit agents.ModelLimit, wait time.Duration) (context.Context, func(), error) {
	if !limit.Limits() {
		return ctx, func() {}, nil
	}
	g := e.gate(endpoint, limit)
	return g.acquire(ctx, wait)
}

// Share says what this worker may use of endpoint's limit now, for
// logs and tests.
func (e *Endpoints) Share(endpoint string) (calls, starts int, limit agents.ModelLimit) {
	e.mu.Lock()
	g := e.gates[endpoint]
	e.mu.Unlock()
	if g == nil {
		return 0, 0, agents.ModelLimit{}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.grant.Calls, g.grant.Starts, g.grant.Limit
}

func (e *Endpoints) gate(endpoint string, limit agents.ModelLimit) *gate {
	e.mu.Lock()
	defer e.mu.Unlock()
	g := e.gates[endpoint]
	if g == nil {
		g = &gate{e: e, endpoint: endpoint, changed: make(chan struct{}), kick: make(chan struct{}, 1),
			calls: map[uint64]context.CancelCauseFunc{}}
		e.gates[endpoint] = g
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.limit = limit
	if e.c == nil {
		// Standalone: the whole limit, for ever.
		g.grant = Grant{Calls: orUnlimited(limit.MaxConcurrent), Starts: orUnlimited(limit.Requests), Limit: limit}
		g.validUntil = time.Now().Add(100 * 365 * 24 * time.Hour)
		return g
	}
	if !g.running {
		// A share comes from the limiter only.
		g.grant, g.validUntil = Grant{}, time.Time{}
		g.running = true
		e.wg.Add(1)
		go g.loop(e.c, e.queue, e.id)
	}
	return g
}

func orUnlimited(n int) int {
	if n <= 0 {
		return Unlimited
	}
	return n
}

// gate lets one worker's calls to one endpoint through within its share.
type gate struct {
	e        *Endpoints
	endpoint string

	mu sync.Mutex
	// limit is what this worker keeps the endpoint within; grant its
	// share (with the limit in force), valid until validUntil.
	limit      agents.ModelLimit
	grant      Grant
	validUntil time.Time
	// inFlight, starts (in the window) and waiting are its use;
	// peakCalls and peakStarts its most demand since the last renewal.
	inFlight int
	// starts are the times the answers of calls began, in the window;
	// pending counts the calls let in whose answer has not begun, which
	// count as starts.
	starts     []time.Time
	pending    int
	waiting    int
	peakCalls  int
	peakStarts int
	// calls cancel the calls in flight, should the lease lapse.
	calls map[uint64]context.CancelCauseFunc
	next  uint64
	// changed is closed (and replaced) whenever a waiting call may pass.
	changed chan struct{}
	// kick asks the loop to renew now.
	kick    chan struct{}
	running bool
	lastErr error
}

// window is the span over which the worker counts its starts: the
// limit's window and a margin for clocks that run at slightly different
// rates (see the package doc).
func (g *gate) window() time.Duration {
	w := g.grant.Limit.Window()
	return w + min(w/50, time.Second)
}

func (g *gate) broadcast() {
	close(g.changed)
	g.changed = make(chan struct{})
}

func (g *gate) acquire(ctx context.Context, wait time.Duration) (context.Context, func(), error) {
	deadline := time.Now().Add(wait)
	g.mu.Lock()
	g.waiting++
	g.peakCalls = max(g.peakCalls, g.inFlight+g.waiting)
	g.peakStarts = max(g.peakStarts, len(g.starts)+g.pending+g.waiting)
	defer func() { g.mu.Lock(); g.waiting--; g.mu.Unlock() }()
	for {
		now := time.Now()
		g.starts = dropBefore(g.starts, now.Add(-g.window()))
		valid := now.Before(g.validUntil)
		callsOK := g.grant.Calls == Unlimited || g.inFlight < g.grant.Calls
		startsOK := g.grant.Starts == Unlimited || len(g.starts)+g.pending < g.grant.Starts
		if valid && callsOK && startsOK {
			g.inFlight++
			g.pending++
			id := g.next
			g.next++
			cctx, cancel := context.WithCancelCause(ctx)
			g.calls[id] = cancel
			g.mu.Unlock()
			// The call counts as a start from now until a window after
			// its answer began (the model client calls the hook then), or
			// else after it ended: the provider counted it when it
			// arrived, somewhere in between, so every window in which the
			// provider counts it sees it counted here too.
			var sent, ended sync.Once
			send := func() {
				sent.Do(func() {
					g.mu.Lock()
					g.pending--
					g.starts = append(g.starts, time.Now())
					g.mu.Unlock()
				})
			}
			return model.WithSendHook(cctx, send), func() {
				ended.Do(func() {
					send()
					g.mu.Lock()
					g.inFlight--
					delete(g.calls, id)
					g.broadcast()
					g.mu.Unlock()
					cancel(nil)
				})
			}, nil
		}
		if !valid || g.grant.Calls == 0 || g.grant.Starts == 0 {
			select {
			case g.kick <- struct{}{}:
			default:
			}
		}
		wake := deadline
		if valid && callsOK && !startsOK && len(g.starts) > 0 {
			if free := g.starts[0].Add(g.window()); free.Before(wake) {
				wake = free
			}
		}
		if !now.Before(deadline) {
			err := g.busy(wait, valid, callsOK)
			g.mu.Unlock()
			return nil, nil, err
		}
		changed := g.changed
		g.mu.Unlock()
		t := time.NewTimer(wake.Sub(now))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil, context.Cause(ctx)
		case <-changed:
		case <-t.C:
		}
		t.Stop()
		g.mu.Lock()
	}
}

// busy says why a call found no room (g.mu held).
func (g *gate) busy(wait time.Duration, valid, callsOK bool) error {
	switch {
	case !valid && g.lastErr != nil:
		return fmt.Errorf("%w: waited %s for a share of the limit of %s, and the limiter could not be reached: %v", ErrBusy, wait, g.endpoint, g.lastErr)
	case !valid:
		return fmt.Errorf("%w: waited %s for a share of the limit of %s", ErrBusy, wait, g.endpoint)
	case !callsOK:
		return fmt.Errorf("%w: waited %s for one of this worker's %d calls at once to %s (limit %s)", ErrBusy, wait, g.grant.Calls, g.endpoint, g.grant.Limit)
	default:
		return fmt.Errorf("%w: waited %s for one of this worker's %d starts per %s to %s (limit %s)", ErrBusy, wait, g.grant.Starts, g.grant.Limit.Window(), g.endpoint, g.grant.Limit)
	}
}

// report is the renewal of g's lease as of now (g.mu held).
func (g *gate) report(holder string, now time.Time) RenewRequest {
	g.starts = dropBefore(g.starts, now.Add(-g.window()))
	// Demand is the most since the last renewal: calls come and go
	// between renewals, and a share sized on the moment would starve a
	// busy worker that happened to be between calls.
	recent := len(g.starts) + g.pending
	req := RenewRequest{Holder: holder, Limit: g.limit, InFlight: g.inFlight, Recent: recent,
		WantCalls: max(g.peakCalls, g.inFlight+g.waiting), WantStarts: max(g.peakStarts, recent+g.waiting)}
	g.peakCalls, g.peakStarts = g.inFlight+g.waiting, recent+g.waiting
	if now.Before(g.validUntil) {
		req.Calls, req.Starts = g.grant.Calls, g.grant.Starts
	}
	return req
}

// loop renews g's lease while the worker calls the endpoint, and gives it
// back once idle.
func (g *gate) loop(c client.Client, queue, id string) {
	defer g.e.wg.Done()
	holder := id + "/" + g.endpoint
	var idleSince time.Time
	last := time.Time{}
	for {
		now := time.Now()
		g.mu.Lock()
		req := g.report(holder, now)
		idle := req.WantCalls == 0 && req.Recent == 0
		if !idle {
			idleSince = time.Time{}
		} else if idleSince.IsZero() {
			idleSince = now
		}
		closing := false
		select {
		case <-g.e.closed:
			closing = true
		default:
		}
		if closing || (idle && now.Sub(idleSince) >= idleRelease) {
			// Use nothing more before the limiter frees the share.
			g.grant, g.validUntil = Grant{}, time.Time{}
			req.Calls, req.Starts, req.Release = 0, 0, true
			g.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
			_, _ = renew(ctx, c, queue, g.endpoint, req)
			cancel()
			g.mu.Lock()
			if closing || g.waiting == 0 {
				g.running = false
				g.mu.Unlock()
				return
			}
			idleSince = time.Time{}
			g.mu.Unlock()
			continue
		}
		g.mu.Unlock()

		sent := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), renewTimeout)
		grant, err := renew(ctx, c, queue, g.endpoint, req)
		cancel()
		last = sent
		g.mu.Lock()
		next := RenewEvery
		if err == nil {
			g.grant, g.validUntil, g.lastErr = grant, sent.Add(grant.TTL-time.Second), nil
			if grant.RenewIn > 0 {
				next = min(grant.RenewIn, RenewEvery)
			}
		} else {
			g.lastErr = err
		}
		if !g.validUntil.IsZero() && !time.Now().Before(g.validUntil) {
			// Lapsed: the limiter may give the share away, so nothing of
			// it runs on.
			for _, cancel := range g.calls {
				cancel(ErrLapsed)
			}
			g.grant, g.validUntil = Grant{}, time.Time{}
		}
		g.broadcast()
		g.mu.Unlock()

		t := time.NewTimer(next)
		select {
		case <-t.C:
		case <-g.kick:
			// At most one renewal per 50 ms, however many calls knock.
			if d := 50*time.Millisecond - time.Since(last); d > 0 {
				time.Sleep(d)
			}
		case <-g.e.closed:
		}
		t.Stop()
	}
}

// renew sends req to the limiter of endpoint on queue, starting it if
// it is not running.
func renew(ctx context.Context, c client.Client, queue, endpoint string, req RenewRequest) (Grant, error) {
	start := c.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID: LimiterID(queue, endpoint), TaskQueue: queue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
	}, LimiterWorkflowName, LimiterState{Endpoint: endpoint})
	h, err := c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{UpdateName: RenewUpdateName, Args: []any{req},
			WaitForStage: client.WorkflowUpdateStageCompleted},
	})
	if err != nil {
		return Grant{}, fmt.Errorf("throttle: renew the share of %s: %w", endpoint, err)
	}
	var g Grant
	if err := h.Get(ctx, &g); err != nil {
		return Grant{}, fmt.Errorf("throttle: renew the share of %s: %w", endpoint, err)
	}
	return g, nil
}

// dropBefore drops the times not after t from the front of ts, which is
// in order.
func dropBefore(ts []time.Time, t time.Time) []time.Time {
	i := 0
	for i < len(ts) && !ts[i].After(t) {
		i++
	}
	return ts[i:]
}
