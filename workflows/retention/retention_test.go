package retention_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/workflows/retention"
)

// runs is a Temporal client that knows the runs of its map (absent ones
// are not found, as after Temporal's own retention) and fails to describe
// "unreadable".
type runs struct {
	client.Client
	status map[string]enums.WorkflowExecutionStatus
	closed time.Time
}

func (r runs) DescribeWorkflowExecution(_ context.Context, id, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	if id == "unreadable" {
		return nil, errors.New("server unavailable")
	}
	st, ok := r.status[id]
	if !ok {
		return nil, serviceerror.NewNotFound("workflow not found")
	}
	info := &workflowpb.WorkflowExecutionInfo{Status: st}
	if st != enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
		info.CloseTime = timestamppb.New(r.closed)
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: info}, nil
}

// TestSweep: a sweep deletes the data of the runs done with it (closed for
// the retention, or unknown to the namespace with data older than it),
// with their marks, and keeps the data of a running run, of a run whose
// state cannot be read, and of a run a running fork shares (Keep).
func TestSweep(t *testing.T) {
	ctx := context.Background()
	store, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	c := runs{status: map[string]enums.WorkflowExecutionStatus{
		"closed":  enums.WORKFLOW_EXECUTION_STATUS_COMPLETED,
		"running": enums.WORKFLOW_EXECUTION_STATUS_RUNNING,
	}, closed: time.Now().Add(-time.Hour)}
	for _, k := range []string{"transcripts/closed/0-a/000001.json", "events/closed/0-a/000000001.json", "snapshots/running/s.tar.zst",
		"outputs/gone/0-a/1-call", "outputs/shared/0-a/1-call", "outputs/gone2/0-a/1-call", "outputs/unreadable/0-a/1-call",
		// Big messages and inputs go with their run's data.
		"inputs/closed/9f86d0", "inputs/gone/9f86d0", "inputs/shared/9f86d0"} {
		if err := store.Put(ctx, k, []byte("data")); err != nil {
			t.Fatal(err)
		}
	}
	acts := &retention.Activities{Store: store}
	// A running fork shares the data of shared; a closed one, of gone2.
	if err := acts.Keep(ctx, retention.KeepInput{For: "running", Runs: []string{"shared"}}); err != nil {
		t.Fatal(err)
	}
	if err := acts.Keep(ctx, retention.KeepInput{For: "closed", Runs: []string{"gone2"}}); err != nil {
		t.Fatal(err)
	}
	has := func(run string) bool {
		for _, area := range []string{"transcripts/", "outputs/", "snapshots/", "events/", "inputs/"} {
			if _, ok, err := store.Newest(ctx, area+run+"/"); err != nil {
				t.Fatal(err)
			} else if ok {
				return true
			}
		}
		return false
	}

	// A retention longer than their age keeps everything.
	swept, err := retention.Sweep(ctx, c, store, 2*time.Hour)
	if len(swept) != 0 || err == nil || !strings.Contains(err.Error(), "unreadable") {
		t.Fatalf("sweep with 2h retention: %v, %v; want nothing deleted, the unreadable run's error", swept, err)
	}
	time.Sleep(10 * time.Millisecond)
	swept, err = retention.Sweep(ctx, c, store, 5*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "unreadable") {
		t.Errorf("sweep: %v, want the unreadable run's error", err)
	}
	if want := []string{"closed", "gone", "gone2"}; !slices.Equal(swept, want) {
		t.Errorf("swept %v, want %v", swept, want)
	}
	for _, run := range []string{"closed", "gone", "gone2"} {
		if has(run) {
			t.Errorf("the data of %s, swept, is still in the store", run)
		}
	}
	for _, run := range []string{"running", "shared", "unreadable"} {
		if !has(run) {
			t.Errorf("the data of %s was deleted", run)
		}
	}
	if marks, err := store.Dirs(ctx, "keep/"); err != nil || strings.Join(marks, ",") != "shared" {
		t.Errorf("keep marks left: %v, %v; want the running fork's only", marks, err)
	}
}

// StartSweeping sweeps at once, then every interval, until stopped.
func TestStartSweeping(t *testing.T) {
	ctx := context.Background()
	store, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Put(ctx, "outputs/gone/0-a/1-call", []byte("data")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	reports := make(chan []string, 100)
	stop := retention.StartSweeping(ctx, runs{}, store, time.Millisecond, 10*time.Millisecond, func(swept []string, err error) {
		if err != nil {
			t.Error(err)
		}
		reports <- swept
	})
	first, second := <-reports, <-reports
	stop()
	if !slices.Equal(first, []string{"gone"}) || len(second) != 0 {
		t.Errorf("sweeps %v then %v, want gone then nothing", first, second)
	}
}

// TestRemove: a removed run's data goes at once, whatever its age, with
// its own marks on the data it shares; the data a running fork still
// shares stays, and the fork is named.
func TestRemove(t *testing.T) {
	ctx := context.Background()
	c := runs{status: map[string]enums.WorkflowExecutionStatus{
		"removed": enums.WORKFLOW_EXECUTION_STATUS_TERMINATED, "source": enums.WORKFLOW_EXECUTION_STATUS_TERMINATED,
		"fork": enums.WORKFLOW_EXECUTION_STATUS_RUNNING,
	}, closed: time.Now()}
	for _, tc := range []struct {
		name, run string
		deleted   int
		keptFor   []string
		left      []string // keys left in the store
	}{
		// removed is itself a fork of source: its mark on source goes.
		{"unshared", "removed", 3, nil, []string{"outputs/source/0-a/1-call", "keep/source/fork/mark"}},
		{"shared with a running fork", "source", 0, []string{"fork"}, []string{"outputs/source/0-a/1-call", "keep/source/fork/mark"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, err := blob.Open(ctx, "mem://")
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"transcripts/removed/0-a/000001.json", "outputs/removed/t1/0-a/1-call", "outputs/source/0-a/1-call"} {
				if err := store.Put(ctx, k, []byte("data")); err != nil {
					t.Fatal(err)
				}
			}
			acts := &retention.Activities{Store: store}
			if err := acts.Keep(ctx, retention.KeepInput{For: "removed", Runs: []string{"source"}}); err != nil {
				t.Fatal(err)
			}
			if err := acts.Keep(ctx, retention.KeepInput{For: "fork", Runs: []string{"source"}}); err != nil {
				t.Fatal(err)
			}
			if tc.run == "source" {
				// The removed fork's own data and mark are another test's.
				for _, p := range []string{"transcripts/removed/", "outputs/removed/", "keep/source/removed/"} {
					if _, err := store.DeletePrefix(ctx, p); err != nil {
						t.Fatal(err)
					}
				}
			}
			deleted, keptFor, err := retention.Remove(ctx, c, store, tc.run)
			if err != nil || deleted != tc.deleted || !slices.Equal(keptFor, tc.keptFor) {
				t.Errorf("remove %s: deleted %d, kept for %v, %v; want %d, %v", tc.run, deleted, keptFor, err, tc.deleted, tc.keptFor)
			}
			left, _, err := store.List(ctx, "", 0)
			if err != nil || !slices.Equal(left, slices.Sorted(slices.Values(tc.left))) {
				t.Errorf("left in the store: %v, %v; want %v", left, err, tc.left)
			}
		})
	}
}
