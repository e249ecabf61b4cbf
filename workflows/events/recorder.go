package events

import (
	"fmt"
	"slices"
	"time"

	"github.com/troupe-dev/troupe"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Recorder keeps the events of a workflow's run, with those the run before
// it carried (its last carriedEvents), and answers the events query. A
// run's events are bounded by its continue-as-new bounds (turns and
// history events), so the run keeps them all. When the workflow continues
// as new, the run saves its events to the blob store as one page
// (events/WORKFLOW/FIRST.json, under the run's key prefix, so retention
// deletes them with the run's other data) and the next run carries the
// list of pages (a few dozen bytes each) and answers the event-pages
// query with it: a follower that fell behind across a continue-as-new
// reads the pages, or, without the blob store, the earlier runs (a worker
// replays one to answer, while Temporal keeps it).
//
// Events are numbered from 1 across the workflow's runs (continue-as-new
// carries the numbering), and the query answers those after a number, so
// a follower's cursor stays good across runs.
type Recorder struct {
	id     string
	events []troupe.Event
	next   int                // the number of the next event
	pages  []troupe.EventPage // the events of earlier runs, in the blob store
	bus    *Bus               // nil for none
}

// SaveEventsInput is a page of events to save.
type SaveEventsInput struct {
	Key    string         `json:"key"`
	Events []troupe.Event `json:"events"`
}

// NewRecorder starts the recorder of a workflow run, with the events and
// pages a previous run of the workflow carried over (none for a first
// run).
func NewRecorder(ctx workflow.Context, carried []troupe.Event, next int, pages []troupe.EventPage, bus *Bus) (*Recorder, error) {
	rec := &Recorder{id: workflow.GetInfo(ctx).WorkflowExecution.ID, events: carried, next: max(next, 1), pages: pages, bus: bus}
	err := workflow.SetQueryHandler(ctx, troupe.EventsQuery, func(after int) ([]troupe.Event, error) {
		return rec.After(after), nil
	})
	if err != nil {
		return nil, err
	}
	err = workflow.SetQueryHandler(ctx, troupe.EventPagesQuery, func() ([]troupe.EventPage, error) {
		return append([]troupe.EventPage{}, rec.pages...), nil
	})
	return rec, err
}

// Next is the number the next event will have: a cursor at Next()-1
// follows what the workflow records from now on.
func (rec *Recorder) Next() int { return rec.next }

// carriedEvents bounds the events a run carries into the next (each
// under a kilobyte), to keep the carry far below the payload bound.
const carriedEvents = 200

// Carry is what the workflow's next run takes over when it continues as
// new: its last events (at most 200), the number of the next event, and
// the pages of the earlier ones (see SavePage, which goes first).
func (rec *Recorder) Carry() (recent []troupe.Event, next int, pages []troupe.EventPage) {
	return rec.events[max(0, len(rec.events)-carriedEvents):], rec.next, rec.pages
}

// versionEventPages marks the change to workflows that save their events
// to the blob store as they continue as new.
const versionEventPages = "troupe.event-pages"

// savePage saves the events that no page holds yet as a page, before the
// workflow continues as new, for runs that do. A page that cannot be saved
// (the blob store failed five times) is left out: its events stay
// readable from this run while Temporal keeps it. The error is a
// cancellation that came while the page was saved: the workflow then ends
// cancelled rather than continue.
func (rec *Recorder) SavePage(ctx workflow.Context) error {
	if workflow.GetVersion(ctx, versionEventPages, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return nil
	}
	from := 1
	if n := len(rec.pages); n > 0 {
		from = rec.pages[n-1].To + 1
	}
	i := slices.IndexFunc(rec.events, func(e troupe.Event) bool { return e.Seq >= from })
	if i < 0 {
		return nil
	}
	evs := rec.events[i:]
	page := troupe.EventPage{From: evs[0].Seq, To: evs[len(evs)-1].Seq, Key: fmt.Sprintf("events/%s/%09d.json", rec.id, evs[0].Seq)}
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 5},
		Summary:             fmt.Sprintf("save events %d to %d", page.From, page.To),
	})
	if err := workflow.ExecuteLocalActivity(lctx, SaveEventsActivityName, SaveEventsInput{Key: page.Key, Events: evs}).Get(ctx, nil); err != nil {
		if ctx.Err() != nil {
			return temporal.NewCanceledError()
		}
		workflow.GetLogger(ctx).Warn("events not saved to the blob store; they stay readable from this run", "from", page.From, "to", page.To, "error", err)
		return nil
	}
	rec.pages = append(rec.pages, page)
	if ctx.Err() != nil {
		return temporal.NewCanceledError()
	}
	return nil
}

// after returns the events numbered after n, at most EventsQueryPage of them.
func (rec *Recorder) After(n int) []troupe.Event {
	for i, e := range rec.events {
		if e.Seq > n {
			return rec.events[i:min(len(rec.events), i+troupe.EventsQueryPage)]
		}
	}
	return []troupe.Event{}
}

func (rec *Recorder) Add(ctx workflow.Context, e troupe.Event) {
	e.Seq = rec.next
	rec.next++
	e.Time = workflow.Now(ctx)
	e.WorkflowID = rec.id
	rec.events = append(rec.events, e)
	if !workflow.IsReplaying(ctx) {
		rec.bus.Publish(e) //workflowcheck:ignore a side channel, like a log: it changes no workflow state
	}
}

const SaveEventsActivityName = "troupe.SaveEvents"
