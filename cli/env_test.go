package cli

import (
	"context"
	"io"
	"testing"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/model"
)

// TestOfflineModelNamesScenarioFile checks the offline model of a worker
// that serves several graphs: each graph's rules answer with its own
// intents, and a message no rule answers names the scenario file of the
// graph whose agent asked, so the user knows where to add a rule.
func TestOfflineModelNamesScenarioFile(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	graph := func(name, instructions string) *agents.Graph {
		return agents.MustGraph(name, "a", &agents.Agent{Name: "a", Instructions: instructions})
	}
	scenario := func(who string) []byte {
		return []byte("intents: {fix: ['fix|repair']}\nrules:\n  - {name: fix, match: {instructions: " + who + ", intent: fix}, respond: {text: fixed by " + who + "}}\n")
	}
	m, _, release, err := modelFor([]Graph{
		{Graph: graph("one", "agent one"), Scenario: scenario("one"), ScenarioFile: "examples/one/scenario.yaml"},
		{Graph: graph("two", "agent two"), Scenario: scenario("two")},
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	ask := func(instructions, msg string) (*model.Response, error) {
		return m.Respond(context.Background(), model.Request{Model: "scripted", Instructions: instructions, Input: []agents.Item{agents.UserMessage(msg)}})
	}
	for _, who := range []string{"one", "two"} {
		resp, err := ask("agent "+who, "please repair it")
		if err != nil || len(resp.Output) != 1 || resp.Output[0].Content != "fixed by "+who {
			t.Errorf("agent %s asked to repair: %+v, %v", who, resp, err)
		}
	}
	for instructions, want := range map[string]string{
		"agent one": "examples/one/scenario.yaml",
		"agent two": "the offline scenario of graph two",
	} {
		_, err := ask(instructions, "what's the weather?")
		if source, ok := model.ScenarioNoMatch(err); !ok || source != want {
			t.Errorf("%s, no rule: %v (source %q), want the no-match naming %q", instructions, err, source, want)
		}
	}
}
