package agents

import (
	"context"
	"strings"
)

// HandoffInput is the conversation a handoff passes to its target agent.
type HandoffInput struct {
	// History is the transcript up to and including the handoff's tool
	// call and its output.
	History []Item
}

// InputFilter rewrites what a handoff passes on. It runs in an activity.
// The handoff package holds ready filters.
type InputFilter func(ctx context.Context, in HandoffInput) (HandoffInput, error)

// Handoff lets an agent transfer the conversation to another agent of the
// graph, through a transfer_to_<agent> tool.
type Handoff struct {
	// Target is the graph name of the agent that takes over.
	Target string
	// ToolName overrides the default tool name transfer_to_<target>.
	ToolName string
	// Description overrides the default tool description, which is built
	// from the target's HandoffDescription.
	Description string
	// InputFilter, when set, rewrites the history the target receives.
	InputFilter InputFilter
	// OnHandoff, when set, runs (in an activity) when the handoff happens;
	// an error from it fails the run.
	OnHandoff func(ctx context.Context, rc RunContext) error
}

// HandoffTo returns a Handoff to target with default name and description.
func HandoffTo(target string) Handoff { return Handoff{Target: target} }

// Name is the handoff's tool name.
func (h Handoff) Name() string {
	if h.ToolName != "" {
		return h.ToolName
	}
	return "transfer_to_" + strings.ToLower(h.Target)
}

// handoffParams is the empty arguments object of handoff tools.
var handoffParams = []byte(`{"additionalProperties":false,"properties":{},"required":[],"type":"object"}`)

func (h Handoff) spec(target *Agent) ToolSpec {
	desc := h.Description
	if desc == "" {
		desc = "Handoff to the " + h.Target + " agent to handle the request."
		if target != nil && target.HandoffDescription != "" {
			desc += " " + target.HandoffDescription
		}
	}
	return ToolSpec{Name: h.Name(), Description: desc, Parameters: handoffParams, Strict: true}
}

// RunContext describes the run a Go func of an agent is called in. It is
// plain data, carried through Temporal, so funcs in activities see the same
// values on every attempt.
type RunContext struct {
	// WorkflowID is the id of the agent's workflow.
	WorkflowID string `json:"workflow_id"`
	// RunID is the id of the whole run (the orchestrator's workflow id).
	RunID string `json:"run_id"`
	// Agent is the agent running.
	Agent string `json:"agent"`
	// Turn is the current model turn of the agent, from 1.
	Turn int `json:"turn"`
	// Vars are the caller's run variables.
	Vars map[string]string `json:"vars,omitempty"`
	// MemoryScope is the memory scope the agent reads and updates, fixed
	// when the run or session started (a fork's own, see
	// memory.ForkScope); empty means the agent's MemoryConfig.Scope.
	MemoryScope string `json:"memory_scope,omitempty"`
	// Execution tells apart two executions of one workflow id (a run id
	// reused once the first run's history is gone): Temporal's first run
	// id of the agent's workflow, which its continue-as-new keeps. Empty
	// in runs recorded before it was set.
	Execution string `json:"execution,omitempty"`
	// CallID is the call id of the tool call a func runs for (empty
	// outside a tool call). With the rest it makes the call's
	// IdempotencyKey.
	CallID string `json:"call_id,omitempty"`
}

type runContextKey struct{}

// WithRunContext returns ctx carrying rc.
func WithRunContext(ctx context.Context, rc RunContext) context.Context {
	return context.WithValue(ctx, runContextKey{}, rc)
}

// RunContextFrom returns the RunContext of a tool call's ctx.
func RunContextFrom(ctx context.Context) (RunContext, bool) {
	rc, ok := ctx.Value(runContextKey{}).(RunContext)
	return rc, ok
}
