package workflows

import (
	"go.temporal.io/sdk/workflow"
)

// recorder keeps a workflow's events and answers the events query.
type recorder struct {
	id     string
	events []Event
}

func newRecorder(ctx workflow.Context) (*recorder, error) {
	rec := &recorder{id: workflow.GetInfo(ctx).WorkflowExecution.ID}
	err := workflow.SetQueryHandler(ctx, EventsQuery, func(after int) ([]Event, error) {
		if after < 0 || after >= len(rec.events) {
			return []Event{}, nil
		}
		return rec.events[after:], nil
	})
	return rec, err
}

func (rec *recorder) add(ctx workflow.Context, e Event) {
	e.Seq = len(rec.events) + 1
	e.Time = workflow.Now(ctx)
	e.WorkflowID = rec.id
	rec.events = append(rec.events, e)
}
