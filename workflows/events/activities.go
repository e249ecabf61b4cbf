package events

import (
	"context"
	"encoding/json"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/runtime/blob"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
)

// Activities are the activities of the events: saving a page of a
// workflow's events to the blob store as it continues as new.
type Activities struct {
	// Store is the blob store the pages go to.
	Store *blob.Store
}

// Register registers the activities on w.
func (a *Activities) Register(w worker.ActivityRegistry) {
	w.RegisterActivityWithOptions(a.SaveEvents, activity.RegisterOptions{Name: SaveEventsActivityName})
}

// SaveEvents writes a page of a workflow's events to the blob store, as
// the workflow continues as new.
func (a *Activities) SaveEvents(ctx context.Context, in SaveEventsInput) error {
	data, err := json.Marshal(in.Events)
	if err != nil {
		return temporal.NewNonRetryableApplicationError("events that do not encode", troupe.ErrInternal, err)
	}
	return a.Store.Put(ctx, in.Key, data)
}
