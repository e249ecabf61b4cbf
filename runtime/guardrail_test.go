package runtime_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
)

// The spec keeps each guardrail's name, kind and how it runs; the tool
// guardrails that apply to a call are those of its tool and those of all
// tools, in order.
func TestGuardrailSpecs(t *testing.T) {
	in := func(context.Context, agents.RunContext, string) (agents.GuardrailVerdict, error) {
		return agents.Pass(), nil
	}
	out := func(context.Context, agents.RunContext, json.RawMessage) (agents.GuardrailVerdict, error) {
		return agents.Pass(), nil
	}
	before := func(context.Context, agents.ToolCall) (agents.ToolVerdict, error) { return agents.ToolVerdict{}, nil }
	after := func(context.Context, agents.ToolCall, string) (agents.ToolVerdict, error) {
		return agents.ToolVerdict{}, nil
	}
	noop := agents.MustFunctionTool("f", "", func(context.Context, verdict) (string, error) { return "", nil })
	g := agents.MustGraph("g", "a",
		&agents.Agent{Name: "a", Tools: []agents.Tool{noop},
			InputGuardrails:  []agents.InputGuardrail{{Name: "i1", Func: in, Blocking: true}, {Name: "i2", Agent: "judge"}},
			OutputGuardrails: []agents.OutputGuardrail{{Name: "o1", Func: out}},
			ToolGuardrails: []agents.ToolGuardrail{{Name: "t_all", Before: before}, {Name: "t_f", Tool: "f", Before: before, After: after},
				{Name: "t_agents", Tool: "f", BeforeAgent: "calls_judge", AfterAgent: "outputs_judge"}, {Name: "t_mixed", After: after, BeforeAgent: "calls_judge"}}},
		&agents.Agent{Name: "judge", Output: agents.MustOutput[agents.GuardrailVerdict]()},
		&agents.Agent{Name: "calls_judge", Output: agents.MustOutput[agents.ToolCallVerdict]()},
		&agents.Agent{Name: "outputs_judge", Output: agents.MustOutput[agents.ToolOutputVerdict]()})
	a := runtime.SpecOf(g, runtime.RunSettings{}).Agent("a")
	want := []runtime.GuardrailSpec{
		{Name: "i1", Kind: agents.GuardrailInput, Blocking: true},
		{Name: "i2", Kind: agents.GuardrailInput, Agent: "judge"},
		{Name: "o1", Kind: agents.GuardrailOutput},
		{Name: "t_all", Kind: runtime.GuardrailTool, Before: true},
		{Name: "t_f", Kind: runtime.GuardrailTool, Tool: "f", Before: true, After: true},
		{Name: "t_agents", Kind: runtime.GuardrailTool, Tool: "f", Before: true, After: true, BeforeAgent: "calls_judge", AfterAgent: "outputs_judge"},
		{Name: "t_mixed", Kind: runtime.GuardrailTool, Before: true, After: true, BeforeAgent: "calls_judge"},
	}
	if !reflect.DeepEqual(a.Guardrails, want) {
		t.Fatalf("guardrails %+v, want %+v", a.Guardrails, want)
	}
	names := func(gs []runtime.GuardrailSpec) (out []string) {
		for _, g := range gs {
			out = append(out, g.Name)
		}
		return out
	}
	for _, tc := range []struct {
		got, want []string
	}{
		{names(a.GuardrailsOf(agents.GuardrailInput)), []string{"i1", "i2"}},
		{names(a.ToolGuardrails("f", true)), []string{"t_all", "t_f", "t_agents", "t_mixed"}},
		{names(a.ToolGuardrails("f", false)), []string{"t_f", "t_agents", "t_mixed"}},
		{names(a.ToolGuardrails("mcp_tool", true)), []string{"t_all", "t_mixed"}},
		{names(a.ToolGuardrails("mcp_tool", false)), []string{"t_mixed"}},
		{names((*runtime.AgentSpec)(nil).GuardrailsOf(agents.GuardrailInput)), nil},
	} {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("got %v, want %v", tc.got, tc.want)
		}
	}
}

// A tool verdict becomes an outcome only when it does something that
// belongs to its check.
func TestToolOutcome(t *testing.T) {
	for _, tc := range []struct {
		v      agents.ToolVerdict
		before bool
		want   string // action, "" for none
	}{
		{agents.ToolVerdict{}, true, ""},
		{agents.RejectCall("no"), true, runtime.GuardrailReject},
		{agents.RejectCall("no"), false, ""},
		{agents.ReplaceOutput("x"), false, runtime.GuardrailReplace},
		{agents.ReplaceOutput("x"), true, ""},
		{agents.WithholdOutput("x"), false, runtime.GuardrailWithhold},
		{agents.TripTool("stop"), true, runtime.GuardrailTrip},
		{agents.ToolVerdict{Tripwire: true, Withhold: true}, false, runtime.GuardrailTrip},
	} {
		o := runtime.ToolOutcome("g", "c1", tc.before, tc.v)
		got := ""
		if o != nil {
			got = o.Action
		}
		if got != tc.want {
			t.Errorf("%+v (before %v): %q, want %q", tc.v, tc.before, got, tc.want)
		}
	}
}
