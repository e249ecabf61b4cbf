package events

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
)

// The live feed serves a bus to followers in other processes through
// Temporal: a query (troupe.LiveQuery) of a workflow of this process's own
// (troupe.LiveWorkflowName), which completes as soon as it starts, on a
// task queue only this process polls. The server hands each query of a
// closed workflow to a poller of its queue with the workflow's history (5
// events), so every query is answered here, in a context of its own: a
// query that waits for news (LiveRequest.WaitMS, a long poll) holds up no
// other. Queries write nothing to any history.

const (
	// feedBuffer bounds the items a watch keeps for its followers: a
	// follower further behind loses the oldest (LivePage.Lost).
	feedBuffer = 4096
	// feedPage and feedPageBytes bound one page, well under the payload
	// limits of a query's answer.
	feedPage      = 512
	feedPageBytes = 512 << 10
	// feedWatchIdle is how long a watch stays with no request before it
	// ends, and feedSweep how often the feed looks.
	feedWatchIdle = time.Minute
	feedSweep     = 10 * time.Second
)

// Feed answers the live queries of followers from a bus: per run asked
// about, a watch subscribes to the bus and keeps the last feedBuffer
// items (events and deltas, numbered) that followers page through, each
// from its own place.
type Feed struct {
	bus  *Bus
	id   string // the feed workflow's id, and its task queue
	idle time.Duration

	mu      sync.Mutex
	watches map[string]*watch // by root
	closed  chan struct{}
	once    sync.Once

	// recent is what the bus carried last, for every run (feedBuffer
	// items at most): a watch starts with its run's, so a follower that
	// comes a moment after its run started misses nothing of it.
	recentMu sync.Mutex
	recent   []troupe.Event
	untap    func()
}

// watch is what a feed keeps of one run for its followers.
type watch struct {
	id          string
	unsubscribe func()

	mu      sync.Mutex
	items   []troupe.Event // numbered first, first+1, ...
	first   uint64
	changed chan struct{} // closed, and replaced, as an item comes
	asked   time.Time     // the last request's time
	waiting int           // requests held now
}

// newFeed returns a feed of bus whose workflow id is id.
func newFeed(bus *Bus, id string) *Feed {
	bus.mu.Lock()
	defer bus.mu.Unlock()
	return newFeedLocked(bus, id)
}

// newFeedLocked is newFeed with the bus locked already.
func newFeedLocked(bus *Bus, id string) *Feed {
	f := &Feed{bus: bus, id: id, idle: feedWatchIdle, watches: map[string]*watch{}, closed: make(chan struct{})}
	f.untap = bus.tapLocked("", f.keep)
	go f.sweep()
	return f
}

// keep keeps e among the recent items (with the bus locked).
func (f *Feed) keep(e troupe.Event) {
	f.recentMu.Lock()
	defer f.recentMu.Unlock()
	f.recent = append(f.recent, e)
	if len(f.recent) >= 2*feedBuffer {
		f.recent = append([]troupe.Event(nil), f.recent[len(f.recent)-feedBuffer:]...)
	}
}

// ID is the workflow id of the feed, which its workers advertise
// (troupe.WithLiveFeed).
func (f *Feed) ID() string { return f.id }

// Answer answers a follower's request: what the watch of req.Root holds
// after req.After, at most a page, waiting up to req.WaitMS for
// something when it holds nothing yet. The first request for a run
// starts its watch, with what the bus carried of the run among its last
// feedBuffer items (of every run): a follower that comes a moment after
// its run started misses nothing of it.
func (f *Feed) Answer(req troupe.LiveRequest) (troupe.LivePage, error) {
	if req.Root == "" {
		return troupe.LivePage{}, errors.New("live feed: the workflow id of the run to follow (root) is required")
	}
	w, err := f.watch(req.Root)
	if err != nil {
		return troupe.LivePage{}, err
	}
	wait := time.Duration(min(max(req.WaitMS, 0), troupe.LiveMaxWait)) * time.Millisecond
	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	w.mu.Lock()
	w.waiting++
	defer func() {
		w.waiting--
		w.asked = time.Now()
		w.mu.Unlock()
	}()
	for {
		page := w.page(req)
		if len(page.Events) > 0 || page.Lost || wait <= 0 {
			return page, nil
		}
		// Nothing for the follower yet (deltas it does not take count):
		// wait from where the page ends.
		req.Watch, req.After = page.Watch, page.Next
		changed := w.changed
		w.mu.Unlock()
		select {
		case <-changed:
		case <-timeout:
			wait = 0
		case <-f.closed:
			wait = 0
		}
		w.mu.Lock()
	}
}

// page is what w holds for req, up to a page (w.mu held). A request of
// another watch, or from before what w still holds, has lost items;
// deltas go only to who asks for them, but count in Next all the same.
func (w *watch) page(req troupe.LiveRequest) troupe.LivePage {
	p := troupe.LivePage{Watch: w.id, Next: req.After}
	after := req.After
	if req.Watch != w.id {
		after, p.Next = w.first-1, w.first-1
		p.Lost = req.Watch != ""
	} else if after+1 < w.first {
		after, p.Next, p.Lost = w.first-1, w.first-1, true
	}
	size := 0
	for i := int(after + 1 - w.first); i < len(w.items) && len(p.Events) < feedPage && size < feedPageBytes; i++ {
		e := w.items[i]
		p.Next = w.first + uint64(i)
		if isDelta(e) && !req.Deltas {
			continue
		}
		p.Events = append(p.Events, e)
		size += len(e.Detail) + 256
	}
	return p
}

