package gate_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/workflows/gate"
)

// These tests hold the chain itself with gates of their own: the order of
// the points and of the gates at each, what each point lets a gate do
// (refuse, edit, delay, answer, trip), and a gate that panics. The gates
// Troupe ships (approvals, guardrails, budgets) pass the conformance suite
// of package gatetest, through a real agent workflow.

// step is a gate that logs each point it is asked at and does there what
// its fields say.
type step struct {
	name string
	log  *[]string
	// refuse fails BeforeTurn; delay sleeps in AroundCalls before letting
	// the inner gates decide; answer answers every call; edit rewrites
	// every call's arguments, and every output; trip fails the agent from
	// AfterCall; panics panics at the point it names.
	refuse error
	delay  time.Duration
	answer string
	edit   bool
	trip   error
	panics string
}

func (s *step) Name() string { return s.name }

func (s *step) note(point string) {
	*s.log = append(*s.log, s.name+"."+point)
	if s.panics == point {
		panic("boom at " + point)
	}
}

func (s *step) BeforeTurn(workflow.Context, *gate.Turn, *gate.ModelCall) error {
	s.note("BeforeTurn")
	return s.refuse
}

func (s *step) AroundModel(ctx workflow.Context, _ *gate.Turn, m *gate.ModelCall, next func(workflow.Context) error) error {
	s.note("AroundModel<")
	err := next(ctx)
	s.note("AroundModel>")
	return err
}

func (s *step) AfterModel(workflow.Context, *gate.Turn, *gate.ModelCall) { s.note("AfterModel") }

func (s *step) AroundCalls(ctx workflow.Context, t *gate.Turn, calls *gate.Calls, next func(workflow.Context) error) error {
	s.note("AroundCalls<")
	if s.delay > 0 {
		if err := workflow.Sleep(ctx, s.delay); err != nil {
			return err
		}
	}
	if s.edit {
		for i := range calls.Dispatch.Functions {
			calls.Dispatch.Functions[i].Arguments = `{"edited":true}`
		}
	}
	err := next(ctx)
	s.note("AroundCalls>")
	return err
}

func (s *step) BeforeCall(_ workflow.Context, _ *gate.Turn, c gate.Call) string {
	s.note("BeforeCall")
	return s.answer
}

func (s *step) Checks(*gate.Turn, gate.Call) bool {
	return s.edit || s.trip != nil || s.panics == "AfterCall"
}

func (s *step) AfterCall(_ workflow.Context, t *gate.Turn, c gate.Call, out agents.Item) agents.Item {
	s.note("AfterCall")
	if s.trip != nil {
		t.Fail(s.trip)
	}
	if s.edit {
		out.Output = strings.ToUpper(out.Output)
	}
	return out
}

func (s *step) BeforeFinal(workflow.Context, *gate.Turn, json.RawMessage) error {
	s.note("BeforeFinal")
	return nil
}

func (s *step) BeforeChildren(workflow.Context, *gate.Turn) { s.note("BeforeChildren") }

// outcome is what one pass of a turn through the chain did.
type outcome struct {
	Log      []string
	Refused  string
	Args     string
	Answer   string
	Output   string
	Fatal    string
	Error    string
	ErrType  string
	Modelled bool
	Took     time.Duration
	// NonRetryable says the error that ended the turn is.
	NonRetryable bool
}

// turnWorkflow takes one turn through a chain of gates: the model call
// (which "answers" with a call of tool act), the call (which "runs" and
// outputs "acted"), and the final output.
func turnWorkflow(gates func(log *[]string) []gate.Gate) func(ctx workflow.Context) (outcome, error) {
	return func(ctx workflow.Context) (outcome, error) {
		var o outcome
		began := workflow.Now(ctx)
		agent := &runtime.AgentSpec{Name: "a", Tools: []runtime.ToolSpec{{Name: "act", Kind: agents.ToolFunction}}}
		t := &gate.Turn{Agent: agent, Spec: &runtime.GraphSpec{}, Run: agents.RunContext{WorkflowID: "wf", Agent: "a", Turn: 1}}
		chain := gate.New(t, gates(&o.Log)...)
		finish := func(err error) (outcome, error) {
			o.Took = workflow.Now(ctx).Sub(began)
			if err != nil {
				o.Error, o.ErrType = err.Error(), troupe.ErrorType(err)
				var ae *temporal.ApplicationError
				o.NonRetryable = errors.As(err, &ae) && ae.NonRetryable()
			}
			return o, nil
		}
		m := gate.ModelCall{Turn: 1}
		if err := chain.BeforeTurn(ctx, &m); err != nil {
			o.Refused = err.Error()
			return finish(err)
		}
		if err := chain.AroundModel(ctx, &m, func(workflow.Context) error { o.Modelled = true; return nil }); err != nil {
			return finish(err)
		}
		if err := chain.AfterModel(ctx, &m); err != nil {
			return finish(err)
		}
		act := agents.FunctionCall("c1", "act", `{"n":1}`)
		d := runtime.Dispatch{Functions: []agents.Item{act}}
		var fatal error
		calls := &gate.Calls{Dispatch: &d, Done: map[string]agents.Item{}}
		if err := chain.BeforeCalls(ctx, calls, &fatal); err != nil {
			return finish(err)
		}
		for _, c := range d.Functions {
			call := gate.Call{Item: c, Kind: gate.KindFunction, Tool: agent.Tool("act")}
			o.Args = c.Arguments
			if why := chain.BeforeCall(ctx, call); why != "" {
				o.Answer = why
				continue
			}
			chain.Spawning(ctx)
			out := chain.AfterCall(ctx, call, t.Output(c, "acted"))
			o.Output = out.Output
		}
		if fatal != nil {
			o.Fatal = fatal.Error()
			return finish(fatal)
		}
		return finish(chain.BeforeFinal(ctx, json.RawMessage(`"done"`)))
	}
}

