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
// for a call that waits. A policy that fails makes its call wait.
func (a *Activities) ApprovalCheck(ctx context.Context, in ApprovalCheckInput) ([]bool, error) {
	_, agent, err := a.Agent(in.Graph, in.Agent)
	if err != nil {
		return nil, err
	}
	need := make([]bool, len(in.Calls))
	for i, c := range in.Calls {
		args := c.Arguments
		if args == "" {
			args = "{}"
		}
		need[i], _ = agent.NeedsApproval(ctx, c.Name, json.RawMessage(args))
	}
	return need, nil
}
