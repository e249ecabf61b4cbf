package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/model/scripted"
	"github.com/troupe-dev/troupe/workflows"
)

// guardrailGraph is a graph whose agent has a guardrail of each kind: an
// input guardrail in parallel with the first model call (trips on
// "forbidden"), an output guardrail (trips on "!!!"), and a tool
// guardrail on lookup that rejects the key "root" and redacts secrets
// from outputs. Its agent vetted has a tool guardrail whose checks are
// agents: call_vetter checks lookup's calls, output_vetter their outputs
// (see vetRules). workflows' replay tests serve it too.
func guardrailGraph() *agents.Graph {
	lookup := agents.MustFunctionTool("lookup", "Looks a key up.", func(_ context.Context, a struct {
		Key string `json:"key"`
	}) (string, error) {
		return "secret-" + a.Key, nil
	})
	return agents.MustGraph("guards", "guarded",
		&agents.Agent{Name: "guarded", Instructions: "guarded main: looks things up", Tools: []agents.Tool{lookup},
			InputGuardrails: []agents.InputGuardrail{{Name: "no_forbidden", Func: func(_ context.Context, _ agents.RunContext, input string) (agents.GuardrailVerdict, error) {
				if strings.Contains(input, "forbidden") {
					return agents.Trip("the message is forbidden"), nil
				}
				return agents.Pass(), nil
			}}},
			OutputGuardrails: []agents.OutputGuardrail{agents.CheckOutput("no_shouting", func(_ context.Context, _ agents.RunContext, text string) (agents.GuardrailVerdict, error) {
				if strings.Contains(text, "!!!") {
					return agents.Trip("the answer shouts"), nil
				}
				return agents.Pass(), nil
			})},
			ToolGuardrails: []agents.ToolGuardrail{{Name: "redact", Tool: "lookup",
				Before: func(_ context.Context, c agents.ToolCall) (agents.ToolVerdict, error) {
					if strings.Contains(string(c.Arguments), `"root"`) {
						return agents.RejectCall("The root key is off limits."), nil
					}
					return agents.ToolVerdict{}, nil
				},
				After: func(_ context.Context, _ agents.ToolCall, out string) (agents.ToolVerdict, error) {
					if strings.Contains(out, "secret") {
						return agents.ReplaceOutput(strings.ReplaceAll(out, "secret", "[redacted]")), nil
					}
					return agents.ToolVerdict{}, nil
				}}}},
		&agents.Agent{Name: "vetted", Instructions: "vetted main: looks things up", Tools: []agents.Tool{lookup},
			ToolGuardrails: []agents.ToolGuardrail{{Name: "vet", Tool: "lookup", BeforeAgent: "call_vetter", AfterAgent: "output_vetter"}}},
		&agents.Agent{Name: "call_vetter", Instructions: "call vetter: checks lookups", Output: agents.MustOutput[agents.ToolCallVerdict]()},
		&agents.Agent{Name: "output_vetter", Instructions: "output vetter: checks what lookups found", Output: agents.MustOutput[agents.ToolOutputVerdict]()},
	)
}

