package lease_test

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/local"
	"github.com/troupe-dev/troupe/workflows"
)

// turnFunc answers a model request in tests: the model is the one part
// that is stood in for.
type turnFunc func(req model.Request) []agents.Item

// funcModel answers every model call with its turnFunc.
type funcModel struct{ fn turnFunc }

func (m *funcModel) Respond(_ context.Context, req model.Request) (*model.Response, error) {
	return &model.Response{Output: m.fn(req), Usage: model.Usage{Requests: 1, InputTokens: 10, OutputTokens: 5, TotalTokens: 15}}, nil
}

func lastItem(req model.Request) agents.Item { return req.Input[len(req.Input)-1] }

func call(id, name, args string) agents.Item { return agents.FunctionCall(id, name, args) }

// quietEnv is a test workflow environment that logs errors only.
//
// The test environment runs activities in the workflow's goroutine, so
// its deadlock detector (a second by default) would time real activities
// (a sandbox command, say) on a loaded machine; here it is a minute.
// Workflow code that blocks is caught by workflowcheck (make lint).
func quietEnv() *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))))
	env := s.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute})
	return env
}

func sandboxEnv(t *testing.T, fn turnFunc, maxTurns int) (*testsuite.TestWorkflowEnvironment, string) {
	t.Helper()
	env := quietEnv()
	root := t.TempDir()
	lc, err := local.New(local.Config{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	store, _ := blob.Open(context.Background(), "mem://")
	g := agents.MustGraph("sb", "worker", &agents.Agent{
		Name: "worker", Instructions: "worker: uses a shell", MaxTurns: maxTurns,
		Sandbox: &agents.Sandbox{Manifest: sandbox.Manifest{
			Entries: []sandbox.Entry{{Kind: sandbox.EntryFile, Path: "docs/deal.txt", Content: "discount 35%\n"}},
			Env:     map[string]string{"DEAL": "acme"},
		}},
	})
	r, err := workflows.NewRunner(workflows.Config{Graphs: []*agents.Graph{g}, Model: &funcModel{fn: fn}, Store: store,
		Sandboxes: map[string]sandbox.Client{"local": lc}})
	if err != nil {
		t.Fatal(err)
	}
	r.Register(env)
	return env, root
}

// leftovers lists the workspaces still on disk under a local client's root.
func leftovers(t *testing.T, root string) []string {
	t.Helper()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
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
		last := lastItem(req)
		if last.Type == agents.ItemFunctionCallOutput {
			outputs = append(outputs, last.Output)
			return []agents.Item{agents.AssistantMessage("read it")}
		}
		return []agents.Item{call("c1", "exec_command", `{"cmd":"cat docs/deal.txt; echo env=$DEAL key=${OPENAI_API_KEY:-none}","workdir":null,"yield_time_ms":null,"max_output_tokens":null}`)}
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
	if left := leftovers(t, root); len(left) != 0 {
		t.Errorf("workspaces left after the run: %v", left)
	}
}

func TestSandboxStoppedWhenAgentFails(t *testing.T) {
	env, root := sandboxEnv(t, func(req model.Request) []agents.Item {
		return []agents.Item{call(strings.Repeat("c", len(req.Input)), "exec_command", `{"cmd":"touch x","workdir":null,"yield_time_ms":null,"max_output_tokens":null}`)}
	}, 2)
	env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "sb", Input: "loop"})
	if troupe.ErrorType(env.GetWorkflowError()) != troupe.ErrMaxTurns {
		t.Fatalf("err = %v, want max turns", env.GetWorkflowError())
	}
	if left := leftovers(t, root); len(left) != 0 {
		t.Errorf("workspaces left after a failed run: %v", left)
	}
}
