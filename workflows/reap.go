package workflows

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// ReapInterval is how often a worker's StartReaping looks for orphan
// sandboxes after the first look at start.
const ReapInterval = 5 * time.Minute

// ReapOrphans removes, from every client that is a sandbox.Reaper, the
// sandboxes keep answers false for, and returns what each backend removed.
// The errors of all backends are joined; one backend's failure does not
// stop the others.
func ReapOrphans(ctx context.Context, clients map[string]sandbox.Client, keep func(labels map[string]string) bool) (map[string][]string, error) {
	backends := make([]string, 0, len(clients))
	for b := range clients {
		backends = append(backends, b)
	}
	sort.Strings(backends)
	removed := map[string][]string{}
	var errs []error
	for _, b := range backends {
		r, ok := clients[b].(sandbox.Reaper)
		if !ok {
			continue
		}
		ids, err := r.Reap(ctx, keep)
		if len(ids) > 0 {
			removed[b] = ids
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", b, err))
		}
	}
	return removed, errors.Join(errs...)
}

// StartReaping reaps the orphan sandboxes of namespace's workflows on c's
// cluster (KeepOpen: those whose workflow has closed) from clients, once
// now and then every interval (ReapInterval when zero), in the
// background, until the returned stop func is called; stop waits for a
// round under way. report, when set, gets each round's outcome.
//
// Together with Create replacing a dead attempt's leftovers, this bounds
// what a killed worker leaves: a sandbox outlives its workflow by at most
// interval, while a worker with the same sandbox roots (or Docker Engine)
// runs on its host.
func StartReaping(ctx context.Context, c client.Client, namespace string, clients map[string]sandbox.Client, interval time.Duration, report func(removed map[string][]string, err error)) (stop func()) {
	if interval <= 0 {
		interval = ReapInterval
	}
	return every(ctx, interval, func(ctx context.Context) {
		// The policy is made afresh each round, so a cluster id the
		// server did not give at first is asked for again.
		removed, err := ReapOrphans(ctx, clients, KeepOpen(ctx, c, namespace))
		if ctx.Err() == nil && report != nil {
			report(removed, err)
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