// vetRules script vetted and its guardrail agents, which read each check
// as JSON (agents.ToolCheck): vetted looks k, root and private up at once
// (only stop when told to stop); call_vetter rejects the key root, trips
// on stop and allows the others; output_vetter withholds the output of
// private and replaces the others' with "[vetted] KEY".
const vetRules = `
rules:
  - name: vet-stop
    match: {instructions: "vetted main", input: stop, turn: 1}
    respond: {calls: [{name: lookup, arguments: {key: stop}}]}
  - name: vet-lookup
    match: {instructions: "vetted main", turn: 1}
    respond: {calls: [{name: lookup, arguments: {key: k}}, {name: lookup, arguments: {key: root}}, {name: lookup, arguments: {key: private}}]}
  - name: vet-answer
    match: {instructions: "vetted main", turn: 2}
    respond: {text: '{{join .Outputs " | "}}'}
  - name: vet-call-root
    match: {instructions: "call vetter", input: '"check":"tool_before".*"arguments":\{"key":"root"\}'}
    respond: {json: {action: reject, message: "The root key is off limits.", reason: "the root key"}}
  - name: vet-call-stop
    match: {instructions: "call vetter", input: '"check":"tool_before".*"arguments":\{"key":"stop"\}'}
    respond: {json: {action: trip, message: "", reason: "the agent was told to stop"}}
  - name: vet-call
    match: {instructions: "call vetter", input: '"check":"tool_before","guardrail":"vet","agent":"vetted","tool":"lookup"'}
    respond: {json: {action: allow, message: "", reason: "a plain lookup"}}
  - name: vet-output-private
    match: {instructions: "output vetter", input: '"check":"tool_after".*"output":"secret-private"'}
    respond: {json: {action: withhold, message: "Private keys stay private.", reason: "a private key"}}
  - name: vet-output
    match: {instructions: "output vetter", input: '"check":"tool_after","guardrail":"vet","agent":"vetted","tool":"lookup".*"output":"secret-'}
    respond: {json: {action: replace, message: '[vetted] {{field .User "arguments.key"}}', reason: "a secret"}}
`

