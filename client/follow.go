package client

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	enums "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe"
)

// LiveEvents hands a follower in a worker's process what the worker's
// workflows record and the text deltas of its model calls, as they come:
// a worker's EventBus (workflows.Config.Events). A nil one, or a nil
// *EventBus, hands nothing, and the follower polls.
type LiveEvents interface {
	// Subscribe returns what comes for the run root and its workflows
	// from now on (recorded events, deltas, or both), with room for
	// buffer of them, and a func that ends the subscription.
	Subscribe(root string, events, deltas bool, buffer int) (<-chan troupe.Event, func())
	// LiveFeed is the workflow id of the live feed this process serves to
	// followers in others, "" for none: a follower that has the bus does
	// not follow its own feed.
	LiveFeed() string
}

// EventStore is where the workers of a run save the events of a
// workflow's earlier runs as it continues as new: their blob store (a
// *blob.Store of package runtime/blob).
type EventStore interface {
	Get(ctx context.Context, key string) ([]byte, error)
}

// none reports whether v, an interface value, holds nothing: nil, or a
// nil pointer (a worker's nil *EventBus, a nil *blob.Store).
func none(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// liveBuffer bounds the events a follower may be behind on a bus or on
// the feeds it follows, and what it polled while it passes them on.
const liveBuffer = 4096

// Follow streams the events of a run and of every workflow it starts
// (agents, handoff targets, agents-as-tools), calling fn once per event, in
// the order each workflow recorded them and, across workflows, by time,
// a workflow's events after the event that started it and the run's
// final_output or failed event after the last events of every workflow
// of the run that started, until ctx is done; cancel ctx once the run's result is in, and Follow
// returns after last readings (within 30 s) that bring nothing new.
//
// Follow watches each workflow's history with a long poll that the
// server answers as the history grows, and reads the events query of a
// workflow as soon as its history grows: an event reaches fn when the
// workflow task that recorded it ends, as a rule with no polling delay. It
// also polls every workflow every `every` (250 ms when zero or less), for
// what a watch missed. Each workflow still running holds one long poll
// of the follower's.
//
// Events are numbered per workflow across its runs, and Follow never skips
// one: those a workflow no longer carries after a continue-as-new are read
// from the pages it saved to the blob store (WithEventStore) or from its
// earlier runs, and until those answer Follow waits on them. Only
// events whose runs are gone for good (deleted by retention) are skipped,
// after two minutes of trying.
//
// A workflow busy in a long workflow task (an agent whose model and tool
// calls are local activities, back to back) answers queries only when
// the task ends. Follow therefore also follows the live feeds that the
// workers of the run's task queue advertise (troupe.LiveFeedOf): a
// query of each, held by the worker until it records something for the
// run, so an event reaches fn as the worker records it, within about a
// round trip through the server, whichever host the worker is on
// (PollOnly does without).
func Follow(ctx context.Context, c client.Client, workflowID string, every time.Duration, fn func(troupe.Event), opts ...FollowOption) error {
	return FollowLive(ctx, c, workflowID, every, nil, fn, opts...)
}

// FollowOption configures Follow, FollowLive and Events.
type FollowOption func(*followConfig)

type followConfig struct {
	store    EventStore
	patience time.Duration
	from     troupe.Cursor
	deltas   bool
	pollOnly bool
}

// From has Follow, FollowLive and Events start after the events c has
// seen, and follow the workflows c knows besides the run's own.
func From(c troupe.Cursor) FollowOption {
	return func(cfg *followConfig) { cfg.from = maps.Clone(c) }
}

// WithDeltas has FollowLive pass fn the text deltas of the run's model
// turns too (EventTextDelta events, Seq 0), as the model generates them:
// those of this process's workers from their bus, and those of other
// processes' workers, on this host or another, from the live feeds the
// run's task queue's workers advertise in their identities (the package
// doc tells how). A turn's deltas come before its model_turn event. A
// worker of the run's queue whose deltas the follower cannot get (it
// serves no feed, or its feed keeps failing) is a notice to fn, once: an
// event of kind troupe.EventLiveText, Seq 0, whose Detail says which and
// why; the recorded events come all the same. Without this option no
// follower sees deltas, and Events never does: no workflow records them.
func WithDeltas() FollowOption {
	return func(c *followConfig) { c.deltas = true }
}

// PollOnly has Follow and FollowLive read only the workflows' events
// query, not the workers' live feeds: an event of a workflow busy in a
// long workflow task (an agent whose model calls are local activities)
// then reaches the follower when the task ends, and there are no deltas
// but a bus's. It spares the workers the feeds' queries.
func PollOnly() FollowOption {
	return func(c *followConfig) { c.pollOnly = true }
}

// WithPatience has Events ask again, every 250 ms for up to d, the
// workflows that did not answer for a reason that passes: busy in a long
// workflow task, their worker busy replaying another, no worker polling
// for a while. A workflow that does not exist is not asked again. Use it
// to read a closed run whole; Follow and FollowLive ask again at every
// poll anyway.
func WithPatience(d time.Duration) FollowOption {
	return func(c *followConfig) { c.patience = d }
}

// WithEventStore has a follower read the events that a workflow saved to
// store as it continued as new (its pages, see EventPagesQuery) instead
// of asking its earlier runs, which a worker must replay to answer. The
// pages stay readable after Temporal's retention removed those runs, for
// as long as the blob retention keeps the run's data. Events the pages do
// not hold are still read from the earlier runs.
func WithEventStore(store EventStore) FollowOption {
	if none(store) {
		store = nil
	}
	return func(c *followConfig) { c.store = store }
}

// FollowLive is Follow that also takes the events that this process's
// workers record (their Config.Events is bus) as they record them, so a
// follower in the process that runs the workflows shows each event at
// once, even one from a workflow busy in a long workflow task; a nil bus
// is Follow. The polls go on, for any event the bus or a feed dropped;
// each event is still passed to fn once, in its workflow's order.
//
// With WithDeltas, fn also gets the text deltas of the run's model turns
// (EventTextDelta, Seq 0) as the model generates them: from bus for this
// process's workers, and from the live feeds of the other workers of
// the run's task queue. A turn's deltas reach fn before the turn's
// model_turn event, never after it.
func FollowLive(ctx context.Context, c client.Client, workflowID string, every time.Duration, bus LiveEvents, fn func(troupe.Event), opts ...FollowOption) error {
	var cfg followConfig
	for _, o := range opts {
		o(&cfg)
	}
	if none(bus) {
		bus = nil
	}
	// Parents first, whatever order the workflows are read in.
	order := newCausal(workflowID, cfg.from, fn)
	defer order.flush()
	fn = order.event
	if bus == nil && cfg.pollOnly {
		return follow(ctx, c, workflowID, every, fn, order.expire, opts)
	}
	var live <-chan troupe.Event
	if bus != nil {
		ch, unsubscribe := bus.Subscribe(workflowID, true, cfg.deltas, liveBuffer)
		defer unsubscribe()
		live = ch
	}
	// The live feeds of the run's workers (but this process's, whose bus
	// the follower has): their events as they are recorded, their deltas.
	// Once ctx is done, the feeds are read a last time, and feedsOver
	// closes: the follower waits for that before it takes what it polled
	// last, so a turn's last deltas precede its model_turn.
	var fed, notices chan troupe.Event
	feedsOver := ctx.Done()
	if !cfg.pollOnly {
		fed, notices = make(chan troupe.Event, liveBuffer), make(chan troupe.Event, 16)
		quit, over := make(chan struct{}), make(chan struct{})
		out := feedStreams{events: fed, notices: notices, deltas: cfg.deltas, quit: quit}
		own := ""
		if bus != nil {
			own = bus.LiveFeed()
		}
		go func() {
			defer close(over)
			followFeeds(ctx, c, workflowID, own, out)
		}()
		defer func() { close(quit); <-over }()
		feedsOver = over
	}
	deltas := newDeltaOrder(fn, fed, relayHold, feedsOver)
	var fromFeeds func(troupe.Event)
	// lastReadings takes what the feeds bring until their last readings
	// are in.
	lastReadings := func() {
		for fed != nil {
			select {
			case e := <-fed:
				fromFeeds(e)
			case <-feedsOver:
				for len(fed) > 0 {
					fromFeeds(<-fed)
				}
				fed = nil
			}
		}
	}
	polled := make(chan troupe.Event, liveBuffer)
	go func() {
		defer close(polled)
		_ = follow(ctx, c, workflowID, every, func(e troupe.Event) { polled <- e }, nil, opts)
	}()
	// Both streams keep each workflow's order; the polled one has no gap.
	// An event is passed on when it is the next of its workflow.
	last := maps.Clone(cfg.from)
	if last == nil {
		last = map[string]int{}
	}
	held := map[string]map[int]troupe.Event{}
	take := func(e troupe.Event, polled bool) {
		if e.Seq <= last[e.WorkflowID] {
			return
		}
		if h := held[e.WorkflowID]; polled && e.Seq > last[e.WorkflowID]+1 {
			// The polled stream skips only what it gave up on: what the
			// bus brought before that point goes out, the rest is gone.
			for _, n := range slices.Sorted(maps.Keys(h)) {
				if n < e.Seq {
					deltas.event(h[n])
					delete(h, n)
				}
			}
			last[e.WorkflowID] = e.Seq - 1
		}
		h := held[e.WorkflowID]
		if h == nil {
			h = map[int]troupe.Event{}
			held[e.WorkflowID] = h
		}
		h[e.Seq] = e
		for {
			next, ok := h[last[e.WorkflowID]+1]
			if !ok {
				break
			}
			delete(h, next.Seq)
			last[e.WorkflowID] = next.Seq
			deltas.event(next)
		}
	}
	fromBus := func(e troupe.Event) {
		if e.Kind == troupe.EventTextDelta || e.Kind == troupe.EventTextEnd {
			deltas.delta(e)
			return
		}
		take(e, false)
	}
	// fedFrom are the workflows whose recorded events a feed brings.
	fedFrom := map[string]bool{}
	fromFeeds = func(e troupe.Event) {
		if e.Seq > 0 {
			fedFrom[e.WorkflowID] = true
		}
		fromBus(e)
		for len(deltas.later) > 0 {
			e := deltas.later[0]
			deltas.later = deltas.later[1:]
			take(e, false)
		}
	}
	// What waits in the causal stage past its patience goes on with no
	// event after it.
	tick := time.NewTicker(causalTick)
	defer tick.Stop()
	for {
		// What a model_turn's wait read of a feed's events goes first.
		for len(deltas.later) > 0 {
			e := deltas.later[0]
			deltas.later = deltas.later[1:]
			take(e, false)
		}
		select {
		case <-tick.C:
			order.expire()
		case e := <-live:
			fromBus(e)
		case e := <-fed:
			fromFeeds(e)
		case e := <-notices:
			fn(e)
		case e, ok := <-polled:
			// What the bus holds was published before: it goes first, so
			// that a turn's deltas precede its polled model_turn.
			for drained := false; !drained; {
				select {
				case b := <-live:
					fromBus(b)
				default:
					drained = true
				}
			}
			if ctx.Err() != nil {
				lastReadings()
			}
			if !ok {
				return nil
			}
			if fed != nil && e.Kind == troupe.EventTurn && fedFrom[e.WorkflowID] && e.Seq > last[e.WorkflowID] {
				// A feed brings this workflow's events, its turn's deltas
				// before its model_turn: the polled model_turn waits for
				// the feed's, for relayHold at most.
				t := time.NewTimer(relayHold)
			wait:
				for e.Seq > last[e.WorkflowID] {
					select {
					case f := <-fed:
						fromFeeds(f)
					case <-t.C:
						break wait
					case <-feedsOver:
						break wait
					}
				}
				t.Stop()
			}
			take(e, true)
		}
	}
}

// follow is Follow without a bus. It calls idle (when not nil) at each
// tick, between calls of fn.
func follow(ctx context.Context, c client.Client, workflowID string, every time.Duration, fn func(troupe.Event), idle func(), opts []FollowOption) error {
	if every <= 0 {
		every = 250 * time.Millisecond
	}
	t := newTree(c, workflowID, opts)
	emit := func(round []troupe.Event) {
		for _, e := range round {
			fn(e)
		}
	}
	// Each workflow's history is watched (a long poll the server answers
	// when the history grows): a workflow task that records events ends
	// in history, so its events are read as soon as it ends. The ticks
	// are the fallback.
	kicks, closed := make(chan string, 64), make(chan string)
	wctx, unwatch := context.WithCancel(ctx)
	var watchers sync.WaitGroup
	defer watchers.Wait()
	defer unwatch()
	watched := map[string]bool{}
	watch := func() {
		for _, f := range t.all {
			if !f.done && !watched[f.id] {
				watched[f.id] = true
				watchers.Go(func() { watchHistory(wctx, c, f.id, kicks, closed) })
			}
		}
	}
	watch()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case id := <-kicks:
			// The kicked workflows only: their histories grew, most often
			// as a workflow task ended, so they answer at once.
			only := map[string]bool{id: true}
			for len(kicks) > 0 {
				only[<-kicks] = true
			}
			round, _ := t.pollOnly(ctx, max(time.Second, 4*every), only)
			emit(round)
			watch()
		case id := <-closed:
			// A last reading of a closed workflow, which then is done
			// (a follower from a cursor may have seen its end already).
			round, err := t.pollOnly(ctx, max(time.Second, 4*every), map[string]bool{id: true})
			emit(round)
			if err == nil && !t.gapped() {
				t.finished(id)
			}
			watch()
		case <-ctx.Done():
			// Last readings, until one brings nothing new and no
			// workflow's events wait on its earlier runs.
			qctx, cancel := context.WithTimeout(context.Background(), backfillTimeout)
			defer cancel()
			for qctx.Err() == nil {
				round, _ := t.poll(qctx, 0)
				emit(round)
				if len(round) == 0 && !t.gapped() {
					break
				}
			}
			return nil
		case <-tick.C:
			round, _ := t.poll(ctx, max(time.Second, 4*every))
			emit(round)
			watch()
			if idle != nil {
				idle()
			}
		}
	}
}

