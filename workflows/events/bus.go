package events

import (
	"strings"
	"sync"

	"github.com/troupe-dev/troupe"
)

// Bus carries the events this process's workflows record, as they
// record them, to followers in the same process (FollowLive): `troupe run`
// and the MCP server run their own worker, so their followers need not
// wait for a workflow task to end, or for a poll, to show an event. A
// workflow task that runs local activities back to back (an agent's model
// and function calls) answers queries only when it ends; its events reach
// the bus at once.
//
// The bus is a side channel, like a log: events are published only while
// a workflow runs live (never while it replays), publishing never blocks,
// and a follower whose buffer is full misses events that its polls then
// bring. What the bus delivers is what the workflow records in its state,
// so the two agree.
//
// The bus also carries the text deltas of this process's model calls
// (EventTextDelta), which no workflow records: to followers in the process
// that ask for them (WithDeltas), and, through the worker's delta relay
// (Config.DeltaAddr), to followers in other processes. A follower that
// falls behind misses deltas; nothing brings them back.
type Bus struct {
	mu    sync.Mutex
	subs  map[*busSub]struct{}
	relay *deltaRelay // nil until a worker serves the bus's deltas
}

type busSub struct {
	root string
	ch   chan troupe.Event
	// events and deltas say what the subscriber takes: recorded events,
	// and text deltas with their ends.
	events, deltas bool
}

// busBuffer bounds the events a follower may be behind on the bus.
const busBuffer = 4096

// NewBus returns an empty bus; set it as Config.Events and pass it to
// FollowLive.
func NewBus() *Bus { return &Bus{subs: map[*busSub]struct{}{}} }

// publish hands e, an event a workflow records, to the followers of its
// run.
func (b *Bus) Publish(e troupe.Event) {
	b.send(e, false)
}

// publishDelta hands e, a text delta or the end of a model call's deltas,
// to the followers of its run that take deltas.
func (b *Bus) PublishDelta(e troupe.Event) {
	b.send(e, true)
}

func (b *Bus) send(e troupe.Event, delta bool) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		if delta && !s.deltas || !delta && !s.events {
			continue
		}
		if e.WorkflowID == s.root || strings.HasPrefix(e.WorkflowID, s.root+"/") {
			select {
			case s.ch <- e:
			default: // Full: the follower's polls bring an event; a delta is lost.
			}
		}
	}
}

// Subscribe returns what the bus carries for the run root and its
// workflows from now on (recorded events, deltas, or both), with room for
// buffer of them, and a func that ends the subscription. A nil bus carries
// nothing.
func (b *Bus) Subscribe(root string, events, deltas bool, buffer int) (<-chan troupe.Event, func()) {
	if b == nil {
		return nil, func() {}
	}
	s := &busSub{root: root, ch: make(chan troupe.Event, buffer), events: events, deltas: deltas}
	b.mu.Lock()
	b.subs[s] = struct{}{}
	b.mu.Unlock()
	return s.ch, func() {
		b.mu.Lock()
		delete(b.subs, s)
		b.mu.Unlock()
	}
}

// RelayURL returns the URL under which this process serves the bus's
// deltas to followers in other processes (with its token), or "" when no
// worker serves them. Followers find it in the worker's identity on its
// task queue; this process's own followers take the bus instead.
func (b *Bus) RelayURL() string {
	if b == nil {
		return ""
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.relay == nil {
		return ""
	}
	return b.relay.url
}

// serveDeltas has the bus's deltas served on addr (DefaultDeltaAddr when
// empty), or takes the relay a worker of this process started already,
// and returns its URL and a func that releases it: the last release stops
// it. A relay bound to an unspecified host (":7300") is advertised under
// host.
func (b *Bus) ServeDeltas(addr, host string) (string, func(), error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.relay == nil {
		r, err := startRelay(b, addr, host)
		if err != nil {
			return "", nil, err
		}
		b.relay = r
	}
	r := b.relay
	r.refs++
	var once sync.Once
	return r.url, func() {
		once.Do(func() {
			b.mu.Lock()
			r.refs--
			last := r.refs == 0
			if last {
				b.relay = nil
			}
			b.mu.Unlock()
			if last {
				_ = r.srv.Close()
			}
		})
	}, nil
}
