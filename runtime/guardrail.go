package runtime

import "github.com/troupe-dev/troupe/agents"

// GuardrailSpec is what workflow code reads of one of an agent's
// guardrails (agents.InputGuardrail, OutputGuardrail, ToolGuardrail): its
// name and kind, and what decides where and how it runs: a func in the
// guardrail activity, or an agent as a child workflow. The funcs stay in
// the graph, where the guardrail activity finds them by name.
type GuardrailSpec struct {
	Name string `json:"name"`
	// Kind is agents.GuardrailInput, GuardrailOutput, or "tool".
	Kind string `json:"kind"`
	// Agent is the agent that runs as the guardrail (input and output
	// guardrails); empty for a func.
	Agent string `json:"agent,omitempty"`
	// Blocking: an input guardrail that runs before the first model call,
	// not in parallel with it.
	Blocking bool `json:"blocking,omitempty"`
	// Tool is the tool a tool guardrail guards; empty for all of them.
	Tool string `json:"tool,omitempty"`
	// Before and After: a tool guardrail checks calls, outputs, or both
	// (with a func, or an agent).
	Before bool `json:"before,omitempty"`
	After  bool `json:"after,omitempty"`
	// BeforeAgent and AfterAgent are the agents that run as a tool
	// guardrail's checks of calls and of outputs; empty for a func (or no
	// check). Specs recorded before tool guardrail agents have none.
	BeforeAgent string `json:"before_agent,omitempty"`
	AfterAgent  string `json:"after_agent,omitempty"`
}

// GuardrailTool is the Kind of a tool guardrail's spec.
const GuardrailTool = "tool"

// guardrailSpecs are the specs of a's guardrails, in the order input,
// output, tool, each in the agent's order.
func guardrailSpecs(a *agents.Agent) []GuardrailSpec {
	var out []GuardrailSpec
	for _, g := range a.InputGuardrails {
		out = append(out, GuardrailSpec{Name: g.Name, Kind: agents.GuardrailInput, Agent: g.Agent, Blocking: g.Blocking})
	}
	for _, g := range a.OutputGuardrails {
		out = append(out, GuardrailSpec{Name: g.Name, Kind: agents.GuardrailOutput, Agent: g.Agent})
	}
	for _, g := range a.ToolGuardrails {
		out = append(out, GuardrailSpec{Name: g.Name, Kind: GuardrailTool, Tool: g.Tool, Before: g.Before != nil || g.BeforeAgent != "", After: g.After != nil || g.AfterAgent != "",
			BeforeAgent: g.BeforeAgent, AfterAgent: g.AfterAgent})
	}
	return out
}

// GuardrailsOf returns the agent's guardrails of kind, in order. A nil spec
// has none.
func (a *AgentSpec) GuardrailsOf(kind string) []GuardrailSpec {
	if a == nil {
		return nil
	}
	var out []GuardrailSpec
	for _, g := range a.Guardrails {
		if g.Kind == kind {
			out = append(out, g)
		}
	}
	return out
}

// ToolGuardrails returns the agent's tool guardrails that check calls of
// tool before they run (before) or their outputs after (!before), in
// order.
func (a *AgentSpec) ToolGuardrails(tool string, before bool) []GuardrailSpec {
	var out []GuardrailSpec
	for _, g := range a.GuardrailsOf(GuardrailTool) {
		if (g.Tool == "" || g.Tool == tool) && (before && g.Before || !before && g.After) {
			out = append(out, g)
		}
	}
	return out
}

// Guardrail actions: what a guardrail that did not simply pass did.
const (
	// GuardrailTrip: it tripped, and the run ends.
	GuardrailTrip = "trip"
	// GuardrailReject: a tool guardrail kept a call from running.
	GuardrailReject = "reject"
	// GuardrailReplace: a tool guardrail replaced a call's output.
	GuardrailReplace = "replace"
	// GuardrailWithhold: a tool guardrail withheld a call's output.
	GuardrailWithhold = "withhold"
)

// GuardrailOutcome is what one guardrail did that was more than pass.
type GuardrailOutcome struct {
	// Guardrail is the guardrail's name; Kind its kind (agents.Guardrail*).
	Guardrail string `json:"guardrail"`
	Kind      string `json:"kind"`
	// Action is one of the Guardrail* actions.
	Action string `json:"action"`
	// CallID is the call a tool guardrail checked.
	CallID string `json:"call_id,omitempty"`
	// Reason is the guardrail's reason; Message what the model reads
	// instead (reject, replace, withhold).
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// ToolOutcome is the outcome of a tool guardrail's verdict v on call
// callID, checked before the call or after it; nil when it lets the call
// (or its output) through.
func ToolOutcome(guardrail, callID string, before bool, v agents.ToolVerdict) *GuardrailOutcome {
	kind := agents.GuardrailToolAfter
	if before {
		kind = agents.GuardrailToolBefore
	}
	o := &GuardrailOutcome{Guardrail: guardrail, Kind: kind, CallID: callID, Reason: v.Reason, Message: v.Message}
	switch {
	case v.Tripwire:
		o.Action = GuardrailTrip
	case before && v.Reject:
		o.Action = GuardrailReject
	case !before && v.Withhold:
		o.Action = GuardrailWithhold
	case !before && v.Replace:
		o.Action = GuardrailReplace
	default:
		return nil
	}
	return o
}
