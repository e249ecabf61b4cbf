package approval_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/workflowstest"
)

// deployArgs are the arguments of the approval tests' deploy tool.
type deployArgs struct {
	Env string `json:"env"`
}

// approvalGraph is a graph whose "ops" agent deploys (every call waits,
// or the prod ones only, or with a timeout), and whose "boss" calls ops as
// a tool.
func approvalGraph(r *workflowstest.Strings, policy agents.Approval) *agents.Graph {
	deploy := agents.MustFunctionTool("deploy", "Deploys.", func(_ context.Context, a deployArgs) (string, error) {
		r.Add(a.Env)
		return "deployed " + a.Env, nil
	})
	policy.Tool = "deploy"
	return agents.MustGraph("approvals", "ops",
		&agents.Agent{Name: "ops", Instructions: "ops: deploys", Tools: []agents.Tool{deploy}, Approvals: []agents.Approval{policy}},
		&agents.Agent{Name: "boss", Instructions: "boss: delegates", Tools: []agents.Tool{agents.AsTool("ops", "ops", "Deploys things.")}},
	)
}

// approvalEnv runs the approval graph on a test environment. fn answers
// the model; its first ops turn's calls are calls.
func approvalEnv(t *testing.T, policy agents.Approval, fn workflowstest.TurnFunc) (*testsuite.TestWorkflowEnvironment, *workflowstest.Strings) {
	t.Helper()
	r := &workflowstest.Strings{}
	env := workflowstest.NewRunnerEnv(t, workflows.Config{Graphs: []*agents.Graph{approvalGraph(r, policy)}, Model: &workflowstest.FuncModel{Func: fn}})
	return env, r
}

// decided are the decisions the root took with the one u sent.
func decided(t *testing.T, u *workflowstest.Update) []runtime.ApprovalDecision {
	t.Helper()
	var ds []runtime.ApprovalDecision
	u.Decode(t, &ds)
	return ds
}

// reportOutputs has the model call deploy with calls on its first turn,
// then answer with the outputs it was sent, in call order.
func reportOutputs(calls ...agents.Item) workflowstest.TurnFunc {
	return func(req model.Request) []agents.Item {
		if !strings.HasPrefix(req.Instructions, "ops:") {
			if out := workflowstest.OutputsOf(req); len(out) > 0 {
				return []agents.Item{agents.AssistantMessage(out["boss-1"])}
			}
			return []agents.Item{workflowstest.Call("boss-1", "ops", `{"input":"deploy"}`)}
		}
		out := workflowstest.OutputsOf(req)
		if len(out) == 0 {
			return calls
		}
		var parts []string
		for _, c := range calls {
			parts = append(parts, c.CallID+"="+out[c.CallID])
		}
		return []agents.Item{agents.AssistantMessage(strings.Join(parts, "|"))}
	}
}

