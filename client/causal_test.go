package client

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/troupe-dev/troupe"
)

// The causal stage passes each workflow's events after the event of its
// parent that started it, in their own order, whatever order they come
// in; a workflow whose start the follower never sees is passed on after
// causalPatience or at the end.
func TestCausalOrder(t *testing.T) {
	ev := func(wf string, seq int, child string) troupe.Event {
		return troupe.Event{WorkflowID: wf, Seq: seq, Child: child}
	}
	const r, a, b, c = "r", "r/0-a", "r/1-b", "r/0-a/t1.0/0-c"
	tests := []causalCase{
		{
			name: "in order already",
			in:   []troupe.Event{ev(r, 1, a), ev(a, 1, ""), ev(a, 2, ""), ev(r, 2, "")},
			want: []string{"r#1", "r/0-a#1", "r/0-a#2", "r#2"},
		},
		{
			name: "a handoff's target read before the handoff",
			in:   []troupe.Event{ev(a, 1, ""), ev(b, 1, ""), ev(b, 2, ""), ev(r, 1, a), ev(a, 2, ""), ev(r, 2, ""), ev(r, 3, b)},
			want: []string{"r#1", "r/0-a#1", "r/0-a#2", "r#2", "r#3", "r/1-b#1", "r/1-b#2"},
		},
		{
			name: "a grandchild before its parent's start, before the child's",
			in:   []troupe.Event{ev(c, 1, ""), ev(a, 1, c), ev(r, 1, a)},
			want: []string{"r#1", "r/0-a#1", "r/0-a/t1.0/0-c#1"},
		},
		{
			name: "a workflow of the cursor is shown",
			from: troupe.Cursor{r: 4, a: 2},
			in:   []troupe.Event{ev(a, 3, ""), ev(r, 5, "")},
			want: []string{"r/0-a#3", "r#5"},
		},
		{
			name: "a start never seen: passed on after the patience",
			in:   []troupe.Event{ev(b, 1, ""), ev(r, 9, "")},
			wait: causalPatience,
			want: []string{"r/1-b#1", "r#9"},
		},
		{
			name:   "a start never seen: passed on at the end",
			in:     []troupe.Event{ev(b, 1, ""), ev(b, 2, ""), ev(r, 9, "")},
			flush:  true,
			before: []string{"r#9"},
			want:   []string{"r#9", "r/1-b#1", "r/1-b#2"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, r) })
	}
}

