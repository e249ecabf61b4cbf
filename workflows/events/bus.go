package events

import (
	"strings"
	"sync"

	"go.temporal.io/sdk/client"

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
// (EventTextDelta), which no workflow records, to followers in the process
// that ask for them (WithDeltas). Its live feed (ServeFeed) serves both,
// events and deltas, to followers in other processes. A follower that
// falls behind misses deltas; nothing brings them back.
type Bus struct {
	mu    sync.Mutex
	subs  map[*busSub]struct{}
	feeds map[client.Client]*feedServer // the live feeds serving the bus
}

type busSub struct {
	root string
	ch   chan troupe.Event
	// fn, when set, takes what the subscriber takes instead of ch, at
	// once and without blocking (a feed's watch).
	fn func(troupe.Event)
	// events and deltas say what the subscriber takes: recorded events,
	// and text deltas with their ends.
	events, deltas bool
}

// busBuffer bounds the events a follower may be behind on the bus.
const busBuffer = 4096

// NewBus returns an empty bus; set it as Config.Events and pass it to
// FollowLive.
func NewBus() *Bus {
	return &Bus{subs: map[*busSub]struct{}{}, feeds: map[client.Client]*feedServer{}}
}

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
		if s.root == "" && s.fn != nil || e.WorkflowID == s.root || strings.HasPrefix(e.WorkflowID, s.root+"/") {
			if s.fn != nil {
				s.fn(e)
				continue
			}
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

// tap has fn take, as the bus carries them, the events and deltas of
// the run root and its workflows, until the returned func is called. fn
// runs with the bus locked: it must not block, nor use the bus.
// An empty root taps every run. first, when not nil, runs with the bus
// locked just before fn starts: nothing is carried in between.
func (b *Bus) tap(root string, fn func(troupe.Event), first func()) func() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if first != nil {
		first()
	}
	return b.tapLocked(root, fn)
}

// tapLocked is tap with the bus locked already.
func (b *Bus) tapLocked(root string, fn func(troupe.Event)) func() {
	s := &busSub{root: root, fn: fn, events: true, deltas: true}
	b.subs[s] = struct{}{}
	return func() {
		b.mu.Lock()
		delete(b.subs, s)
		b.mu.Unlock()
	}
}