// watch returns the watch of root, started if there is none.
func (f *Feed) watch(root string) (*watch, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.closed:
		return nil, errors.New("live feed: the worker is stopping")
	default:
	}
	if w := f.watches[root]; w != nil {
		return w, nil
	}
	w := &watch{id: uuid.NewString()[:8], first: 1, changed: make(chan struct{}), asked: time.Now()}
	w.unsubscribe = f.bus.tap(root, w.add, func() {
		// The run's recent items first, with the bus locked: none is
		// carried in between, none twice.
		f.recentMu.Lock()
		defer f.recentMu.Unlock()
		for _, e := range f.recent {
			if e.WorkflowID == root || strings.HasPrefix(e.WorkflowID, root+"/") {
				w.items = append(w.items, e)
			}
		}
	})
	f.watches[root] = w
	return w, nil
}

// add keeps e, which the bus carries for the watch's run.
func (w *watch) add(e troupe.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.items = append(w.items, e)
	if len(w.items) >= 2*feedBuffer {
		drop := len(w.items) - feedBuffer
		w.items = append([]troupe.Event(nil), w.items[drop:]...)
		w.first += uint64(drop)
	}
	close(w.changed)
	w.changed = make(chan struct{})
}

// sweep ends the watches that no follower asked about for a while.
func (f *Feed) sweep() {
	tick := time.NewTicker(feedSweep)
	defer tick.Stop()
	for {
		select {
		case <-f.closed:
			return
		case <-tick.C:
			f.expire(time.Now())
		}
	}
}

// expire ends the watches idle since before now - f.idle.
func (f *Feed) expire(now time.Time) {
	f.mu.Lock()
	var ended []*watch
	for root, w := range f.watches {
		w.mu.Lock()
		if w.waiting == 0 && now.Sub(w.asked) >= f.idle {
			delete(f.watches, root)
			ended = append(ended, w)
		}
		w.mu.Unlock()
	}
	f.mu.Unlock()
	for _, w := range ended {
		w.unsubscribe()
	}
}

// close ends every watch and wakes the requests held.
func (f *Feed) close() {
	f.once.Do(func() {
		f.mu.Lock()
		close(f.closed)
		ws := f.watches
		f.watches = map[string]*watch{}
		f.mu.Unlock()
		for _, w := range ws {
			w.unsubscribe()
		}
		f.untap()
	})
}

// Workflow is the feed's workflow: it sets the live query's handler and
// completes. Every query of it replays it in this process, whose bus
// answers: the handler reads the process's state, never the workflow's,
// which has none.
func (f *Feed) Workflow(ctx workflow.Context) error {
	return workflow.SetQueryHandler(ctx, troupe.LiveQuery, func(req troupe.LiveRequest) (troupe.LivePage, error) {
		return f.Answer(req) //workflowcheck:ignore a side channel, like the bus: it changes no workflow state
	})
}

func isDelta(e troupe.Event) bool {
	return e.Kind == troupe.EventTextDelta || e.Kind == troupe.EventTextEnd
}

// feedServer is a feed served to one Temporal client's namespace: its
// worker, and how many of the process's workers advertise it.
type feedServer struct {
	feed *Feed
	w    worker.Worker
	refs int
}

// feedStartTimeout bounds the start of a feed's workflow.
const feedStartTimeout = 30 * time.Second

// ServeFeed has the bus's events and deltas served to followers in other
// processes through c's Temporal namespace, by a live feed (Feed) of
// host, or takes the feed a worker of this process serves there already,
// and returns its workflow id, which workers advertise in their identity
// (troupe.WithLiveFeed), and a func that releases it: the last release
// stops it. identity is the feed worker's identity on its queue.
func (b *Bus) ServeFeed(c client.Client, host, identity string) (string, func(), error) {
	b.mu.Lock()
	s := b.feeds[c]
	if s == nil {
		if host == "" {
			host = "host"
		}
		id := "troupe-live/" + strings.ReplaceAll(host, "/", "-") + "/" + uuid.NewString()
		f := newFeedLocked(b, id)
		fail := func(err error) (string, func(), error) {
			b.mu.Unlock()
			f.close() // it takes the bus's lock
			return "", nil, err
		}
		w := worker.New(c, id, worker.Options{Identity: identity, MaxConcurrentWorkflowTaskPollers: 2})
		w.RegisterWorkflowWithOptions(f.Workflow, workflow.RegisterOptions{Name: troupe.LiveWorkflowName})
		if err := w.Start(); err != nil {
			return fail(fmt.Errorf("live feed: start its worker: %w", err))
		}
		ctx, cancel := context.WithTimeout(context.Background(), feedStartTimeout)
		_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: id,
			StaticSummary: "the live feed of a worker process on " + host + ": followers query it for text as it streams"}, troupe.LiveWorkflowName)
		cancel()
		if err != nil {
			w.Stop()
			return fail(fmt.Errorf("live feed: start its workflow %s: %w", id, err))
		}
		s = &feedServer{feed: f, w: w}
		b.feeds[c] = s
	}
	s.refs++
	b.mu.Unlock()
	var once sync.Once
	return s.feed.id, func() {
		once.Do(func() {
			b.mu.Lock()
			s.refs--
			last := s.refs == 0
			if last {
				delete(b.feeds, c)
			}
			b.mu.Unlock()
			if last {
				s.feed.close()
				s.w.Stop()
			}
		})
	}, nil
}

// LiveFeed returns the workflow id of a live feed of this bus (one per
// Temporal client its workers use; "" for none). A follower with the bus
// takes its events from the bus, not from the feed.
func (b *Bus) LiveFeed() string {
	if b == nil {
		return ""
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.feeds {
		return s.feed.id
	}
	return ""
}