// watchHistory sends id to kicks each time the history of workflow id
// grows, across its runs, and to closed when the workflow has closed for
// good; it ends then or when ctx is done. It reads each run's history,
// then waits on the server for what is added; a workflow not started yet
// (or gone, or a server error) is asked again, at most every 5 s.
func watchHistory(ctx context.Context, c client.Client, id string, kicks, closed chan<- string) {
	kick := func() {
		select {
		case kicks <- id:
		default: // Full: a poll is due anyway.
		}
	}
	wait := 200 * time.Millisecond
	for ctx.Err() == nil {
		it := c.GetWorkflowHistory(ctx, id, "", true, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		var last *historypb.HistoryEvent
		var err error
		for it.HasNext() {
			if last, err = it.Next(); err != nil {
				break
			}
			kick()
		}
		switch {
		case err == nil && last.GetWorkflowExecutionContinuedAsNewEventAttributes() != nil:
			// Continued as new: the latest run is the next one.
		case err == nil && isClose(last.GetEventType()):
			select { // Closed for good: the follower reads it a last time.
			case closed <- id:
			case <-ctx.Done():
			}
			return
		default:
			// Not started yet, gone, or the server is busy: ask again,
			// less and less often.
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
			wait = min(2*wait, 5*time.Second)
		}
	}
}

// isClose reports whether a history event closes a workflow run.
func isClose(t enums.EventType) bool {
	switch t {
	case enums.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, enums.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
		enums.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED, enums.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
		enums.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT:
		return true
	}
	return false
}

// Events returns the events so far of a run and of every workflow it
// started, ordered as Follow streams them. A closed run answers too (a
// worker replays it). Workflows that do not answer within two seconds
// (busy in a long workflow task, or their worker busy replaying another)
// are left out, unless WithPatience gives them longer; so is whatever ctx
// cuts short. The error is the run's own query error in the last reading.
func Events(ctx context.Context, c client.Client, workflowID string, opts ...FollowOption) ([]troupe.Event, error) {
	t := newTree(c, workflowID, opts)
	var cfg followConfig
	for _, o := range opts {
		o(&cfg)
	}
	var all []troupe.Event
	order := newCausal(workflowID, cfg.from, func(e troupe.Event) { all = append(all, e) })
	deadline := time.Now().Add(t.patience)
	for {
		round, err := t.poll(ctx, 2*time.Second)
		for _, e := range round {
			order.event(e)
		}
		if t.unanswered > 0 && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
				continue
			}
		}
		if ctx.Err() != nil || err != nil || len(round) == 0 && !t.gapped() {
			order.flush()
			return all, err
		}
	}
}

