// Package gatetest is the conformance suite of the gates of an agent's
// chain (package workflows/gate): what a gate may do to a tool call, each
// checked the same way through a real run, whichever gate does it.
// Approvals (workflows/approval), guardrails (workflows/guardrail) and
// budgets (workflows/budget) run it with their cases; a new gate runs it
// too.
//
// Run goes through these steps for each case of a Suite:
//
//  1. It builds a graph whose agent under test, "agent" (Agent), has one
//     function tool, "act" (Tool), which records the arguments it ran
//     with and returns a fixed text (Output); the case adds its gate to
//     that agent (Case.Gate), and the agents the gate needs (guardrail
//     agents: Case.Agents).
//  2. It scripts the model (workflowstest.FuncModel): the agent's first
//     turn calls act with Args (call id CallID), its second answers with
//     what it read as act's output; the case answers for its own agents
//     (Case.Answer).
//  3. It runs the graph with the real Runner (workflows.NewRunner) on the
//     SDK's test environment, under the case's budget (Case.Budget), doing
//     what the case does during the run (Case.Release) from a delayed
//     callback.
//  4. It asserts the outcome that the case's kind promises (see Suite),
//     the same for every gate.
//
// The properties of the chain itself, whatever its gates (the order of
// the points and of the gates at each, an empty chain that costs nothing,
// a gate that panics failing the agent with a non-retryable
// troupe.GateFailed error that names it), are held by the chain's own
// tests, workflows/gate/gate_test.go, with gates of their own.
package gatetest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/workflowstest"
)

// The graph that Run builds.
const (
	// Graph is the graph's name.
	Graph = "gatetest"
	// Agent is the agent under test; its instructions start "agent:", as
	// its model calls are counted (workflowstest.FuncModel.Calls).
	Agent = "agent"
	// Tool is the agent's function tool, whose call the gate acts on.
	Tool = "act"
	// CallID is the id of the agent's call of Tool.
	CallID = "call-act"
	// Args are the arguments the model calls Tool with: an ActArgs.
	Args = `{"input":"as asked"}`
	// Output is what Tool returns, whatever its arguments.
	Output = "act ran"
)

// ActArgs are Tool's arguments; an edit of a call's arguments gives others
// of this shape.
type ActArgs struct {
	Input string `json:"input"`
}

// Suite says how the gate under test does each thing a gate may do to the
// agent's call of Tool; a nil case is one it cannot do, which Run leaves
// out. Each case runs as a subtest of its kind's name.
type Suite struct {
	// Passes configures the gate so that it lets the call through: the
	// run is exactly the run without the gate (Tool ran once with Args,
	// the model read Output, the same final output, turns and tool
	// calls).
	Passes *Case
	// Rejects has the gate refuse the call: the model reads the refusal
	// as the call's output, starting "Error:"; Tool never ran; the run
	// goes on to its final output.
	Rejects *Case
	// Edits has the gate change the call: it runs with arguments other
	// than Args, or the model reads an output other than Output (and no
	// refusal); the run goes on to its final output.
	Edits *Case
	// Delays has the gate hold the call until Release: Tool has not run
	// before it (though the model asked for the call), runs after it,
	// and the run goes on to its final output.
	Delays *Case
	// Trips has the gate end the run: with an application error of type
	// ErrorType, and no model call of the agent reads Tool's output
	// after the gate acted.
	Trips *Case
}

// Case is one thing the gate under test does, and how to make it do it.
type Case struct {
	// Gate adds the gate under test to the agent under test: its approval
	// policies, its guardrails. Nil adds nothing (a budget is the run's:
	// Budget).
	Gate func(a *agents.Agent)
	// Agents are the other agents the gate needs (guardrail agents).
	Agents []*agents.Agent
	// Answer answers the model calls of the other agents; nil when there
	// are none.
	Answer workflowstest.TurnFunc
	// Budget is the run's budget (troupe.RunInput.Budget); nil for none.
	Budget *agents.Budget
	// Release, when set, is what the case does during the run (a decision
	// on the call that waits for approval, say), At into it, from a
	// delayed callback (env.RegisterDelayedCallback). It is required for
	// Delays: what the call waits for.
	Release func(t *testing.T, env *testsuite.TestWorkflowEnvironment)
	// At is when Release runs, in the run's (test environment's) time;
	// zero is a minute.
	At time.Duration
	// ErrorType is the type of the application error the run ends with
	// (Trips): troupe.ErrGuardrailTripped, troupe.ErrBudgetExceeded.
	ErrorType string
}

