// Package periodic runs a worker's chores in the background on a
// schedule: the reaping of orphan sandboxes (workflows/lease) and the
// sweeping of the blob store (workflows/retention).
package periodic

import (
	"context"
	"sync"
	"time"
)

// Every calls round once now and then every interval, in the background,
// until the returned stop func is called; stop waits for a round under
// way, whose ctx it cancels.
func Every(ctx context.Context, interval time.Duration, round func(context.Context)) (stop func()) {
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
