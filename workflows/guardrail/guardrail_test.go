package guardrail_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/workflowstest"
)

// guarded configures the guardrail tests' graph: the guardrails of its
// "main" agent (its model calls lookup when the user's message says
// "call", with the key "key:KEY" says, and again with the key k2 when it
// says "twice"; ask, an agent tool, when it says "ask"), and of "helper",
// the agent behind ask. Its guardrail agents are judge (input and output
// guardrails), call_judge and output_judge (tool guardrails, see
// judgeTool).
type guarded struct {
	input        []agents.InputGuardrail
	output       []agents.OutputGuardrail
	tools        []agents.ToolGuardrail
	helperOutput []agents.OutputGuardrail
}

type answer struct {
	Text string `json:"text"`
}

func guardGraph(cfg guarded, ran *workflowstest.Strings) *agents.Graph {
	lookup := agents.MustFunctionTool("lookup", "Looks a key up.", func(_ context.Context, a struct {
		Key string `json:"key"`
	}) (string, error) {
		ran.Add(a.Key)
		if strings.HasPrefix(a.Key, "big") {
			// Over transcript.InlineLimit: the output is stored apart.
			return strings.Repeat("x", 2000) + "secret-" + a.Key, nil
		}
		return "secret-" + a.Key, nil
	})
	return agents.MustGraph("guards", "main",
		&agents.Agent{Name: "main", Instructions: "main: answers", Output: agents.MustOutput[answer](),
			Tools:           []agents.Tool{lookup, agents.AsTool("helper", "ask", "Asks the helper.")},
			Handoffs:        []agents.Handoff{agents.HandoffTo("second")},
			InputGuardrails: cfg.input, OutputGuardrails: cfg.output, ToolGuardrails: cfg.tools},
		&agents.Agent{Name: "helper", Instructions: "helper: helps", OutputGuardrails: cfg.helperOutput},
		// second has an input guardrail that always trips: it is never the
		// first agent of a chain here, so it never runs.
		&agents.Agent{Name: "second", Instructions: "second: takes over",
			InputGuardrails: []agents.InputGuardrail{{Name: "never_runs", Blocking: true, Func: func(context.Context, agents.RunContext, string) (agents.GuardrailVerdict, error) {
				return agents.Trip("second's input guardrail ran"), nil
			}}}},
		&agents.Agent{Name: "judge", Instructions: "judge: judges", Output: agents.MustOutput[agents.GuardrailVerdict]()},
		&agents.Agent{Name: "call_judge", Instructions: "calls: judges calls", Output: agents.MustOutput[agents.ToolCallVerdict]()},
		&agents.Agent{Name: "output_judge", Instructions: "outputs: judges outputs", Output: agents.MustOutput[agents.ToolOutputVerdict]()},
		// relay_judge hands the check on to helper, whose answer is text.
		&agents.Agent{Name: "relay_judge", Instructions: "relay: hands checks on", Output: agents.MustOutput[agents.ToolCallVerdict](),
			Handoffs: []agents.Handoff{agents.HandoffTo("helper")}},
	)
}

// guardModel answers the guardrail graph's agents. main calls what its
// message asks for, then answers with the outputs it was sent; judge
// trips on "forbidden"; helper answers "helped: MESSAGE".
func guardModel(req model.Request) []agents.Item {
	var user string
	for _, it := range req.Input {
		if it.Type == agents.ItemMessage && it.Role == agents.RoleUser && user == "" {
			user = it.Content
		}
	}
	switch workflowstest.FirstWord(req.Instructions) {
	case "judge:":
		if strings.Contains(user, "forbidden") {
			return []agents.Item{agents.AssistantMessage(`{"tripwire":true,"reason":"the text says forbidden"}`)}
		}
		return []agents.Item{agents.AssistantMessage(`{"tripwire":false,"reason":"fine"}`)}
	case "helper:":
		return []agents.Item{agents.AssistantMessage("helped: " + user)}
	case "second:":
		return []agents.Item{agents.AssistantMessage("second answers")}
	case "calls:", "outputs:":
		return []agents.Item{agents.AssistantMessage(judgeTool(workflowstest.FirstWord(req.Instructions) == "calls:", user))}
	case "relay:":
		return []agents.Item{workflowstest.Call("r1", "transfer_to_helper", `{}`)}
	}
	outs := workflowstest.OutputsOf(req)
	if len(outs) == 0 {
		var calls []agents.Item
		if strings.Contains(user, "call") {
			key := "k"
			for _, w := range strings.Fields(user) {
				if k, ok := strings.CutPrefix(w, "key:"); ok {
					key = k
				}
			}
			calls = append(calls, workflowstest.Call("c1", "lookup", `{"key":"`+key+`"}`))
		}
		if strings.Contains(user, "twice") {
			calls = append(calls, workflowstest.Call("c2", "lookup", `{"key":"k2"}`))
		}
		if strings.Contains(user, "ask") {
			calls = append(calls, workflowstest.Call("a1", "ask", `{"input":"help me"}`))
		}
		if strings.Contains(user, "hand") {
			calls = append(calls, workflowstest.Call("h1", "transfer_to_second", `{}`))
		}
		if len(calls) > 0 {
			return calls
		}
	}
	var parts []string
	for _, id := range []string{"c1", "c2", "a1"} {
		if o, ok := outs[id]; ok {
			parts = append(parts, id+"="+o)
		}
	}
	text, _ := json.Marshal(answer{Text: cmp.Or(strings.Join(parts, "|"), "answer to "+user)})
	return []agents.Item{agents.AssistantMessage(string(text))}
}

