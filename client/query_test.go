package client

import (
	"context"
	"errors"
	"testing"

	"go.temporal.io/api/serviceerror"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
)

// flaky answers queries with the errors it holds, in order, then with
// "ok". It stands in for the server only to order the errors; the e2e
// TestSessionSurvivesWorkerKill meets the real one.
type flaky struct {
	sdkclient.Client
	errs  []error
	asked int
}

func (f *flaky) QueryWorkflow(ctx context.Context, id, runID, name string, args ...any) (converter.EncodedValue, error) {
	f.asked++
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		return nil, err
	}
	p, err := converter.GetDefaultDataConverter().ToPayloads("ok")
	if err != nil {
		return nil, err
	}
	return sdkclient.NewValue(p), nil
}

func TestQueryAsksAgainOnlyAfterTheServersCancellation(t *testing.T) {
	canceledCtx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name      string
		ctx       context.Context
		errs      []error
		wantAsked int
		wantErr   bool
	}{
		{"answered", context.Background(), nil, 1, false},
		{"a dead worker's poll took it", context.Background(), []error{serviceerror.NewCanceled("context canceled"), serviceerror.NewCanceled("context canceled")}, 3, false},
		{"the caller's own cancellation", canceledCtx, []error{context.Canceled}, 1, true},
		{"no such workflow", context.Background(), []error{serviceerror.NewNotFound("no workflow")}, 1, true},
		{"no worker answered in time", context.Background(), []error{serviceerror.NewDeadlineExceeded("deadline")}, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &flaky{errs: tc.errs}
			c := &Client{cfg: Config{Temporal: f}}
			v, err := c.query(tc.ctx, "wf", "q")
			if f.asked != tc.wantAsked {
				t.Errorf("asked %d times, want %d", f.asked, tc.wantAsked)
			}
			if tc.wantErr {
				if err == nil || !errors.Is(err, tc.errs[0]) {
					t.Fatalf("err %v, want the first error %v", err, tc.errs[0])
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got string
			if err := v.Get(&got); err != nil || got != "ok" {
				t.Errorf("answer %q, %v", got, err)
			}
		})
	}
}
