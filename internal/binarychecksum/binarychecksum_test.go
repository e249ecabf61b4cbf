package binarychecksum_test

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe/internal/binarychecksum"
)

// A workflow of the test environment that schedules an activity sees the
// checksum set up front: the SDK had nothing to hash in workflow code.
func TestChecksumSetBeforeWorkflows(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterActivityWithOptions(func(context.Context) error { return nil }, activity.RegisterOptions{Name: "noop"})
	var got string
	env.ExecuteWorkflow(func(ctx workflow.Context) error {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
		if err := workflow.ExecuteActivity(ctx, "noop").Get(ctx, nil); err != nil {
			return err
		}
		got = workflow.GetInfo(ctx).GetBinaryChecksum()
		return nil
	})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if got != binarychecksum.Checksum {
		t.Errorf("binary checksum %q, want %q", got, binarychecksum.Checksum)
	}
}
