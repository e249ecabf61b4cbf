package workflows

// Retention of the blob data of runs. Everything a run writes to the blob
// store lives under transcripts/RUN/, outputs/RUN/, snapshots/RUN/ and
// events/RUN/ (RUN: the run's workflow id, the orchestrator's), so a run's
// data can be found and deleted as one. Workers sweep the store on a
// schedule.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe/runtime/blob"
)

// DefaultBlobRetention is how long the blob data of a closed run is kept
// when no retention is set: a week after the run closed.
const DefaultBlobRetention = 7 * 24 * time.Hour

// SweepInterval is how often a worker sweeps the blob store.
const SweepInterval = time.Hour

// blobAreas are the key prefixes under which each run keeps its data.
var blobAreas = []string{"transcripts/", "outputs/", "snapshots/", "events/"}

// A fork of a session shares its source's blob data (transcript segments,
// snapshots) rather than copy it. Before it starts, keep/RUN/FORK/ marks
// each run whose data it shares: a run's data stays while a run that
// marked it is not done with its own, and a run's marks go with its data.

// KeepActivityName is the activity that marks the runs whose data a fork
// shares.
const KeepActivityName = "troupe.KeepBlobs"

// KeepInput asks to keep the data of Runs for as long as the run For
// needs it.
type KeepInput struct {
	For  string   `json:"for"`
	Runs []string `json:"runs"`
}

func keepKey(run, forRun string) string { return "keep/" + run + "/" + forRun + "/mark" }

// Keep marks the runs whose data in.For shares.
func (a *Activities) Keep(ctx context.Context, in KeepInput) error {
	for _, run := range in.Runs {
		if err := a.r.cfg.Store.Put(ctx, keepKey(run, in.For), []byte(in.For)); err != nil {
			return err
		}
	}
	return nil
}

// SweepBlobs deletes the blob data of the runs that are done with it and
// returns those runs. A run's data goes once the run has been closed for
// retention (DefaultBlobRetention when zero), or, for a run that c's
// namespace no longer holds (Temporal's own retention removed it), once
// none of its data has changed for retention. The data of a run still
// running, or whose state c cannot read, is never touched.
//
// A store shared by several namespaces or clusters would see the others'
// runs as unknown ones: give each namespace its own bucket or prefix.
func SweepBlobs(ctx context.Context, c client.Client, store *blob.Store, retention time.Duration) ([]string, error) {
	if retention <= 0 {
		retention = DefaultBlobRetention
	}
	var runs []string
	for _, area := range blobAreas {
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
		for _, area := range blobAreas {
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
		for _, area := range blobAreas {
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
		return false, fmt.Errorf("workflows: sweep the data of run %s: %w", run, err)
	}
	info := d.GetWorkflowExecutionInfo()
	if info.GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_RUNNING || info.GetCloseTime() == nil {
		return false, nil
	}
	return time.Since(info.GetCloseTime().AsTime()) >= retention, nil
}

// StartSweeping sweeps store (SweepBlobs) once now and then every interval
// (SweepInterval when zero), in the background, until the returned stop
// func is called; stop waits for a sweep under way. report, when set, gets
// each sweep's outcome.
func StartSweeping(ctx context.Context, c client.Client, store *blob.Store, retention, interval time.Duration, report func(swept []string, err error)) (stop func()) {
	if interval <= 0 {
		interval = SweepInterval
	}
	return every(ctx, interval, func(ctx context.Context) {
		swept, err := SweepBlobs(ctx, c, store, retention)
		if ctx.Err() == nil && report != nil {
			report(swept, err)
		}
	})
}

// every calls round once now and then every interval, in the background,
// until the returned stop func is called; stop waits for a round under
// way, whose ctx it cancels.
func every(ctx context.Context, interval time.Duration, round func(context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			round(ctx)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() {
		cancel()
		wg.Wait()
	}
}
