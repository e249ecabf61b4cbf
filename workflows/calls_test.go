package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/workflowstest"
)

// gauge counts the calls running at once, and the most it saw.
type gauge struct {
	hold          time.Duration // how long each call takes
	onEnter       func(id string)
	mu            sync.Mutex
	running, peak int
	ran           []string
}

// enter counts call id in for g.hold, then out.
func (g *gauge) enter(id string) {
	g.mu.Lock()
	g.running++
	g.peak = max(g.peak, g.running)
	g.ran = append(g.ran, id)
	g.mu.Unlock()
	if g.onEnter != nil {
		g.onEnter(id)
	}
	time.Sleep(g.hold)
	g.mu.Lock()
	g.running--
	g.mu.Unlock()
}

func (g *gauge) stats() (peak int, ran []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.peak, append([]string(nil), g.ran...)
}

// fanGraph is a graph whose agent fan calls work (a function tool) and
// rev (an agent tool) as often as its model asks, at most limit calls at
// once; the gauge counts both kinds.
func fanGraph(g *gauge, limit int) *agents.Graph {
	work := agents.MustFunctionTool("work", "Does some work.", func(_ context.Context, a struct {
		ID string `json:"id"`
	}) (string, error) {
		g.enter(a.ID)
		return "worked " + a.ID, nil
	})
	return agents.MustGraph("fan", "fan",
		&agents.Agent{Name: "fan", Instructions: "fan: fans out", MaxConcurrentCalls: limit,
			Tools: []agents.Tool{work, agents.AsTool("rev", "review", "Reviews a part.")}},
		&agents.Agent{Name: "rev", Instructions: "rev: reviews"},
	)
}

// fanModel asks for works function calls and reviews agent-tool calls
// in its first turn, then answers with the outputs it got, in order; the
// reviewers' model calls count in g.
func fanModel(g *gauge, works, reviews int) workflowstest.TurnFunc {
	return func(req model.Request) []agents.Item {
		last := workflowstest.LastItem(req)
		switch workflowstest.FirstWord(req.Instructions) {
		case "fan:":
			if last.Type == agents.ItemFunctionCallOutput {
				var outs []string
				for _, it := range req.Input {
					if it.Type == agents.ItemFunctionCallOutput {
						outs = append(outs, it.Output)
					}
				}
				return []agents.Item{agents.AssistantMessage(strings.Join(outs, "|"))}
			}
			var calls []agents.Item
			for i := range works {
				calls = append(calls, workflowstest.Call(fmt.Sprintf("w%d", i), "work", fmt.Sprintf(`{"id":"w%d"}`, i)))
			}
			for i := range reviews {
				calls = append(calls, workflowstest.Call(fmt.Sprintf("r%d", i), "review", fmt.Sprintf(`{"input":"r%d"}`, i)))
			}
			return calls
		default:
			g.enter(last.Content)
			return []agents.Item{agents.AssistantMessage("reviewed " + last.Content)}
		}
	}
}

// wantOutputs is what fanModel answers when every call ran: the outputs
// in the order the model asked for them.
func wantOutputs(works, reviews int) string {
	var outs []string
	for i := range works {
		outs = append(outs, fmt.Sprintf("worked w%d", i))
	}
	for i := range reviews {
		outs = append(outs, fmt.Sprintf("reviewed r%d", i))
	}
	return strings.Join(outs, "|")
}

// A turn's calls run at most the agent's bound at once (the run's own
// bound over it), the others waiting their turn, and their outputs reach
// the model in the order it asked for them; a turn of no more calls than
// its bound runs them all at once.
func TestTurnCallsBounded(t *testing.T) {
	for _, tc := range []struct {
		name              string
		limit, runLimit   int
		works, reviews    int
		wantPeak, atLeast int
	}{
		{name: "agent bound 3 over 10 calls", limit: 3, works: 6, reviews: 4, wantPeak: 3},
		{name: "run bound 1 over the agent's 3", limit: 3, runLimit: 1, works: 4, reviews: 2, wantPeak: 1},
		{name: "no more calls than the bound", limit: 10, works: 6, reviews: 4, wantPeak: 10, atLeast: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &gauge{hold: 20 * time.Millisecond}
			env := workflowstest.NewRunnerEnv(t, workflows.Config{Graphs: []*agents.Graph{fanGraph(g, tc.limit)},
				Model: &workflowstest.FuncModel{Func: fanModel(g, tc.works, tc.reviews)}})
			env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "fan", Input: "go", MaxConcurrentCalls: tc.runLimit})
			if got, want := workflowstest.FinalOutput(t, env), wantOutputs(tc.works, tc.reviews); got != want {
				t.Errorf("the model saw %s, want %s", got, want)
			}
			peak, ran := g.stats()
			if len(ran) != tc.works+tc.reviews {
				t.Errorf("%d calls ran, want %d: %v", len(ran), tc.works+tc.reviews, ran)
			}
			if peak > tc.wantPeak {
				t.Errorf("%d calls ran at once, want at most %d", peak, tc.wantPeak)
			}
			if peak < tc.atLeast {
				t.Errorf("%d calls ran at once, want at least %d (unbounded)", peak, tc.atLeast)
			}
		})
	}
}