// judgeTool is the verdict of call_judge (calls) or output_judge on check,
// the JSON of an agents.ToolCheck of main's call. call_judge rejects the
// key "root", trips on "stop" and gives no verdict on "broken";
// output_judge replaces outputs that end in "-redact", withholds those
// that end in "-hide", trips on "secret-leak" and gives no verdict on
// "secret-broken". A check that lacks what they read trips.
func judgeTool(calls bool, check string) string {
	verdict := func(action, message, reason string) string {
		data, _ := json.Marshal(map[string]string{"action": action, "message": message, "reason": reason})
		return string(data)
	}
	var c agents.ToolCheck
	var args struct {
		Key   string `json:"key"`
		Input string `json:"input"`
	}
	if json.Unmarshal([]byte(check), &c) != nil || json.Unmarshal(c.Arguments, &args) != nil || c.Agent != "main" || c.CallID == "" ||
		c.Tool != "lookup" && c.Tool != "ask" || args.Key == "" && args.Input == "" ||
		calls != (c.Check == agents.GuardrailToolBefore) || calls != (c.Output == nil) {
		return verdict("trip", "", "not a check of main's calls: "+check)
	}
	if calls {
		switch args.Key {
		case "root":
			return verdict(agents.ToolCallReject, "The root key is off limits.", "the root key")
		case "stop":
			return verdict(agents.ToolCallTrip, "", "the key says stop")
		case "broken":
			return "no verdict"
		}
		return verdict(agents.ToolCallAllow, "", "fine")
	}
	out := *c.Output
	switch {
	case strings.HasSuffix(out, "-redact"):
		return verdict(agents.ToolOutputReplace, "[redacted]", "a secret")
	case strings.HasSuffix(out, "-hide"):
		return verdict(agents.ToolOutputWithhold, "Secrets stay private.", "a secret")
	case strings.Contains(out, "secret-leak"):
		return verdict(agents.ToolOutputTrip, "", "the output leaks a secret")
	case strings.Contains(out, "secret-broken"):
		return "no verdict"
	}
	return verdict(agents.ToolOutputKeep, "", "fine")
}

// trips and passes are input guardrail funcs.
func trips(reason string) func(context.Context, agents.RunContext, string) (agents.GuardrailVerdict, error) {
	return func(context.Context, agents.RunContext, string) (agents.GuardrailVerdict, error) {
		return agents.Trip(reason), nil
	}
}

func passes(context.Context, agents.RunContext, string) (agents.GuardrailVerdict, error) {
	return agents.Pass(), nil
}

// checksFor trips an input guardrail on messages that contain word.
func checksFor(word string) func(context.Context, agents.RunContext, string) (agents.GuardrailVerdict, error) {
	return func(_ context.Context, _ agents.RunContext, input string) (agents.GuardrailVerdict, error) {
		if strings.Contains(input, word) {
			return agents.Trip("the message says " + word), nil
		}
		return agents.Pass(), nil
	}
}

