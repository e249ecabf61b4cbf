// Package blobwait bounds how long an activity retries a blob that is not
// in the store.
//
// Blobs (transcripts, outputs, snapshots, registry pages) are written by
// one worker and read by others. A read that finds none may be early (a
// store whose listing lags a write), so it is retried like any failure;
// but a blob that stays missing is not a passing fault (the workers of a
// queue keep their blobs in different stores, or the blob was deleted),
// and an activity with the default retry policy would retry it for ever,
// stalling its run with nothing said. Interceptor, a worker interceptor,
// lets an activity (regular or local) that fails on a missing blob
// (blob.ErrNotFound) be retried for its first Attempts attempts, then
// fails it for good as troupe.BlobMissing, saying what to check.
package blobwait

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/runtime/blob"
)

// DefaultAttempts is how many attempts an activity gets at a missing blob
// unless Interceptor.Attempts says otherwise: with the default retry
// policy (1 s, doubling), about 15 s of waiting.
const DefaultAttempts = 5

// Interceptor is a worker interceptor (worker.Options.Interceptors) that
// fails an activity for good, as troupe.BlobMissing, once it has failed
// Attempts times on a missing blob. Its zero value uses DefaultAttempts.
type Interceptor struct {
	interceptor.WorkerInterceptorBase
	// Attempts is how many attempts an activity gets at a missing blob
	// (DefaultAttempts when 0).
	Attempts int32
}

// InterceptActivity implements interceptor.WorkerInterceptor.
func (i *Interceptor) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	a := &inbound{attempts: i.Attempts}
	if a.attempts <= 0 {
		a.attempts = DefaultAttempts
	}
	a.Next = next
	return a
}

type inbound struct {
	interceptor.ActivityInboundInterceptorBase
	attempts int32
}

func (a *inbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	res, err := a.Next.ExecuteActivity(ctx, in)
	if err == nil || !errors.Is(err, blob.ErrNotFound) {
		return res, err
	}
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) && ae.NonRetryable() {
		return res, err // The activity decided already.
	}
	info := activity.GetInfo(ctx)
	if info.Attempt < a.attempts {
		return res, err
	}
	return res, temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s: %v, still after %d attempts: the blob store of the worker "+
		"that ran it does not hold it (do all the workers of the task queue use one store: the same TROUPE_BLOB_URL, or the same TROUPE_HOME?)",
		info.ActivityType.Name, err, info.Attempt), troupe.ErrBlobMissing, err)
}
