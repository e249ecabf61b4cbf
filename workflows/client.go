package workflows

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
)

// StartRun starts a run's OrchestratorWorkflow on taskQueue (the default
// queue when empty) with a fresh workflow id, and returns its handle.
func StartRun(ctx context.Context, c client.Client, taskQueue string, in RunInput) (client.WorkflowRun, error) {
	if taskQueue == "" {
		taskQueue = DefaultTaskQueue
	}
	if err := checkPayload("the run input", len(in.Input)); err != nil {
		return nil, err
	}
	opts := client.StartWorkflowOptions{
		ID:        fmt.Sprintf("troupe-%s-%s", in.Graph, uuid.NewString()[:8]),
		TaskQueue: taskQueue,
	}
	run, err := c.ExecuteWorkflow(ctx, opts, OrchestratorWorkflowName, in)
	if err != nil {
		return nil, fmt.Errorf("workflows: start run of %s: %w", in.Graph, err)
	}
	return run, nil
}

// Run starts a run and waits for its result.
func Run(ctx context.Context, c client.Client, taskQueue string, in RunInput) (*RunResult, error) {
	run, err := StartRun(ctx, c, taskQueue, in)
	if err != nil {
		return nil, err
	}
	var res RunResult
	if err := run.Get(ctx, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Follow streams the events of a run and of every workflow it starts
// (agents, handoff targets, agents-as-tools), calling fn once per event, in
// the order each workflow recorded them and, across workflows, by time. It polls the events query until
// ctx is done; cancel ctx once the run's result is in, and Follow returns
// after a last poll.
func Follow(ctx context.Context, c client.Client, workflowID string, every time.Duration, fn func(Event)) error {
	if every <= 0 {
		every = 250 * time.Millisecond
	}
	type followed struct {
		id   string
		seen int
		done bool
	}
	all := []*followed{{id: workflowID}}
	known := map[string]bool{workflowID: true}
	poll := func(qctx context.Context) {
		var round []Event
		defer func() {
			// Within a round, show events of different workflows in time order.
			sort.SliceStable(round, func(i, j int) bool { return round[i].Time.Before(round[j].Time) })
			for _, e := range round {
				fn(e)
			}
		}()
		for i := 0; i < len(all); i++ {
			f := all[i]
			if f.done {
				continue
			}
			resp, err := c.QueryWorkflow(qctx, f.id, "", EventsQuery, f.seen)
			if err != nil {
				continue // not started yet, or gone: try again next round
			}
			var evs []Event
			if err := resp.Get(&evs); err != nil {
				continue
			}
			for _, e := range evs {
				f.seen = e.Seq
				round = append(round, e)
				if e.Child != "" && !known[e.Child] {
					known[e.Child] = true
					all = append(all, &followed{id: e.Child})
				}
				switch e.Kind {
				case EventFinal, EventFailed, EventHandoff:
					if e.WorkflowID != workflowID {
						f.done = true
					}
				}
			}
		}
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			qctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			poll(qctx)
			cancel()
			return nil
		case <-t.C:
			poll(ctx)
		}
	}
}

// KeepOpen returns a keep-policy for sandbox orphan reaping: a sandbox is
// kept while the workflow named by its troupe.workflow label is open, when
// that cannot be told (the server does not answer), and when it has no
// such label (no workflow of ours made it). A sandbox whose workflow is
// closed or unknown to the server is an orphan.
func KeepOpen(ctx context.Context, c client.Client) func(labels map[string]string) bool {
	return func(labels map[string]string) bool {
		id := labels["troupe.workflow"]
		if id == "" {
			return true
		}
		d, err := c.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			var nf *serviceerror.NotFound
			return !errors.As(err, &nf)
		}
		return d.GetWorkflowExecutionInfo().GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_RUNNING
	}
}