func TestGuardrails(t *testing.T) {
	textHas := func(word string) agents.OutputGuardrail {
		return agents.CheckOutput("no_"+word, func(_ context.Context, _ agents.RunContext, a answer) (agents.GuardrailVerdict, error) {
			if strings.Contains(a.Text, word) {
				return agents.Trip("the answer says " + word), nil
			}
			return agents.Pass(), nil
		})
	}
	noSecrets := func(tool string) agents.ToolGuardrail {
		return agents.ToolGuardrail{Name: "no_secrets", Tool: tool, After: func(_ context.Context, c agents.ToolCall, out string) (agents.ToolVerdict, error) {
			if strings.Contains(out, "secret") {
				return agents.ReplaceOutput(strings.ReplaceAll(out, "secret", "[redacted]")), nil
			}
			return agents.ToolVerdict{}, nil
		}}
	}
	tests := []struct {
		name  string
		cfg   guarded
		input string
		// For a run that completes: parts of its output. For one that
		// fails: the error type, and for a trip the guardrail and kind.
		want          []string
		wantErr       string
		trip          string
		tripKind      string
		ran           []string       // lookups that ran
		mainCalls     int            // main's model calls, when not -1
		noModelAtTrip bool           // the model was not called
		judged        map[string]int // the tool judges' model calls ("calls:", "outputs:"), when set
		requests      int            // the run's model calls, its guardrail agents' included, when set
	}{
		{name: "input passes in parallel", cfg: guarded{input: []agents.InputGuardrail{{Name: "ok", Func: passes}}},
			input: "hello", want: []string{"answer to hello"}, mainCalls: 1},
		{name: "input trips in parallel", cfg: guarded{input: []agents.InputGuardrail{{Name: "no_hello", Func: checksFor("hello")}}},
			input: "hello", wantErr: troupe.ErrGuardrailTripped, trip: "no_hello", tripKind: agents.GuardrailInput, mainCalls: -1},
		{name: "input passes blocking", cfg: guarded{input: []agents.InputGuardrail{{Name: "ok", Func: passes, Blocking: true}}},
			input: "hello", want: []string{"answer to hello"}, mainCalls: 1},
		{name: "input trips blocking, before the model", cfg: guarded{input: []agents.InputGuardrail{
			{Name: "ok", Func: passes}, {Name: "no_hello", Func: checksFor("hello"), Blocking: true}}},
			input: "hello", wantErr: troupe.ErrGuardrailTripped, trip: "no_hello", tripKind: agents.GuardrailInput, mainCalls: 0},
		{name: "input agent passes", cfg: guarded{input: []agents.InputGuardrail{{Name: "judged", Agent: "judge"}}},
			input: "hello", want: []string{"answer to hello"}, mainCalls: 1},
		{name: "input agent trips", cfg: guarded{input: []agents.InputGuardrail{{Name: "judged", Agent: "judge", Blocking: true}}},
			input: "forbidden words", wantErr: troupe.ErrGuardrailTripped, trip: "judged", tripKind: agents.GuardrailInput, mainCalls: 0},
		{name: "input guardrail fails", cfg: guarded{input: []agents.InputGuardrail{{Name: "broken", Blocking: true,
			Func: func(context.Context, agents.RunContext, string) (agents.GuardrailVerdict, error) {
				return agents.GuardrailVerdict{}, errors.New("moderation service down")
			}}}},
			input: "hello", wantErr: troupe.ErrGuardrailFailed, mainCalls: 0},
		{name: "a handoff target's input guardrails do not run", cfg: guarded{input: []agents.InputGuardrail{{Name: "ok", Func: passes}}},
			input: "hand over", want: []string{"second answers"}, mainCalls: 1},
		{name: "output passes", cfg: guarded{output: []agents.OutputGuardrail{textHas("goodbye")}},
			input: "hello", want: []string{"answer to hello"}, mainCalls: 1},
		{name: "output trips", cfg: guarded{output: []agents.OutputGuardrail{textHas("hello")}},
			input: "hello", wantErr: troupe.ErrGuardrailTripped, trip: "no_hello", tripKind: agents.GuardrailOutput, mainCalls: 1},
		{name: "output agent trips", cfg: guarded{output: []agents.OutputGuardrail{{Name: "judged", Agent: "judge"}}},
			input: "forbidden", wantErr: troupe.ErrGuardrailTripped, trip: "judged", tripKind: agents.GuardrailOutput, mainCalls: 1},
		{name: "output agent passes", cfg: guarded{output: []agents.OutputGuardrail{{Name: "judged", Agent: "judge"}}},
			input: "hello", want: []string{"answer to hello"}, mainCalls: 1},
		{name: "tool before passes", cfg: guarded{tools: []agents.ToolGuardrail{{Name: "ok", Tool: "lookup",
			Before: func(context.Context, agents.ToolCall) (agents.ToolVerdict, error) { return agents.ToolVerdict{}, nil }}}},
			input: "call", want: []string{"c1=secret-k"}, ran: []string{"k"}, mainCalls: 2},
		{name: "tool before rejects", cfg: guarded{tools: []agents.ToolGuardrail{{Name: "no_k", Tool: "lookup",
			Before: func(_ context.Context, c agents.ToolCall) (agents.ToolVerdict, error) {
				if strings.Contains(string(c.Arguments), `"k"`) {
					return agents.RejectCall("Key k is off limits."), nil
				}
				return agents.ToolVerdict{}, nil
			}}}},
			input: "call", want: []string{"c1=Error: guardrail no_k rejected this call; it was not run. Key k is off limits."}, mainCalls: 2},
		{name: "tool before trips", cfg: guarded{tools: []agents.ToolGuardrail{{Name: "stop", Tool: "lookup",
			Before: func(context.Context, agents.ToolCall) (agents.ToolVerdict, error) {
				return agents.TripTool("no lookups at all"), nil
			}}}},
			input: "call", wantErr: troupe.ErrGuardrailTripped, trip: "stop", tripKind: agents.GuardrailToolBefore, mainCalls: 1},
		{name: "tool before rejects an agent tool", cfg: guarded{tools: []agents.ToolGuardrail{{Name: "no_asking",
			Before: func(_ context.Context, c agents.ToolCall) (agents.ToolVerdict, error) {
				if c.Tool == "ask" {
					return agents.RejectCall(""), nil
				}
				return agents.ToolVerdict{}, nil
			}}}},
			input: "call and ask", want: []string{"c1=secret-k", "a1=Error: guardrail no_asking rejected this call; it was not run."}, ran: []string{"k"}, mainCalls: 2},
		{name: "tool after passes", cfg: guarded{tools: []agents.ToolGuardrail{noSecrets("lookup")}},
			input: "ask", want: []string{"a1=helped: help me"}, mainCalls: 2},
		{name: "tool after replaces", cfg: guarded{tools: []agents.ToolGuardrail{noSecrets("")}},
			input: "call", want: []string{"c1=[redacted]-k"}, ran: []string{"k"}, mainCalls: 2},
		{name: "tool after withholds an agent tool's output", cfg: guarded{tools: []agents.ToolGuardrail{{Name: "quiet", Tool: "ask",
			After: func(context.Context, agents.ToolCall, string) (agents.ToolVerdict, error) {
				return agents.WithholdOutput("Helpers' answers are private."), nil
			}}}},
			input: "ask", want: []string{"a1=The output of this call was withheld by guardrail quiet. Helpers' answers are private."}, mainCalls: 2},
		{name: "tool after trips", cfg: guarded{tools: []agents.ToolGuardrail{{Name: "leak", Tool: "lookup",
			After: func(_ context.Context, _ agents.ToolCall, out string) (agents.ToolVerdict, error) {
				return agents.TripTool("the output leaks " + out), nil
			}}}},
			input: "call", wantErr: troupe.ErrGuardrailTripped, trip: "leak", tripKind: agents.GuardrailToolAfter, ran: []string{"k"}, mainCalls: 1},
		{name: "an agent tool's output guardrail ends the run", cfg: guarded{helperOutput: []agents.OutputGuardrail{{Name: "helper_quiet",
			Func: func(context.Context, agents.RunContext, json.RawMessage) (agents.GuardrailVerdict, error) {
				return agents.Trip("helpers must not answer"), nil
			}}}},
			input: "ask", wantErr: troupe.ErrGuardrailTripped, trip: "helper_quiet", tripKind: agents.GuardrailOutput, mainCalls: 1},
		// Tool guardrails that are agents: call_judge checks calls,
		// output_judge outputs (see judgeTool).
		{name: "tool agent before allows", cfg: guarded{tools: []agents.ToolGuardrail{{Name: "judged", Tool: "lookup", BeforeAgent: "call_judge"}}},
			input: "call key:k", want: []string{"c1=secret-k"}, ran: []string{"k"}, mainCalls: 2, judged: map[string]int{"calls:": 1}, requests: 3},
		{name: "tool agent before rejects, and the model reads its message", cfg: guarded{tools: []agents.ToolGuardrail{{Name: "judged", BeforeAgent: "call_judge"}}},
			input: "call key:root", want: []string{"c1=Error: guardrail judged rejected this call; it was not run. The root key is off limits."}, mainCalls: 2},
		{name: "tool agent before trips", cfg: guarded{tools: []agents.ToolGuardrail{{Name: "judged", Tool: "lookup", BeforeAgent: "call_judge"}}},
			input: "call key:stop", wantErr: troupe.ErrGuardrailTripped, trip: "judged", tripKind: agents.GuardrailToolBefore, mainCalls: 1},
		{name: "tool agent before gives no verdict", cfg: guarded{tools: []agents.ToolGuardrail{{Name: "judged", Tool: "lookup", BeforeAgent: "call_judge"}}},
			input: "call key:broken", wantErr: troupe.ErrGuardrailFailed, mainCalls: 1},
		{name: "tool agent before whose chain ends in no verdict", cfg: guarded{tools: []agents.ToolGuardrail{{Name: "judged", Tool: "lookup", BeforeAgent: "relay_judge"}}},
			input: "call key:k", wantErr: troupe.ErrGuardrailFailed, mainCalls: 1},
		{name: "tool agent before trips beside a func that passes", cfg: guarded{tools: []agents.ToolGuardrail{
			{Name: "ok", Before: func(context.Context, agents.ToolCall) (agents.ToolVerdict, error) { return agents.ToolVerdict{}, nil }},
			{Name: "judged", Tool: "lookup", BeforeAgent: "call_judge"}}},
			input: "call key:stop", wantErr: troupe.ErrGuardrailTripped, trip: "judged", tripKind: agents.GuardrailToolBefore, mainCalls: 1},
		{name: "tool agent before trips beside a func that fails", cfg: guarded{tools: []agents.ToolGuardrail{
			{Name: "broken", Before: func(context.Context, agents.ToolCall) (agents.ToolVerdict, error) {
				return agents.ToolVerdict{}, errors.New("policy service down")
			}},
			{Name: "judged", Tool: "lookup", BeforeAgent: "call_judge"}}},
			input: "call key:stop", wantErr: troupe.ErrGuardrailTripped, trip: "judged", tripKind: agents.GuardrailToolBefore, mainCalls: 1},
		{name: "tool agent after keeps", cfg: guarded{tools: []agents.ToolGuardrail{{Name: "judged", Tool: "lookup", AfterAgent: "output_judge"}}},
			input: "call key:k", want: []string{"c1=secret-k"}, ran: []string{"k"}, mainCalls: 2, judged: map[string]int{"outputs:": 1}, requests: 3},
		{name: "tool agent after replaces", cfg: guarded{tools: []agents.ToolGuardrail{{Name: "judged", AfterAgent: "output_judge"}}},
			input: "call key:redact", want: []string{"c1=[redacted]"}, ran: []string{"redact"}, mainCalls: 2},
		{name: "tool agent after replaces an output stored apart", cfg: guarded{tools: []agents.ToolGuardrail{{Name: "judged", AfterAgent: "output_judge"}}},
			input: "call key:big-redact", want: []string{"c1=[redacted]"}, ran: []string{"big-redact"}, mainCalls: 2},
		{name: "tool agent after withholds", cfg: guarded{tools: []agents.ToolGuardrail{{Name: "judged", Tool: "lookup", AfterAgent: "output_judge"}}},
			input: "call key:hide", want: []string{"c1=The output of this call was withheld by guardrail judged. Secrets stay private."}, ran: []string{"hide"}, mainCalls: 2},
		{name: "tool agent after trips", cfg: guarded{tools: []agents.ToolGuardrail{{Name: "judged", Tool: "lookup", AfterAgent: "output_judge"}}},
			input: "call key:leak", wantErr: troupe.ErrGuardrailTripped, trip: "judged", tripKind: agents.GuardrailToolAfter, ran: []string{"leak"}, mainCalls: 1},
		{name: "tool agent after gives no verdict", cfg: guarded{tools: []agents.ToolGuardrail{{Name: "judged", Tool: "lookup", AfterAgent: "output_judge"}}},
			input: "call key:broken", wantErr: troupe.ErrGuardrailFailed, ran: []string{"broken"}, mainCalls: 1},
		{name: "tool agent after checks the output a func before it left", cfg: guarded{tools: []agents.ToolGuardrail{noSecrets(""), {Name: "judged", AfterAgent: "output_judge"}}},
			input: "call key:leak", want: []string{"c1=[redacted]-leak"}, ran: []string{"leak"}, mainCalls: 2},
		{name: "a func after checks the output a tool agent before it left", cfg: guarded{tools: []agents.ToolGuardrail{{Name: "judged", AfterAgent: "output_judge"},
			{Name: "suffix", After: func(_ context.Context, _ agents.ToolCall, out string) (agents.ToolVerdict, error) {
				return agents.ReplaceOutput(out + "-checked"), nil
			}}}},
			input: "call key:redact", want: []string{"c1=[redacted]-checked"}, ran: []string{"redact"}, mainCalls: 2},
		{name: "tool agents check an agent tool's call and output, and no output of a rejected call",
			cfg:   guarded{tools: []agents.ToolGuardrail{{Name: "judged", BeforeAgent: "call_judge", AfterAgent: "output_judge"}}},
			input: "call key:root and ask", want: []string{"c1=Error: guardrail judged rejected this call", "a1=helped: help me"}, mainCalls: 2,
			judged: map[string]int{"calls:": 2, "outputs:": 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ran := &workflowstest.Strings{}
			m := &workflowstest.FuncModel{Func: guardModel}
			env := workflowstest.NewRunnerEnv(t, workflows.Config{Graphs: []*agents.Graph{guardGraph(tc.cfg, ran)}, Model: m})
			env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "guards", Input: tc.input})
			if !env.IsWorkflowCompleted() {
				t.Fatal("the run did not complete")
			}
			err := env.GetWorkflowError()
			if tc.mainCalls >= 0 && m.Calls("main:") != tc.mainCalls {
				t.Errorf("main's model calls: %d, want %d", m.Calls("main:"), tc.mainCalls)
			}
			if got := ran.List(); !slices.Equal(got, tc.ran) {
				t.Errorf("lookups ran: %v, want %v", got, tc.ran)
			}
			for judge, n := range tc.judged {
				if m.Calls(judge) != n {
					t.Errorf("%s model calls: %d, want %d", judge, m.Calls(judge), n)
				}
			}
			if tc.wantErr != "" {
				if troupe.ErrorType(err) != tc.wantErr {
					t.Fatalf("err = %v, want type %s", err, tc.wantErr)
				}
				trip, ok := troupe.TrippedGuardrail(err)
				if ok != (tc.trip != "") {
					t.Fatalf("TrippedGuardrail(%v) = %+v, %v", err, trip, ok)
				}
				if ok && (trip.Guardrail != tc.trip || trip.Kind != tc.tripKind || trip.Reason == "" || trip.Agent == "" || trip.Workflow == "") {
					t.Errorf("trip %+v, want guardrail %s of kind %s, with its agent, workflow and reason", trip, tc.trip, tc.tripKind)
				}
				if ok {
					// Its work so far stays readable: the agent's events say
					// which guardrail tripped, and end with the failure.
					evs := workflowstest.RecordedBy(t, env, trip.Workflow)
					i := slices.IndexFunc(evs, func(e troupe.Event) bool { return e.Kind == troupe.EventGuardrailTripped })
					last := evs[len(evs)-1]
					if i < 0 || !strings.Contains(evs[i].Detail, tc.trip) || last.Kind != troupe.EventFailed || !strings.Contains(last.Detail, troupe.ErrGuardrailTripped) {
						t.Errorf("events of %s: %+v; want guardrail_tripped naming %s, and failed last", trip.Workflow, evs, tc.trip)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var res troupe.RunResult
			if err := env.GetWorkflowResult(&res); err != nil {
				t.Fatal(err)
			}
			if tc.requests > 0 && res.Usage.Requests != tc.requests {
				t.Errorf("the run's usage counts %d model calls, want %d", res.Usage.Requests, tc.requests)
			}
			var text string
			if a, err := agents.Decode[answer](res.Output); err == nil {
				text = a.Text
			}
			if text == "" {
				_ = json.Unmarshal(res.Output, &text)
			}
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("output %q lacks %q", text, w)
				}
			}
		})
	}
}

