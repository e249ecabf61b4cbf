package workflows

import (
	"go.temporal.io/sdk/workflow"
)

// recentEvents bounds the events a workflow keeps, and carries through
// continue-as-new: a follower more than that many events behind misses
// the oldest.
const recentEvents = 1000

// recorder keeps a workflow's recent events and answers the events query.
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

// after returns the events numbered after n.
func (rec *recorder) after(n int) []Event {
	for i, e := range rec.events {
		if e.Seq > n {
			return rec.events[i:]
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
	if len(rec.events) > recentEvents {
		rec.events = append([]Event(nil), rec.events[len(rec.events)-recentEvents:]...)
	}
}
