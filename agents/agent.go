package agents

import (
	"context"
	"fmt"
)

// Defaults applied where an Agent leaves a field zero.
const (
	// DefaultMaxTurns bounds the model turns of one agent's run.
	DefaultMaxTurns = 10
	// DefaultMaxOutputRetries bounds how often an invalid structured output
	// is fed back to the model before the run fails.
	DefaultMaxOutputRetries = 2
	// DefaultMaxConcurrentCalls bounds the tool calls and agents-as-tools
	// of one model turn that run at once. It keeps a wide fan-out well
	// under Temporal's limits on what one workflow may have pending (2,000
	// activities or child workflows by default) and its model's endpoint
	// from a burst of hundreds of calls at once.
	DefaultMaxConcurrentCalls = 100
)

// Agent is a named definition of an LLM agent. It is plain Go data; the
// funcs inside it run only in activities. The zero value of every field but
// Name works.
type Agent struct {
	// Name identifies the agent in its Graph; it must match
	// ^[a-zA-Z0-9_-]{1,52}$ so that transfer_to_<name> is a valid tool name.
	Name string
	// Instructions is the system prompt.
	Instructions string
	// DynamicInstructions, when set, computes the system prompt for each
	// turn instead of Instructions. It runs in the model activity.
	DynamicInstructions func(ctx context.Context, rc RunContext) (string, error)
	// HandoffDescription tells other agents when to hand off to this one.
	HandoffDescription string
	// Model is the provider's model name; empty means the worker's default.
	Model string
	// Settings tune the model calls.
	Settings ModelSettings
	// Tools are the tools the model may call.
	Tools []Tool
	// Handoffs are the agents this one may transfer the conversation to.
	Handoffs []Handoff
	// Output, when set, makes the final output a validated JSON document of
	// its type; otherwise the final output is the model's text.
	Output *OutputType
	// Sandbox, when set, gives the agent its own workspace.
	Sandbox *Sandbox
	// Capabilities add sandbox tools, instructions, manifest entries and
	// compaction. A sandbox agent with none gets the worker's defaults
	// (shell, filesystem, compaction); a plain agent may have those that
	// need no workspace (compaction, say).
	Capabilities []Capability
	// MCPServers are MCP servers whose tools the model may call, next to
	// Tools.
	MCPServers []*MCPServer
	// Expose, when set, makes the agent callable from outside its graph,
	// as an MCP tool of `troupe mcp serve`.
	Expose *Exposure
	// MaxTurns bounds this agent's model turns; 0 means DefaultMaxTurns.
	MaxTurns int
	// MaxConcurrentCalls bounds the calls of one model turn (function
	// tools, MCP tools and agents-as-tools) that run at once; 0 means
	// DefaultMaxConcurrentCalls. The others wait for a slot and start in
	// order: function tools, then MCP tools, then agents-as-tools, each
	// in the order the model asked for them; their outputs reach the
	// model in its order, as without a bound. A run can set its own
	// bound for all its agents (troupe.RunInput.MaxConcurrentCalls).
	MaxConcurrentCalls int
	// MaxOutputRetries bounds the corrections of an invalid structured
	// output; 0 means DefaultMaxOutputRetries, negative means none.
	MaxOutputRetries int
	// Memory, when set, feeds the agent's runs and session turns to a
	// memory scope's consolidation (see MemoryConfig); nil generates no
	// memory.
	Memory *MemoryConfig
	// Approvals are the agent's approval policies, at most one per tool:
	// which calls wait for a human's decision before they run (see
	// Approval). A tool without one never waits, except an MCP tool its
	// server's RequireApproval names.
	Approvals []Approval
	// InputGuardrails check the user's message the agent answers first,
	// OutputGuardrails its final output, ToolGuardrails its tool calls and
	// their outputs (see GuardrailVerdict, ToolVerdict, ToolCallVerdict,
	// ToolOutputVerdict). A tripped guardrail ends the run with
	// troupe.GuardrailTripped.
	InputGuardrails  []InputGuardrail
	OutputGuardrails []OutputGuardrail
	ToolGuardrails   []ToolGuardrail
}

// TurnLimit is MaxTurns with its default applied.
func (a *Agent) TurnLimit() int {
	if a.MaxTurns > 0 {
		return a.MaxTurns
	}
	return DefaultMaxTurns
}

// CallLimit is MaxConcurrentCalls with its default applied.
func (a *Agent) CallLimit() int {
	if a.MaxConcurrentCalls > 0 {
		return a.MaxConcurrentCalls
	}
	return DefaultMaxConcurrentCalls
}

// OutputRetryLimit is MaxOutputRetries with its default applied.
func (a *Agent) OutputRetryLimit() int {
	switch {
	case a.MaxOutputRetries < 0:
		return 0
	case a.MaxOutputRetries == 0:
		return DefaultMaxOutputRetries
	}
	return a.MaxOutputRetries
}

// ResolveInstructions returns the system prompt for a turn.
func (a *Agent) ResolveInstructions(ctx context.Context, rc RunContext) (string, error) {
	if a.DynamicInstructions == nil {
		return a.Instructions, nil
	}
	s, err := a.DynamicInstructions(ctx, rc)
	if err != nil {
		return "", fmt.Errorf("agents: instructions of %s: %w", a.Name, err)
	}
	return s, nil
}