// An input guardrail in parallel with the first model call that trips
// while the call runs cancels it: the run ends at the trip, not when the
// model answers, and the agent's events say so.
func TestInputGuardrailCancelsTheModelCall(t *testing.T) {
	ran := &workflowstest.Strings{}
	started := make(chan struct{})
	cfg := guarded{input: []agents.InputGuardrail{{Name: "slow_no", Func: func(ctx context.Context, _ agents.RunContext, _ string) (agents.GuardrailVerdict, error) {
		<-started // The model call is under way.
		return agents.Trip("no"), nil
	}}}}
	m := &blockingModel{started: started, returned: make(chan struct{})}
	env := workflowstest.NewRunnerEnv(t, workflows.Config{Graphs: []*agents.Graph{guardGraph(cfg, ran)}, Model: m})
	env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "guards", Input: "hello"})
	err := env.GetWorkflowError()
	if trip, ok := troupe.TrippedGuardrail(err); !ok || trip.Guardrail != "slow_no" {
		t.Fatalf("err = %v, want slow_no tripped", err)
	}
	// The workflow need not wait for the model's goroutine to see the
	// cancellation (a local activity's future settles as cancelled at
	// once): the call returns within its 20 s unless cancelled.
	select {
	case <-m.returned:
	case <-time.After(time.Minute):
	}
	if !m.cancelled.Load() {
		t.Error("the model call was not cancelled")
	}
}

