// Package heartbeat keeps a long call inside a Temporal activity
// heartbeating, so that the death of its worker (or host) shows within
// the activity's heartbeat timeout rather than at its start-to-close
// timeout. The model, sandbox, MCP and memory activities wrap their calls
// with While.
package heartbeat

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
)

// While runs fn, recording heartbeats while it runs when ctx is an
// activity's with a heartbeat timeout (every third of it, at least every
// 100 ms), and returns what fn returns. Outside an activity, or without a
// heartbeat timeout, it just calls fn.
func While[T any](ctx context.Context, fn func() (T, error)) (T, error) {
	return WhileAs(ctx, "", fn)
}

// WhileAs is While, each heartbeat carrying who (when set): the worker's
// identity, which a workflow reads from the timeout of an activity whose
// heartbeats stopped (temporal.TimeoutError.LastHeartbeatDetails) to know
// which worker died. The first heartbeat goes at once, so even a worker
// that dies at the start leaves its name.
func WhileAs[T any](ctx context.Context, who string, fn func() (T, error)) (T, error) {
	if !activity.IsActivity(ctx) || activity.GetInfo(ctx).HeartbeatTimeout == 0 {
		return fn()
	}
	beat := func() { activity.RecordHeartbeat(ctx) }
	if who != "" {
		beat = func() { activity.RecordHeartbeat(ctx, who) }
		beat()
	}
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := fn()
		done <- result{v, err}
	}()
	tick := time.NewTicker(max(activity.GetInfo(ctx).HeartbeatTimeout/3, 100*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case res := <-done:
			return res.v, res.err
		case <-tick.C:
			beat()
		}
	}
}