// The run's end comes last: its final_output (or failed) event, and the
// root's events after it, wait until every workflow of the run that
// started has been passed on to its end, in whatever order the workflows
// were read; a workflow whose end does not come holds it for
// endPatience (then the next event or tick passes it on), or until the
// end.
func TestCausalRunEndsLast(t *testing.T) {
	ev := func(wf string, seq int, kind, child string) troupe.Event {
		return troupe.Event{WorkflowID: wf, Seq: seq, Kind: kind, Child: child}
	}
	const r, a, b, tool = "r", "r/0-a", "r/1-b", "r/0-a/t1.0/0-c"
	const (
		started   = troupe.EventAgentStarted
		toolStart = troupe.EventAgentToolStarted
		toolEnd   = troupe.EventAgentToolFinished
		turn      = troupe.EventTurn
		final     = troupe.EventFinal
		failed    = troupe.EventFailed
		handoff   = troupe.EventHandoff
		message   = "message"
	)
	tests := []causalCase{
		{
			// The flake of TestTextStreamsToFollowers: the child's last
			// reading came after the run's.
			name: "the child's final read after the run's",
			in:   []troupe.Event{ev(r, 1, started, a), ev(a, 1, started, ""), ev(r, 2, final, ""), ev(a, 2, final, "")},
			want: []string{"r#1", "r/0-a#1", "r/0-a#2", "r#2"},
		},
		{
			name: "a child read only after the run's end",
			in:   []troupe.Event{ev(r, 1, started, a), ev(r, 2, failed, ""), ev(a, 1, started, ""), ev(a, 2, failed, "")},
			want: []string{"r#1", "r/0-a#1", "r/0-a#2", "r#2"},
		},
		{
			name: "a handoff's target and an agent tool read last",
			in: []troupe.Event{ev(r, 1, started, a), ev(a, 1, toolStart, tool), ev(tool, 1, started, ""), ev(a, 2, toolEnd, ""),
				ev(a, 3, handoff, ""), ev(r, 2, started, b), ev(r, 3, final, ""), ev(b, 1, started, ""), ev(tool, 2, final, ""), ev(b, 2, final, "")},
			want: []string{"r#1", "r/0-a#1", "r/0-a/t1.0/0-c#1", "r/0-a#2", "r/0-a#3", "r#2", "r/1-b#1", "r/0-a/t1.0/0-c#2", "r/1-b#2", "r#3"},
		},
		{
			name: "a session's next turn waits behind the last turn's final",
			in: []troupe.Event{ev(r, 1, message, ""), ev(r, 2, started, a), ev(a, 1, turn, ""), ev(r, 3, final, ""), ev(r, 4, message, ""),
				ev(r, 5, started, b), ev(b, 1, final, ""), ev(r, 6, final, ""), ev(a, 2, final, "")},
			want: []string{"r#1", "r#2", "r/0-a#1", "r/0-a#2", "r#3", "r#4", "r#5", "r/1-b#1", "r#6"},
		},
		{
			name: "children of the cursor ended before it",
			from: troupe.Cursor{r: 3, a: 2},
			in:   []troupe.Event{ev(r, 4, final, "")},
			want: []string{"r#4"},
		},
		{
			name: "a child's end read after the patience goes first still",
			in:   []troupe.Event{ev(r, 1, started, a), ev(a, 1, turn, ""), ev(r, 2, final, ""), ev(a, 2, final, "")},
			wait: endPatience,
			want: []string{"r#1", "r/0-a#1", "r/0-a#2", "r#2"},
		},
		{
			name: "a child whose end never comes: the run's end after the patience, at the next event",
			in:   []troupe.Event{ev(r, 1, started, a), ev(a, 1, turn, ""), ev(r, 2, final, ""), ev(r, 3, message, "")},
			wait: endPatience,
			want: []string{"r#1", "r/0-a#1", "r#2", "r#3"},
		},
		{
			name: "a child whose end never comes: the run's end after the patience, at a tick",
			in:   []troupe.Event{ev(r, 1, started, a), ev(a, 1, turn, ""), ev(r, 2, final, "")},
			tick: endPatience,
			want: []string{"r#1", "r/0-a#1", "r#2"},
		},
		{
			name: "not before the patience",
			in:   []troupe.Event{ev(r, 1, started, a), ev(a, 1, turn, ""), ev(r, 2, final, "")},
			tick: endPatience - time.Millisecond,
			want: []string{"r#1", "r/0-a#1"},
		},
		{
			name:   "a child that never started: the run's end at the end",
			in:     []troupe.Event{ev(r, 1, started, a), ev(r, 2, failed, "")},
			flush:  true,
			before: []string{"r#1"},
			want:   []string{"r#1", "r#2"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, r) })
	}
}

// causalCase is a case of the causal stage of root r: events that come
// in, in that order, and what the stage passes on.
type causalCase struct {
	name   string
	from   troupe.Cursor
	in     []troupe.Event
	wait   time.Duration // before the last event
	tick   time.Duration // after the last event, then a tick
	flush  bool
	want   []string
	before []string // what is passed before the flush, when flush
}

// run feeds tc's events to a causal stage of root r on a clock of its
// own and checks what the stage passed on.
func (tc causalCase) run(t *testing.T, r string) {
	t.Helper()
	var got []string
	order := newCausal(r, tc.from, func(e troupe.Event) { got = append(got, fmt.Sprintf("%s#%d", e.WorkflowID, e.Seq)) })
	now := time.Unix(1000, 0)
	order.now = func() time.Time { return now }
	for i, e := range tc.in {
		if i == len(tc.in)-1 {
			now = now.Add(tc.wait)
		}
		order.event(e)
	}
	if tc.tick > 0 {
		now = now.Add(tc.tick)
		order.expire()
	}
	if tc.flush {
		if !slices.Equal(got, tc.before) {
			t.Errorf("before the end: %v, want %v", got, tc.before)
		}
		order.flush()
	}
	if !slices.Equal(got, tc.want) {
		t.Errorf("passed %v, want %v", got, tc.want)
	}
}
