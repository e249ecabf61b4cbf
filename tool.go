package troupe

import (
	"fmt"

	"github.com/troupe-dev/troupe/agents"
)

// ToolInput is the input of the activities that run a function tool: the
// function-tool activity and, for a sandbox tool, the sandbox-tool
// activity (workflows/lease).
type ToolInput struct {
	Graph string            `json:"graph"`
	Agent string            `json:"agent"`
	Run   agents.RunContext `json:"run"`
	Call  agents.Item       `json:"call"`
	// OutputKey is where an output too large to inline is stored.
	OutputKey string `json:"output_key"`
}

// Gone is the output of a call of a function tool that the run's graph
// had when it started and the graph served now has not (or not as that
// kind of tool): an error the model can act on.
func (in ToolInput) Gone() agents.Item {
	item := agents.FunctionCallOutput(in.Call.CallID, fmt.Sprintf(
		"Error: tool %s is no longer available: the graph this worker serves changed since the run started. Do without it.", in.Call.Name))
	item.Agent = in.Agent
	return item
}

// CallContext is the RunContext the call's tool gets: the run's, with the
// call's id, so that agents.IdempotencyKey names the call.
func (in ToolInput) CallContext() agents.RunContext {
	return in.Run.ForCall(in.Call.CallID)
}

// InDoubt is the output of a call of a tool that is not idempotent which
// an earlier attempt started (agents.InDoubtOutput): the call is not run
// again, and the model is told to check what happened.
func (in ToolInput) InDoubt() agents.Item {
	item := agents.FunctionCallOutput(in.Call.CallID, agents.InDoubtOutput(in.Call.Name, in.CallContext().IdempotencyKey()))
	item.Agent = in.Agent
	return item
}
