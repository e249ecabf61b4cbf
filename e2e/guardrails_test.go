package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/model/scripted"
	"github.com/troupe-dev/troupe/workflows"
)

// guardrailGraph is a graph whose agent has a guardrail of each kind: an
// input guardrail in parallel with the first model call (trips on
// "forbidden"), an output guardrail (trips on "!!!"), and a tool
// guardrail on lookup that rejects the key "root" and redacts secrets
// from outputs. workflows' replay tests serve it too.
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
	)
}

// TestGuardrailsEndToEnd runs the guardrail graph on the embedded server:
// an input guardrail that trips while the first model call is under way
// (cancelled, the run failed with troupe.GuardrailTripped), a turn whose
// tool guardrail rejects one call and redacts the other's output, and an
// output guardrail that trips. Each run's workflows replay from their
// histories, and the events of a tripped run stay readable once it has
// ended. With -histories, their histories are saved for the replay tests
// of package workflows:
//
//	go test ./e2e -run TestGuardrailsEndToEnd -histories ../workflows/testdata/histories/v10-guardrails
func TestGuardrailsEndToEnd(t *testing.T) {
	c := dial(t)
	_, url := serveScenario(t, &scripted.Scenario{Rules: []scripted.Rule{
		{Name: "guard-slow", Match: scripted.Match{Instructions: "guarded main", Input: "forbidden"},
			Respond: scripted.Respond{Text: "too late", DelayMS: 3000}},
		{Name: "guard-shout", Match: scripted.Match{Instructions: "guarded main", Input: "shout"}, Respond: scripted.Respond{Text: "HELLO!!!"}},
		{Name: "guard-lookup", Match: scripted.Match{Instructions: "guarded main", Turn: 1}, Respond: scripted.Respond{Calls: []scripted.ToolCall{
			{Name: "lookup", Arguments: map[string]any{"key": "k"}}, {Name: "lookup", Arguments: map[string]any{"key": "root"}}}}},
		{Name: "guard-answer", Match: scripted.Match{Instructions: "guarded main", Turn: 2}, Respond: scripted.Respond{Text: `{{join .Outputs " | "}}`}},
	}})
	queue := startWorker(t, c, url, model.APIResponses, func(cfg *workflows.Config) { cfg.Graphs = []*agents.Graph{guardrailGraph()} })
	for _, tc := range []struct {
		name, input string
		trip        string // the guardrail that trips; "" for none
		want        []string
	}{
		{"input", "something forbidden", "no_forbidden", nil},
		{"tools", "look k and root up", "", []string{"[redacted]-k", "guardrail redact rejected this call; it was not run. The root key is off limits."}},
		{"output", "shout", "no_shouting", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			run, err := workflows.StartRun(ctx, c, queue, workflows.RunInput{Graph: "guards", Input: tc.input})
			if err != nil {
				t.Fatal(err)
			}
			var res workflows.RunResult
			err = run.Get(ctx, &res)
			trip, tripped := workflows.TrippedGuardrail(err)
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
			agent := run.GetID() + "/0-guarded"
			// The agent's events, read once it ended (a worker replays
			// it to answer), say what the guardrails did.
			kinds := map[string]int{}
			for _, e := range runEvents(t, c, run.GetID()) {
				kinds[e.Kind]++
			}
			want := map[string]int{workflows.EventGuardrailTripped: 1}
			if tc.name == "input" {
				// The model call was cancelled: no turn was taken.
				want[workflows.EventTurn] = 0
			}
			if tc.trip == "" {
				want = map[string]int{workflows.EventGuardrailTripped: 0, workflows.EventGuardrailApplied: 2}
			}
			for k, n := range want {
				if kinds[k] != n {
					t.Errorf("%d %s events, want %d (events: %v)", kinds[k], k, n, kinds)
				}
			}
			ids := map[string]bool{run.GetID(): true, agent: true}
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
	h := &historypb.History{}
	it := c.GetWorkflowHistory(context.Background(), id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		h.Events = append(h.Events, e)
	}
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