// Run runs each case of s that is set, as a subtest named for its kind
// ("Passes", "Rejects", "Edits", "Delays", "Trips"), and fails it unless
// the gate did what the kind promises.
func Run(t *testing.T, s Suite) {
	t.Helper()
	cases := []struct {
		name  string
		c     *Case
		check func(t *testing.T, c *Case, o *outcome)
	}{
		{"Passes", s.Passes, passes},
		{"Rejects", s.Rejects, rejects},
		{"Edits", s.Edits, edits},
		{"Delays", s.Delays, delays},
		{"Trips", s.Trips, trips},
	}
	for _, tc := range cases {
		if tc.c == nil {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "Delays" && tc.c.Release == nil {
				t.Fatal("a Delays case says what releases the call: its Release is nil")
			}
			tc.check(t, tc.c, run(t, tc.c))
		})
	}
}

// outcome is what a run of the graph did.
type outcome struct {
	// ran are the arguments Tool ran with, as JSON, in order; read what the
	// agent's model calls read as Tool's output.
	ran, read []string
	// agentCalls are the agent's model calls.
	agentCalls int
	// released says the case's Release came; early that Tool ran before
	// it; modelledAt and ranAtRelease how many model calls the agent had
	// made, and how many times Tool had run, when it came.
	released, early          bool
	modelledAt, ranAtRelease int
	// completed says the run ended, err how (an application error when
	// appError), res with what when it did not fail.
	completed, appError bool
	err                 error
	res                 *troupe.RunResult
	// unanswered are the other agents the model was asked as, which the
	// case gave no Answer for.
	unanswered []string
}

// run builds the graph with c's gate, runs it and says what it did.
func run(t *testing.T, c *Case) *outcome {
	t.Helper()
	var ran, read, unanswered workflowstest.Strings
	var released, early atomic.Bool
	act := agents.MustFunctionTool(Tool, "Acts on the input.", func(_ context.Context, a ActArgs) (string, error) {
		data, _ := json.Marshal(a)
		ran.Add(string(data))
		if c.Release != nil && !released.Load() {
			early.Store(true)
		}
		return Output, nil
	})
	agent := &agents.Agent{Name: Agent, Instructions: Agent + ": acts once, then says what it read", Tools: []agents.Tool{act}}
	if c.Gate != nil {
		c.Gate(agent)
	}
	g := agents.MustGraph(Graph, Agent, append([]*agents.Agent{agent}, c.Agents...)...)
	m := &workflowstest.FuncModel{Func: func(req model.Request) []agents.Item {
		if workflowstest.FirstWord(req.Instructions) != Agent+":" {
			if c.Answer == nil {
				unanswered.Add(workflowstest.FirstWord(req.Instructions))
				return []agents.Item{agents.AssistantMessage("the case gives no answer")}
			}
			return c.Answer(req)
		}
		if out, ok := workflowstest.OutputsOf(req)[CallID]; ok {
			read.Add(out)
			return []agents.Item{agents.AssistantMessage("read: " + out)}
		}
		return []agents.Item{workflowstest.Call(CallID, Tool, Args)}
	}}
	env := workflowstest.NewRunnerEnv(t, workflows.Config{Graphs: []*agents.Graph{g}, Model: m})
	o := &outcome{}
	if c.Release != nil {
		at := c.At
		if at == 0 {
			at = time.Minute
		}
		env.RegisterDelayedCallback(func() {
			o.modelledAt, o.ranAtRelease = m.Calls(Agent+":"), len(ran.List())
			released.Store(true)
			c.Release(t, env)
			o.released = true
		}, at)
	}
	env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: Graph, Agent: Agent, Input: "act", Budget: c.Budget})
	o.completed = env.IsWorkflowCompleted()
	if o.completed {
		if o.err = env.GetWorkflowError(); o.err == nil {
			var res troupe.RunResult
			if err := env.GetWorkflowResult(&res); err != nil {
				t.Fatal(err)
			}
			o.res = &res
		}
	}
	var ae *temporal.ApplicationError
	o.appError = errors.As(o.err, &ae)
	o.ran, o.read, o.unanswered = ran.List(), read.List(), unanswered.List()
	o.early, o.agentCalls = early.Load(), m.Calls(Agent+":")
	if len(o.unanswered) > 0 {
		t.Errorf("the model was asked as %v, which the case gives no Answer for", o.unanswered)
	}
	return o
}

