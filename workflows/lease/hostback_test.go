package lease_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/mock"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/workflows/lease"
	"github.com/troupe-dev/troupe/workflows/workflowstest"
)

// TestAgentHostComesBack: an agent's first command finds no worker of its
// sandbox's store (a schedule-to-start timeout): the agent takes the host
// as gone and restores the sandbox, and the restore is made by a worker
// of that same store (the host came back, on its disk). The agent takes
// the host as back and its next command runs there. Before, the agent
// kept the host as gone: each command of the sandbox restored there was
// refused, the sandbox lost again, until the agent ran out of turns.
func TestAgentHostComesBack(t *testing.T) {
	env, _ := sandboxEnv(t, func(req model.Request) []agents.Item {
		last := workflowstest.LastItem(req)
		if last.Type == agents.ItemFunctionCallOutput && !strings.Contains(last.Output, "sandbox was lost") {
			return []agents.Item{agents.AssistantMessage("read: " + last.Output)}
		}
		return []agents.Item{workflowstest.Call("c1", "exec_command", `{"cmd":"cat docs/deal.txt","workdir":null,"yield_time_ms":null,"max_output_tokens":null}`)}
	}, 6)
	calls := 0
	env.OnActivity(lease.SandboxToolActivityName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in lease.SandboxToolInput) (agents.Item, error) {
			calls++
			if calls == 1 {
				return agents.Item{}, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)
			}
			return agents.FunctionCallOutput(in.Tool.Call.CallID, "discount 35%"), nil
		})
	env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "sb", Input: "read the deal"})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("the run failed: %v (the sandbox's commands were sent %d times)", err, calls)
	}
	var res troupe.RunResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(res.Output), "discount 35%") || calls != 2 {
		t.Errorf("output %s after %d commands sent; want the deal read by the second, on the host that came back", res.Output, calls)
	}
}
