package runtime

import (
	"slices"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/agents"
)

// A GraphSpec is what a run's workflow code branches on, taken from the
// run's graph when the run starts and kept for the whole run: each agent's
// limits, whether it has a sandbox and which MCP servers, and its tools by
// kind (which tool is a function, which runs an agent, which hands off to
// which agent), with the run's settings that change control flow. It is
// plain data, recorded in the run's history, so a worker redeployed with
// an edited graph replays and continues a run on what the run started
// with. Go funcs (tools, instructions, filters) are not in it: activities
// still resolve them by name from the graph the worker serves now.
type GraphSpec struct {
	// Graph is the graph's name.
	Graph string `json:"graph"`
	// Entry is the graph's entry agent.
	Entry string `json:"entry"`
	// Agents are the graph's agents, in the graph's order.
	Agents []AgentSpec `json:"agents"`
	RunSettings
}

// RunSettings are the worker's settings that change a run's control flow,
// fixed for the run when it starts.
type RunSettings struct {
	// MaxHandoffs bounds the handoffs of one chain of agents.
	MaxHandoffs int `json:"max_handoffs"`
	// MaxToolDepth bounds the nesting of agents-as-tools.
	MaxToolDepth int `json:"max_tool_depth"`
	// ModelActivities runs model calls as regular activities rather than
	// local ones.
	ModelActivities bool `json:"model_activities,omitempty"`
	// ModelRateLimitWait bounds how long one model call may stay
	// rate-limited before the agent fails. Specs recorded before it have
	// none, and take the default of the code that runs them.
	ModelRateLimitWait time.Duration `json:"model_rate_limit_wait,omitempty"`
	// ContinueAfterTurns and ContinueAfterEvents bound one run of an agent
	// workflow: at the first turn boundary past either (turns taken in the
	// run, events in its history), it continues as new. 0 never does.
	ContinueAfterTurns  int `json:"continue_after_turns,omitempty"`
	ContinueAfterEvents int `json:"continue_after_events,omitempty"`
	// Budget, when set, limits the model calls of the run's tree (a
	// session's, over its turns): every agent asks the run's root before
	// each model call. Specs recorded before budgets have none.
	Budget *agents.Budget `json:"budget,omitempty"`
	// Prices price the model calls, by model name, for the models the
	// graph's agents use; Unpriced lists those of them without a price.
	Prices   agents.Prices `json:"prices,omitempty"`
	Unpriced []string      `json:"unpriced,omitempty"`
	// MaxConcurrentCalls, when not 0, is the run's own bound on the calls
	// of one model turn that run at once, for every agent of the run
	// (troupe.RunInput.MaxConcurrentCalls), over each agent's.
	MaxConcurrentCalls int `json:"max_concurrent_calls,omitempty"`
}

// AgentSpec is what workflow code reads of one agent.
type AgentSpec struct {
	Name string `json:"name"`
	// MaxTurns and MaxOutputRetries are the agent's limits, defaults
	// applied (agents.Agent.TurnLimit, OutputRetryLimit).
	MaxTurns         int `json:"max_turns"`
	MaxOutputRetries int `json:"max_output_retries"`
	// MaxConcurrentCalls bounds the calls of one of the agent's model
	// turns that run at once, its default applied
	// (agents.Agent.CallLimit); see CallLimit. Specs recorded before the
	// bound have 0: their turns run every call at once, as they did.
	MaxConcurrentCalls int `json:"max_concurrent_calls,omitempty"`
	// Sandbox: the agent runs in a sandbox.
	Sandbox bool `json:"sandbox,omitempty"`
	// MCPServers are the agent's MCP servers.
	MCPServers []MCPServerSpec `json:"mcp_servers,omitempty"`
	// Tools are the agent's tools, in the order its model sees them.
	Tools []ToolSpec `json:"tools,omitempty"`
	// MemoryScope is the memory scope the agent's runs and session turns
	// feed (agents.MemoryConfig, when it generates); empty for none. Specs recorded before
	// memory have none.
	MemoryScope string `json:"memory_scope,omitempty"`
	// MemoryReadScope is the memory scope the agent reads (and updates
	// live), when it reads; empty for none. A fork of a session has both
	// scopes replaced by its own (memory.ForkScope).
	MemoryReadScope string `json:"memory_read_scope,omitempty"`
	// Approvals are the agent's approval policies that can make a call
	// wait (agents.Approval), by tool name. Specs recorded before
	// approvals have none.
	Approvals []ApprovalSpec `json:"approvals,omitempty"`
	// Guardrails are the agent's guardrails (agents.InputGuardrail,
	// OutputGuardrail, ToolGuardrail). Specs recorded before guardrails
	// have none.
	Guardrails []GuardrailSpec `json:"guardrails,omitempty"`
}

// ApprovalSpec is what workflow code reads of an approval policy.
type ApprovalSpec struct {
	Tool string `json:"tool"`
	// When: the policy decides per call (in an activity); otherwise every
	// call waits.
	When bool `json:"when,omitempty"`
	// Timeout bounds the wait; 0 waits for ever.
	Timeout time.Duration `json:"timeout,omitempty"`
	// ApproveOnTimeout: a wait that times out approves the call rather
	// than reject it.
	ApproveOnTimeout bool `json:"approve_on_timeout,omitempty"`
}