func runTurn(t *testing.T, gates func(log *[]string) []gate.Gate) outcome {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(turnWorkflow(gates), workflow.RegisterOptions{Name: "turn"})
	env.ExecuteWorkflow("turn")
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("the turn's workflow failed: %v", err)
	}
	var o outcome
	if err := env.GetWorkflowResult(&o); err != nil {
		t.Fatal(err)
	}
	return o
}

func TestChainOrder(t *testing.T) {
	o := runTurn(t, func(log *[]string) []gate.Gate {
		return []gate.Gate{&step{name: "outer", log: log}, nil, (*step)(nil), &step{name: "inner", log: log}}
	})
	want := strings.Join([]string{
		"outer.BeforeTurn", "inner.BeforeTurn",
		"outer.AroundModel<", "inner.AroundModel<", "inner.AroundModel>", "outer.AroundModel>",
		"outer.AfterModel", "inner.AfterModel",
		"outer.AroundCalls<", "inner.AroundCalls<", "inner.AroundCalls>", "outer.AroundCalls>",
		"outer.BeforeCall", "inner.BeforeCall",
		"outer.BeforeChildren", "inner.BeforeChildren",
		"outer.BeforeFinal", "inner.BeforeFinal",
	}, " ")
	if got := strings.Join(o.Log, " "); got != want {
		t.Errorf("the chain asked\n  %s\nwant\n  %s", got, want)
	}
	if !o.Modelled || o.Output != "acted" || o.Error != "" {
		t.Errorf("a chain whose gates let all through: %+v", o)
	}
}

func TestChainEmpty(t *testing.T) {
	o := runTurn(t, func(*[]string) []gate.Gate { return nil })
	if !o.Modelled || o.Output != "acted" || o.Args != `{"n":1}` || o.Error != "" || o.Took != 0 {
		t.Errorf("an empty chain: %+v; want everything through, at once", o)
	}
	if !gate.New(&gate.Turn{}).Empty() || !(*gate.Chain)(nil).Empty() {
		t.Error("a chain of no gates is not Empty")
	}
}

func TestChainGates(t *testing.T) {
	spent := temporal.NewNonRetryableApplicationError("spent", troupe.ErrBudgetExceeded, nil)
	tripped := temporal.NewNonRetryableApplicationError("tripped", troupe.ErrGuardrailTripped, nil)
	tests := []struct {
		name  string
		gates []*step
		check func(t *testing.T, o outcome)
	}{
		{"a gate that refuses the model call stops the gates after it", []*step{{name: "a", refuse: spent}, {name: "b"}}, func(t *testing.T, o outcome) {
			if o.ErrType != troupe.ErrBudgetExceeded || o.Modelled || strings.Contains(strings.Join(o.Log, " "), "b.") {
				t.Errorf("refused: %+v", o)
			}
		}},
		{"a gate that answers a call keeps it from running", []*step{{name: "a", answer: "not today"}}, func(t *testing.T, o outcome) {
			if o.Answer != "not today" || o.Output != "" || o.Error != "" {
				t.Errorf("answered: %+v", o)
			}
		}},
		{"a gate edits a call's arguments and its output", []*step{{name: "a", edit: true}}, func(t *testing.T, o outcome) {
			if o.Args != `{"edited":true}` || o.Output != "ACTED" {
				t.Errorf("edited: %+v", o)
			}
		}},
		{"a gate delays the calls durably", []*step{{name: "a", delay: time.Hour}, {name: "b"}}, func(t *testing.T, o outcome) {
			if o.Took < time.Hour || o.Output != "acted" {
				t.Errorf("delayed: %+v", o)
			}
		}},
		{"a gate that trips on an output ends the agent with its error", []*step{{name: "a", trip: tripped}, {name: "b", trip: spent}}, func(t *testing.T, o outcome) {
			if o.ErrType != troupe.ErrGuardrailTripped || !strings.Contains(o.Fatal, "tripped") {
				t.Errorf("tripped: %+v; want the first gate's trip", o)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := runTurn(t, func(log *[]string) []gate.Gate {
				var gs []gate.Gate
				for _, g := range tt.gates {
					g.log = log
					gs = append(gs, g)
				}
				return gs
			})
			tt.check(t, o)
		})
	}
}

// TestChainPanics: a gate that panics, at any point, fails the agent with
// a non-retryable troupe.GateFailed error that names it, rather than
// blocking the workflow task.
func TestChainPanics(t *testing.T) {
	for _, point := range []string{"BeforeTurn", "AroundModel<", "AfterModel", "AroundCalls<", "BeforeCall", "AfterCall", "BeforeChildren", "BeforeFinal"} {
		t.Run(point, func(t *testing.T) {
			o := runTurn(t, func(log *[]string) []gate.Gate {
				return []gate.Gate{&step{name: "ok", log: log}, &step{name: "faulty", log: log, panics: point}}
			})
			if o.ErrType != troupe.ErrGateFailed || !strings.Contains(o.Error, "gate faulty panicked: boom at "+point) {
				t.Fatalf("a gate that panics at %s: %+v; want a %s error naming it", point, o, troupe.ErrGateFailed)
			}
			if !o.NonRetryable {
				t.Errorf("a gate that panics at %s fails retryably: a retry panics again", point)
			}
		})
	}
}
