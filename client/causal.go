package client

import (
	"maps"
	"slices"
	"time"

	"github.com/troupe-dev/troupe"
)

// causal passes a run's events on parents first: the events of a
// workflow (an agent, an agent-as-tool, a handoff's target) wait until
// the event of its parent that started it (one whose Child names it) has
// been passed on. Each workflow's own order is kept. The workflows are
// read apart, so a child's events may well be read before its parent's
// (a bus delivers them as recorded, a round of polls is sorted by time,
// and clocks of several hosts differ); without this, a tech agent's
// answer could show before the handoff to it.
//
// A workflow whose starting event the follower never sees (it was
// before the cursor the follower starts from) is not held for ever: its
// events are passed on once they waited causalPatience, at the next
// event, and at the end (flush).
type causal struct {
	fn    func(troupe.Event)
	shown map[string]bool
	held  map[string][]troupe.Event
	since map[string]time.Time
	now   func() time.Time
}

// causalPatience is how long the events of a workflow whose starting
// event has not come wait for it.
const causalPatience = 2 * time.Second

// newCausal returns the stage in front of fn for the run root followed
// from cursor from: the root and the workflows of the cursor are shown
// already.
func newCausal(root string, from troupe.Cursor, fn func(troupe.Event)) *causal {
	c := &causal{fn: fn, shown: map[string]bool{root: true}, held: map[string][]troupe.Event{}, since: map[string]time.Time{}, now: time.Now}
	for id := range from {
		c.shown[id] = true
	}
	return c
}

// event takes the next event read.
func (c *causal) event(e troupe.Event) {
	c.expire()
	if !c.shown[e.WorkflowID] {
		if _, ok := c.held[e.WorkflowID]; !ok {
			c.since[e.WorkflowID] = c.now()
		}
		c.held[e.WorkflowID] = append(c.held[e.WorkflowID], e)
		return
	}
	c.pass(e)
}

// pass passes e on, then the events that waited for it.
func (c *causal) pass(e troupe.Event) {
	c.fn(e)
	if e.Child != "" && !c.shown[e.Child] {
		c.show(e.Child)
	}
}

// show marks workflow id shown and passes on its events that waited.
func (c *causal) show(id string) {
	c.shown[id] = true
	held := c.held[id]
	delete(c.held, id)
	delete(c.since, id)
	for _, e := range held {
		c.pass(e)
	}
}

// expire shows the workflows whose events waited causalPatience.
func (c *causal) expire() {
	if len(c.held) == 0 {
		return
	}
	now := c.now()
	for _, id := range slices.Sorted(maps.Keys(c.held)) {
		if _, still := c.held[id]; still && now.Sub(c.since[id]) >= causalPatience {
			c.show(id)
		}
	}
}

// flush passes on every event that still waits, as the follower ends.
func (c *causal) flush() {
	for len(c.held) > 0 {
		c.show(slices.Sorted(maps.Keys(c.held))[0])
	}
}
