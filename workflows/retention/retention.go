package retention

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/troupe-dev/troupe/internal/periodic"
	"github.com/troupe-dev/troupe/runtime/blob"
)

// Default is how long the blob data of a closed run is kept when no
// retention is set: a week after the run closed.
const Default = 7 * 24 * time.Hour

// SweepInterval is how often a worker sweeps the blob store.
const SweepInterval = time.Hour

// areas are the key prefixes under which each run keeps its data.
var areas = []string{"transcripts/", "outputs/", "snapshots/", "events/", "inputs/"}

// KeepActivityName is the activity that marks the runs whose data a fork
// shares.
const KeepActivityName = "troupe.KeepBlobs"

// KeepInput asks to keep the data of Runs for as long as the run For
// needs it.
type KeepInput struct {
	For  string   `json:"for"`
	Runs []string `json:"runs"`
}

// Activities are the retention room's activity: Keep.
// workflows.NewRunner builds them with its blob store.
type Activities struct {
	// Store is the blob store the marks are written to.
	Store *blob.Store
}

// Register registers Keep on w, as KeepActivityName.
func (a *Activities) Register(w worker.ActivityRegistry) {
	w.RegisterActivityWithOptions(a.Keep, activity.RegisterOptions{Name: KeepActivityName})
}

func keepKey(run, forRun string) string { return "keep/" + run + "/" + forRun + "/mark" }

// Keep marks the runs whose data in.For shares.
func (a *Activities) Keep(ctx context.Context, in KeepInput) error {
	for _, run := range in.Runs {
		if err := a.Store.Put(ctx, keepKey(run, in.For), []byte(in.For)); err != nil {
			return err
		}
	}
	return nil
}

// Sweep deletes the blob data of the runs that are done with it and
// returns those runs. A run's data goes once the run has been closed for
// retention (Default when zero), or, for a run that c's namespace no
// longer holds (Temporal's own retention removed it), once none of its
// data has changed for retention. The data of a run still running, or
// whose state c cannot read, is never touched.
//
// A store shared by several namespaces or clusters would see the others'
// runs as unknown ones: give each namespace its own bucket or prefix.
func Sweep(ctx context.Context, c client.Client, store *blob.Store, retention time.Duration) ([]string, error) {
	if retention <= 0 {
		retention = Default
	}
	var runs []string
	for _, area := range areas {
		dirs, err := store.Dirs(ctx, area)
		if err != nil {
			return nil, err
		}
		for _, d := range dirs {
			if !slices.Contains(runs, d) {
				runs = append(runs, d)
			}
		}
	}
	slices.Sort(runs)
	var swept, marked []string
	var errs []error
	for _, run := range runs {
		done, err := runDone(ctx, c, store, run, retention)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !done {
			continue
		}
		if kept, err := keptFor(ctx, c, store, run, retention); err != nil || kept {
			if err != nil {
				errs = append(errs, err)
			}
			continue
		}
		for _, area := range areas {
			if _, err := store.DeletePrefix(ctx, area+run+"/"); err != nil {
				errs = append(errs, err)
			}
		}
		// Its own marks on the runs whose data it shared go too, and the
		// marks of the runs that shared its data (they are done).
		if len(swept) == 0 {
			if marked, err = store.Dirs(ctx, "keep/"); err != nil {
				errs = append(errs, err)
			}
		}
		for _, m := range marked {
			if _, err := store.DeletePrefix(ctx, "keep/"+m+"/"+run+"/"); err != nil {
				errs = append(errs, err)
			}
		}
		if _, err := store.DeletePrefix(ctx, "keep/"+run+"/"); err != nil {
			errs = append(errs, err)
		}
		swept = append(swept, run)
	}
	return swept, errors.Join(errs...)
}

// Remove deletes the blob data of run (a session removed: its workflows
// terminated), whatever its age, and returns how many blobs it deleted.
// Data that a fork still shares (a fork not done with it, by keptFor's
// rule at the Default retention) is kept, and the forks that keep it are
// returned: Sweep deletes it once they are done. Run's own marks on the
// data of the runs it was forked from go either way, so that their data
// no longer waits for run.
func Remove(ctx context.Context, c client.Client, store *blob.Store, run string) (deleted int, keptFor []string, err error) {
	forks, err := store.Dirs(ctx, "keep/"+run+"/")
	if err != nil {
		return 0, nil, err
	}
	for _, f := range forks {
		done, err := runDone(ctx, c, store, f, Default)
		if err != nil {
			return 0, nil, err
		}
		if !done {
			keptFor = append(keptFor, f)
		}
	}
	var errs []error
	if len(keptFor) == 0 {
		for _, area := range areas {
			n, err := store.DeletePrefix(ctx, area+run+"/")
			deleted += n
			errs = append(errs, err)
		}
		n, err := store.DeletePrefix(ctx, "keep/"+run+"/")
		deleted += n
		errs = append(errs, err)
	}
	marked, err := store.Dirs(ctx, "keep/")
	errs = append(errs, err)
	for _, m := range marked {
		n, err := store.DeletePrefix(ctx, "keep/"+m+"/"+run+"/")
		deleted += n
		errs = append(errs, err)
	}
	return deleted, keptFor, errors.Join(errs...)
}

// keptFor reports whether a run that shares run's data (a fork of it) is
// not done with its own.
func keptFor(ctx context.Context, c client.Client, store *blob.Store, run string, retention time.Duration) (bool, error) {
	forks, err := store.Dirs(ctx, "keep/"+run+"/")
	if err != nil {
		return false, err
	}
	for _, f := range forks {
		done, err := runDone(ctx, c, store, f, retention)
		if err != nil || !done {
			return true, err
		}
	}
	return false, nil
}

// runDone reports whether run's blob data may go.
func runDone(ctx context.Context, c client.Client, store *blob.Store, run string, retention time.Duration) (bool, error) {
	d, err := c.DescribeWorkflowExecution(ctx, run, "")
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		var newest time.Time
		for _, area := range areas {
			t, ok, err := store.Newest(ctx, area+run+"/")
			if err != nil {
				return false, err
			}
			if ok && t.After(newest) {
				newest = t
			}
		}
		return time.Since(newest) >= retention, nil
	case err != nil:
		return false, fmt.Errorf("retention: sweep the data of run %s: %w", run, err)
	}
	info := d.GetWorkflowExecutionInfo()
	if info.GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_RUNNING || info.GetCloseTime() == nil {
		return false, nil
	}
	return time.Since(info.GetCloseTime().AsTime()) >= retention, nil
}

// StartSweeping sweeps store (Sweep) once now and then every interval
// (SweepInterval when zero), in the background, until the returned stop
// func is called; stop waits for a sweep under way. report, when set, gets
// each sweep's outcome.
func StartSweeping(ctx context.Context, c client.Client, store *blob.Store, retention, interval time.Duration, report func(swept []string, err error)) (stop func()) {
	if interval <= 0 {
		interval = SweepInterval
	}
	return periodic.Every(ctx, interval, func(ctx context.Context) {
		swept, err := Sweep(ctx, c, store, retention)
		if ctx.Err() == nil && report != nil {
			report(swept, err)
		}
	})
}
