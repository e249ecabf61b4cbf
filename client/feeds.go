package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	enums "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe"
)

const (
	// feedDiscovery is how often a follower reads the task queue's
	// workers again, for feeds that came up since.
	feedDiscovery = 2 * time.Second
	// feedWait is how long a feed may hold a follower's request that
	// finds nothing new (a long poll); feedTimeout bounds a request over
	// that.
	feedWait    = 2 * time.Second
	feedTimeout = 10 * time.Second
	// feedPatience is how many requests in a row may fail before a
	// follower that asked for deltas says it gets none from that feed.
	feedPatience = 3
	// feedLast bounds a follower's last reading of a feed, once it stops.
	feedLast = 5 * time.Second
	// relayHold bounds how long a follower holds a turn's model_turn
	// event back for the rest of the turn's deltas from a feed. A feed
	// behind by more (a loaded worker) loses the follower the rest of
	// the turn's deltas, not its text: the model_turn event carries it.
	// 2 s lost deltas on a loaded two-core machine (make test).
	relayHold = 5 * time.Second
)

// feedStreams is where followFeeds sends what the feeds bring: recorded
// events and, when deltas is set, deltas, each feed's in its order, on
// events; and notices (kind troupe.EventLiveText) that the follower gets
// no deltas from some worker.
type feedStreams struct {
	events, notices chan<- troupe.Event
	deltas          bool
	// quit closes when the follower stops reading events.
	quit <-chan struct{}
}

// followFeeds sends to out what the live feeds of the run root's task
// queue's workers bring for it (those that polled in the last
// pollerFresh), until ctx is done: it reads the queue from the run's
// workflow, the feeds from the identities of the queue's workers, and
// follows each but own (this process's, whose bus the follower takes),
// every feedDiscovery for new ones. A feed that fails is tried again
// later, less and less often, from where it was (a feedPlace): what it
// brought is never brought twice, what it holds since is not lost. Once
// ctx is done, each feed that ever answered is read a last time
// (followFeed), whether it was being read then or waiting to be tried
// again, before followFeeds returns. When the follower takes deltas, a
// worker that serves no feed, or a feed that keeps failing, is a notice
// on out.notices, once: its turns show when they end.
func followFeeds(ctx context.Context, c client.Client, root, own string, out feedStreams) {
	query := func(ctx context.Context, id string, req troupe.LiveRequest) (troupe.LivePage, error) {
		var p troupe.LivePage
		resp, err := c.QueryWorkflow(ctx, id, "", troupe.LiveQuery, req)
		if err == nil {
			err = resp.Get(&p)
		}
		return p, err
	}
	type feedState struct {
		active   bool
		fails    int
		next     time.Time // when to try again after a failure
		noticed  bool
		identity string
		place    *feedPlace
	}
	feeds := map[string]*feedState{}
	noticed := map[string]bool{} // workers without a feed, told of
	type ended struct {
		id  string
		err error
	}
	endedc := make(chan ended)
	notice := func(detail string) {
		if !out.deltas {
			return
		}
		select {
		case out.notices <- troupe.Event{Kind: troupe.EventLiveText, WorkflowID: root, Time: time.Now(), Detail: detail}:
		case <-ctx.Done():
		}
	}
	var queue string
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(feedDiscovery)
	defer tick.Stop()
	for {
		if queue == "" {
			if d, err := c.DescribeWorkflowExecution(ctx, root, ""); err == nil {
				queue = d.GetWorkflowExecutionInfo().GetTaskQueue()
			}
		}
		var pollers []*taskqueuepb.PollerInfo
		if queue != "" {
			pollers, _ = freshPollers(ctx, c, queue)
		}
		for _, p := range pollers {
			id, who := troupe.LiveFeedOf(p.GetIdentity())
			if id == "" {
				if !noticed[who] {
					noticed[who] = true
					notice(fmt.Sprintf("worker %s of task queue %s serves no live feed (a worker of before it, or one with no event bus): the turns it runs show when they end", who, queue))
				}
				continue
			}
			st := feeds[id]
			if st == nil {
				st = &feedState{identity: who, place: &feedPlace{}}
				feeds[id] = st
			}
			if id == own || st.active || time.Now().Before(st.next) {
				continue
			}
			st.active = true
			wg.Go(func() {
				err := followFeed(ctx, query, id, root, st.place, out)
				select {
				case endedc <- ended{id, err}:
				case <-ctx.Done():
				}
			})
		}
		select {
		case <-ctx.Done():
			// The feeds between tries get their last reading too: a
			// request that failed a moment before the run ended must not
			// lose the follower the end of a turn's text.
			for id, st := range feeds {
				if !st.active && id != own && st.place.answered {
					wg.Go(func() { _ = followFeed(ctx, query, id, root, st.place, out) })
				}
			}
			return
		case e := <-endedc:
			st := feeds[e.id]
			st.active = false
			if e.err != nil && ctx.Err() == nil {
				st.fails++
				st.next = time.Now().Add(min(feedDiscovery<<min(st.fails-1, 5), time.Minute))
				if st.fails >= feedPatience && !st.noticed {
					st.noticed = true
					notice(fmt.Sprintf("the live feed of worker %s does not answer (%v): the turns it runs show when they end", st.identity, e.err))
				}
			}
		case <-tick.C:
		}
	}
}

