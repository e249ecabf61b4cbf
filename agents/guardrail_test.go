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
	after := func(context.Context, agents.ToolCall, string) (agents.ToolVerdict, error) {
		return agents.ToolVerdict{}, nil
	}
	judge := &agents.Agent{Name: "judge", Output: agents.MustOutput[agents.GuardrailVerdict]()}
	calls := &agents.Agent{Name: "calls", Output: agents.MustOutput[agents.ToolCallVerdict]()}
	outputs := &agents.Agent{Name: "outputs", Output: agents.MustOutput[agents.ToolOutputVerdict]()}
	with := func(a agents.Agent) []*agents.Agent {
		a.Name, a.Tools, a.Handoffs = "a", []agents.Tool{tool}, []agents.Handoff{agents.HandoffTo("b")}
		return []*agents.Agent{&a, {Name: "b"}, judge, calls, outputs}
	}
	toolAgents := func(tg agents.ToolGuardrail) []*agents.Agent {
		tg.Name = "x"
		return with(agents.Agent{ToolGuardrails: []agents.ToolGuardrail{tg}})
	}
	tests := []struct {
		name    string
		agents  []*agents.Agent
		wantErr string
	}{
		{"every kind", with(agents.Agent{
			InputGuardrails:  []agents.InputGuardrail{{Name: "in", Func: pass, Blocking: true}, {Name: "in_agent", Agent: "judge"}},
			OutputGuardrails: []agents.OutputGuardrail{{Name: "out", Func: passOut}, {Name: "out_agent", Agent: "judge"}},
			ToolGuardrails: []agents.ToolGuardrail{{Name: "all", Before: before}, {Name: "echo_only", Tool: "echo", Before: before},
				{Name: "agents", BeforeAgent: "calls", AfterAgent: "outputs"}, {Name: "mixed", Tool: "echo", Before: before, AfterAgent: "outputs"}},
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
		{"tool guardrail with no check", with(agents.Agent{ToolGuardrails: []agents.ToolGuardrail{{Name: "x", Tool: "echo"}}}), "set Before or BeforeAgent, After or AfterAgent, or both"},
		{"tool guardrail agent checking calls", toolAgents(agents.ToolGuardrail{BeforeAgent: "calls"}), ""},
		{"tool guardrail agent checking outputs", toolAgents(agents.ToolGuardrail{Tool: "echo", AfterAgent: "outputs"}), ""},
		{"both Before and BeforeAgent", toolAgents(agents.ToolGuardrail{Before: before, BeforeAgent: "calls"}), "set at most one of Before and BeforeAgent"},
		{"both After and AfterAgent", toolAgents(agents.ToolGuardrail{After: after, AfterAgent: "outputs"}), "set at most one of After and AfterAgent"},
		{"unknown tool guardrail agent", toolAgents(agents.ToolGuardrail{AfterAgent: "ghost"}), `runs unknown agent "ghost"`},
		{"tool guardrail agent without a verdict", toolAgents(agents.ToolGuardrail{BeforeAgent: "b"}), `agent "b" must have the output type agents.ToolCallVerdict`},
		{"tool guardrail agent with an input or output verdict", toolAgents(agents.ToolGuardrail{BeforeAgent: "judge"}), `agent "judge" must have the output type agents.ToolCallVerdict`},
		{"tool guardrail agent checking calls with the verdict on outputs", toolAgents(agents.ToolGuardrail{BeforeAgent: "outputs"}), `agent "outputs" must have the output type agents.ToolCallVerdict`},
		{"tool guardrail agent checking outputs with the verdict on calls", toolAgents(agents.ToolGuardrail{AfterAgent: "calls"}), `agent "calls" must have the output type agents.ToolOutputVerdict`},
		{"its own tool guardrail", []*agents.Agent{{Name: "a", Output: agents.MustOutput[agents.ToolCallVerdict](),
			ToolGuardrails: []agents.ToolGuardrail{{Name: "x", BeforeAgent: "a"}}}}, "an agent cannot be its own guardrail"},
		{"a tool guardrail agent with guardrails", []*agents.Agent{{Name: "a", ToolGuardrails: []agents.ToolGuardrail{{Name: "x", AfterAgent: "j"}}},
			{Name: "j", Output: agents.MustOutput[agents.ToolOutputVerdict](), ToolGuardrails: []agents.ToolGuardrail{{Name: "y", Before: before}}}},
			`agent "j" has guardrails of its own`},
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

// A tool guardrail agent's verdict is what a func would give: each action
// maps onto its ToolVerdict, an unknown one is an error, and the verdicts'
// schemas are strict and list the actions.
func TestToolGuardrailVerdicts(t *testing.T) {
	for _, tc := range []struct {
		name    string
		got     func() (agents.ToolVerdict, error)
		want    agents.ToolVerdict
		wantErr bool
	}{
		{"allow", agents.ToolCallVerdict{Action: agents.ToolCallAllow, Reason: "fine"}.ToolVerdict, agents.ToolVerdict{Reason: "fine"}, false},
		{"reject", agents.ToolCallVerdict{Action: agents.ToolCallReject, Message: "Not that key.", Reason: "root"}.ToolVerdict,
			agents.ToolVerdict{Reject: true, Message: "Not that key.", Reason: "root"}, false},
		{"trip a call", agents.ToolCallVerdict{Action: agents.ToolCallTrip, Reason: "stop"}.ToolVerdict, agents.TripTool("stop"), false},
		{"an unknown call action", agents.ToolCallVerdict{Action: "keep"}.ToolVerdict, agents.ToolVerdict{}, true},
		{"keep", agents.ToolOutputVerdict{Action: agents.ToolOutputKeep}.ToolVerdict, agents.ToolVerdict{}, false},
		{"replace", agents.ToolOutputVerdict{Action: agents.ToolOutputReplace, Message: "[redacted]", Reason: "a key"}.ToolVerdict,
			agents.ToolVerdict{Replace: true, Message: "[redacted]", Reason: "a key"}, false},
		{"withhold", agents.ToolOutputVerdict{Action: agents.ToolOutputWithhold, Message: "Private.", Reason: "private"}.ToolVerdict,
			agents.ToolVerdict{Withhold: true, Message: "Private.", Reason: "private"}, false},
		{"trip an output", agents.ToolOutputVerdict{Action: agents.ToolOutputTrip, Reason: "stop"}.ToolVerdict, agents.TripTool("stop"), false},
		{"an unknown output action", agents.ToolOutputVerdict{Action: "reject"}.ToolVerdict, agents.ToolVerdict{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := tc.got()
			if (err != nil) != tc.wantErr || v != tc.want {
				t.Errorf("verdict %+v, %v; want %+v (an error: %v)", v, err, tc.want, tc.wantErr)
			}
		})
	}
	for _, tc := range []struct {
		out     *agents.OutputType
		actions string
		valid   string
	}{
		{agents.MustOutput[agents.ToolCallVerdict](), `["allow","reject","trip"]`, `{"action":"reject","message":"Not that key.","reason":"root"}`},
		{agents.MustOutput[agents.ToolOutputVerdict](), `["keep","replace","withhold","trip"]`, `{"action":"withhold","message":"","reason":"private"}`},
	} {
		var schema struct {
			Required   []string `json:"required"`
			Properties struct {
				Action struct {
					Enum json.RawMessage `json:"enum"`
				} `json:"action"`
			} `json:"properties"`
			AdditionalProperties bool `json:"additionalProperties"`
		}
		spec := tc.out.Spec()
		if err := json.Unmarshal(spec.Schema, &schema); err != nil || !spec.Strict || schema.AdditionalProperties ||
			strings.Join(schema.Required, ",") != "action,message,reason" || string(schema.Properties.Action.Enum) != tc.actions {
			t.Errorf("%s: schema %s (strict %v), want strict, every property required, actions %s", spec.Name, spec.Schema, spec.Strict, tc.actions)
		}
		if _, err := tc.out.Validate(tc.valid); err != nil {
			t.Errorf("%s: %s: %v", spec.Name, tc.valid, err)
		}
		if _, err := tc.out.Validate(`{"action":"maybe","message":"","reason":""}`); err == nil {
			t.Errorf("%s: an unknown action validates", spec.Name)
		}
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

// A tool guardrail whose checks are agents: one reads each call of lookup
// before it runs (a ToolCheck, as JSON), one each of its outputs before
// the model reads it; each answers with its verdict, as JSON.
func ExampleToolGuardrail_agents() {
	lookup := agents.MustFunctionTool("lookup", "Looks a customer up.", func(_ context.Context, a struct {
		ID string `json:"id"`
	}) (string, error) {
		return "customer " + a.ID + ", card 4111 1111 1111 1111", nil
	})
	support := &agents.Agent{Name: "support", Instructions: "Answer the customer.", Tools: []agents.Tool{lookup},
		ToolGuardrails: []agents.ToolGuardrail{{Name: "privacy", Tool: "lookup", BeforeAgent: "call_checker", AfterAgent: "output_checker"}}}
	callChecker := &agents.Agent{Name: "call_checker", Output: agents.MustOutput[agents.ToolCallVerdict](),
		Instructions: "You read a tool call as JSON. Reject lookups of staff records, telling the caller why; trip on a lookup of every customer at once."}
	outputChecker := &agents.Agent{Name: "output_checker", Output: agents.MustOutput[agents.ToolOutputVerdict](),
		Instructions: "You read a tool call and its output as JSON. Replace card numbers with [card]; withhold outputs that hold passwords."}
	_, err := agents.NewGraph("support", "support", support, callChecker, outputChecker)
	fmt.Println(err)
	var v agents.ToolOutputVerdict
	_ = json.Unmarshal([]byte(`{"action":"replace","message":"customer 7, card [card]","reason":"a card number"}`), &v)
	tv, err := v.ToolVerdict()
	fmt.Printf("%+v %v\n", tv, err)
	// Output:
	// <nil>
	// {Tripwire:false Reason:a card number Reject:false Replace:true Withhold:false Message:customer 7, card [card]} <nil>
}
