package guardrail_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/approval"
	"github.com/troupe-dev/troupe/workflows/guardrail"
	"github.com/troupe-dev/troupe/workflows/workflowstest"
)

// The checks of a turn's calls ride with its model call (gate.Precheck):
// an approval policy that decides per call and a tool guardrail func that
// checks a call before it runs are asked by the model activity, and the
// turn starts no activity of its own for them; what they decide is what
// they decided from their own activities. A check that fails in the model
// call is asked again in its activity; so are checks that a pause came
// between (the session held the calls), and checks of arguments an
// approval changed.
func TestChecksRideWithTheModelCall(t *testing.T) {
	for _, tc := range []struct {
		name string
		// words are the keys the model looks up, a call per turn.
		words []string
		// wait says which keys the approval policy makes wait; each that
		// waits is approved as asked, or with the arguments of edit.
		wait func(key string) bool
		edit string
		// check is the guardrail func's verdict on a key; failOnce makes
		// its first check of each key fail.
		check    func(key string) agents.ToolVerdict
		failOnce bool
		// pauseAt pauses the session after the model call of that turn
		// (1-based), until the test resumes it.
		pauseAt int
		// Wanted: the keys looked up, the outputs the model read, and
		// how many activities the gates started (policies, guardrails).
		ran              []string
		read             []string
		policies, guards int
		// checked is how often the guardrail checked each key.
		checked map[string]int
	}{
		{name: "passes: no activity of the gates", words: []string{"a", "b", "c"},
			ran: []string{"a", "b", "c"}, read: []string{"secret-a", "secret-b", "secret-c"}, checked: map[string]int{"a": 1, "b": 1, "c": 1}},
		{name: "a policy that waits: approved, no activity of the gates", words: []string{"a", "b"}, wait: func(k string) bool { return k == "b" },
			ran: []string{"a", "b"}, read: []string{"secret-a", "secret-b"}, checked: map[string]int{"a": 1, "b": 1}},
		{name: "a guardrail that rejects: no activity of the gates", words: []string{"a", "bad"},
			check: func(k string) agents.ToolVerdict {
				if k == "bad" {
					return agents.RejectCall("not that one")
				}
				return agents.ToolVerdict{}
			},
			ran: []string{"a"}, read: []string{"secret-a", "not that one"}, checked: map[string]int{"a": 1, "bad": 1}},
		{name: "a guardrail that fails in the model call: checked in its activity", words: []string{"a", "b"}, failOnce: true,
			ran: []string{"a", "b"}, read: []string{"secret-a", "secret-b"}, guards: 2, checked: map[string]int{"a": 2, "b": 2}},
		{name: "a pause between the model call and the calls: checked again after it", words: []string{"a", "b"}, pauseAt: 2,
			ran: []string{"a", "b"}, read: []string{"secret-a", "secret-b"}, policies: 1, guards: 1, checked: map[string]int{"a": 1, "b": 2}},
		{name: "arguments an approval changed: checked again", words: []string{"a", "b"}, wait: func(k string) bool { return k == "b" }, edit: `{"key":"b2"}`,
			ran: []string{"a", "b2"}, read: []string{"secret-a", "secret-b2"}, guards: 1, checked: map[string]int{"a": 1, "b": 1, "b2": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ran := &workflowstest.Strings{}
			var mu sync.Mutex
			checks := map[string]int{}
			lookup := agents.MustFunctionTool("lookup", "Looks a key up.", func(_ context.Context, a struct {
				Key string `json:"key"`
			}) (string, error) {
				ran.Add(a.Key)
				return "secret-" + a.Key, nil
			})
			policy := agents.When("lookup", func(_ context.Context, args json.RawMessage) (bool, error) {
				var a struct{ Key string }
				err := json.Unmarshal(args, &a)
				return tc.wait != nil && tc.wait(a.Key), err
			})
			guard := agents.ToolGuardrail{Name: "screen", Tool: "lookup", Before: func(_ context.Context, c agents.ToolCall) (agents.ToolVerdict, error) {
				var a struct{ Key string }
				if err := json.Unmarshal(c.Arguments, &a); err != nil {
					return agents.ToolVerdict{}, err
				}
				mu.Lock()
				checks[a.Key]++
				n := checks[a.Key]
				mu.Unlock()
				if tc.failOnce && n == 1 {
					return agents.ToolVerdict{}, errors.New("the screen is down")
				}
				if tc.check != nil {
					return tc.check(a.Key), nil
				}
				return agents.ToolVerdict{}, nil
			}}
			g := agents.MustGraph("prechecks", "main", &agents.Agent{Name: "main", Instructions: "main: looks up", Tools: []agents.Tool{lookup},
				Approvals: []agents.Approval{policy}, ToolGuardrails: []agents.ToolGuardrail{guard}})
			var read []string
			var env *testsuite.TestWorkflowEnvironment
			var paused atomic.Bool
			m := &workflowstest.FuncModel{Func: func(req model.Request) []agents.Item {
				turn := 0
				for _, it := range req.Input {
					if it.Type == agents.ItemFunctionCallOutput {
						turn++
						if turn > len(read) {
							read = append(read, it.Output)
						}
					}
				}
				if turn == len(tc.words) {
					return []agents.Item{agents.AssistantMessage("done")}
				}
				if turn+1 == tc.pauseAt && !paused.Swap(true) {
					// Paused while the model call runs: the turn's calls
					// wait for the resume.
					env.SignalWorkflow(troupe.ControlSignal, troupe.Control{Op: troupe.ControlPause, Seq: 1})
					env.RegisterDelayedCallback(func() {
						env.SignalWorkflow(troupe.ControlSignal, troupe.Control{Op: troupe.ControlResume, Seq: 2})
					}, time.Hour)
				}
				args, _ := json.Marshal(map[string]string{"key": tc.words[turn]})
				return []agents.Item{workflowstest.Call("c"+tc.words[turn], "lookup", string(args))}
			}}
			env = workflowstest.NewRunnerEnv(t, workflows.Config{Graphs: []*agents.Graph{g}, Model: m})
			var policies, guards atomic.Int32
			env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, _ []any) {
				switch info.ActivityType.Name {
				case approval.ApprovalCheckActivityName:
					policies.Add(1)
				case guardrail.GuardrailActivityName:
					guards.Add(1)
				}
			})
			if tc.wait != nil {
				env.RegisterDelayedCallback(func() {
					ps := workflowstest.Pending(t, env)
					if len(ps) != 1 {
						t.Errorf("waiting: %+v, want one call", ps)
						return
					}
					workflowstest.Decide(env, runtime.ApprovalDecision{ID: ps[0].ID, Approve: true, Arguments: tc.edit})
				}, time.Minute)
			}
			if tc.pauseAt == 0 {
				env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "prechecks", Input: "look up"})
				if out := workflowstest.FinalOutput(t, env); out != "done" {
					t.Fatalf("output %s, want done", out)
				}
			} else {
				// The agent's workflow itself, which takes the controls by
				// signal (a session's turn passes them on to it).
				spec := runtime.SpecOf(g, runtime.RunSettings{MaxHandoffs: 5, MaxToolDepth: 5})
				env.ExecuteWorkflow(troupe.AgentWorkflowName, troupe.AgentInput{Graph: "prechecks", Agent: "main", RunID: "run", Spec: spec,
					Pending: []agents.Item{agents.UserMessage("look up")}})
				var res troupe.AgentResult
				if err := env.GetWorkflowResult(&res); err != nil || string(res.Output) != `"done"` {
					t.Fatalf("result %s, %v; want done", res.Output, err)
				}
				if !paused.Load() {
					t.Fatal("never paused")
				}
			}
			if got := ran.List(); !slices.Equal(got, tc.ran) {
				t.Errorf("looked up %v, want %v", got, tc.ran)
			}
			for i, want := range tc.read {
				if i >= len(read) || !strings.Contains(read[i], want) {
					t.Errorf("the model read %q, want %q at %d", read, want, i)
					break
				}
			}
			if p, g := int(policies.Load()), int(guards.Load()); p != tc.policies || g != tc.guards {
				t.Errorf("the gates started %d policy and %d guardrail activities, want %d and %d", p, g, tc.policies, tc.guards)
			}
			if !maps.Equal(checks, tc.checked) {
				t.Errorf("the guardrail checked %v, want %v", checks, tc.checked)
			}
		})
	}
}