// tree is a run's tree of workflows, as far as its events have revealed
// it, with how many events of each have been seen.
type tree struct {
	c        client.Client
	store    EventStore // nil: earlier runs only
	patience time.Duration
	root     string
	all      []*followed
	known    map[string]bool
	// unanswered is how many workflows did not answer the last poll for
	// a reason that passes (see passing).
	unanswered int
}

type followed struct {
	id       string
	seen     int
	done     bool
	gapSince time.Time // when the events after seen were first found missing
}

func newTree(c client.Client, root string, opts []FollowOption) *tree {
	var cfg followConfig
	for _, o := range opts {
		o(&cfg)
	}
	t := &tree{c: c, store: cfg.store, patience: cfg.patience, root: root, all: []*followed{{id: root, seen: cfg.from[root]}}, known: map[string]bool{root: true}}
	for _, id := range slices.Sorted(maps.Keys(cfg.from)) {
		// A cursor's workflows of another run are not this run's.
		if !t.known[id] && strings.HasPrefix(id, root+"/") {
			t.known[id] = true
			t.all = append(t.all, &followed{id: id, seen: cfg.from[id]})
		}
	}
	return t
}

// gapped reports whether a workflow's next events wait on its earlier
// runs.
func (t *tree) gapped() bool {
	for _, f := range t.all {
		if !f.gapSince.IsZero() {
			return true
		}
	}
	return false
}

