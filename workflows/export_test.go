package workflows

import (
	"context"
	"time"
)

// SetMemoryHook makes r's memory writers call hook at each step
// (memory_generations.go): "write-back: checked" (a write-back decided,
// before it claims), "phase 2: answered" (before phase 2 claims),
// "claimed <by>" (a claim won, before its files), "took over <by>" (a
// takeover of another writer's generation won, before its files),
// "wrote <path>" (a file of a generation written), "wait" (waiting for
// another writer's window to end),
// "fork: read <path>" (the fork copy read a file). The hook may hold the
// writer, or return an error, which ends the activity as a crash would
// (nothing is cleaned up).
func SetMemoryHook(r *Runner, hook func(ctx context.Context, step, scope string) error) {
	r.acts.memoryHook = hook
}

// SetMemoryClock makes r's memory writers go by clock.
func SetMemoryClock(r *Runner, clock func() time.Time) { r.acts.clock = clock }