// blockingModel starts answering, then waits until its call is
// cancelled (or, should it never be, a while, and answers).
type blockingModel struct {
	once      sync.Once
	started   chan struct{}
	cancelled atomic.Bool
	// returned is closed once a call returned.
	returned chan struct{}
	ended    sync.Once
}

func (m *blockingModel) Respond(ctx context.Context, req model.Request) (*model.Response, error) {
	m.once.Do(func() { close(m.started) })
	defer m.ended.Do(func() { close(m.returned) })
	select {
	case <-ctx.Done():
		m.cancelled.Store(true)
		return nil, fmt.Errorf("cancelled: %w", ctx.Err())
	case <-time.After(20 * time.Second):
		return &model.Response{Output: []agents.Item{agents.AssistantMessage(`{"text":"late"}`)}}, nil
	}
}

// A session's turn whose message trips an input guardrail fails, saying
// which guardrail, and the session answers the next message.
func TestSessionTurnInputGuardrail(t *testing.T) {
	cfg := guarded{input: []agents.InputGuardrail{{Name: "no_forbidden", Func: checksFor("forbidden")}}}
	env := workflowstest.NewRunnerEnv(t, workflows.Config{Graphs: []*agents.Graph{guardGraph(cfg, &workflowstest.Strings{})},
		Model: &workflowstest.FuncModel{Func: guardModel}})
	env.RegisterDelayedCallback(func() {
		workflowstest.SendUpdate(env, troupe.SendUpdate, troupe.SendInput{Message: "forbidden words"})
		workflowstest.SendUpdate(env, troupe.SendUpdate, troupe.SendInput{Message: "hello"})
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		info := workflowstest.SessionInfo(t, env)
		if len(info.Recent) != 2 {
			t.Fatalf("turns: %+v, want 2", info.Recent)
		}
		failed, answered := info.Recent[0], info.Recent[1]
		if failed.Outcome != runtime.TurnFailed || failed.ErrorType != troupe.ErrGuardrailTripped || !strings.Contains(failed.Error, "no_forbidden") {
			t.Errorf("first turn %+v; want it failed by no_forbidden", failed)
		}
		if answered.Outcome != runtime.TurnAnswered || !strings.Contains(string(answered.Output), "answer to hello") {
			t.Errorf("second turn %+v; want it answered", answered)
		}
		workflowstest.SendUpdate(env, troupe.CommandUpdate, troupe.SessionCommand{Op: troupe.CommandStop})
	}, time.Minute)
	env.ExecuteWorkflow(troupe.SessionWorkflowName, troupe.SessionInput{Graph: "guards"})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
}