// poll queries every workflow of the tree not known to be done, at once,
// then the children found on the way, and returns their new events in
// time order across workflows. wait bounds each query (0: only ctx does);
// a workflow that does not answer in time is asked again next poll. The
// error is the root's query error, if any.
func (t *tree) poll(ctx context.Context, wait time.Duration) ([]troupe.Event, error) {
	return t.pollOnly(ctx, wait, nil)
}

// finished marks workflow id done, unless it is the run's own, which
// the follower reads until it stops.
func (t *tree) finished(id string) {
	if id == t.root {
		return
	}
	for _, f := range t.all {
		if f.id == id && t.unanswered == 0 {
			f.done = true
		}
	}
}

// pollOnly is poll of the workflows in only (all when nil) and the
// children found on the way.
func (t *tree) pollOnly(ctx context.Context, wait time.Duration, only map[string]bool) ([]troupe.Event, error) {
	var round []troupe.Event
	var rootErr error
	var wave []*followed
	t.unanswered = 0
	for _, f := range t.all {
		if !f.done && (only == nil || only[f.id]) {
			wave = append(wave, f)
		}
	}
	for len(wave) > 0 {
		answers := make([][]troupe.Event, len(wave))
		errs := make([]error, len(wave))
		var wg sync.WaitGroup
		for i, f := range wave {
			wg.Add(1)
			go func() {
				defer wg.Done()
				answers[i], errs[i] = t.query(ctx, f, wait)
			}()
		}
		wg.Wait()
		var next []*followed
		for i, f := range wave {
			if errs[i] != nil {
				if passing(errs[i]) {
					t.unanswered++
				}
				// Not started yet, gone, or busy: try again next poll.
				if f.id == t.root {
					rootErr = errs[i]
				}
				continue
			}
			for _, e := range answers[i] {
				f.seen = e.Seq
				round = append(round, e)
				if e.Child != "" && !t.known[e.Child] {
					t.known[e.Child] = true
					child := &followed{id: e.Child}
					t.all = append(t.all, child)
					next = append(next, child)
				}
				switch e.Kind {
				case troupe.EventFinal, troupe.EventFailed, troupe.EventHandoff:
					if e.WorkflowID != t.root {
						f.done = true
					}
				}
			}
		}
		wave = next
	}
	// Within a round, show events of different workflows in time order.
	sort.SliceStable(round, func(i, j int) bool { return round[i].Time.Before(round[j].Time) })
	return round, rootErr
}

