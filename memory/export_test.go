package memory

import (
	"context"
	"time"
)

// SetMemoryHook makes c's memory writers call hook at each step
// (writers.go): "write-back: checked" (a write-back decided,
// before it claims), "phase 2: answered" (before phase 2 claims),
// "claimed <by>" (a claim won, before its files), "took over <by>" (a
// takeover of another writer's generation won, before its files),
// "wrote <path>" (a file of a generation written), "wait" (waiting for
// another writer's window to end),
// "fork: read <path>" (the fork copy read a file). The hook may hold the
// writer, or return an error, which ends the activity as a crash would
// (nothing is cleaned up).
func SetMemoryHook(c *Consolidation, hook func(ctx context.Context, step, scope string) error) {
	c.memoryHook = hook
}

// SetMemoryClock makes c's memory writers go by clock.
func SetMemoryClock(c *Consolidation, clock func() time.Time) { c.clock = clock }