func TestApprovalDecisions(t *testing.T) {
	tests := []struct {
		name   string
		policy agents.Approval
		calls  []agents.Item
		// decide takes decisions on the calls waiting (ps); later runs fn
		// a minute on; check runs once the run ended.
		decide  func(t *testing.T, env *testsuite.TestWorkflowEnvironment, ps []runtime.ApprovalRequest, later func(func())) (check func())
		waiting int      // calls listed as waiting when the decisions start
		want    []string // parts of the final output
		ran     []string
	}{
		{
			name: "approve", calls: []agents.Item{workflowstest.Call("c1", "deploy", `{"env":"prod"}`)}, waiting: 1,
			decide: func(t *testing.T, env *testsuite.TestWorkflowEnvironment, ps []runtime.ApprovalRequest, later func(func())) func() {
				d := workflowstest.Decide(env, runtime.ApprovalDecision{ID: ps[0].ID, Approve: true})
				return func() { d.Completed(t) }
			},
			want: []string{"c1=deployed prod"}, ran: []string{"prod"},
		},
		{
			name: "reject with a message", calls: []agents.Item{workflowstest.Call("c1", "deploy", `{"env":"prod"}`)}, waiting: 1,
			decide: func(t *testing.T, env *testsuite.TestWorkflowEnvironment, ps []runtime.ApprovalRequest, later func(func())) func() {
				d := workflowstest.Decide(env, runtime.ApprovalDecision{ID: ps[0].ID, Message: "not on a Friday"})
				return func() { d.Completed(t) }
			},
			want: []string{"c1=Error: the user rejected this call; it was not run. Their message: not on a Friday"},
		},
		{
			name: "edited arguments", calls: []agents.Item{workflowstest.Call("c1", "deploy", `{"env":"prod"}`)}, waiting: 1,
			decide: func(t *testing.T, env *testsuite.TestWorkflowEnvironment, ps []runtime.ApprovalRequest, later func(func())) func() {
				d := workflowstest.Decide(env, runtime.ApprovalDecision{ID: ps[0].ID, Approve: true, Arguments: `{"env":"staging"}`})
				return func() { d.Completed(t) }
			},
			want: []string{"c1=deployed staging"}, ran: []string{"staging"},
		},
		{
			name:  "two calls decided in the opposite order",
			calls: []agents.Item{workflowstest.Call("c1", "deploy", `{"env":"eu"}`), workflowstest.Call("c2", "deploy", `{"env":"us"}`)}, waiting: 2,
			decide: func(t *testing.T, env *testsuite.TestWorkflowEnvironment, ps []runtime.ApprovalRequest, later func(func())) func() {
				second := workflowstest.Decide(env, runtime.ApprovalDecision{ID: ps[1].ID, Approve: true})
				var first *workflowstest.Update
				later(func() {
					if left := workflowstest.Pending(t, env); len(left) != 1 || left[0].ID != ps[0].ID {
						t.Errorf("after the second was decided, waiting: %+v, want the first alone", left)
					}
					first = workflowstest.Decide(env, runtime.ApprovalDecision{ID: ps[0].ID, Message: "no"})
				})
				return func() { second.Completed(t); first.Completed(t) }
			},
			want: []string{"c1=Error: the user rejected", "c2=deployed us"}, ran: []string{"us"},
		},
		{
			name:  "remember for the tool",
			calls: []agents.Item{workflowstest.Call("c1", "deploy", `{"env":"eu"}`), workflowstest.Call("c2", "deploy", `{"env":"us"}`)}, waiting: 2,
			decide: func(t *testing.T, env *testsuite.TestWorkflowEnvironment, ps []runtime.ApprovalRequest, later func(func())) func() {
				d := workflowstest.Decide(env, runtime.ApprovalDecision{ID: ps[0].ID, Approve: true, Remember: runtime.RememberTool})
				return func() {
					d.Completed(t)
					if ds := decided(t, d); len(ds) != 2 || ds[1].By != runtime.DecidedByRule {
						t.Errorf("decided %+v, want the second call decided by the rule", ds)
					}
				}
			},
			want: []string{"c1=deployed eu", "c2=deployed us"}, ran: []string{"eu", "us"},
		},
		{
			name:  "remember for the same arguments only",
			calls: []agents.Item{workflowstest.Call("c1", "deploy", `{"env":"eu"}`), workflowstest.Call("c2", "deploy", `{"env":"us"}`)}, waiting: 2,
			decide: func(t *testing.T, env *testsuite.TestWorkflowEnvironment, ps []runtime.ApprovalRequest, later func(func())) func() {
				first := workflowstest.Decide(env, runtime.ApprovalDecision{ID: ps[0].ID, Approve: true, Remember: runtime.RememberArguments})
				var second *workflowstest.Update
				later(func() { second = workflowstest.Decide(env, runtime.ApprovalDecision{ID: ps[1].ID}) })
				return func() {
					first.Completed(t)
					second.Completed(t)
					if ds := decided(t, first); len(ds) != 1 {
						t.Errorf("decided %+v, want the first call only", ds)
					}
				}
			},
			want: []string{"c1=deployed eu", "c2=Error: the user rejected"}, ran: []string{"eu"},
		},
		{
			name: "a predicate lets some calls through",
			policy: agents.When("", func(_ context.Context, args json.RawMessage) (bool, error) {
				return strings.Contains(string(args), "prod"), nil
			}),
			calls: []agents.Item{workflowstest.Call("c1", "deploy", `{"env":"dev"}`), workflowstest.Call("c2", "deploy", `{"env":"prod"}`)}, waiting: 1,
			decide: func(t *testing.T, env *testsuite.TestWorkflowEnvironment, ps []runtime.ApprovalRequest, later func(func())) func() {
				if ps[0].CallID != "c2" {
					t.Errorf("waiting %+v, want the prod call", ps[0])
				}
				d := workflowstest.Decide(env, runtime.ApprovalDecision{ID: ps[0].ID, Approve: true})
				return func() { d.Completed(t) }
			},
			want: []string{"c1=deployed dev", "c2=deployed prod"}, ran: []string{"dev", "prod"},
		},
		{
			name:   "a timeout rejects by default",
			policy: agents.Approval{Timeout: time.Hour},
			calls:  []agents.Item{workflowstest.Call("c1", "deploy", `{"env":"prod"}`)}, waiting: 1,
			want: []string{"c1=Error: this call needed approval and no one decided within 1h0m0s; it was not run."},
		},
		{
			name:   "a timeout approves when the policy says so",
			policy: agents.Approval{Timeout: time.Hour, OnTimeout: agents.ApproveOnTimeout},
			calls:  []agents.Item{workflowstest.Call("c1", "deploy", `{"env":"prod"}`)}, waiting: 1,
			want: []string{"c1=deployed prod"}, ran: []string{"prod"},
		},
	}
	for _, tc := range tests {
		for _, root := range []string{"ops", "boss"} {
			t.Run(tc.name+" from "+root, func(t *testing.T) {
				env, r := approvalEnv(t, tc.policy, reportOutputs(tc.calls...))
				var seen []runtime.ApprovalRequest
				check := func() {}
				later := func(fn func()) { env.RegisterDelayedCallback(fn, 2*time.Minute) }
				env.RegisterDelayedCallback(func() {
					seen = workflowstest.Pending(t, env)
					if len(seen) != tc.waiting {
						t.Fatalf("waiting: %+v, want %d workflowstest.Call(s)", seen, tc.waiting)
					}
					if len(r.List()) != 0 {
						t.Errorf("ran %v before any decision", r.List())
					}
					if tc.decide != nil {
						check = tc.decide(t, env, seen, later)
					}
				}, time.Minute)
				env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "approvals", Agent: root, Input: "deploy"})
				out := workflowstest.FinalOutput(t, env)
				check()
				for _, w := range tc.want {
					if !strings.Contains(out, w) {
						t.Errorf("output %q lacks %q", out, w)
					}
				}
				// The approved calls of a turn run at once, in any order.
				if got := r.List(); !slices.Equal(sorted(got), sorted(tc.ran)) {
					t.Errorf("ran %v, want %v", got, tc.ran)
				}
				for _, p := range seen {
					if p.Agent != "ops" || p.Tool != "deploy" || p.Kind != "function" || !strings.Contains(p.Workflow, "ops") {
						t.Errorf("listed %+v, want ops's deploy in its workflow", p)
					}
					if root == "boss" && !strings.Contains(p.Workflow, "/t1.0/") {
						t.Errorf("listed %+v, want the workflow of boss's agent tool", p)
					}
				}
				if left := workflowstest.Pending(t, env); len(left) != 0 {
					t.Errorf("still waiting at the end: %+v", left)
				}
			})
		}
	}
}

