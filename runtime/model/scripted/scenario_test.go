package scripted

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseScenarioErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string // substrings of the error
	}{
		{"empty", ``, []string{"scenario has no rules"}},
		{"no rules", `rules: []`, []string{"scenario has no rules"}},
		{"unknown field", "rules:\n  - name: a\n    mach: {}\n    respond: {text: hi}\n", []string{"field mach not found"}},
		{"unknown JSON field", `{"rules":[{"name":"a","respond":{"txt":"hi"}}]}`, []string{`unknown field "txt"`}},
		{"missing name", "rules:\n  - respond: {text: hi}\n", []string{`rule 0 "": name is required`}},
		{"duplicate name", "rules:\n  - {name: a, respond: {text: hi}}\n  - {name: a, respond: {text: ho}}\n",
			[]string{`rule 1 "a": name is already used by rule 0`}},
		{"no answer", "rules:\n  - {name: a, respond: {delay_ms: 5}}\n",
			[]string{`rule 0 "a": respond: exactly one of text, json and calls must be set, got 0`}},
		{"two answers", "rules:\n  - {name: a, respond: {text: hi, json: {x: 1}}}\n",
			[]string{`rule 0 "a": respond: exactly one of text, json and calls must be set, got 2`}},
		{"template syntax", "rules:\n  - {name: a, respond: {text: '{{.User'}}\n", []string{`rule 0 "a": respond.text`}},
		{"template field", "rules:\n  - {name: a, respond: {text: '{{.Nope}}'}}\n",
			[]string{`rule 0 "a": respond.text`, "can't evaluate field Nope"}},
		{"json template", "rules:\n  - {name: a, respond: {json: {x: ['{{.Turn', 2]}}}\n",
			[]string{`rule 0 "a": respond.json.x[0]`}},
		{"arguments template", "rules:\n  - {name: a, respond: {calls: [{name: f, arguments: {q: '{{.Bad}}'}}]}}\n",
			[]string{`respond.calls[0].arguments.q`, "can't evaluate field Bad"}},
		{"arguments list", "rules:\n  - {name: a, respond: {calls: [{name: f, arguments: [1]}]}}\n",
			[]string{`respond.calls[0].arguments must be an object or a template string`}},
		{"call name", "rules:\n  - {name: a, respond: {calls: [{name: 'bad name'}]}}\n",
			[]string{`respond.calls[0].name "bad name" must match`}},
		{"last_input regexp", "rules:\n  - {name: a, match: {last_input: '('}, respond: {text: hi}}\n",
			[]string{`rule 0 "a": match.last_input: error parsing regexp`}},
		{"input regexp", "rules:\n  - {name: a, match: {input: '[z-a]'}, respond: {text: hi}}\n",
			[]string{`rule 0 "a": match.input`}},
		{"turn and range", "rules:\n  - {name: a, match: {turn: 2, min_turn: 1}, respond: {text: hi}}\n",
			[]string{"turn cannot be combined with min_turn or max_turn"}},
		{"inverted range", "rules:\n  - {name: a, match: {min_turn: 3, max_turn: 2}, respond: {text: hi}}\n",
			[]string{"min_turn 3 is greater than max_turn 2"}},
		{"negative pace", "rules:\n  - {name: a, respond: {text: hi, pace_ms: -1}}\n",
			[]string{"respond.pace_ms must not be negative"}},
		{"negative delay", "rules:\n  - {name: a, respond: {text: hi, delay_ms: -1}}\n",
			[]string{"delay_ms must not be negative"}},
		{"every bad rule named", "rules:\n  - {name: a, respond: {}}\n  - {name: b, respond: {text: '{{'}}\n",
			[]string{`rule 0 "a"`, `rule 1 "b"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseScenario([]byte(tt.src))
			if err == nil {
				t.Fatal("ParseScenario succeeded, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestParseScenarioFormats(t *testing.T) {
	yamlSrc := `
rules:
  - name: lookup
    match:
      instructions: pricing
      tools: [get_document]
      has_output_schema: false
      turn: 1
    respond:
      calls:
        - name: get_document
          arguments: {doc: pricing, depth: 2, tags: [a, b]}
  - name: answer
    respond:
      json: {verdict: ok, score: 0.5}
`
	jsonSrc := `{"rules": [
  {"name": "lookup",
   "match": {"instructions": "pricing", "tools": ["get_document"], "has_output_schema": false, "turn": 1},
   "respond": {"calls": [{"name": "get_document", "arguments": {"doc": "pricing", "depth": 2, "tags": ["a", "b"]}}]}},
  {"name": "answer", "respond": {"json": {"verdict": "ok", "score": 0.5}}}
]}`
	for name, src := range map[string]string{"yaml": yamlSrc, "json": jsonSrc} {
		t.Run(name, func(t *testing.T) {
			sc, err := ParseScenario([]byte(src))
			if err != nil {
				t.Fatal(err)
			}
			if len(sc.Rules) != 2 || sc.Rules[0].Name != "lookup" || sc.Rules[1].Name != "answer" {
				t.Fatalf("rules = %+v", sc.Rules)
			}
			m := sc.Rules[0].Match
			if m.Instructions != "pricing" || m.Turn != 1 || m.HasOutputSchema == nil || *m.HasOutputSchema ||
				len(m.Tools) != 1 {
				t.Errorf("match = %+v", m)
			}
			args, err := renderArguments(mustCompile(t, sc)[0].calls[0], TemplateData{})
			if err != nil {
				t.Fatal(err)
			}
			if want := `{"depth":2,"doc":"pricing","tags":["a","b"]}`; args != want {
				t.Errorf("arguments = %s, want %s", args, want)
			}
		})
	}
}

func mustCompile(t *testing.T, sc *Scenario) []*rule {
	t.Helper()
	rules, err := compileScenario(sc)
	if err != nil {
		t.Fatal(err)
	}
	return rules
}

func TestLoadScenario(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte("rules:\n  - {name: a, respond: {text: hi}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadScenario(good); err != nil {
		t.Errorf("LoadScenario(good) = %v", err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("rules:\n  - {name: a, respond: {}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadScenario(bad); err == nil || !strings.Contains(err.Error(), "bad.yaml") {
		t.Errorf("LoadScenario(bad) = %v, want an error naming the file", err)
	}
	if _, err := LoadScenario(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Error("LoadScenario(missing) succeeded")
	}
}

func TestNewPanicsOnInvalidScenario(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("New did not panic")
		}
	}()
	New(&Scenario{Rules: []Rule{{Name: "a"}}})
}

func TestValidateScenarioBuiltInGo(t *testing.T) {
	sc := &Scenario{Rules: []Rule{{
		Name:    "a",
		Respond: Respond{Calls: []ToolCall{{Name: "f", Arguments: map[string]any{"q": "{{.User}}"}}}},
	}}}
	if err := sc.Validate(); err != nil {
		t.Fatal(err)
	}
}
