package guardrail_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/workflows/gate/gatetest"
	"github.com/troupe-dev/troupe/workflows/workflowstest"
)

// Tool guardrails pass the gate chain's conformance suite, as funcs and as
// guardrail agents: a guardrail that allows the call and keeps its output
// lets it through; one whose check of the call rejects it refuses it; one
// whose check of the output replaces it edits it; one whose check of the
// output trips ends the run with troupe.ErrGuardrailTripped.
func TestGateConformance(t *testing.T) {
	tool := func(g agents.ToolGuardrail) func(*agents.Agent) {
		g.Name, g.Tool = "checked", gatetest.Tool
		return func(a *agents.Agent) { a.ToolGuardrails = []agents.ToolGuardrail{g} }
	}
	t.Run("funcs", func(t *testing.T) {
		before := func(v agents.ToolVerdict) func(context.Context, agents.ToolCall) (agents.ToolVerdict, error) {
			return func(context.Context, agents.ToolCall) (agents.ToolVerdict, error) { return v, nil }
		}
		after := func(v agents.ToolVerdict) func(context.Context, agents.ToolCall, string) (agents.ToolVerdict, error) {
			return func(context.Context, agents.ToolCall, string) (agents.ToolVerdict, error) { return v, nil }
		}
		gatetest.Run(t, gatetest.Suite{
			Passes:  &gatetest.Case{Gate: tool(agents.ToolGuardrail{Before: before(agents.ToolVerdict{}), After: after(agents.ToolVerdict{})})},
			Rejects: &gatetest.Case{Gate: tool(agents.ToolGuardrail{Before: before(agents.RejectCall("Not this one."))})},
			Edits:   &gatetest.Case{Gate: tool(agents.ToolGuardrail{After: after(agents.ReplaceOutput("[redacted]"))})},
			Trips:   &gatetest.Case{Gate: tool(agents.ToolGuardrail{After: after(agents.TripTool("the output leaks"))}), ErrorType: troupe.ErrGuardrailTripped},
		})
	})
	t.Run("agents", func(t *testing.T) {
		// call_judge and output_judge give the verdicts of the agent
		// checks: the one the case's name says.
		judges := []*agents.Agent{
			{Name: "call_judge", Instructions: "calls: judges calls", Output: agents.MustOutput[agents.ToolCallVerdict]()},
			{Name: "output_judge", Instructions: "outputs: judges outputs", Output: agents.MustOutput[agents.ToolOutputVerdict]()},
		}
		answer := func(calls, outputs string) workflowstest.TurnFunc {
			return func(req model.Request) []agents.Item {
				verdict := map[string]string{"action": outputs, "message": "[redacted]", "reason": "the case says so"}
				if workflowstest.FirstWord(req.Instructions) == "calls:" {
					verdict = map[string]string{"action": calls, "message": "Not this one.", "reason": "the case says so"}
				}
				data, _ := json.Marshal(verdict)
				return []agents.Item{agents.AssistantMessage(string(data))}
			}
		}
		judged := tool(agents.ToolGuardrail{BeforeAgent: "call_judge", AfterAgent: "output_judge"})
		gatetest.Run(t, gatetest.Suite{
			Passes:  &gatetest.Case{Gate: judged, Agents: judges, Answer: answer(agents.ToolCallAllow, agents.ToolOutputKeep)},
			Rejects: &gatetest.Case{Gate: judged, Agents: judges, Answer: answer(agents.ToolCallReject, agents.ToolOutputKeep)},
			Edits:   &gatetest.Case{Gate: judged, Agents: judges, Answer: answer(agents.ToolCallAllow, agents.ToolOutputReplace)},
			Trips:   &gatetest.Case{Gate: judged, Agents: judges, Answer: answer(agents.ToolCallAllow, agents.ToolOutputTrip), ErrorType: troupe.ErrGuardrailTripped},
		})
	})
}