// feedPlace is where a follower is in one feed: the request that reads
// what comes next, and whether the feed ever answered. One goroutine at a
// time reads a feed (followFeed), with its place.
type feedPlace struct {
	req      troupe.LiveRequest
	answered bool
}

// feedRetries is how many requests in a row followFeed tries again at
// once (after feedRetryPause, doubled each time) before it says the feed
// fails: a query lost on a loaded machine is not a feed that is down.
const (
	feedRetries    = 3
	feedRetryPause = 100 * time.Millisecond
)

// followFeed reads what the live feed id has for the run root into out,
// from place on, request after request, until requests fail feedRetries
// times in a row (the last error) or ctx is done: then it reads the feed
// a last time, for what came since, and returns nil. Every request but
// the first and the last is held by the feed until it has something
// (feedWait at most). query asks the feed.
func followFeed(ctx context.Context, query func(context.Context, string, troupe.LiveRequest) (troupe.LivePage, error), id, root string, place *feedPlace, out feedStreams) error {
	place.req.Root, place.req.Deltas = root, out.deltas
	fails := 0
	for last := false; !last; {
		req := place.req
		if !place.answered {
			req.WaitMS = 0 // the first request answers at once
		}
		qctx, cancel := context.WithTimeout(ctx, feedTimeout)
		if last = ctx.Err() != nil; last {
			cancel()
			req.WaitMS = 0
			qctx, cancel = context.WithTimeout(context.Background(), feedLast)
		}
		p, err := query(qctx, id, req)
		cancel()
		if err != nil {
			switch {
			case ctx.Err() != nil && !last:
				continue // cut short: the last reading comes next
			case last:
				return nil
			}
			var nf *serviceerror.NotFound
			if errors.As(err, &nf) {
				return fmt.Errorf("live feed %s: not found", id)
			}
			if fails++; fails >= feedRetries {
				return fmt.Errorf("live feed %s: %w", id, err)
			}
			t := time.NewTimer(feedRetryPause << (fails - 1))
			select {
			case <-t.C:
			case <-ctx.Done(): // the last reading comes next
			}
			t.Stop()
			continue
		}
		fails = 0
		place.answered = true
		place.req.Watch, place.req.After, place.req.WaitMS = p.Watch, p.Next, int(feedWait/time.Millisecond)
		for _, e := range p.Events {
			if e.WorkflowID != root && !isUnder(e.WorkflowID, root) {
				continue // not the run's: not the follower's to see
			}
			if isDelta(e) {
				if !out.deltas {
					continue
				}
				e.Seq = 0
			}
			select {
			case out.events <- e:
			case <-out.quit:
				return nil
			}
		}
	}
	return nil
}

