package agents_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/agents"
)

func TestGuardrailValidation(t *testing.T) {
	tool := agents.MustFunctionTool("echo", "Echoes.", echo)
	pass := func(context.Context, agents.RunContext, string) (agents.GuardrailVerdict, error) {
		return agents.Pass(), nil
	}
	passOut := func(context.Context, agents.RunContext, json.RawMessage) (agents.GuardrailVerdict, error) {
		return agents.Pass(), nil
	}
	before := func(context.Context, agents.ToolCall) (agents.ToolVerdict, error) { return agents.ToolVerdict{}, nil }
	judge := &agents.Agent{Name: "judge", Output: agents.MustOutput[agents.GuardrailVerdict]()}
	with := func(a agents.Agent) []*agents.Agent {
		a.Name, a.Tools, a.Handoffs = "a", []agents.Tool{tool}, []agents.Handoff{agents.HandoffTo("b")}
		return []*agents.Agent{&a, {Name: "b"}, judge}
	}
	tests := []struct {
		name    string
		agents  []*agents.Agent
		wantErr string
	}{
		{"every kind", with(agents.Agent{
			InputGuardrails:  []agents.InputGuardrail{{Name: "in", Func: pass, Blocking: true}, {Name: "in_agent", Agent: "judge"}},
			OutputGuardrails: []agents.OutputGuardrail{{Name: "out", Func: passOut}, {Name: "out_agent", Agent: "judge"}},
			ToolGuardrails:   []agents.ToolGuardrail{{Name: "all", Before: before}, {Name: "echo_only", Tool: "echo", Before: before}},
		}), ""},
		{"no name", with(agents.Agent{InputGuardrails: []agents.InputGuardrail{{Func: pass}}}), `guardrail "" must match`},
		{"two of one name", with(agents.Agent{InputGuardrails: []agents.InputGuardrail{{Name: "x", Func: pass}},
			OutputGuardrails: []agents.OutputGuardrail{{Name: "x", Func: passOut}}}), `guardrail "x": two guardrails of the agent have this name`},
		{"neither func nor agent", with(agents.Agent{InputGuardrails: []agents.InputGuardrail{{Name: "x"}}}), "set exactly one of Func and Agent"},
		{"both func and agent", with(agents.Agent{OutputGuardrails: []agents.OutputGuardrail{{Name: "x", Func: passOut, Agent: "judge"}}}), "set exactly one of Func and Agent"},
		{"unknown agent", with(agents.Agent{InputGuardrails: []agents.InputGuardrail{{Name: "x", Agent: "ghost"}}}), `runs unknown agent "ghost"`},
		{"agent without a verdict", with(agents.Agent{InputGuardrails: []agents.InputGuardrail{{Name: "x", Agent: "b"}}}), `agent "b" must have the output type agents.GuardrailVerdict`},
		{"its own guardrail", []*agents.Agent{{Name: "a", Output: agents.MustOutput[agents.GuardrailVerdict](),
			OutputGuardrails: []agents.OutputGuardrail{{Name: "x", Agent: "a"}}}}, "an agent cannot be its own guardrail"},
		{"a guardrail agent with guardrails", []*agents.Agent{{Name: "a", InputGuardrails: []agents.InputGuardrail{{Name: "x", Agent: "j"}}},
			{Name: "j", Output: agents.MustOutput[agents.GuardrailVerdict](), InputGuardrails: []agents.InputGuardrail{{Name: "y", Func: pass}}}},
			`agent "j" has guardrails of its own`},
		{"tool guardrail with no check", with(agents.Agent{ToolGuardrails: []agents.ToolGuardrail{{Name: "x", Tool: "echo"}}}), "set Before, After or both"},
		{"tool guardrail for an unknown tool", with(agents.Agent{ToolGuardrails: []agents.ToolGuardrail{{Name: "x", Tool: "ghost", Before: before}}}), `guards unknown tool "ghost"`},
		{"tool guardrail for a handoff", with(agents.Agent{ToolGuardrails: []agents.ToolGuardrail{{Name: "x", Tool: "transfer_to_b", Before: before}}}), "is a handoff"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := agents.NewGraph("g", "a", tc.agents...)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatal(err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// CheckOutput decodes the final output into the agent's output type; one
// that does not decode trips.
func TestCheckOutput(t *testing.T) {
	type review struct {
		Files []string `json:"files"`
	}
	g := agents.CheckOutput("has_files", func(_ context.Context, _ agents.RunContext, r review) (agents.GuardrailVerdict, error) {
		if len(r.Files) == 0 {
			return agents.Trip("no files"), nil
		}
		return agents.Pass(), nil
	})
	for _, tc := range []struct {
		output string
		trip   bool
	}{{`{"files":["a.go"]}`, false}, {`{"files":[]}`, true}, {`"just text"`, true}} {
		v, err := g.Func(context.Background(), agents.RunContext{}, json.RawMessage(tc.output))
		if err != nil || v.Tripwire != tc.trip {
			t.Errorf("%s: %+v, %v; want tripwire %v", tc.output, v, err, tc.trip)
		}
	}
}

// An agent with a guardrail of each kind: a blocking input check, an
// output check on its typed output, and a tool check that keeps a tool's
// output from the model.
func ExampleToolGuardrail() {
	type answer struct {
		Text string `json:"text"`
	}
	lookup := agents.MustFunctionTool("lookup", "Looks a customer up.", func(_ context.Context, a struct {
		ID string `json:"id"`
	}) (string, error) {
		return "customer " + a.ID + ", card 4111 1111 1111 1111", nil
	})
	support := &agents.Agent{
		Name: "support", Instructions: "Answer the customer.", Tools: []agents.Tool{lookup}, Output: agents.MustOutput[answer](),
		InputGuardrails: []agents.InputGuardrail{{Name: "on_topic", Blocking: true,
			Func: func(_ context.Context, _ agents.RunContext, input string) (agents.GuardrailVerdict, error) {
				if strings.Contains(strings.ToLower(input), "homework") {
					return agents.Trip("not a support question"), nil
				}
				return agents.Pass(), nil
			}}},
		OutputGuardrails: []agents.OutputGuardrail{agents.CheckOutput("polite",
			func(_ context.Context, _ agents.RunContext, a answer) (agents.GuardrailVerdict, error) {
				if strings.Contains(a.Text, "!!!") {
					return agents.Trip("shouting"), nil
				}
				return agents.Pass(), nil
			})},
		ToolGuardrails: []agents.ToolGuardrail{{Name: "no_cards", Tool: "lookup",
			After: func(_ context.Context, _ agents.ToolCall, output string) (agents.ToolVerdict, error) {
				if strings.Contains(output, "card") {
					return agents.WithholdOutput("It holds card numbers."), nil
				}
				return agents.ToolVerdict{}, nil
			}}},
	}
	_, err := agents.NewGraph("support", "support", support)
	fmt.Println(err)
	v, _ := support.ToolGuardrails[0].After(context.Background(), agents.ToolCall{Tool: "lookup"}, "customer 7, card 4111 1111 1111 1111")
	fmt.Printf("%+v\n", v)
	// Output:
	// <nil>
	// {Tripwire:false Reason:It holds card numbers. Reject:false Replace:false Withhold:true Message:It holds card numbers.}
}
