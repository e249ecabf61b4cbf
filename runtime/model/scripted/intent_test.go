package scripted

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestIntents checks what a rule's intent answers: any alternative, every
// term of it as a word in any order, any synonym of a term, prefixes,
// any case; and only a user message that is the last input.
func TestIntents(t *testing.T) {
	s, baseURL := startServer(t, `
intents:
  fix: ["fix|repair|patch", "make work*"]
  pipeline: ["every|all deal|deals pipeline"]
rules:
  - {name: fix, match: {intent: fix}, respond: {text: fixing}}
  - {name: pipeline, match: {intent: pipeline}, respond: {text: all of them}}
  - {name: other, respond: {text: other}}
`)
	tests := []struct {
		input string // a Responses input: a string, or JSON items
		want  string
	}{
		{`"Now fix the finding"`, "fix"},
		{`"please REPAIR it"`, "fix"},
		{`"patch login.go, then show the diff"`, "fix"},
		{`"make it working again"`, "fix"},
		{`"Review all the deals in the pipeline"`, "pipeline"},
		{`"pipeline: every deal, please"`, "pipeline"},
		// Words, not pieces of words; every term of an alternative.
		{`"the fixture is fine"`, "other"},
		{`"make me a sandwich"`, "other"},
		{`"all deals"`, "other"},
		// The intent of the last user message, only while it is the last
		// input: a later turn of the same message is not asked again.
		{`[{"role":"user","content":"fix it"},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"done"}]`, "other"},
		{`[{"role":"user","content":"hello"},{"role":"assistant","content":"hi"},{"role":"user","content":"fix it"}]`, "fix"},
	}
	for _, tt := range tests {
		body := `{"model":"m","input":` + tt.input + `}`
		if strings.Contains(tt.input, "function_call") {
			body = `{"model":"m","input":` + tt.input + `,"tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{}}}]}`
		}
		status, raw := post(t, baseURL+"/responses", body, "Bearer k")
		if status != 200 {
			t.Fatalf("%s: status %d: %s", tt.input, status, raw)
		}
		calls := s.Calls()
		if got := calls[len(calls)-1].Rule; got != tt.want {
			t.Errorf("%s: rule %s answered, want %s", tt.input, got, tt.want)
		}
	}
}

// TestIntentsTravelWithRules merges the rules of two scenario files that
// name the same intent differently: each rule matches as it did in its
// own file.
func TestIntentsTravelWithRules(t *testing.T) {
	a, err := ParseScenario([]byte("intents: {go: ['fix']}\nrules:\n  - {name: a, match: {instructions: A, intent: go}, respond: {text: a}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseScenario([]byte("intents: {go: ['start|begin']}\nrules:\n  - {name: b, match: {instructions: B, intent: go}, respond: {text: b}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := New(&Scenario{Rules: append(a.Rules, b.Rules...)})
	baseURL, err := s.Start("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for _, tt := range []struct{ instructions, input, want string }{
		{"A", "fix it", "a"}, {"B", "begin now", "b"}, {"A", "begin now", ""}, {"B", "fix it", ""},
	} {
		status, raw := post(t, baseURL+"/responses", `{"model":"m","instructions":"`+tt.instructions+`","input":"`+tt.input+`"}`, "Bearer k")
		if got := status == 200; got != (tt.want != "") || got && !strings.Contains(raw, `"text":"`+tt.want+`"`) {
			t.Errorf("%s, %q: %d %s; want the answer %q", tt.instructions, tt.input, status, raw, tt.want)
		}
	}
}

func TestIntentErrors(t *testing.T) {
	for name, tt := range map[string]struct{ src, want string }{
		"unknown intent": {"rules:\n  - {name: a, match: {intent: nope}, respond: {text: hi}}\n", `match.intent "nope" is not one of the scenario's intents`},
		"not a word":     {"intents: {fix: ['fix-it']}\nrules:\n  - {name: a, respond: {text: hi}}\n", `intent "fix": alternative "fix-it": "fix-it" is not a word`},
		"empty synonym":  {"intents: {fix: ['fix|']}\nrules:\n  - {name: a, respond: {text: hi}}\n", `"" is not a word`},
		"no alternative": {"intents: {fix: []}\nrules:\n  - {name: a, respond: {text: hi}}\n", `intent "fix": has no alternatives`},
	} {
		_, err := ParseScenario([]byte(tt.src))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, tt.want)
		}
	}
}

// TestNoMatchNamesSource checks that the answer to a request no rule
// matches names, as its param, the file of the rules for the request's
// agent (or of every rule, when none is for it).
func TestNoMatchNamesSource(t *testing.T) {
	a, err := ParseScenario([]byte("rules:\n  - {name: a, match: {instructions: billing, turn: 9}, respond: {text: hi}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseScenario([]byte("rules:\n  - {name: b, match: {instructions: refunds, turn: 9}, respond: {text: hi}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range a.Rules {
		a.Rules[i].Source = "billing.yaml"
	}
	for i := range b.Rules {
		b.Rules[i].Source = "refunds.yaml"
	}
	srv := New(&Scenario{Rules: append(a.Rules, b.Rules...)})
	baseURL, err := srv.Start("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	for instructions, want := range map[string]string{
		"You are the refunds agent": "refunds.yaml",
		"You are the billing agent": "billing.yaml",
		"You are someone else":      "billing.yaml, refunds.yaml",
	} {
		status, raw := post(t, baseURL+"/responses", `{"model":"m","instructions":"`+instructions+`","input":"hi"}`, "Bearer k")
		var eb errorBody
		if err := json.Unmarshal([]byte(raw), &eb); err != nil || status != 400 {
			t.Fatalf("%d %s: %v", status, raw, err)
		}
		if eb.Error.Code == nil || *eb.Error.Code != CodeNoMatch || eb.Error.Param == nil || *eb.Error.Param != want ||
			!strings.Contains(eb.Error.Message, "Add a rule for it to "+want) {
			t.Errorf("%s: %s; want code %s, param %q", instructions, raw, CodeNoMatch, want)
		}
	}
}