// query returns the events of f after the ones seen, with no gap: when
// the latest run no longer carries the next events (the workflow continued
// as new more than its carried events ago), they are read from its earlier
// runs, and while those do not answer, only the events up to the first
// missing one are returned, so the next poll asks again. A gap is given up
// on only after gapPatience without progress (the earlier runs are gone
// for good: deleted by retention); the events after it are then returned.
func (t *tree) query(parent context.Context, f *followed, wait time.Duration) ([]troupe.Event, error) {
	ctx := parent
	if wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(parent, wait)
		defer cancel()
	}
	evs, err := t.queryRun(ctx, f.id, "", f.seen)
	if err != nil || len(evs) == 0 || evs[0].Seq == f.seen+1 {
		f.gapSince = time.Time{}
		return evs, err
	}
	bctx, cancel := context.WithTimeout(parent, backfillTimeout)
	defer cancel()
	found, err := t.backfill(bctx, f.id, f.seen, evs[0].Seq)
	if err == nil {
		f.gapSince = time.Time{}
		return append(found, evs...), nil
	}
	// The events up to the first missing one, if any, are progress.
	n := 0
	for n < len(found) && found[n].Seq == f.seen+1+n {
		n++
	}
	if n > 0 {
		f.gapSince = time.Time{}
		return found[:n], nil
	}
	if f.gapSince.IsZero() {
		f.gapSince = time.Now()
	}
	if time.Since(f.gapSince) < gapPatience {
		return nil, err
	}
	// Given up: skip what is missing, keep all that was found.
	f.gapSince = time.Time{}
	return append(found, evs...), nil
}