// isDelta reports whether e is a text delta or the end of a model
// call's deltas.
func isDelta(e troupe.Event) bool {
	return e.Kind == troupe.EventTextDelta || e.Kind == troupe.EventTextEnd
}

// isUnder reports whether workflow id is one of root's (root/...).
func isUnder(id, root string) bool {
	return len(id) > len(root) && id[len(root)] == '/' && id[:len(root)] == root
}

// freshPollers returns the workers polling queue's workflow tasks whose
// last poll began within pollerFresh: those that may be up.
func freshPollers(ctx context.Context, c client.Client, queue string) ([]*taskqueuepb.PollerInfo, error) {
	d, err := c.DescribeTaskQueue(ctx, queue, enums.TASK_QUEUE_TYPE_WORKFLOW)
	if err != nil {
		return nil, err
	}
	var fresh []*taskqueuepb.PollerInfo
	for _, p := range d.GetPollers() {
		if time.Since(p.GetLastAccessTime().AsTime()) < pollerFresh {
			fresh = append(fresh, p)
		}
	}
	return fresh, nil
}

// pollerFresh is how recently a worker must have polled for its feed to
// be followed: a worker keeps a poll open for up to a minute, and the
// server lists the pollers of the last minutes.
const pollerFresh = 75 * time.Second

// deltaOrder passes deltas and recorded events on to a follower's fn in
// an order that makes sense: a turn's deltas before the turn's model_turn
// event, and none after it. A delta of a turn whose model_turn went out
// already (a feed that lagged) is dropped; a model_turn whose deltas a
// feed is still bringing (seen, but not their end) is held until their
// end arrives, for at most hold (and not once done is closed: the
// follower is stopping, and its feeds with it). Deltas reach fn with Seq
// 0, which a Cursor ignores.
type deltaOrder struct {
	fn      func(troupe.Event)
	relayed <-chan troupe.Event // nil: no feed, nothing to wait for
	hold    time.Duration
	done    <-chan struct{}
	// open are the turns whose deltas came and whose end did not;
	// recorded holds each workflow's last turn whose model_turn went out.
	open     map[turnKey]bool
	recorded map[string]int
	// later are the recorded events read from relayed while a model_turn
	// waited: the follower takes them next (takeLater).
	later []troupe.Event
}

type turnKey struct {
	workflow string
	turn     int
}

func newDeltaOrder(fn func(troupe.Event), relayed <-chan troupe.Event, hold time.Duration, done <-chan struct{}) *deltaOrder {
	return &deltaOrder{fn: fn, relayed: relayed, hold: hold, done: done, open: map[turnKey]bool{}, recorded: map[string]int{}}
}

// delta takes a delta or a delta's end, from the bus or a feed.
func (o *deltaOrder) delta(e troupe.Event) {
	if e.Turn <= o.recorded[e.WorkflowID] {
		return // Its turn is recorded: too late to show.
	}
	k := turnKey{e.WorkflowID, e.Turn}
	switch e.Kind {
	case troupe.EventTextEnd:
		delete(o.open, k)
	case troupe.EventTextDelta:
		o.open[k] = true
		e.Seq = 0
		o.fn(e)
	}
}

// event passes on an event that a workflow recorded, once the deltas of
// its turn are in when it is a model_turn.
func (o *deltaOrder) event(e troupe.Event) {
	if e.Kind == troupe.EventTurn {
		k := turnKey{e.WorkflowID, e.Turn}
		if o.open[k] && o.relayed != nil {
			t := time.NewTimer(o.hold)
		wait:
			for o.open[k] {
				select {
				case d := <-o.relayed:
					if isDelta(d) {
						o.delta(d)
					} else {
						o.later = append(o.later, d)
					}
				case <-t.C:
					break wait
				case <-o.done:
					break wait
				}
			}
			t.Stop()
		}
		delete(o.open, k)
		o.recorded[e.WorkflowID] = max(o.recorded[e.WorkflowID], e.Turn)
	}
	o.fn(e)
}
