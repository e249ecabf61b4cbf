package runtime

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/troupe-dev/troupe/agents"
)

// Step is what one model turn asks for next. Exactly one of these holds:
// Calls is non-empty (run the tools, then call the model again, or hand
// off); Final is set (the agent is done); OutputError is set (the final
// output was invalid and must be corrected or the run fails).
type Step struct {
	// Calls are the function calls of the turn, in the model's order.
	Calls []agents.Item `json:"calls,omitempty"`
	// Final is the validated final output: the JSON document for agents
	// with an output type, a JSON string of the text otherwise.
	Final json.RawMessage `json:"final,omitempty"`
	// OutputError says why the final output failed validation.
	OutputError string `json:"output_error,omitempty"`
}

// Decide reads a model turn's output items for the agent.
func Decide(a *agents.Agent, output []agents.Item) Step {
	var calls []agents.Item
	text, sawText := "", false
	for _, it := range output {
		switch {
		case it.Type == agents.ItemFunctionCall:
			calls = append(calls, it)
		case it.Type == agents.ItemMessage && it.Role == agents.RoleAssistant:
			text, sawText = it.Content, true
		}
	}
	if len(calls) > 0 {
		return Step{Calls: calls}
	}
	if a.Output == nil {
		final, _ := json.Marshal(text)
		return Step{Final: final}
	}
	if !sawText {
		return Step{OutputError: "the response had no final output message"}
	}
	doc, err := a.Output.Validate(text)
	if err != nil {
		return Step{OutputError: err.Error()}
	}
	return Step{Final: doc}
}

// Correction is the message that feeds an invalid structured output back
// to the model.
func Correction(outputError string) agents.Item {
	return agents.Item{Type: agents.ItemMessage, Role: agents.RoleUser, Content: fmt.Sprintf(
		"Your final output does not match the required JSON schema: %s. Reply again with only a JSON document that matches the schema.",
		outputError)}
}

// Dispatch is a turn's function calls sorted by what carries them out.
type Dispatch struct {
	// Functions are calls of function tools, run as activities.
	Functions []agents.Item
	// AgentTools are calls of agent tools, run as child workflows.
	AgentTools []agents.Item
	// MCP are calls of MCP servers' tools, run as activities on the worker
	// that holds the server's session.
	MCP []agents.Item
	// Handoff is the handoff call taken, if any: the first one of the turn.
	Handoff *agents.Item
	// Outputs are the outputs already decided without running anything:
	// unknown tools, and handoffs after the first, each told why.
	Outputs []agents.Item
}

// Sort classifies calls against the tools of agent a (as the run's spec
// holds them) and the names of the MCP tools it was offered. Unknown tools
// are answered with an error output the model can act on, not a failed
// run.
func Sort(a *AgentSpec, calls []agents.Item, mcpTools []string) Dispatch {
	var d Dispatch
	for _, c := range calls {
		kind := a.Tool(c.Name).Kind
		if slices.Contains(mcpTools, c.Name) && kind == agents.ToolUnknown {
			d.MCP = append(d.MCP, c)
			continue
		}
		switch kind {
		case agents.ToolFunction:
			d.Functions = append(d.Functions, c)
		case agents.ToolAgent:
			d.AgentTools = append(d.AgentTools, c)
		case agents.ToolHandoff:
			if d.Handoff != nil {
				d.Outputs = append(d.Outputs, agents.FunctionCallOutput(c.CallID,
					"Multiple handoffs requested; only the first ("+d.Handoff.Name+") was taken."))
				continue
			}
			h := c
			d.Handoff = &h
		default:
			d.Outputs = append(d.Outputs, agents.FunctionCallOutput(c.CallID,
				fmt.Sprintf("Error: tool %q does not exist. Available tools: %s.", c.Name, a.toolNames(mcpTools))))
		}
	}
	return d
}

// HandoffOutput is the tool output recorded for a handoff call.
func HandoffOutput(callID, target string) agents.Item {
	out, _ := json.Marshal(map[string]string{"assistant": target})
	return agents.FunctionCallOutput(callID, string(out))
}
