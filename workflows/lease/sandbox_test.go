package lease_test

import (
	"strings"
	"testing"

	"go.temporal.io/sdk/testsuite"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/local"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/workflowstest"
)

func sandboxEnv(t *testing.T, fn workflowstest.TurnFunc, maxTurns int) (*testsuite.TestWorkflowEnvironment, string) {
	t.Helper()
	root := t.TempDir()
	lc, err := local.New(local.Config{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	g := agents.MustGraph("sb", "worker", &agents.Agent{
		Name: "worker", Instructions: "worker: uses a shell", MaxTurns: maxTurns,
		Sandbox: &agents.Sandbox{Manifest: sandbox.Manifest{
			Entries: []sandbox.Entry{{Kind: sandbox.EntryFile, Path: "docs/deal.txt", Content: "discount 35%\n"}},
			Env:     map[string]string{"DEAL": "acme"},
		}},
	})
	env := workflowstest.NewRunnerEnv(t, workflows.Config{Graphs: []*agents.Graph{g}, Model: &workflowstest.FuncModel{Func: fn},
		Sandboxes: map[string]sandbox.Client{"local": lc}})
	return env, root
}

func TestSandboxAgent(t *testing.T) {
	var sawTools []string
	var outputs []string
	env, root := sandboxEnv(t, func(req model.Request) []agents.Item {
		if len(sawTools) == 0 {
			for _, s := range req.Tools {
				sawTools = append(sawTools, s.Name)
			}
		}
		last := workflowstest.LastItem(req)
		if last.Type == agents.ItemFunctionCallOutput {
			outputs = append(outputs, last.Output)
			return []agents.Item{agents.AssistantMessage("read it")}
		}
		return []agents.Item{workflowstest.Call("c1", "exec_command", `{"cmd":"cat docs/deal.txt; echo env=$DEAL key=${OPENAI_API_KEY:-none}","workdir":null,"yield_time_ms":null,"max_output_tokens":null}`)}
	}, 0)
	t.Setenv("OPENAI_API_KEY", "sk-host-secret")
	env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "sb", Input: "read the deal"})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(sawTools, ","); !strings.Contains(got, "exec_command") || !strings.Contains(got, "apply_patch") {
		t.Errorf("a sandbox agent without capabilities got tools %s, want the defaults", got)
	}
	if len(outputs) != 1 || !strings.Contains(outputs[0], "discount 35%") || !strings.Contains(outputs[0], "env=acme key=none") {
		t.Errorf("exec_command output = %q", outputs)
	}
	if left := workflowstest.Leftovers(t, root); len(left) != 0 {
		t.Errorf("workspaces left after the run: %v", left)
	}
}

func TestSandboxStoppedWhenAgentFails(t *testing.T) {
	env, root := sandboxEnv(t, func(req model.Request) []agents.Item {
		return []agents.Item{workflowstest.Call(strings.Repeat("c", len(req.Input)), "exec_command", `{"cmd":"touch x","workdir":null,"yield_time_ms":null,"max_output_tokens":null}`)}
	}, 2)
	env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "sb", Input: "loop"})
	if troupe.ErrorType(env.GetWorkflowError()) != troupe.ErrMaxTurns {
		t.Fatalf("err = %v, want max turns", env.GetWorkflowError())
	}
	if left := workflowstest.Leftovers(t, root); len(left) != 0 {
		t.Errorf("workspaces left after a failed run: %v", left)
	}
}
