package gate

// Checks that ride with the model call: a gate whose first check of a
// turn's calls is a local activity of its own (an approval policy that
// decides per call, tool guardrail funcs that check a call before it
// runs) may have the model activity run it instead, on the calls the model
// answers with, right after the call. The turn then takes no activity of
// its own for them: what they found waits in Turn.Prechecked, and the gate
// takes it from there rather than start its activity. A verdict that does
// not fit what the gate would ask (another call, other arguments, other
// guardrails) is not taken: the gate asks its activity, as without.

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"

	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe/runtime"
)

// versionPrechecks marks runs whose model calls carry the checks of their
// gates (Precheck). The marker is written only for an agent that has such
// a check, at its first model call; runs recorded before start each
// check's activity as they did.
const versionPrechecks = "troupe.prechecks"

// Prechecker is a gate whose first check of a turn's calls the model
// activity can run: Precheck adds what it checks to p.
type Prechecker interface {
	Gate
	Precheck(t *Turn, p *Precheck)
}

// Precheck is what the model activity checks of the calls the model
// answers with, right after the call.
type Precheck struct {
	// Approvals names the tools whose approval policy decides per call
	// (runtime.ApprovalSpec.When): the activity asks the policy of each
	// of their calls.
	Approvals []string `json:"approvals,omitempty"`
	// Guardrails are the tool guardrail funcs that check a call before it
	// runs, in the agent's order (runtime.AgentSpec.ToolGuardrails): the
	// activity runs, on each call, those of its tool, until one decides.
	Guardrails []PrecheckGuardrail `json:"guardrails,omitempty"`
}

// PrecheckGuardrail is a tool guardrail func of a Precheck: Name checks the
// calls of Tool ("" for every tool).
type PrecheckGuardrail struct {
	Name string `json:"name"`
	Tool string `json:"tool,omitempty"`
}

// GuardrailsOf names p's guardrails that check the calls of tool, in
// order.
func (p *Precheck) GuardrailsOf(tool string) []string {
	var names []string
	for _, g := range p.Guardrails {
		if g.Tool == "" || g.Tool == tool {
			names = append(names, g.Name)
		}
	}
	return names
}

// Prechecked is what the model activity's checks found, a call at a time,
// in the model's order.
type Prechecked struct {
	Calls []CheckedCall `json:"calls,omitempty"`
}

// CheckedCall is what the checks found of one call, on its arguments as
// the model gave them, which it names by their SHA-256 (ArgumentsHash):
// the model call's result, which holds it, holds the arguments once.
type CheckedCall struct {
	CallID string `json:"call_id"`
	// ArgumentsHash is the hex SHA-256 of the arguments checked
	// (HashArguments).
	ArgumentsHash string `json:"arguments_sha256"`
	// Approval, when its policy was asked, says whether the call waits
	// for a decision.
	Approval *bool `json:"approval,omitempty"`
	// Guardrails are the guardrail funcs run on it, when they were, and
	// Outcomes what they did beyond passing.
	Guardrails []string                   `json:"guardrails,omitempty"`
	Outcomes   []runtime.GuardrailOutcome `json:"outcomes,omitempty"`
}

// Call is what the checks found of call id with arguments args, or nil
// when they did not check that call (or checked other arguments).
func (p *Prechecked) Call(id, args string) *CheckedCall {
	if p == nil {
		return nil
	}
	i := slices.IndexFunc(p.Calls, func(c CheckedCall) bool { return c.CallID == id })
	if i < 0 {
		return nil
	}
	if p.Calls[i].ArgumentsHash != HashArguments(args) {
		return nil
	}
	return &p.Calls[i]
}

// HashArguments is the hex SHA-256 of a call's arguments, as a CheckedCall
// names them.
func HashArguments(args string) string {
	sum := sha256.Sum256([]byte(args))
	return hex.EncodeToString(sum[:])
}

// Precheck is what the model call of the turn should check for the gates
// (nil for nothing): each Prechecker adds its checks, in runs recorded
// with the marker.
func (c *Chain) Precheck(ctx workflow.Context) *Precheck {
	if c == nil {
		return nil
	}
	var p Precheck
	for _, g := range c.prechecks {
		if err := guard(g, func() error { g.Precheck(c.turn, &p); return nil }); err != nil {
			return nil // The gate checks in its activity, and fails there as it would.
		}
	}
	if len(p.Approvals) == 0 && len(p.Guardrails) == 0 {
		return nil
	}
	if workflow.GetVersion(ctx, versionPrechecks, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return nil
	}
	return &p
}
