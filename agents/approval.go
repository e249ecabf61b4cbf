package agents

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Approval is an approval policy: which calls of one of an agent's tools
// wait for a human's decision before they run. It applies to every kind
// of tool the model calls: a function tool, an agent tool, a sandbox
// capability's tool (exec_command, apply_patch; see the capabilities
// package for predicates on a command or on the paths a patch touches)
// and an MCP tool (by the name the model sees, its server's prefix
// included; an MCPServer's RequireApproval is the other way to ask for
// those).
//
// A call that needs approval makes its agent's workflow wait, durably and
// at no cost, for as long as it takes: the run or session at the root of
// the agent tree lists the calls waiting (client.Client.Approvals) and
// takes the decisions (client.Client.Decide). A decision approves or
// rejects the call, may change its arguments, and may be remembered for
// the rest of the run or session.
//
// The zero Approval (Tool aside) has every call of the tool wait, with no
// timeout.
type Approval struct {
	// Tool names the tool, as the model sees it.
	Tool string
	// Never turns the policy off: no call waits. It lets a graph keep a
	// policy in place and switch it by configuration.
	Never bool
	// When, when set, decides for each call from its JSON arguments:
	// true makes the call wait. It runs in an activity. An error makes
	// the call wait (a policy that cannot decide asks a human).
	When func(ctx context.Context, args json.RawMessage) (bool, error)
	// Timeout, when positive, bounds the wait: a call still waiting
	// after it is decided by OnTimeout. Zero waits for ever.
	Timeout time.Duration
	// OnTimeout is the decision taken at the timeout: by default the call
	// is rejected and the model told that no one decided in time;
	// ApproveOnTimeout approves it.
	OnTimeout TimeoutDecision
}

// TimeoutDecision is what an approval that timed out decides.
type TimeoutDecision int

const (
	// RejectOnTimeout rejects the call (the default).
	RejectOnTimeout TimeoutDecision = iota
	// ApproveOnTimeout approves the call.
	ApproveOnTimeout
)

// Always is a policy under which every call of the tool waits for a
// decision.
func Always(tool string) Approval { return Approval{Tool: tool} }

// Never is a policy under which no call of the tool waits.
func Never(tool string) Approval { return Approval{Tool: tool, Never: true} }

// When is a policy under which the calls for which pred returns true
// wait for a decision.
func When(tool string, pred func(ctx context.Context, args json.RawMessage) (bool, error)) Approval {
	return Approval{Tool: tool, When: pred}
}

// ApprovalFor returns the agent's policy for the tool named tool, if any.
// With two policies for one tool, the first counts (graph validation
// refuses that).
func (a *Agent) ApprovalFor(tool string) (Approval, bool) {
	for _, p := range a.Approvals {
		if p.Tool == tool {
			return p, true
		}
	}
	return Approval{}, false
}

// NeedsApproval reports whether the call of tool with the JSON arguments
// args waits for a decision under the agent's policies. It runs the
// policy's When, so call it from an activity.
func (a *Agent) NeedsApproval(ctx context.Context, tool string, args json.RawMessage) (bool, error) {
	p, ok := a.ApprovalFor(tool)
	switch {
	case !ok || p.Never:
		return false, nil
	case p.When == nil:
		return true, nil
	}
	need, err := p.When(ctx, args)
	if err != nil {
		return true, fmt.Errorf("approval policy of %s: %w", tool, err)
	}
	return need, nil
}
