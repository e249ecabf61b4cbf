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