// A bounded turn cancelled while calls wait for a slot starts none of
// them: the run ends cancelled with fewer calls run than asked for.
func TestTurnCallsBoundedCancelled(t *testing.T) {
	g := &gauge{hold: 20 * time.Millisecond}
	env := workflowstest.NewRunnerEnv(t, workflows.Config{Graphs: []*agents.Graph{fanGraph(g, 2)},
		Model: &workflowstest.FuncModel{Func: fanModel(g, 0, 8)}})
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Millisecond)
	env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "fan", Input: "go"})
	var canceled *temporal.CanceledError
	if err := env.GetWorkflowError(); !errors.As(err, &canceled) {
		t.Fatalf("run ended with %v, want cancelled", err)
	}
	if _, ran := g.stats(); len(ran) >= 8 {
		t.Errorf("%d of 8 calls ran after the turn was cancelled: %v", len(ran), ran)
	}
}

// A turn of many more agent-tool calls than its bound completes with
// every output in the model's order, never more than the bound running
// at once. (BenchmarkFanOutWide runs 2,500, past the 2,000 child
// workflows Temporal lets one workflow have pending, on a real server.)
func TestTurnOfManyAgentTools(t *testing.T) {
	const n, limit = 400, 25
	g := &gauge{}
	env := workflowstest.NewRunnerEnv(t, workflows.Config{Graphs: []*agents.Graph{fanGraph(g, limit)},
		Model: &workflowstest.FuncModel{Func: fanModel(g, 0, n)}})
	env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "fan", Input: "go"})
	if got, want := workflowstest.FinalOutput(t, env), wantOutputs(0, n); got != want {
		t.Errorf("the model saw %d bytes of outputs, want %d, in order", len(got), len(want))
	}
	peak, ran := g.stats()
	if len(ran) != n || peak > limit {
		t.Errorf("%d calls ran, at most %d at once; want %d, at most %d", len(ran), peak, n, limit)
	}
}

// A budget reaches every call of a bounded turn: with the run's model
// calls spent part way through, the calls still waiting for a slot are
// not made, and the run ends on the spent budget, with no more model
// calls than the budget allows.
func TestTurnCallsBoundedBudget(t *testing.T) {
	g := &gauge{hold: 5 * time.Millisecond}
	m := &workflowstest.FuncModel{Func: fanModel(g, 0, 8)}
	env := workflowstest.NewRunnerEnv(t, workflows.Config{Graphs: []*agents.Graph{fanGraph(g, 2)}, Model: m})
	env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "fan", Input: "go", Budget: &agents.Budget{ModelCalls: 4}})
	err := env.GetWorkflowError()
	if troupe.ErrorType(err) != troupe.ErrBudgetExceeded {
		t.Fatalf("run ended with %v, want %s", err, troupe.ErrBudgetExceeded)
	}
	if calls := m.Calls("fan:") + m.Calls("rev:"); calls > 4 {
		t.Errorf("%d model calls, over the budget of 4", calls)
	}
	if _, ran := g.stats(); len(ran) >= 8 {
		t.Errorf("all 8 reviews ran on a budget of 4 model calls: %v", ran)
	}
}

// A bounded turn paused while calls wait for a slot starts none of them
// until it is resumed: the call running finishes, the others start after
// the resume, and the turn completes with every output. (Agent tools: a
// signal reaches a workflow between its workflow tasks, and local
// activities run back to back within one.)
func TestTurnCallsBoundedPaused(t *testing.T) {
	g := &gauge{hold: 10 * time.Millisecond}
	graph := fanGraph(g, 1)
	env := workflowstest.NewRunnerEnv(t, workflows.Config{Graphs: []*agents.Graph{graph},
		Model: &workflowstest.FuncModel{Func: fanModel(g, 0, 3)}})
	g.onEnter = func(id string) {
		if id == "r0" { // Paused while the first call runs.
			env.SignalWorkflow(troupe.ControlSignal, troupe.Control{Op: troupe.ControlPause, Seq: 1})
		}
	}
	var resumedAt time.Time
	env.RegisterDelayedCallback(func() {
		resumedAt = env.Now()
		env.SignalWorkflow(troupe.ControlSignal, troupe.Control{Op: troupe.ControlResume, Seq: 2})
	}, time.Hour)
	// The run's spec, as an orchestrator or a session passes it: an agent
	// without one is of a run from before specs, which bounded nothing.
	spec := runtime.SpecOf(graph, runtime.RunSettings{MaxHandoffs: 5, MaxToolDepth: 5})
	env.ExecuteWorkflow(troupe.AgentWorkflowName, troupe.AgentInput{Graph: "fan", Agent: "fan", RunID: "run", Spec: spec,
		Pending: []agents.Item{agents.UserMessage("go")}})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("agent ended %v", err)
	}
	var res troupe.AgentResult
	if err := env.GetWorkflowResult(&res); err != nil || string(res.Output) != `"`+wantOutputs(0, 3)+`"` {
		t.Errorf("result %s, %v; want every output", res.Output, err)
	}
	var started []time.Time
	for _, e := range workflowstest.Recorded(t, env, 0) {
		if e.Kind == troupe.EventAgentToolStarted {
			started = append(started, e.Time)
		}
	}
	if len(started) != 3 || resumedAt.IsZero() {
		t.Fatalf("%d calls started, resumed at %s; want 3, resumed", len(started), resumedAt)
	}
	for i, at := range started[1:] {
		if at.Before(resumedAt) {
			t.Errorf("call %d started at %s, before the resume at %s", i+2, at, resumedAt)
		}
	}
}