// A call that needs approval is checked by its tool guardrails beside
// the approval policies, and again when its decision changes its
// arguments; a verdict on a call a human rejected does not count. So for
// a guardrail func as for a guardrail agent (prod_judge).
func TestToolGuardrailsAfterApproval(t *testing.T) {
	noProd := agents.ToolGuardrail{Name: "no_prod", Tool: "deploy", Before: func(_ context.Context, c agents.ToolCall) (agents.ToolVerdict, error) {
		if strings.Contains(string(c.Arguments), "prod") {
			return agents.TripTool("deploys to prod are not for agents"), nil
		}
		return agents.ToolVerdict{}, nil
	}}
	noProdAgent := agents.ToolGuardrail{Name: "no_prod", Tool: "deploy", BeforeAgent: "prod_judge"}
	for _, tc := range []struct {
		name      string
		guardrail agents.ToolGuardrail
		decision  runtime.ApprovalDecision
		trip      bool
		want      string
		ran       []string
	}{
		{"approved as asked: the guardrail trips", noProd, runtime.ApprovalDecision{Approve: true}, true, "", nil},
		{"approved for staging: checked again, it passes", noProd, runtime.ApprovalDecision{Approve: true, Arguments: `{"env":"staging"}`}, false, "deployed staging", []string{"staging"}},
		{"approved for production: checked again, it trips", noProd, runtime.ApprovalDecision{Approve: true, Arguments: `{"env":"production"}`}, true, "", nil},
		{"rejected: the guardrail's verdict does not count", noProd, runtime.ApprovalDecision{Message: "no"}, false, "the user rejected this call", nil},
		{"approved as asked: the guardrail agent trips", noProdAgent, runtime.ApprovalDecision{Approve: true}, true, "", nil},
		{"approved for staging: the guardrail agent checks again, it passes", noProdAgent, runtime.ApprovalDecision{Approve: true, Arguments: `{"env":"staging"}`}, false, "deployed staging", []string{"staging"}},
		{"approved for production: the guardrail agent checks again, it trips", noProdAgent, runtime.ApprovalDecision{Approve: true, Arguments: `{"env":"production"}`}, true, "", nil},
		{"rejected: the guardrail agent's verdict does not count", noProdAgent, runtime.ApprovalDecision{Message: "no"}, false, "the user rejected this call", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &workflowstest.Strings{}
			deploy := agents.MustFunctionTool("deploy", "Deploys.", func(_ context.Context, a struct {
				Env string `json:"env"`
			}) (string, error) {
				r.Add(a.Env)
				return "deployed " + a.Env, nil
			})
			g := agents.MustGraph("approvals", "ops", &agents.Agent{Name: "ops", Instructions: "ops: deploys", Tools: []agents.Tool{deploy},
				Approvals: []agents.Approval{agents.Always("deploy")}, ToolGuardrails: []agents.ToolGuardrail{tc.guardrail}},
				&agents.Agent{Name: "prod_judge", Instructions: "prod: judges deploys", Output: agents.MustOutput[agents.ToolCallVerdict]()})
			m := &workflowstest.FuncModel{Func: func(req model.Request) []agents.Item {
				if workflowstest.FirstWord(req.Instructions) == "prod:" {
					if strings.Contains(req.Input[0].Content, `"arguments":{"env":"prod`) {
						return []agents.Item{agents.AssistantMessage(`{"action":"trip","message":"","reason":"deploys to prod are not for agents"}`)}
					}
					return []agents.Item{agents.AssistantMessage(`{"action":"allow","message":"","reason":"not prod"}`)}
				}
				if out := workflowstest.OutputsOf(req); len(out) > 0 {
					return []agents.Item{agents.AssistantMessage(out["c1"])}
				}
				return []agents.Item{workflowstest.Call("c1", "deploy", `{"env":"prod"}`)}
			}}
			env := workflowstest.NewRunnerEnv(t, workflows.Config{Graphs: []*agents.Graph{g}, Model: m})
			env.RegisterDelayedCallback(func() {
				ps := workflowstest.Pending(t, env)
				if len(ps) != 1 {
					t.Fatalf("waiting: %+v, want the deploy", ps)
				}
				dec := tc.decision
				dec.ID = ps[0].ID
				workflowstest.Decide(env, dec)
			}, time.Minute)
			env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "approvals", Input: "deploy"})
			if tc.trip {
				if trip, ok := troupe.TrippedGuardrail(env.GetWorkflowError()); !ok || trip.Guardrail != "no_prod" {
					t.Fatalf("err = %v, want no_prod tripped", env.GetWorkflowError())
				}
			} else if out := workflowstest.FinalOutput(t, env); !strings.Contains(out, tc.want) {
				t.Errorf("output %q, want %q", out, tc.want)
			}
			if got := r.List(); !slices.Equal(got, tc.ran) {
				t.Errorf("ran %v, want %v", got, tc.ran)
			}
		})
	}
}

