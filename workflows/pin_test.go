package workflows_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/workflowstest"
)

// redeployed is a test environment where the run's orchestrator ran on a
// worker serving before, and everything after it (agent workflows and
// activities) runs on a worker redeployed with after: a redeploy in the
// middle of a run.
func redeployed(t *testing.T, fn workflowstest.TurnFunc, before, after *agents.Graph) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	env := workflowstest.NewEnv()
	store, err := blob.Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	m := &workflowstest.FuncModel{Func: fn}
	old, err := workflows.NewRunner(workflows.Config{Graphs: []*agents.Graph{before}, Model: m, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	now, err := workflows.NewRunner(workflows.Config{Graphs: []*agents.Graph{after}, Model: m, Store: store, ModelActivities: true})
	if err != nil {
		t.Fatal(err)
	}
	env.RegisterWorkflowWithOptions(old.OrchestratorWorkflow, workflow.RegisterOptions{Name: troupe.OrchestratorWorkflowName})
	env.RegisterWorkflowWithOptions(now.AgentWorkflow, workflow.RegisterOptions{Name: troupe.AgentWorkflowName})
	now.RegisterActivities(env)
	return env
}

// A run keeps the graph it started with: after a redeploy whose graph
// lost a tool and gained an input filter, the model is still offered the
// tool, as a stand-in that says it is gone, and told so when it calls it;
// the handoff goes on without the filter the run never had, and the run
// completes.
func TestRunKeepsItsGraph(t *testing.T) {
	lookup := agents.MustFunctionTool("lookup", "Looks a key up.", func(_ context.Context, a struct {
		Key string `json:"key"`
	}) (string, error) {
		return "value-of-" + a.Key, nil
	})
	before := agents.MustGraph("pin", "a",
		&agents.Agent{Name: "a", Instructions: "a: first", Handoffs: []agents.Handoff{agents.HandoffTo("b")}},
		&agents.Agent{Name: "b", Instructions: "b: second", Tools: []agents.Tool{lookup}})
	var filtered atomic.Int32
	filter := func(_ context.Context, in agents.HandoffInput) (agents.HandoffInput, error) {
		filtered.Add(1)
		return in, nil
	}
	extra := agents.MustFunctionTool("extra", "Gained after the run started.", func(context.Context, struct{}) (string, error) { return "", nil })
	after := agents.MustGraph("pin", "a",
		&agents.Agent{Name: "a", Instructions: "a: first", Handoffs: []agents.Handoff{{Target: "b", InputFilter: filter}}},
		&agents.Agent{Name: "b", Instructions: "b: second", Tools: []agents.Tool{extra}})
	var mu sync.Mutex
	var offeredToB []string
	env := redeployed(t, func(req model.Request) []agents.Item {
		if workflowstest.FirstWord(req.Instructions) == "b:" {
			mu.Lock()
			for _, tool := range req.Tools {
				offeredToB = append(offeredToB, tool.Name+": "+tool.Description)
			}
			mu.Unlock()
		}
		switch last := workflowstest.LastItem(req); {
		case workflowstest.FirstWord(req.Instructions) == "a:":
			return []agents.Item{workflowstest.Call("h1", "transfer_to_b", "{}")}
		case last.Type == agents.ItemFunctionCallOutput && last.CallID == "l1":
			return []agents.Item{agents.AssistantMessage("lookup said: " + last.Output)}
		default:
			return []agents.Item{workflowstest.Call("l1", "lookup", `{"key":"k"}`)}
		}
	}, before, after)
	env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "pin", Input: "go"})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("the run failed after the redeploy: %v", err)
	}
	var res troupe.RunResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if out := string(res.Output); !strings.Contains(out, "lookup said: Error: tool lookup is no longer available") {
		t.Errorf("output = %s, want the model told that lookup is gone", out)
	}
	if n := filtered.Load(); n != 0 {
		t.Errorf("the input filter the run never had ran %d time(s)", n)
	}
	// The lost tool is offered, saying it is gone, on every turn (a
	// model would otherwise carry on as if it never had it); the gained
	// one is not the run's.
	mu.Lock()
	defer mu.Unlock()
	if len(offeredToB) != 2 || !strings.HasPrefix(offeredToB[0], "lookup: Unavailable:") || offeredToB[1] != offeredToB[0] {
		t.Errorf("b was offered %q, want the stand-in for lookup on both its turns", offeredToB)
	}
	if got := strings.Join(res.Path, ","); got != "a,b" {
		t.Errorf("path = %s", got)
	}
}

