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
// The other way round, the run's own final_output or failed event waits
// (with the run's events after it, a session's next turn) until every
// workflow of the run that has started has been passed on to its end:
// its own final_output, failed, handoff or interrupted event. A child
// ends before its parent does, but its last events can be read after the
// parent's (the follower reads a workflow as its history grows, one at a
// time, and a bus hands this process's events at once while another
// worker's are polled); without this, a child's final output could show
// after the run's.
//
// A workflow whose starting event the follower never sees (it was
// before the cursor the follower starts from) is not held for ever: its
// events are passed on once they waited causalPatience, at the next
// event or tick, and at the end (flush). The run's end waits for a
// workflow whose end does not come (one that was interrupted before it
// started, or terminated) for endPatience, and no longer: a follower
// waiting for it (a session's turn) is not held up for ever.
type causal struct {
	fn    func(troupe.Event)
	root  string
	shown map[string]bool
	held  map[string][]troupe.Event
	since map[string]time.Time
	now   func() time.Time
	// open are the workflows of the run, but the root, that started (or
	// whose events came) and whose end has not been passed on.
	open map[string]bool
	// ending are the root's events from its final_output or failed on,
	// held while a workflow is open, since endingSince.
	ending      []troupe.Event
	endingSince time.Time
}

// causalPatience is how long the events of a workflow whose starting
// event has not come wait for it; endPatience how long the run's end
// waits for the ends of its workflows (longer: on a loaded machine a
// workflow's last reading can come seconds after its parent's).
const (
	causalPatience = 2 * time.Second
	endPatience    = 5 * time.Second
)

// causalTick is how often a follower ticks its causal stage, so that
// what waits past its patience goes on with no event after it.
const causalTick = 250 * time.Millisecond

// newCausal returns the stage in front of fn for the run root followed
// from cursor from: the root and the workflows of the cursor are shown
// already.
func newCausal(root string, from troupe.Cursor, fn func(troupe.Event)) *causal {
	c := &causal{fn: fn, root: root, shown: map[string]bool{root: true}, held: map[string][]troupe.Event{}, since: map[string]time.Time{}, now: time.Now,
		open: map[string]bool{}}
	for id := range from {
		c.shown[id] = true
	}
	return c
}

// event takes the next event read. The run's end waited past its
// patience goes on after it: e may be the end it waited for.
func (c *causal) event(e troupe.Event) {
	c.expireHeld()
	if !c.shown[e.WorkflowID] {
		if _, ok := c.held[e.WorkflowID]; !ok {
			c.since[e.WorkflowID] = c.now()
		}
		c.held[e.WorkflowID] = append(c.held[e.WorkflowID], e)
	} else {
		c.pass(e)
	}
	c.expireEnd()
}

// pass passes e on, then the events that waited for it; or, for the
// root's end (and what follows it), holds it while a workflow is open.
func (c *causal) pass(e troupe.Event) {
	if e.WorkflowID == c.root && (len(c.ending) > 0 || ends(e) && len(c.open) > 0) {
		if len(c.ending) == 0 {
			c.endingSince = c.now()
		}
		c.ending = append(c.ending, e)
		return
	}
	c.fn(e)
	if e.WorkflowID != c.root && e.Seq > 0 {
		if ends(e) {
			delete(c.open, e.WorkflowID)
		} else {
			c.open[e.WorkflowID] = true
		}
	}
	if e.Child != "" && !c.shown[e.Child] {
		if starts(e) {
			c.open[e.Child] = true
		}
		c.show(e.Child)
	}
	if len(c.ending) > 0 && len(c.open) == 0 {
		c.end()
	}
}

// end passes on the root's events that waited for the open workflows:
// its end first. One of them may start a workflow (a session's next
// turn), and a later end wait for it in turn.
func (c *causal) end() {
	ending := c.ending
	c.ending = nil
	for _, e := range ending {
		c.pass(e)
	}
}

// ends reports whether e is the last event of its workflow.
func ends(e troupe.Event) bool {
	switch e.Kind {
	case troupe.EventFinal, troupe.EventFailed, troupe.EventHandoff, troupe.EventInterrupted:
		return true
	}
	return false
}

// starts reports whether e starts the workflow it names (Child), which
// then must end before the run does.
func starts(e troupe.Event) bool {
	return e.Kind == troupe.EventAgentStarted || e.Kind == troupe.EventAgentToolStarted
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

// expire passes on what waited past its patience, when no event came
// (a tick): the run's end first (it was read before what waits after
// it), then the workflows whose start did not come.
func (c *causal) expire() {
	c.expireEnd()
	c.expireHeld()
}

// expireEnd passes on the run's end when it waited endPatience for the
// workflows still open.
func (c *causal) expireEnd() {
	if len(c.ending) > 0 && c.now().Sub(c.endingSince) >= endPatience {
		clear(c.open)
		c.end()
	}
}

// expireHeld shows the workflows whose events waited causalPatience.
func (c *causal) expireHeld() {
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

// flush passes on every event that still waits, as the follower ends:
// the root's end first (the events after it may start the workflows
// whose events wait), then the workflows' whose start never came.
func (c *causal) flush() {
	for len(c.held) > 0 || len(c.ending) > 0 {
		if len(c.ending) > 0 {
			clear(c.open)
			c.end()
			continue
		}
		c.show(slices.Sorted(maps.Keys(c.held))[0])
	}
}
