package approval

import (
	"context"
	"encoding/json"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"

	"github.com/troupe-dev/troupe/agents"
)

// Activities run the approval policies of the graphs a worker serves
// that decide per call (agents.Approval.When).
type Activities struct {
	// Agent resolves a run's agent in the graph the worker serves now
	// (troupe.ErrGraphChanged when it is no longer there).
	Agent func(graph, name string) (*agents.Graph, *agents.Agent, error)
}

// Register registers the activities on w.
func (a *Activities) Register(w worker.ActivityRegistry) {
	w.RegisterActivityWithOptions(a.ApprovalCheck, activity.RegisterOptions{Name: ApprovalCheckActivityName})
}

// ApprovalCheckActivityName runs the approval policies that decide per
// call.
const ApprovalCheckActivityName = "troupe.ApprovalCheck"

// ApprovalCheckInput asks which calls of an agent wait under its policies.
type ApprovalCheckInput struct {
	Graph string        `json:"graph"`
	Agent string        `json:"agent"`
	Calls []agents.Item `json:"calls"`
}

// ApprovalCheck runs the agent's approval policies on each call: true
// for a call that waits. A policy that fails makes its call wait, and so
// does one the worker no longer has: the run pinned a policy that decides
// per call for each call asked about, and a redeployed graph that lost it
// must not let the call run unasked.
func (a *Activities) ApprovalCheck(ctx context.Context, in ApprovalCheckInput) ([]bool, error) {
	_, agent, err := a.Agent(in.Graph, in.Agent)
	if err != nil {
		return nil, err
	}
	need := make([]bool, len(in.Calls))
	for i, c := range in.Calls {
		if p, ok := agent.ApprovalFor(c.Name); !ok || p.Never {
			need[i] = true
			continue
		}
		args := c.Arguments
		if args == "" {
			args = "{}"
		}
		need[i], _ = agent.NeedsApproval(ctx, c.Name, json.RawMessage(args))
	}
	return need, nil
}
