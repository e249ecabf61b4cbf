package client

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/converter"
)

// queryPatience bounds how long a query is asked again after the server
// answered with a cancellation the caller did not ask for.
const queryPatience = 15 * time.Second

// query asks the workflow's latest run a query, and asks again, for up to
// queryPatience, when the server reports a cancellation that the caller's
// context did not cause. That happens right after a worker dies:
// the server can hand the query to the dead worker's poll, which it has not
// yet noticed is gone, and returns that poll's "context canceled" to the
// caller. A worker that is alive answers the next ask.
func (c *Client) query(ctx context.Context, id, name string, args ...any) (converter.EncodedValue, error) {
	deadline := time.Now().Add(queryPatience)
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		v, err := c.cfg.Temporal.QueryWorkflow(ctx, id, "", name, args...)
		if err == nil || !workerLost(ctx, err) || time.Now().Add(wait).After(deadline) {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(wait):
		}
	}
}

// workerLost reports whether err is a cancellation of the server's rather
// than the caller's own. A timeout is not retried: it means no worker
// answered at all, and asking again would only double the wait.
func workerLost(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var canceled *serviceerror.Canceled
	return errors.As(err, &canceled) || errors.Is(err, context.Canceled)
}
