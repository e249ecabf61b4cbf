package workflows

import (
	"go.temporal.io/sdk/workflow"
)

// queryPage bounds the events one answer of the events query holds; a
// follower further behind asks again from the last it got.
const queryPage = 2500

// recorder keeps the events of a workflow's run, with those the run before
// it carried (its last carriedEvents), and answers the events query. A
// run's events are bounded by its continue-as-new bounds (turns and
// history events), so the run keeps them all: an earlier run's events
// stay readable from that run (a worker replays it to answer), which is
// how a follower that fell behind across a continue-as-new catches up.
// Events are numbered from 1 across the workflow's runs (continue-as-new
// carries the numbering), and the query answers those after a number, so
// a follower's cursor stays good across runs.
type recorder struct {
	id     string
	events []Event
	next   int       // the number of the next event
	bus    *EventBus // nil for none
}

// newRecorder starts the recorder of a workflow run, with the events a
// previous run of the workflow carried over (none for a first run).
func newRecorder(ctx workflow.Context, carried []Event, next int, bus *EventBus) (*recorder, error) {
	rec := &recorder{id: workflow.GetInfo(ctx).WorkflowExecution.ID, events: carried, next: max(next, 1), bus: bus}
	err := workflow.SetQueryHandler(ctx, EventsQuery, func(after int) ([]Event, error) {
		return rec.after(after), nil
	})
	return rec, err
}

// after returns the events numbered after n, at most queryPage of them.
func (rec *recorder) after(n int) []Event {
	for i, e := range rec.events {
		if e.Seq > n {
			return rec.events[i:min(len(rec.events), i+queryPage)]
		}
	}
	return []Event{}
}

func (rec *recorder) add(ctx workflow.Context, e Event) {
	e.Seq = rec.next
	rec.next++
	e.Time = workflow.Now(ctx)
	e.WorkflowID = rec.id
	rec.events = append(rec.events, e)
	if !workflow.IsReplaying(ctx) {
		rec.bus.publish(e) //workflowcheck:ignore a side channel, like a log: it changes no workflow state
	}
}