// An agent the run needs that the redeployed graph no longer has fails
// the run with troupe.GraphChanged naming it: no nondeterminism, no hang.
func TestGraphChangedAgentGone(t *testing.T) {
	before := agents.MustGraph("pin", "a",
		&agents.Agent{Name: "a", Instructions: "a: first", Handoffs: []agents.Handoff{agents.HandoffTo("b")}},
		&agents.Agent{Name: "b", Instructions: "b: second"})
	after := agents.MustGraph("pin", "a", &agents.Agent{Name: "a", Instructions: "a: first"})
	env := redeployed(t, func(req model.Request) []agents.Item {
		if workflowstest.FirstWord(req.Instructions) == "a:" {
			return []agents.Item{workflowstest.Call("h1", "transfer_to_b", "{}")}
		}
		return []agents.Item{agents.AssistantMessage("b answers")}
	}, before, after)
	env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "pin", Input: "go"})
	err := env.GetWorkflowError()
	if troupe.ErrorType(err) != troupe.ErrGraphChanged || !strings.Contains(err.Error(), `agent "b"`) {
		t.Fatalf("run error = %v (type %q), want %s naming agent b", err, troupe.ErrorType(err), troupe.ErrGraphChanged)
	}
}

// What a run pinned and the redeployed graph no longer has never goes
// quietly: a handoff's input filter lost fails the run with
// troupe.GraphChanged (its target would read the conversation
// unfiltered); an agent tool's extractor lost is a tool error the model
// reads, naming it.
func TestGraphChangedHooksGone(t *testing.T) {
	filter := func(_ context.Context, in agents.HandoffInput) (agents.HandoffInput, error) { return in, nil }
	extract := func(context.Context, agents.ToolRunResult) (string, error) { return "extracted", nil }
	withExtractor := agents.AsTool("b", "ask_b", "Asks b.")
	withExtractor.Extractor = extract
	for _, tc := range []struct {
		name          string
		before, after *agents.Graph
		wantErr       string // in the run's GraphChanged error
		wantOutput    string // in the run's output
	}{
		{
			name: "an input filter",
			before: agents.MustGraph("pin", "a",
				&agents.Agent{Name: "a", Instructions: "a: first", Handoffs: []agents.Handoff{{Target: "b", InputFilter: filter}}},
				&agents.Agent{Name: "b", Instructions: "b: second"}),
			after: agents.MustGraph("pin", "a",
				&agents.Agent{Name: "a", Instructions: "a: first", Handoffs: []agents.Handoff{agents.HandoffTo("b")}},
				&agents.Agent{Name: "b", Instructions: "b: second"}),
			wantErr: `handoff transfer_to_b of agent "a" had an input filter or callback`,
		},
		{
			name: "an extractor",
			before: agents.MustGraph("pin", "a",
				&agents.Agent{Name: "a", Instructions: "a: first", Tools: []agents.Tool{withExtractor}},
				&agents.Agent{Name: "b", Instructions: "b: second"}),
			after: agents.MustGraph("pin", "a",
				&agents.Agent{Name: "a", Instructions: "a: first", Tools: []agents.Tool{agents.AsTool("b", "ask_b", "Asks b.")}},
				&agents.Agent{Name: "b", Instructions: "b: second"}),
			wantOutput: "a read: Error: output extractor of ask_b failed: troupe.GraphChanged: the extractor of agent tool ask_b is no longer in graph",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := redeployed(t, func(req model.Request) []agents.Item {
				last := workflowstest.LastItem(req)
				switch {
				case workflowstest.FirstWord(req.Instructions) == "b:":
					return []agents.Item{agents.AssistantMessage("b answers")}
				case last.Type == agents.ItemFunctionCallOutput:
					return []agents.Item{agents.AssistantMessage("a read: " + last.Output)}
				case len(req.Tools) > 0 && req.Tools[0].Name == "ask_b":
					return []agents.Item{workflowstest.Call("c1", "ask_b", `{"input":"go"}`)}
				}
				return []agents.Item{workflowstest.Call("h1", "transfer_to_b", "{}")}
			}, tc.before, tc.after)
			env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "pin", Input: "go"})
			err := env.GetWorkflowError()
			if tc.wantErr != "" {
				if troupe.ErrorType(err) != troupe.ErrGraphChanged || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("run error = %v (type %q), want %s saying %q", err, troupe.ErrorType(err), troupe.ErrGraphChanged, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var res troupe.RunResult
			if err := env.GetWorkflowResult(&res); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(res.Output), tc.wantOutput) {
				t.Errorf("output = %s, want %q", res.Output, tc.wantOutput)
			}
		})
	}
}
