package workflows

import (
	"encoding/json"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/model"
)

// Names of the workflows of a run. They are stable: histories and
// clients refer to them.
const (
	OrchestratorWorkflowName = "troupe.Orchestrator"
	AgentWorkflowName        = "troupe.Agent"
)

// Names of the activities of a run's agents. They are stable: histories
// refer to them.
const (
	ModelActivityName      = "troupe.Model"
	ToolActivityName       = "troupe.FunctionTool"
	HandoffActivityName    = "troupe.Handoff"
	ExtractActivityName    = "troupe.ExtractOutput"
	SaveEventsActivityName = "troupe.SaveEvents"
)

// RunInput starts a run.
type RunInput struct {
	// Graph names the graph, as the worker knows it.
	Graph string `json:"graph"`
	// Agent is the agent to start at; empty means the graph's entry agent.
	Agent string `json:"agent,omitempty"`
	// Input is the user's message.
	Input string `json:"input"`
	// Vars are run variables, visible to agents' Go funcs in RunContext.
	Vars map[string]string `json:"vars,omitempty"`
	// MaxHandoffs bounds the handoffs of the run; 0 means the worker's
	// default.
	MaxHandoffs int `json:"max_handoffs,omitempty"`
	// Budget, when set, is the run's budget, over the graph's default
	// (agents.Graph.WithBudget); the zero Budget lifts it.
	Budget *agents.Budget `json:"budget,omitempty"`
}

// OrchestratorInput is the orchestrator workflow's input: the run's, and
// what the previous run of the orchestrator carried over when it
// continued as new (nil when the run starts). Its JSON is the run's input
// with a "carry" field, so a client starts a run with a RunInput.
type OrchestratorInput struct {
	RunInput
	Carry *RunCarry `json:"carry,omitempty"`
}

// RunCarry is what a run's orchestrator carries into its next run when it
// continues as new: the run's spec (so the graph stays pinned), where the
// chain of agents stands, and the recent events with their numbering and
// the pages of the older ones in the blob store, so a follower's cursor
// stays good.
type RunCarry struct {
	Spec      *runtime.GraphSpec `json:"spec"`
	Route     routeState         `json:"route"`
	Events    []troupe.Event     `json:"events,omitempty"`
	NextEvent int                `json:"next_event"`
	Pages     []troupe.EventPage `json:"pages,omitempty"`
	// Approvals are the decisions the run remembers (no call waits
	// between two agents of the chain).
	Approvals *runtime.ApprovalDesk `json:"approvals,omitempty"`
	// Budget is what the run spent of its budget, if it has one.
	Budget *runtime.BudgetLedger `json:"budget,omitempty"`
}

// RunResult is a finished run.
type RunResult struct {
	// WorkflowID is the orchestrator's workflow id.
	WorkflowID string `json:"workflow_id"`
	// Graph is the graph that ran.
	Graph string `json:"graph"`
	// Agent is the agent that gave the final output.
	Agent string `json:"agent"`
	// Output is the final output: a JSON document for agents with an output
	// type, a JSON string of the text otherwise.
	Output json.RawMessage `json:"output"`
	// Path lists the agents the run went through, in order of handoffs.
	Path []string `json:"path"`
	// Turns counts the model turns of the agents on the path.
	Turns int `json:"turns"`
	// ToolCalls counts the tool calls of the agents on the path.
	ToolCalls int `json:"tool_calls"`
	// Handoffs counts the handoffs taken.
	Handoffs int `json:"handoffs"`
	// Usage sums the model usage of the whole run, agents-as-tools included.
	Usage model.Usage `json:"usage"`
	// Agents is the same usage per agent, with its cost; failed
	// agents-as-tools count.
	Agents runtime.Usages `json:"agents,omitempty"`
	// Cost sums the cost of the run's model calls, by the run's price
	// table (0 without one).
	Cost float64 `json:"cost,omitempty"`
	// Budget, for a run with a budget, is the budget and what the run
	// spent of it.
	Budget *runtime.BudgetReport `json:"budget,omitempty"`
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
}