// A decision for no call that waits, or one that cannot be taken, is
// refused with a reason, and the call still waits.
func TestApprovalBadDecisions(t *testing.T) {
	env, r := approvalEnv(t, agents.Approval{}, reportOutputs(workflowstest.Call("c1", "deploy", `{"env":"prod"}`)))
	var bads []*workflowstest.Update
	var good *workflowstest.Update
	env.RegisterDelayedCallback(func() {
		ps := workflowstest.Pending(t, env)
		for _, bad := range []runtime.ApprovalDecision{
			{ID: "a00000000", Approve: true},
			{ID: ps[0].ID, Approve: true, Remember: "forever"},
			{ID: ps[0].ID, Approve: true, Arguments: `not json`},
			{ID: ps[0].ID, Approve: false, Arguments: `{"env":"dev"}`},
		} {
			bads = append(bads, workflowstest.Decide(env, bad))
		}
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		ps := workflowstest.Pending(t, env)
		if len(ps) != 1 {
			t.Fatalf("after refused decisions, waiting: %+v", ps)
		}
		good = workflowstest.Decide(env, runtime.ApprovalDecision{ID: ps[0].ID, Approve: true})
	}, 2*time.Minute)
	env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "approvals", Input: "deploy"})
	if out := workflowstest.FinalOutput(t, env); !strings.Contains(out, "c1=deployed prod") || len(r.List()) != 1 {
		t.Errorf("output %q, ran %v", out, r.List())
	}
	for i, d := range bads {
		if !d.Done() || troupe.ErrorType(d.Err()) != troupe.ErrBadDecision {
			t.Errorf("bad decision %d: done %v, err %v, want %s", i, d.Done(), d.Err(), troupe.ErrBadDecision)
		}
	}
	good.Completed(t)
}