// TestGuardrailsEndToEnd runs the guardrail graph on the embedded server:
// an input guardrail that trips while the first model call is under way
// (cancelled, the run failed with troupe.GuardrailTripped), a turn whose
// tool guardrail rejects one call and redacts the other's output, and an
// output guardrail that trips; and, with tool guardrails that are agents
// (vetted's), a turn of three calls of which one is rejected, one's
// output replaced and one's withheld, and a call that trips. Each run's
// workflows replay from their histories, and the events of a tripped run
// stay readable once it has ended. With -histories, their histories are
// saved for the replay tests of package workflows (v10-guardrails holds
// the runs of input, tools and output; v17-prechecks the same three, once
// tool guardrail funcs rode with the model call; v11-tool-guardrail-agents
// those of tool_agents and tool_agents_trip):
//
//	go test ./e2e -run 'TestGuardrailsEndToEnd/tool_agents' -histories ../workflows/testdata/histories/v11-tool-guardrail-agents
func TestGuardrailsEndToEnd(t *testing.T) {
	parallel(t)
	c := dial(t)
	vet, err := scripted.ParseScenario([]byte(vetRules))
	if err != nil {
		t.Fatal(err)
	}
	_, url := serveScenario(t, &scripted.Scenario{Rules: append([]scripted.Rule{
		{Name: "guard-slow", Match: scripted.Match{Instructions: "guarded main", Input: "forbidden"},
			Respond: scripted.Respond{Text: "too late", DelayMS: 3000}},
		{Name: "guard-shout", Match: scripted.Match{Instructions: "guarded main", Input: "shout"}, Respond: scripted.Respond{Text: "HELLO!!!"}},
		{Name: "guard-lookup", Match: scripted.Match{Instructions: "guarded main", Turn: 1}, Respond: scripted.Respond{Calls: []scripted.ToolCall{
			{Name: "lookup", Arguments: map[string]any{"key": "k"}}, {Name: "lookup", Arguments: map[string]any{"key": "root"}}}}},
		{Name: "guard-answer", Match: scripted.Match{Instructions: "guarded main", Turn: 2}, Respond: scripted.Respond{Text: `{{join .Outputs " | "}}`}},
	}, vet.Rules...)})
	queue := startWorker(t, c, url, model.APIResponses, func(cfg *workflows.Config) { cfg.Graphs = []*agents.Graph{guardrailGraph()} })
	for _, tc := range []struct {
		name, agent, input string
		trip               string // the guardrail that trips; "" for none
		want               []string
		applied            int // guardrail_applied events, for a run that ends well
		guards             int // workflows of guardrail agents
	}{
		{"input", "guarded", "something forbidden", "no_forbidden", nil, 0, 0},
		{"tools", "guarded", "look k and root up", "", []string{"[redacted]-k", "guardrail redact rejected this call; it was not run. The root key is off limits."}, 2, 0},
		{"output", "guarded", "shout", "no_shouting", nil, 0, 0},
		// The three calls are checked at once, then the two that ran
		// have their outputs checked.
		{"tool_agents", "vetted", "look k, root and private up", "", []string{"[vetted] k",
			"guardrail vet rejected this call; it was not run. The root key is off limits.",
			"The output of this call was withheld by guardrail vet. Private keys stay private."}, 3, 5},
		{"tool_agents_trip", "vetted", "stop", "vet", nil, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			run, err := troupeclient.StartRun(ctx, c, queue, troupe.RunInput{Graph: "guards", Agent: tc.agent, Input: tc.input})
			if err != nil {
				t.Fatal(err)
			}
			var res troupe.RunResult
			err = run.Get(ctx, &res)
			trip, tripped := troupe.TrippedGuardrail(err)
			switch {
			case tc.trip != "" && (!tripped || trip.Guardrail != tc.trip):
				t.Fatalf("err = %v, want %s tripped", err, tc.trip)
			case tc.trip == "" && err != nil:
				t.Fatal(err)
			}
			var text string
			_ = json.Unmarshal(res.Output, &text)
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("output %q lacks %q", text, w)
				}
			}
			// The agent's events, read once it ended (a worker replays
			// it to answer), say what the guardrails did; those of its
			// guardrail agents' workflows are among them.
			ids := map[string]bool{run.GetID(): true, run.GetID() + "/0-" + tc.agent: true}
			kinds := map[string]int{}
			for _, e := range runEvents(t, c, run.GetID()) {
				kinds[e.Kind]++
				if e.Child != "" {
					ids[e.Child] = true
				}
			}
			want := map[string]int{troupe.EventGuardrailTripped: 1}
			if tc.name == "input" {
				// The model call was cancelled: no turn was taken.
				want[troupe.EventTurn] = 0
			}
			if tc.trip == "" {
				want = map[string]int{troupe.EventGuardrailTripped: 0, troupe.EventGuardrailApplied: tc.applied}
			}
			for k, n := range want {
				if kinds[k] != n {
					t.Errorf("%d %s events, want %d (events: %v)", kinds[k], k, n, kinds)
				}
			}
			if n := len(ids) - 2; n != tc.guards {
				t.Errorf("%d workflows of guardrail agents, want %d (ids: %v)", n, tc.guards, ids)
			}
			for id := range ids {
				replayClosed(t, c, id)
			}
			if *historiesDir != "" {
				saveHistories(t, c, ids, *historiesDir, "guardrails-"+tc.name)
			}
		})
	}
}

// replayClosed replays the history of the closed workflow id on today's
// workflow code.
func replayClosed(t *testing.T, c client.Client, id string) {
	t.Helper()
	h := history(t, c, id)
	store, _ := blob.Open(context.Background(), "mem://")
	r, err := workflows.NewRunner(workflows.Config{Graphs: []*agents.Graph{guardrailGraph()}, Model: unusedModel{}, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	rp := worker.NewWorkflowReplayer()
	r.RegisterWorkflows(rp)
	if err := rp.ReplayWorkflowHistoryWithOptions(nil, h, worker.ReplayWorkflowHistoryOptions{
		OriginalExecution: workflow.Execution{ID: id, RunID: "replay"}}); err != nil {
		t.Errorf("replay of %s: %v", id, err)
	}
}

// unusedModel stands in for the model of a replay, which calls none.
type unusedModel struct{}

func (unusedModel) Respond(context.Context, model.Request) (*model.Response, error) {
	return nil, errors.New("a replay calls no model")
}