// AgentWorkflowInput is the agent workflow's input: the agent's, and
// what the previous run of the agent's workflow carried over when it
// continued as new (nil for the first run). Its JSON is the agent's input
// with a "carry" field, so a parent starts an agent with an AgentInput.
type AgentWorkflowInput struct {
	AgentInput
	Carry *AgentCarry `json:"carry,omitempty"`
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

// AgentCarry is what an agent workflow carries into its next run when it
// continues as new: its state (the loop's, its sandbox lease, so the
// sandbox stays up, and its MCP catalog), and its recent events with their
// numbering and the pages of the older ones in the blob store, so a
// follower's cursor stays good.
type AgentCarry struct {
	State     runtime.AgentState `json:"state"`
	Events    []troupe.Event     `json:"events,omitempty"`
	NextEvent int                `json:"next_event"`
	Pages     []troupe.EventPage `json:"pages,omitempty"`
	// Paused and Interrupted are the session's controls in force (see
	// control), which a signal may have set while the run continued.
	Paused      bool `json:"paused,omitempty"`
	Interrupted bool `json:"interrupted,omitempty"`
	// Budget is what the agent holds of its run's budget: the root's
	// ledger, when lent to it, and the last call's usage until the root
	// is known to have it.
	Budget *AgentBudgetCarry `json:"budget,omitempty"`
	// Lease, MCP and MCPLost are where carries written before they were
	// part of State held them: read, never written.
	Lease   *runtime.SandboxLease `json:"lease,omitempty"`
	MCP     *MCPCatalog           `json:"mcp,omitempty"`
	MCPLost bool                  `json:"mcp_lost,omitempty"`
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

// ModelInput is the model activity's input.
type ModelInput struct {
	Graph      string                `json:"graph"`
	Agent      string                `json:"agent"`
	Run        agents.RunContext     `json:"run"`
	Transcript runtime.TranscriptRef `json:"transcript"`
	Pending    []agents.Item         `json:"pending,omitempty"`
	// MCPTools is the blob key of the agent's MCP tool specs, if any.
	MCPTools string `json:"mcp_tools,omitempty"`
	// Pinned says the run keeps its graph: the model is offered only
	// those of the agent's tools (in the graph served now) that Tools, the
	// run's spec of them, names. Otherwise it is offered all of them.
	Pinned bool     `json:"pinned,omitempty"`
	Tools  []string `json:"tools,omitempty"`
	// Guidance is the blob key of the guidance (AGENTS.md) of the agent's
	// workspace, once it is provisioned: the model activity adds it to
	// the instructions.
	Guidance string `json:"guidance,omitempty"`
	// Budget, for an agent of a run with a budget that asks its root by
	// update, has the activity tell the root what the call used, right
	// after it.
	Budget *ModelBudget `json:"budget,omitempty"`
}

// ModelOutput is the model activity's result.
type ModelOutput struct {
	// Transcript includes the pending items and the turn's output.
	Transcript runtime.TranscriptRef `json:"transcript"`
	Step       runtime.Step          `json:"step"`
	Usage      model.Usage           `json:"usage"`
	// Text is the start of the turn's assistant text, for events.
	Text string `json:"text,omitempty"`
	// Model is the model the call asked for, which prices it.
	Model string `json:"model,omitempty"`
	// Told says how the activity told the root what the call used
	// (ModelInput.Budget): "delivered", "sent" (not waited for), or not
	// at all ("").
	Told string `json:"told,omitempty"`
}

// ToolInput is the function-tool activity's input.
type ToolInput struct {
	Graph string            `json:"graph"`
	Agent string            `json:"agent"`
	Run   agents.RunContext `json:"run"`
	Call  agents.Item       `json:"call"`
	// OutputKey is where an output too large to inline is stored.
	OutputKey string `json:"output_key"`
}

// HandoffInput is the handoff activity's input.
type HandoffInput struct {
	Graph      string                `json:"graph"`
	From       string                `json:"from"`
	Tool       string                `json:"tool"`
	Run        agents.RunContext     `json:"run"`
	Transcript runtime.TranscriptRef `json:"transcript"`
	Pending    []agents.Item         `json:"pending,omitempty"`
	// NewKey is the key of the filtered transcript.
	NewKey string `json:"new_key"`
}

// HandoffOutput is the handoff activity's result: the conversation the
// target receives.
type HandoffOutput struct {
	Transcript runtime.TranscriptRef `json:"transcript"`
	Pending    []agents.Item         `json:"pending,omitempty"`
}

// ExtractInput is the output-extractor activity's input.
type ExtractInput struct {
	Graph  string               `json:"graph"`
	Agent  string               `json:"agent"`
	Tool   string               `json:"tool"`
	Result agents.ToolRunResult `json:"result"`
}
