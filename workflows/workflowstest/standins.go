package workflowstest

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/workflows"
)

// SlowAgents stands in for the agents of a session's turns: each answers
// "re: MESSAGE" after two seconds of workflow time, and inputs records the
// messages in the order the agents got them.
func SlowAgents(env *testsuite.TestWorkflowEnvironment, inputs *[]string) {
	env.OnWorkflow(troupe.AgentWorkflowName, mock.Anything, mock.Anything).Return(
		func(ctx workflow.Context, in workflows.AgentWorkflowInput) (*troupe.AgentResult, error) {
			msg := in.Pending[len(in.Pending)-1].Content
			*inputs = append(*inputs, msg)
			if err := workflow.Sleep(ctx, 2*time.Second); err != nil {
				return nil, err
			}
			out, _ := json.Marshal("re: " + msg)
			return &troupe.AgentResult{Agent: in.Agent, Output: out, Transcript: in.Transcript, Turns: 1}, nil
		})
}

// ScriptedCoder is a TurnFunc for a sandbox agent with the shell
// capability. It answers each user message "run: CMD" by running CMD in
// its sandbox (Shell), then with the command's output ("out: ...");
// "history?" with what the user said so far; any other message with
// "ok".
func ScriptedCoder(req model.Request) []agents.Item {
	last := LastItem(req)
	if last.Type == agents.ItemFunctionCallOutput {
		_, out, _ := strings.Cut(last.Output, "Output:\n")
		return []agents.Item{agents.AssistantMessage("out: " + strings.TrimSpace(out))}
	}
	if cmd, ok := strings.CutPrefix(last.Content, "run: "); ok {
		return []agents.Item{Shell(fmt.Sprintf("c%d", len(req.Input)), cmd)}
	}
	if last.Content == "history?" {
		var said []string
		for _, it := range req.Input {
			if it.Type == agents.ItemMessage && it.Role == "user" {
				said = append(said, it.Content)
			}
		}
		return []agents.Item{agents.AssistantMessage(strings.Join(said, " | "))}
	}
	return []agents.Item{agents.AssistantMessage("ok")}
}