// In a session: a call that waits makes the session "waiting"; a decision
// remembered for the tool answers the next turn's call at once; under the
// interrupt policy, a message sent while a call waits stops the turn, the
// call not run, and nothing waits any more.
func TestSessionApprovals(t *testing.T) {
	deployTurns := func(req model.Request) []agents.Item {
		out := workflowstest.OutputsOf(req)
		last := workflowstest.LastItem(req)
		if last.Type == agents.ItemFunctionCallOutput {
			return []agents.Item{agents.AssistantMessage("saw: " + out[last.CallID])}
		}
		if strings.HasPrefix(last.Content, "deploy ") {
			env := strings.TrimPrefix(last.Content, "deploy ")
			return []agents.Item{workflowstest.Call("c-"+env, "deploy", `{"env":"`+env+`"}`)}
		}
		return []agents.Item{agents.AssistantMessage("heard: " + last.Content + " after: " + out["c-eu"])}
	}
	t.Run("remembered across turns", func(t *testing.T) {
		env, r := approvalEnv(t, agents.Approval{}, deployTurns)
		var first, second *workflowstest.Update
		var waitingInfo troupe.SessionInfo
		var d *workflowstest.Update
		env.RegisterDelayedCallback(func() {
			first = workflowstest.SendUpdate(env, troupe.SendUpdate, troupe.SendInput{Message: "deploy eu", Wait: true})
		}, time.Second)
		env.RegisterDelayedCallback(func() {
			waitingInfo = workflowstest.SessionInfo(t, env)
			ps := workflowstest.Pending(t, env)
			if len(ps) != 1 {
				t.Fatalf("waiting %+v", ps)
			}
			d = workflowstest.Decide(env, runtime.ApprovalDecision{ID: ps[0].ID, Approve: true, Remember: runtime.RememberTool})
		}, time.Minute)
		env.RegisterDelayedCallback(func() {
			second = workflowstest.SendUpdate(env, troupe.SendUpdate, troupe.SendInput{Message: "deploy us", Wait: true})
		}, 2*time.Minute)
		env.RegisterDelayedCallback(func() {
			workflowstest.SendUpdate(env, troupe.CommandUpdate, troupe.SessionCommand{Op: troupe.CommandStop})
		}, time.Hour)
		env.ExecuteWorkflow(troupe.SessionWorkflowName, troupe.SessionInput{Graph: "approvals"})
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		d.Completed(t)
		if waitingInfo.Status != runtime.SessionWaiting {
			t.Errorf("status while the call waited: %s", waitingInfo.Status)
		}
		var r1, r2 troupe.SendResult
		first.Decode(t, &r1)
		second.Decode(t, &r2)
		if r1.Record == nil || string(r1.Record.Output) != `"saw: deployed eu"` || r2.Record == nil || string(r2.Record.Output) != `"saw: deployed us"` {
			t.Errorf("turns %+v, %+v", r1.Record, r2.Record)
		}
		if got := r.List(); !slices.Equal(got, []string{"eu", "us"}) { // one turn after the other
			t.Errorf("ran %v", got)
		}
	})
	t.Run("interrupted while waiting", func(t *testing.T) {
		env, r := approvalEnv(t, agents.Approval{}, deployTurns)
		var first, second *workflowstest.Update
		var after []runtime.ApprovalRequest
		env.RegisterDelayedCallback(func() {
			first = workflowstest.SendUpdate(env, troupe.SendUpdate, troupe.SendInput{Message: "deploy eu", Wait: true})
		}, time.Second)
		env.RegisterDelayedCallback(func() {
			second = workflowstest.SendUpdate(env, troupe.SendUpdate, troupe.SendInput{Message: "never mind", Wait: true})
		}, time.Minute)
		env.RegisterDelayedCallback(func() { after = workflowstest.Pending(t, env) }, 2*time.Minute)
		env.RegisterDelayedCallback(func() {
			workflowstest.SendUpdate(env, troupe.CommandUpdate, troupe.SessionCommand{Op: troupe.CommandStop})
		}, time.Hour)
		env.ExecuteWorkflow(troupe.SessionWorkflowName, troupe.SessionInput{Graph: "approvals", Policy: runtime.PolicyInterrupt})
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		var r1, r2 troupe.SendResult
		first.Decode(t, &r1)
		second.Decode(t, &r2)
		if r1.Record == nil || r1.Record.Outcome != runtime.TurnInterrupted {
			t.Errorf("the first turn: %+v, want interrupted", r1.Record)
		}
		if r2.Record == nil || string(r2.Record.Output) != `"heard: never mind after: Error: not run: the user interrupted the turn while this call waited for approval"` {
			t.Errorf("the second turn: %+v", r2.Record)
		}
		if len(after) != 0 || len(r.List()) != 0 {
			t.Errorf("after the interrupt: waiting %+v, ran %v", after, r.List())
		}
	})
}

// sorted is a sorted copy of s, never nil.
func sorted(s []string) []string {
	out := append([]string{}, s...)
	slices.Sort(out)
	return out
}
