package runtime_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/model"
)

// The agent loop's transitions, one effect at a time, without a server.
func TestAgentStateTransitions(t *testing.T) {
	agent := &runtime.AgentSpec{Name: "a", MaxTurns: 3, MaxOutputRetries: 1}
	ref := func(n int) runtime.TranscriptRef { return runtime.TranscriptRef{Key: "t", Segments: n} }
	usage := model.Usage{Requests: 1, TotalTokens: 10}
	call := agents.FunctionCall("c1", "f", "{}")
	out := agents.FunctionCallOutput("c1", "ok")
	final := json.RawMessage(`"done"`)

	// A step is one effect's outcome fed to the state, and what must come next.
	type step struct {
		model   *runtime.Step // ModelDone with this step, or
		calls   []agents.Item // CallsDone with these outputs (and handoff)
		handoff *agents.Item
		want    runtime.Action
		check   func(t *testing.T, s *runtime.AgentState, n runtime.Next)
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"final at once", []step{
			{model: &runtime.Step{Final: final}, want: runtime.Finish, check: func(t *testing.T, s *runtime.AgentState, n runtime.Next) {
				if string(n.Output) != `"done"` || s.Turn != 1 || !reflect.DeepEqual(s.Transcript, ref(1)) || s.Pending != nil || s.Usage != usage {
					t.Errorf("state %+v, next %+v", s, n)
				}
			}},
		}},
		{"calls, then final", []step{
			{model: &runtime.Step{Calls: []agents.Item{call, call}}, want: runtime.RunCalls, check: func(t *testing.T, s *runtime.AgentState, n runtime.Next) {
				if len(n.Calls) != 2 || s.ToolCalls != 2 {
					t.Errorf("state %+v, next %+v", s, n)
				}
			}},
			{calls: []agents.Item{out}, want: runtime.CallModel, check: func(t *testing.T, s *runtime.AgentState, n runtime.Next) {
				if n.Turn != 2 || len(s.Pending) != 1 || s.Pending[0].Output != "ok" || s.Usage.Requests != 1 {
					t.Errorf("state %+v, next %+v", s, n)
				}
			}},
			{model: &runtime.Step{Final: final}, want: runtime.Finish, check: func(t *testing.T, s *runtime.AgentState, n runtime.Next) {
				if s.Turn != 2 || s.Usage.Requests != 2 || !reflect.DeepEqual(s.Transcript, ref(2)) {
					t.Errorf("state %+v", s)
				}
			}},
		}},
		{"handoff", []step{
			{model: &runtime.Step{Calls: []agents.Item{call}}, want: runtime.RunCalls},
			{calls: []agents.Item{out}, handoff: &call, want: runtime.HandOff, check: func(t *testing.T, s *runtime.AgentState, n runtime.Next) {
				if n.Handoff == nil || n.Handoff.CallID != "c1" || len(s.Pending) != 1 {
					t.Errorf("state %+v, next %+v", s, n)
				}
			}},
		}},
		{"a correction, then a valid output", []step{
			{model: &runtime.Step{OutputError: "/ok: wrong"}, want: runtime.CallModel, check: func(t *testing.T, s *runtime.AgentState, n runtime.Next) {
				if n.Turn != 2 || n.Correction != "/ok: wrong" || s.Corrections != 1 || len(s.Pending) != 1 || !strings.Contains(s.Pending[0].Content, "/ok: wrong") {
					t.Errorf("state %+v, next %+v", s, n)
				}
			}},
			{model: &runtime.Step{Final: final}, want: runtime.Finish},
		}},
		{"corrections used up", []step{
			{model: &runtime.Step{OutputError: "e1"}, want: runtime.CallModel},
			{model: &runtime.Step{OutputError: "e2"}, want: runtime.Fail, check: func(t *testing.T, s *runtime.AgentState, n runtime.Next) {
				if n.Failure.Kind != runtime.FailOutputInvalid || n.Correction != "e2" || !strings.Contains(n.Failure.Message, "2 time(s); last error: e2") {
					t.Errorf("next %+v, failure %+v", n, n.Failure)
				}
			}},
		}},
		{"turns used up", []step{
			{model: &runtime.Step{Calls: []agents.Item{call}}, want: runtime.RunCalls},
			{calls: []agents.Item{out}, want: runtime.CallModel},
			{model: &runtime.Step{Calls: []agents.Item{call}}, want: runtime.RunCalls},
			{calls: []agents.Item{out}, want: runtime.CallModel},
			{model: &runtime.Step{Calls: []agents.Item{call}}, want: runtime.RunCalls},
			{calls: []agents.Item{out}, want: runtime.Fail, check: func(t *testing.T, s *runtime.AgentState, n runtime.Next) {
				if n.Failure.Kind != runtime.FailMaxTurns || s.Turn != 3 || !strings.Contains(n.Failure.Message, "used its 3 turns") {
					t.Errorf("state %+v, failure %+v", s, n.Failure)
				}
			}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := runtime.NewAgentState("a", ref(0), []agents.Item{agents.UserMessage("hi")})
			n := s.Begin(agent)
			if n.Action != runtime.CallModel || n.Turn != 1 {
				t.Fatalf("Begin = %+v", n)
			}
			for i, st := range tc.steps {
				if st.model != nil {
					n = s.ModelDone(agent, ref(s.Turn), *st.model, usage)
				} else {
					n = s.CallsDone(agent, st.calls, st.handoff, model.Usage{})
				}
				if n.Action != st.want {
					t.Fatalf("step %d: next %+v, want action %d", i, n, st.want)
				}
				if st.check != nil {
					st.check(t, s, n)
				}
				// The state survives JSON (continue-as-new, a session) at
				// every step.
				data, err := json.Marshal(s)
				if err != nil {
					t.Fatal(err)
				}
				var back runtime.AgentState
				if err := json.Unmarshal(data, &back); err != nil || !reflect.DeepEqual(&back, s) {
					t.Fatalf("step %d: JSON round trip %+v, %v; want %+v", i, back, err, s)
				}
			}
		})
	}
	if n := runtime.NewAgentState("a", ref(0), nil).Begin(&runtime.AgentSpec{Name: "a"}); n.Action != runtime.Fail {
		t.Errorf("Begin with no turns = %+v, want Fail", n)
	}
}