// finished fails t unless the run ended with a final output: what the
// agent read as Tool's output.
func finished(t *testing.T, o *outcome) bool {
	t.Helper()
	switch {
	case !o.completed:
		t.Error("the run did not complete")
	case o.err != nil:
		t.Errorf("the run failed: %v; want it to go on to its final output", o.err)
	case len(o.read) != 1:
		t.Errorf("the agent read Tool's output %d times (%q); want once", len(o.read), o.read)
	default:
		var text string
		_ = json.Unmarshal(o.res.Output, &text)
		if text != "read: "+o.read[0] {
			t.Errorf("final output %s; want what the agent read, %q", o.res.Output, "read: "+o.read[0])
		}
		return true
	}
	return false
}

func passes(t *testing.T, _ *Case, o *outcome) {
	if !finished(t, o) {
		return
	}
	plain := run(t, &Case{}) // the run without the gate
	if !slices.Equal(o.ran, []string{Args}) || !slices.Equal(o.read, []string{Output}) {
		t.Errorf("act ran with %q and the model read %q; want it run once with %s, and its own output read", o.ran, o.read, Args)
	}
	if !finished(t, plain) {
		t.Fatal("the run without the gate did not finish")
	}
	if string(o.res.Output) != string(plain.res.Output) || o.res.ToolCalls != plain.res.ToolCalls || o.res.Turns != plain.res.Turns || o.agentCalls != plain.agentCalls {
		t.Errorf("output %s after %d turns, %d tool calls, %d model calls; without the gate %s after %d, %d, %d",
			o.res.Output, o.res.Turns, o.res.ToolCalls, o.agentCalls, plain.res.Output, plain.res.Turns, plain.res.ToolCalls, plain.agentCalls)
	}
}

func rejects(t *testing.T, _ *Case, o *outcome) {
	if !finished(t, o) {
		return
	}
	if len(o.ran) != 0 {
		t.Errorf("act ran with %q; want it refused, never run", o.ran)
	}
	if !strings.HasPrefix(o.read[0], "Error:") {
		t.Errorf("the model read %q as the call's output; want the refusal, starting \"Error:\"", o.read[0])
	}
}

func edits(t *testing.T, _ *Case, o *outcome) {
	if !finished(t, o) {
		return
	}
	if len(o.ran) > 1 {
		t.Errorf("act ran %d times (%q); want once at most", len(o.ran), o.ran)
	}
	if strings.HasPrefix(o.read[0], "Error:") {
		t.Errorf("the model read %q: a refusal, not an edit", o.read[0])
	}
	argsEdited := len(o.ran) == 1 && o.ran[0] != Args
	if !argsEdited && o.read[0] == Output {
		t.Errorf("act ran with %q and the model read %q: the call as it was; want other arguments or another output", o.ran, o.read[0])
	}
}

func delays(t *testing.T, _ *Case, o *outcome) {
	if !o.released {
		t.Fatalf("the run ended (err %v) before the case's Release came", o.err)
	}
	if o.modelledAt != 1 || o.ranAtRelease != 0 || o.early {
		t.Errorf("at Release the model had been asked %d times and act had run %d times (early %v); want the call asked for and not run",
			o.modelledAt, o.ranAtRelease, o.early)
	}
	if !finished(t, o) {
		return
	}
	if len(o.ran) != 1 {
		t.Errorf("act ran %d times after Release (%q); want once", len(o.ran), o.ran)
	}
}

func trips(t *testing.T, c *Case, o *outcome) {
	if !o.completed {
		t.Fatal("the run did not complete")
	}
	if o.err == nil || !o.appError || troupe.ErrorType(o.err) != c.ErrorType {
		t.Errorf("the run ended with %v; want an application error of type %s", o.err, c.ErrorType)
	}
	if len(o.read) != 0 {
		t.Errorf("the agent's model read %q as act's output after the gate acted; want no model call to read it", o.read)
	}
}