// Approval returns the agent's policy for tool, if one can make its calls
// wait.
func (a *AgentSpec) Approval(tool string) (ApprovalSpec, bool) {
	for _, p := range a.Approvals {
		if p.Tool == tool {
			return p, true
		}
	}
	return ApprovalSpec{}, false
}

// MCPServerSpec is what workflow code reads of an MCP server.
type MCPServerSpec struct {
	Name string `json:"name"`
	// CallTimeout bounds one call of the server's tools.
	CallTimeout time.Duration `json:"call_timeout"`
}

// ToolSpec is what workflow code reads of one tool of an agent.
type ToolSpec struct {
	Name string          `json:"name"`
	Kind agents.ToolKind `json:"kind"`
	// Sandbox: a function tool that acts on the agent's sandbox.
	Sandbox bool `json:"sandbox,omitempty"`
	// Activity: a function tool that runs as a regular activity, not a
	// local one.
	Activity bool `json:"activity,omitempty"`
	// Timeout bounds one call of a function tool.
	Timeout time.Duration `json:"timeout,omitempty"`
	// Target is the agent an agent tool runs or a handoff transfers to.
	Target string `json:"target,omitempty"`
	// Extractor: an agent tool whose result goes through an output
	// extractor.
	Extractor bool `json:"extractor,omitempty"`
	// Hooks: a handoff with an input filter or an on-handoff callback.
	Hooks bool `json:"hooks,omitempty"`
}

// SpecOf takes the spec of g, with the run settings given.
func SpecOf(g *agents.Graph, settings RunSettings) *GraphSpec {
	s := &GraphSpec{Graph: g.Name(), Entry: g.Entry(), RunSettings: settings}
	for _, a := range g.Agents() {
		as := AgentSpec{Name: a.Name, MaxTurns: a.TurnLimit(), MaxOutputRetries: a.OutputRetryLimit(), MaxConcurrentCalls: a.CallLimit(), Sandbox: a.Sandbox != nil}
		if a.Memory.Generates() {
			as.MemoryScope = a.Memory.Scope
		}
		if a.Memory.Reads() {
			as.MemoryReadScope = a.Memory.Scope
		}
		for _, p := range a.Approvals {
			if !p.Never {
				as.Approvals = append(as.Approvals, ApprovalSpec{Tool: p.Tool, When: p.When != nil, Timeout: p.Timeout, ApproveOnTimeout: p.OnTimeout == agents.ApproveOnTimeout})
			}
		}
		as.Guardrails = guardrailSpecs(a)
		for _, srv := range a.MCPServers {
			as.MCPServers = append(as.MCPServers, MCPServerSpec{Name: srv.Name, CallTimeout: srv.CallTimeout()})
		}
		for _, ts := range g.ToolSpecs(a.Name) {
			ref := g.Tool(a.Name, ts.Name)
			t := ToolSpec{Name: ts.Name, Kind: ref.Kind}
			switch ref.Kind {
			case agents.ToolFunction:
				t.Sandbox, t.Activity, t.Timeout = ref.Function.NeedsSandbox(), ref.Function.RunsAsActivity(), ref.Function.Timeout()
			case agents.ToolAgent:
				t.Target, t.Extractor = ref.Agent.Agent, ref.Agent.Extractor != nil
			case agents.ToolHandoff:
				t.Target, t.Hooks = ref.Handoff.Target, ref.Handoff.InputFilter != nil || ref.Handoff.OnHandoff != nil
			}
			as.Tools = append(as.Tools, t)
		}
		s.Agents = append(s.Agents, as)
	}
	return s
}

// CallLimit is how many calls of one of agent a's model turns run at
// once in the run of s: the run's own bound, else the agent's; 0 (a spec
// recorded before bounds) means all of them.
func (s *GraphSpec) CallLimit(a *AgentSpec) int {
	if a.MaxConcurrentCalls == 0 {
		return 0
	}
	if s.MaxConcurrentCalls > 0 {
		return s.MaxConcurrentCalls
	}
	return a.MaxConcurrentCalls
}

// Agent returns the named agent's spec, or nil when the graph had none.
func (s *GraphSpec) Agent(name string) *AgentSpec {
	for i := range s.Agents {
		if s.Agents[i].Name == name {
			return &s.Agents[i]
		}
	}
	return nil
}

// Tool returns the agent's tool named name; its Kind is ToolUnknown when
// the agent had none.
func (a *AgentSpec) Tool(name string) ToolSpec {
	for _, t := range a.Tools {
		if t.Name == name {
			return t
		}
	}
	return ToolSpec{Name: name}
}

// MCPServer returns the agent's MCP server named name (a zero call
// timeout when it had none).
func (a *AgentSpec) MCPServer(name string) MCPServerSpec {
	for _, s := range a.MCPServers {
		if s.Name == name {
			return s
		}
	}
	return MCPServerSpec{Name: name, CallTimeout: agents.DefaultMCPTimeout}
}

// ToolNames lists the names of the agent's tools, in order.
func (a *AgentSpec) ToolNames() []string {
	names := make([]string, len(a.Tools))
	for i, t := range a.Tools {
		names[i] = t.Name
	}
	return names
}

// toolNames lists the agent's tools and then the MCP tools, for an
// unknown tool's error.
func (a *AgentSpec) toolNames(mcpTools []string) string {
	names := append(a.ToolNames(), mcpTools...)
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(slices.Clip(names), ", ")
}