const (
	// backfillTimeout bounds one reading of a followed workflow's earlier
	// runs.
	backfillTimeout = 30 * time.Second
	// gapPatience is how long a follower keeps asking for events that
	// only a workflow's earlier runs hold before it skips them.
	gapPatience = 2 * time.Minute
)

// passing reports whether a query error may pass if asked again: not a
// workflow or namespace that does not exist, nor a query it cannot answer.
func passing(err error) bool {
	var nf *serviceerror.NotFound
	var nnf *serviceerror.NamespaceNotFound
	var ia *serviceerror.InvalidArgument
	var qf *serviceerror.QueryFailed
	return !errors.As(err, &nf) && !errors.As(err, &nnf) && !errors.As(err, &ia) && !errors.As(err, &qf)
}

// queryRun returns the events after seen of a workflow's run ("" for the
// latest).
func (t *tree) queryRun(ctx context.Context, id, runID string, seen int) ([]troupe.Event, error) {
	resp, err := t.c.QueryWorkflow(ctx, id, runID, troupe.EventsQuery, seen)
	if err != nil {
		return nil, err
	}
	var evs []troupe.Event
	err = resp.Get(&evs)
	return evs, err
}

// backfill returns the events numbered after seen and before next from
// the workflow's pages in the blob store (with WithEventStore) and the
// runs before the workflow's latest, walking back the chain of
// continue-as-new until it has them all. When it cannot read them all, it
// returns those it found, in order, and why the rest are missing.
func (t *tree) backfill(ctx context.Context, id string, seen, next int) ([]troupe.Event, error) {
	found := map[int]troupe.Event{}
	if t.store != nil {
		t.fromPages(ctx, id, seen, next, found)
	}
	var err error
	if !holds(found, seen, next) {
		err = t.walkBack(ctx, id, func(run string) (bool, error) {
			lowest := next
			// A page at a time, up to the events the later runs hold.
			for after := seen; ; {
				evs, err := t.queryRun(ctx, id, run, after)
				if err != nil {
					return false, fmt.Errorf("events of run %s: %w", run, err)
				}
				for _, e := range evs {
					if e.Seq > seen && e.Seq < next {
						found[e.Seq] = e
					}
					lowest = min(lowest, e.Seq)
				}
				if len(evs) < troupe.EventsQueryPage || evs[len(evs)-1].Seq >= next-1 {
					break
				}
				after = evs[len(evs)-1].Seq
			}
			return lowest <= seen+1 || holds(found, seen, next), nil
		})
	}
	out := make([]troupe.Event, 0, len(found))
	first := 0 // the first missing number
	for n := seen + 1; n < next; n++ {
		e, ok := found[n]
		if !ok {
			first = cmp.Or(first, n)
			continue
		}
		out = append(out, e)
	}
	if first == 0 {
		return out, nil
	}
	if err == nil {
		err = fmt.Errorf("events %d to %d of %s: not in its pages or earlier runs", first, next-1, id)
	}
	return out, err
}

