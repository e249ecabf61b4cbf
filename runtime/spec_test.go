package runtime_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
)

// SpecOf keeps what workflow code branches on, for each kind of tool, and
// survives JSON (it is recorded in histories) unchanged.
func TestSpecOf(t *testing.T) {
	noop := func(context.Context, verdict) (string, error) { return "", nil }
	fn := agents.MustFunctionTool("f", "", noop)
	slow := agents.MustFunctionTool("slow", "", noop, agents.WithTimeout(time.Minute), agents.AsActivity())
	filter := func(_ context.Context, in agents.HandoffInput) (agents.HandoffInput, error) { return in, nil }
	g := agents.MustGraph("g", "a",
		&agents.Agent{Name: "a", MaxTurns: 7, Tools: []agents.Tool{fn, slow, agents.AsTool("b", "ask_b", "")},
			Handoffs:   []agents.Handoff{agents.HandoffTo("b"), {Target: "c", InputFilter: filter}},
			MCPServers: []*agents.MCPServer{{Name: "m", Command: []string{"m"}, Timeout: 5 * time.Second}}},
		&agents.Agent{Name: "b", MaxOutputRetries: -1},
		&agents.Agent{Name: "c"})
	spec := runtime.SpecOf(g, runtime.RunSettings{MaxHandoffs: 4, MaxToolDepth: 2, ModelActivities: true, ContinueAfterTurns: 7, ContinueAfterEvents: 70})
	want := &runtime.GraphSpec{Graph: "g", Entry: "a", RunSettings: runtime.RunSettings{MaxHandoffs: 4, MaxToolDepth: 2, ModelActivities: true, ContinueAfterTurns: 7, ContinueAfterEvents: 70}, Agents: []runtime.AgentSpec{
		{Name: "a", MaxTurns: 7, MaxOutputRetries: agents.DefaultMaxOutputRetries, MaxConcurrentCalls: agents.DefaultMaxConcurrentCalls,
			MCPServers: []runtime.MCPServerSpec{{Name: "m", CallTimeout: 5 * time.Second}},
			Tools: []runtime.ToolSpec{
				{Name: "f", Kind: agents.ToolFunction, Timeout: fn.Timeout()},
				{Name: "slow", Kind: agents.ToolFunction, Activity: true, Timeout: time.Minute},
				{Name: "ask_b", Kind: agents.ToolAgent, Target: "b"},
				{Name: "transfer_to_b", Kind: agents.ToolHandoff, Target: "b"},
				{Name: "transfer_to_c", Kind: agents.ToolHandoff, Target: "c", Hooks: true},
			}},
		{Name: "b", MaxTurns: agents.DefaultMaxTurns, MaxOutputRetries: 0, MaxConcurrentCalls: agents.DefaultMaxConcurrentCalls},
		{Name: "c", MaxTurns: agents.DefaultMaxTurns, MaxOutputRetries: agents.DefaultMaxOutputRetries, MaxConcurrentCalls: agents.DefaultMaxConcurrentCalls},
	}}
	if !reflect.DeepEqual(spec, want) {
		t.Fatalf("SpecOf =\n%+v\nwant\n%+v", spec, want)
	}
	data, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	var back runtime.GraphSpec
	if err := json.Unmarshal(data, &back); err != nil || !reflect.DeepEqual(&back, spec) {
		t.Fatalf("JSON round trip: %+v, %v", back, err)
	}
	a := spec.Agent("a")
	for _, tc := range []struct {
		tool string
		kind agents.ToolKind
	}{{"f", agents.ToolFunction}, {"ask_b", agents.ToolAgent}, {"transfer_to_c", agents.ToolHandoff}, {"ghost", agents.ToolUnknown}} {
		if got := a.Tool(tc.tool).Kind; got != tc.kind {
			t.Errorf("Tool(%q).Kind = %v, want %v", tc.tool, got, tc.kind)
		}
	}
	if spec.Agent("ghost") != nil {
		t.Errorf("Agent(ghost) is not nil")
	}
	if got := a.MCPServer("m").CallTimeout; got != 5*time.Second {
		t.Errorf("MCPServer(m).CallTimeout = %v", got)
	}
	if got := a.MCPServer("other").CallTimeout; got != agents.DefaultMCPTimeout {
		t.Errorf("MCPServer(other).CallTimeout = %v, want the default", got)
	}
}

// A run's bound on calls at once is over its agents'; a spec recorded
// before bounds (0) bounds nothing, whatever the run asks.
func TestCallLimit(t *testing.T) {
	for _, tc := range []struct {
		agent, run, want int
	}{
		{agent: 5, want: 5},
		{agent: 5, run: 2, want: 2},
		{agent: 5, run: 9, want: 9},
		{agent: 0, want: 0},
		{agent: 0, run: 3, want: 0},
	} {
		s := &runtime.GraphSpec{RunSettings: runtime.RunSettings{MaxConcurrentCalls: tc.run}}
		if got := s.CallLimit(&runtime.AgentSpec{MaxConcurrentCalls: tc.agent}); got != tc.want {
			t.Errorf("agent %d, run %d: CallLimit %d, want %d", tc.agent, tc.run, got, tc.want)
		}
	}
}
