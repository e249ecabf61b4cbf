package blobwait_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	_ "github.com/troupe-dev/troupe/internal/binarychecksum" // no executable hashed in workflow code
	"github.com/troupe-dev/troupe/internal/blobwait"
	"github.com/troupe-dev/troupe/runtime/blob"
)

// An activity that keeps failing on a missing blob fails for good, typed,
// after the interceptor's attempts, where the retry policy alone would
// retry it (here up to 50 times; by default for ever); other failures,
// and a blob found on a retry, are the retry policy's as before.
func TestMissingBlobFailsAfterItsAttempts(t *testing.T) {
	store, err := blob.Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		key      string
		appear   int32 // the attempt at which the blob is written; 0 never
		other    bool  // fail with another error instead
		wantType string
		want     int32 // attempts made
	}{
		{name: "stays missing", key: "gone", wantType: troupe.ErrBlobMissing, want: blobwait.DefaultAttempts},
		{name: "found on a retry", key: "late", appear: 3, want: 3},
		{name: "another failure", key: "x", other: true, wantType: "boom", want: 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var attempts int32
			read := func(ctx context.Context) (string, error) {
				attempts++
				if tt.other {
					return "", temporal.NewApplicationError("boom", "boom")
				}
				if attempts == tt.appear {
					_ = store.Put(ctx, tt.key, []byte("here"))
				}
				b, err := store.Get(ctx, tt.key)
				if err != nil {
					return "", fmt.Errorf("read %s: %w", tt.key, err)
				}
				return string(b), nil
			}
			wf := func(ctx workflow.Context) (string, error) {
				ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
					RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 50}})
				var s string
				err := workflow.ExecuteActivity(ctx, "read").Get(ctx, &s)
				return s, err
			}
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestWorkflowEnvironment()
			env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{&blobwait.Interceptor{}}})
			env.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: "wf"})
			env.RegisterActivityWithOptions(read, activity.RegisterOptions{Name: "read"})
			env.ExecuteWorkflow("wf")
			err := env.GetWorkflowError()
			if attempts != tt.want {
				t.Errorf("%d attempts, want %d", attempts, tt.want)
			}
			if tt.wantType == "" {
				if err != nil {
					t.Errorf("workflow failed: %v", err)
				}
				return
			}
			var ae *temporal.ApplicationError
			if !errors.As(err, &ae) || ae.Type() != tt.wantType {
				t.Fatalf("workflow error %v, want type %s", err, tt.wantType)
			}
			if tt.wantType == troupe.ErrBlobMissing && (!strings.Contains(err.Error(), "TROUPE_BLOB_URL") || !strings.Contains(err.Error(), "blob: not found: gone")) {
				t.Errorf("error %v: want it to name the blob and say what to check", err)
			}
		})
	}
}