// The tool guardrail agents of a turn's calls run at once, as the calls
// do: each judge's model call waits until the other call's judge has
// asked too; so do the checks of their outputs. (Checks one after the
// other would wait in vain, until the test environment's timeout fails
// the test.)
func TestToolGuardrailAgentsRunInParallel(t *testing.T) {
	ran := &workflowstest.Strings{}
	cfg := guarded{tools: []agents.ToolGuardrail{{Name: "judged", Tool: "lookup", BeforeAgent: "call_judge", AfterAgent: "output_judge"}}}
	m := &meetingModel{met: map[string]chan struct{}{"calls:": make(chan struct{}), "outputs:": make(chan struct{})}, asked: map[string]int{}}
	env := workflowstest.NewRunnerEnv(t, workflows.Config{Graphs: []*agents.Graph{guardGraph(cfg, ran)}, Model: m})
	env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "guards", Input: "call twice"})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res troupe.RunResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if a, err := agents.Decode[answer](res.Output); err != nil || a.Text != "c1=secret-k|c2=secret-k2" {
		t.Errorf("output %s, want both lookups' outputs", res.Output)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.asked["calls:"] != 2 || m.asked["outputs:"] != 2 {
		t.Errorf("the judges were asked %v, want each twice", m.asked)
	}
}

// meetingModel answers as guardModel does, but holds each judge's first
// two model calls (of "calls:", of "outputs:") until both were made.
type meetingModel struct {
	mu    sync.Mutex
	met   map[string]chan struct{}
	asked map[string]int
}

func (m *meetingModel) Respond(ctx context.Context, req model.Request) (*model.Response, error) {
	judge := workflowstest.FirstWord(req.Instructions)
	if met, ok := m.met[judge]; ok {
		m.mu.Lock()
		m.asked[judge]++
		if m.asked[judge] == 2 {
			close(met)
		}
		m.mu.Unlock()
		select {
		case <-met:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &model.Response{Output: guardModel(req)}, nil
}
