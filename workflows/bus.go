package workflows

import (
	"strings"
	"sync"
)

// EventBus carries the events this process's workflows record, as they
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
type EventBus struct {
	mu   sync.Mutex
	subs map[*busSub]struct{}
}

type busSub struct {
	root string
	ch   chan Event
}

// busBuffer bounds the events a follower may be behind on the bus.
const busBuffer = 4096

// NewEventBus returns an empty bus; set it as Config.Events and pass it to
// FollowLive.
func NewEventBus() *EventBus { return &EventBus{subs: map[*busSub]struct{}{}} }

// publish hands e to the followers of its run.
func (b *EventBus) publish(e Event) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		if e.WorkflowID == s.root || strings.HasPrefix(e.WorkflowID, s.root+"/") {
			select {
			case s.ch <- e:
			default: // Full: the follower's polls bring it.
			}
		}
	}
}

// subscribe returns the events of the run root and its workflows, from
// now on, and a func that ends the subscription.
func (b *EventBus) subscribe(root string) (<-chan Event, func()) {
	s := &busSub{root: root, ch: make(chan Event, busBuffer)}
	b.mu.Lock()
	b.subs[s] = struct{}{}
	b.mu.Unlock()
	return s.ch, func() {
		b.mu.Lock()
		delete(b.subs, s)
		b.mu.Unlock()
	}
}