// walkBack calls fn with each run before the workflow's latest, newest
// first, until fn says it is done or the chain of continue-as-new ends.
func (t *tree) walkBack(ctx context.Context, id string, fn func(run string) (done bool, err error)) error {
	d, err := t.c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return fmt.Errorf("describe %s: %w", id, err)
	}
	run := d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	for hops := 0; hops < maxRuns; hops++ {
		it := t.c.GetWorkflowHistory(ctx, id, run, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		if !it.HasNext() {
			return fmt.Errorf("history of %s run %s: empty", id, run)
		}
		first, err := it.Next()
		if err != nil {
			return fmt.Errorf("history of %s run %s: %w", id, run, err)
		}
		run = first.GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId()
		if run == "" {
			return nil
		}
		if done, err := fn(run); done || err != nil {
			return err
		}
	}
	return nil
}

// fromPages adds to found the events numbered after seen and before next
// that the workflow's pages in the blob store hold. It does its best: a
// page that cannot be read is left to the earlier runs.
func (t *tree) fromPages(ctx context.Context, id string, seen, next int, found map[int]troupe.Event) {
	resp, err := t.c.QueryWorkflow(ctx, id, "", troupe.EventPagesQuery)
	if err != nil {
		return // A worker from before pages, or busy: the earlier runs answer.
	}
	var pages []troupe.EventPage
	if resp.Get(&pages) != nil {
		return
	}
	for _, p := range pages {
		if p.To <= seen || p.From >= next {
			continue
		}
		data, err := t.store.Get(ctx, p.Key)
		if err != nil {
			continue
		}
		var evs []troupe.Event
		if json.Unmarshal(data, &evs) != nil {
			continue
		}
		for _, e := range evs {
			if e.Seq > seen && e.Seq < next {
				found[e.Seq] = e
			}
		}
	}
}

// holds reports whether found has every event numbered after seen and
// before next.
func holds(found map[int]troupe.Event, seen, next int) bool {
	for n := seen + 1; n < next; n++ {
		if _, ok := found[n]; !ok {
			return false
		}
	}
	return true
}

// maxRuns bounds how far back a follower walks a workflow's runs.
const maxRuns = 1000
