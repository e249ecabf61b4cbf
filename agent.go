package troupe

import (
	"encoding/json"
	"errors"
	"strings"

	"go.temporal.io/sdk/temporal"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/model"
)

// AgentFailure is what a failed agent's error carries to its caller: the
// lease of the sandbox it gave back to its session, and what the agent
// and the agents it ran as tools used of the model (a failed agent's
// usage still counts).
type AgentFailure struct {
	Lease  *runtime.SandboxLease `json:"troupe_lease_back,omitempty"`
	Usage  runtime.Usages        `json:"troupe_usage,omitempty"`
	Budget *BudgetLoan           `json:"troupe_budget_back,omitempty"`
}

// WithFailure is err carrying lease, usage and the root's budget ledger
// (loan) to the caller, its type and text as err's: an application error
// whose details hold them and whose cause is err. A cancellation carries
// the ledger alone, as its details. An error with nothing to carry stays
// as it is.
func WithFailure(err error, lease *runtime.SandboxLease, usage runtime.Usages, loan *BudgetLoan) error {
	if err != nil && temporal.IsCanceledError(err) && loan != nil {
		return temporal.NewCanceledError(AgentFailure{Budget: loan})
	}
	if err == nil || temporal.IsCanceledError(err) || lease == nil && len(usage) == 0 && loan == nil {
		return err
	}
	typ, text := ErrorType(err), FailureText(err)
	text = strings.TrimPrefix(text, typ+": ")
	return temporal.NewApplicationErrorWithOptions(text, typ, temporal.ApplicationErrorOptions{
		NonRetryable: true, Cause: err, Details: []any{AgentFailure{Lease: lease, Usage: usage, Budget: loan}}})
}

// FailureOf is what a failed or cancelled agent's error carries back.
func FailureOf(err error) AgentFailure {
	var ae *temporal.ApplicationError
	var ce *temporal.CanceledError
	var d AgentFailure
	switch {
	case errors.As(err, &ae) && ae.HasDetails():
		_ = ae.Details(&d)
	case errors.As(err, &ce) && ce.HasDetails():
		_ = ce.Details(&d)
	}
	return d
}

// AgentInput starts one agent's child workflow.
type AgentInput struct {
	Graph string `json:"graph"`
	Agent string `json:"agent"`
	// RunID is the orchestrator's workflow id.
	RunID string            `json:"run_id"`
	Vars  map[string]string `json:"vars,omitempty"`
	// Transcript is the conversation so far, in the blob store.
	Transcript runtime.TranscriptRef `json:"transcript"`
	// Pending are items to append before the first model call.
	Pending []agents.Item `json:"pending,omitempty"`
	// Depth counts the agent-tool calls above this agent.
	Depth int `json:"depth,omitempty"`
	// Spec is the run's graph as it was when the run started, which the
	// agent's workflow code branches on; nil for runs started before runs
	// kept their graph, which use the graph as served.
	Spec *runtime.GraphSpec `json:"spec,omitempty"`
	// Session is set for an agent that answers a session's turn: the
	// session owns the agent's sandbox across turns.
	Session *SessionLink `json:"session,omitempty"`
	// CheckInput is set for the first agent of a chain (a run's, a
	// session turn's, an agent tool's) that has input guardrails: they
	// check the last user message of Pending.
	CheckInput bool `json:"check_input,omitempty"`
	// Budget, in a run with a budget, is the root's budget ledger lent to
	// the agent, the one agent of the tree at work: it decides its own
	// model calls with it, and gives it back.
	Budget *BudgetLoan `json:"budget,omitempty"`
	// Backend, when set, is the sandbox backend the agent's own sandbox
	// is provisioned on, over the agent's: its session switched backend
	// (agents-as-tools and guardrail agents started under a session's
	// turn, at any depth, carry it).
	Backend string `json:"backend,omitempty"`
}

// SandboxBackend is the backend the agents that in's agent starts
// provision their sandboxes on, over their own ("": their own): its
// session's, as switched.
func (in AgentInput) SandboxBackend() string {
	if in.Session != nil && in.Session.Backend != "" {
		return in.Session.Backend
	}
	return in.Backend
}

// SessionLink is what an agent of a session's turn gets from its session:
// the session's workflow id, which owns the agent's sandbox (its label,
// so no reaper takes it between turns), and the sandbox's lease. The
// agent gives the lease back in its result rather than stop the sandbox;
// an agent that fails or is cancelled stops it, and the session restores
// the workspace from the last snapshot it knows.
type SessionLink struct {
	ID    string                `json:"id"`
	Lease *runtime.SandboxLease `json:"lease,omitempty"`
	// Backend, when set, is the backend the sandbox is provisioned on,
	// over the agent's own (the session switched backend).
	Backend string `json:"backend,omitempty"`
}

// AgentResult is how an agent's child workflow ends: with a final output,
// or with a handoff request for the caller to route.
type AgentResult struct {
	Agent string `json:"agent"`
	// Output is set when the agent gave its final output.
	Output json.RawMessage `json:"output,omitempty"`
	// Handoff is the handoff call taken, when the agent hands off.
	Handoff *agents.Item `json:"handoff,omitempty"`
	// Transcript and Pending are the conversation at the end.
	Transcript runtime.TranscriptRef `json:"transcript"`
	Pending    []agents.Item         `json:"pending,omitempty"`
	Turns      int                   `json:"turns"`
	ToolCalls  int                   `json:"tool_calls"`
	Usage      model.Usage           `json:"usage"`
	// Agents is the usage per agent: the agent's, and its agents-as-tools'.
	Agents runtime.Usages `json:"agents,omitempty"`
	// Lease is the sandbox's lease given back to the session that lent it
	// (AgentInput.Session): the sandbox is not stopped.
	Lease *runtime.SandboxLease `json:"lease,omitempty"`
	// Interrupted says the agent stopped at a step boundary on its
	// session's interrupt: Transcript and Pending are what it did.
	Interrupted bool `json:"interrupted,omitempty"`
	// Budget is the root's budget ledger given back, with what the agent
	// spent of it, when the root lent it to the agent.
	Budget *BudgetLoan `json:"budget,omitempty"`
}
