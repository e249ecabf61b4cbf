package client

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/runtime"
)

type (
	// Approval is a call that waits for a human's decision: which agent
	// (and agent workflow) called which tool with which arguments, since
	// when, and, when its policy has a timeout, when it times out. Its ID
	// is what a Decision names.
	Approval = runtime.ApprovalRequest
	// Decision decides a call that waits: approve or reject, a message
	// for the model, arguments that replace the model's, and whether to
	// remember it for the rest of the run or session
	// (runtime.RememberTool, runtime.RememberArguments).
	Decision = runtime.ApprovalDecision
)

// Approvals lists the calls that wait for a decision anywhere in the
// agent tree of the run or session id, oldest first.
func (c *Client) Approvals(ctx context.Context, id string) ([]Approval, error) {
	v, err := c.query(ctx, id, troupe.ApprovalsQuery)
	if err != nil {
		return nil, fmt.Errorf("approvals of %s: %w", id, err)
	}
	var as []Approval
	return as, v.Get(&as)
}

// Decide takes a decision on a call that waits in the agent tree of the
// run or session id; the root brings it to the agent workflow that waits.
// It returns every decision taken (the one given first, then those of
// other waiting calls that a remembered decision settled). A decision
// for no call that waits, or one that cannot be taken as given, fails
// with an error whose troupe.ErrorType is troupe.ErrBadDecision,
// and changes nothing.
func (c *Client) Decide(ctx context.Context, id string, d Decision) ([]Decision, error) {
	h, err := c.cfg.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: troupe.DecideUpdate,
		Args: []any{d}, WaitForStage: client.WorkflowUpdateStageCompleted})
	if err != nil {
		return nil, fmt.Errorf("decide %s of %s: %w", d.ID, id, err)
	}
	var out []Decision
	if err := h.Get(ctx, &out); err != nil {
		return nil, fmt.Errorf("decide %s of %s: %w", d.ID, id, err)
	}
	return out, nil
}

// Approvals lists the calls of the run's tree that wait for a decision.
func (r *Run) Approvals(ctx context.Context) ([]Approval, error) { return r.c.Approvals(ctx, r.id) }

// Decide takes a decision on a call of the run's tree.
func (r *Run) Decide(ctx context.Context, d Decision) ([]Decision, error) {
	return r.c.Decide(ctx, r.id, d)
}

// Approvals lists the calls of the running turn's tree that wait for a
// decision.
func (s *Session) Approvals(ctx context.Context) ([]Approval, error) { return s.c.Approvals(ctx, s.id) }

// Decide takes a decision on a call of the running turn's tree.
func (s *Session) Decide(ctx context.Context, d Decision) ([]Decision, error) {
	return s.c.Decide(ctx, s.id, d)
}
