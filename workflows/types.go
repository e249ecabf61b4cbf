package workflows

import (
	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/handoff"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/workflows/budget"
	"github.com/troupe-dev/troupe/workflows/gate"
)

// Names of the activities of a run's agents. They are stable: histories
// refer to them.
const (
	ModelActivityName   = "troupe.Model"
	ToolActivityName    = "troupe.FunctionTool"
	HandoffActivityName = "troupe.Handoff"
	ExtractActivityName = "troupe.ExtractOutput"
)

// OrchestratorInput is the orchestrator workflow's input: the run's, and
// what the previous run of the orchestrator carried over when it
// continued as new (nil when the run starts). Its JSON is the run's input
// with a "carry" field, so a client starts a run with a RunInput.
type OrchestratorInput struct {
	troupe.RunInput
	Carry *RunCarry `json:"carry,omitempty"`
}

// RunCarry is what a run's orchestrator carries into its next run when it
// continues as new: the run's spec (so the graph stays pinned), where the
// chain of agents stands, and the recent events with their numbering and
// the pages of the older ones in the blob store, so a follower's cursor
// stays good.
type RunCarry struct {
	Spec      *runtime.GraphSpec `json:"spec"`
	Route     handoff.State      `json:"route"`
	Events    []troupe.Event     `json:"events,omitempty"`
	NextEvent int                `json:"next_event"`
	Pages     []troupe.EventPage `json:"pages,omitempty"`
	// Approvals are the decisions the run remembers (no call waits
	// between two agents of the chain).
	Approvals *runtime.ApprovalDesk `json:"approvals,omitempty"`
	// Budget is what the run spent of its budget, if it has one.
	Budget *runtime.BudgetLedger `json:"budget,omitempty"`
}

// AgentWorkflowInput is the agent workflow's input: the agent's, and
// what the previous run of the agent's workflow carried over when it
// continued as new (nil for the first run). Its JSON is the agent's input
// with a "carry" field, so a parent starts an agent with an AgentInput.
type AgentWorkflowInput struct {
	troupe.AgentInput
	Carry *AgentCarry `json:"carry,omitempty"`
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
	Budget *budget.Carry `json:"budget,omitempty"`
	// Lease, MCP and MCPLost are where carries written before they were
	// part of State held them: read, never written.
	Lease   *runtime.SandboxLease `json:"lease,omitempty"`
	MCP     *runtime.MCPCatalog   `json:"mcp,omitempty"`
	MCPLost bool                  `json:"mcp_lost,omitempty"`
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
	Budget *troupe.ModelBudget `json:"budget,omitempty"`
	// Precheck, when set, has the activity run the gates' checks it names
	// on the calls the model answers with (gate.Precheck).
	Precheck *gate.Precheck `json:"precheck,omitempty"`
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
	// Prechecked is what the checks of ModelInput.Precheck found.
	Prechecked *gate.Prechecked `json:"prechecked,omitempty"`
}

// ExtractInput is the output-extractor activity's input.
type ExtractInput struct {
	Graph  string               `json:"graph"`
	Agent  string               `json:"agent"`
	Tool   string               `json:"tool"`
	Result agents.ToolRunResult `json:"result"`
}
