package guardrail_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/workflowstest"
)

// A guardrail for every tool (Tool "") that trips on a call the gate never
// screens (an unknown tool: answered "unknown tool" before any gate) and
// cannot decide on a real call: the trip, which makes the guardrail
// activity succeed whatever failed beside it, must not make the real call
// pass. The model call's checks leave such a turn to the gate's activity,
// which fails the agent as undecided, as before the checks rode with the
// model call.
func TestPrecheckedTripLeavesNoCallUndecided(t *testing.T) {
	ran := &workflowstest.Strings{}
	lookup := agents.MustFunctionTool("lookup", "Looks a key up.", func(_ context.Context, a struct {
		Key string `json:"key"`
	}) (string, error) {
		ran.Add(a.Key)
		return "secret-" + a.Key, nil
	})
	guard := agents.ToolGuardrail{Name: "allow", Before: func(_ context.Context, c agents.ToolCall) (agents.ToolVerdict, error) {
		if c.Tool != "lookup" {
			return agents.TripTool("tool " + c.Tool + " is not allowed"), nil
		}
		return agents.ToolVerdict{}, errors.New("the policy service is down")
	}}
	g := agents.MustGraph("masks", "main", &agents.Agent{Name: "main", Instructions: "main: looks up", Tools: []agents.Tool{lookup},
		ToolGuardrails: []agents.ToolGuardrail{guard}})
	m := &workflowstest.FuncModel{Func: func(req model.Request) []agents.Item {
		if len(workflowstest.OutputsOf(req)) > 0 {
			return []agents.Item{agents.AssistantMessage("done")}
		}
		return []agents.Item{workflowstest.Call("c1", "ghost", "{}"), workflowstest.Call("c2", "lookup", `{"key":"a"}`)}
	}}
	env := workflowstest.NewRunnerEnv(t, workflows.Config{Graphs: []*agents.Graph{g}, Model: m})
	env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "masks", Input: "look up"})
	_, err := workflowstest.Result(t, env)
	if got := ran.List(); len(got) > 0 {
		t.Errorf("looked up %v although its guardrail could not decide", got)
	}
	if err == nil {
		t.Errorf("the run succeeded, want it failed: its guardrail could not decide")
	}
}

// A guardrail func slower than what is left of the model call's timeout,
// once: the model call's checks give up on it and leave it to the gate's
// activity, which has its minute; the model call is neither timed out nor
// made again because of it (local and regular model activities).
func TestSlowPrecheckLeavesTheModelCallAlone(t *testing.T) {
	for _, tc := range []struct {
		name            string
		modelActivities bool
	}{{"local", false}, {"activities", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var slow atomic.Bool
			runSlowScreen(t, workflows.Config{ModelTimeout: 2 * time.Second, ModelActivities: tc.modelActivities}, func() {
				if !slow.Swap(true) {
					time.Sleep(3 * time.Second) // once: well within the guardrail activity's minute
				}
			})
		})
	}
}

// A guardrail func that always takes longer than what the model call
// leaves of its timeout, well within its own activity's minute: each turn
// falls back to the gate's activity, and the agent ends well with one model
// call per turn.
func TestAlwaysSlowPrecheckFallsBack(t *testing.T) {
	runSlowScreen(t, workflows.Config{ModelTimeout: time.Second}, func() { time.Sleep(1500 * time.Millisecond) })
}

// runSlowScreen runs an agent that looks a key up once, its calls checked
// by a tool guardrail func that passes after wait, on a Runner configured
// as cfg (its graph and model set here), and fails t unless the run ends
// well with one model call per turn.
func runSlowScreen(t *testing.T, cfg workflows.Config, wait func()) {
	t.Helper()
	lookup := agents.MustFunctionTool("lookup", "Looks a key up.", func(_ context.Context, a struct {
		Key string `json:"key"`
	}) (string, error) {
		return "secret-" + a.Key, nil
	})
	guard := agents.ToolGuardrail{Name: "screen", Tool: "lookup", Before: func(context.Context, agents.ToolCall) (agents.ToolVerdict, error) {
		wait()
		return agents.ToolVerdict{}, nil
	}}
	cfg.Graphs = []*agents.Graph{agents.MustGraph("slow", "main", &agents.Agent{Name: "main", Instructions: "main: looks up",
		Tools: []agents.Tool{lookup}, ToolGuardrails: []agents.ToolGuardrail{guard}})}
	m := &workflowstest.FuncModel{Func: func(req model.Request) []agents.Item {
		if len(workflowstest.OutputsOf(req)) > 0 {
			return []agents.Item{agents.AssistantMessage("done")}
		}
		return []agents.Item{workflowstest.Call("c1", "lookup", `{"key":"a"}`)}
	}}
	cfg.Model = m
	env := workflowstest.NewRunnerEnv(t, cfg)
	env.SetTestTimeout(time.Minute)
	env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "slow", Input: "look up"})
	if _, err := workflowstest.Result(t, env); err != nil {
		t.Errorf("run failed: %v", err)
	}
	if n := m.Calls("main:"); n != 2 {
		t.Errorf("the model was called %d times, want 2 (one per turn)", n)
	}
}
