package workflows_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/mock"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/workflowstest"
)

// TestToolAttempts: a tool call attempted again after an attempt whose
// result was lost (its worker died: each call's activity here runs the
// real activity twice and keeps the second's result; e2e's
// TestToolKilledMidCall kills a worker). An idempotent tool runs again,
// with the same idempotency key; a NotIdempotent one, as a local or a
// regular activity, does not: the model reads that the call may or may
// not have taken effect, and the agent records a tool_in_doubt event.
func TestToolAttempts(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []agents.ToolOption
		runs int // how many times the tool's func runs
	}{
		{"idempotent", nil, 2},
		{"not idempotent", []agents.ToolOption{agents.NotIdempotent()}, 1},
		{"not idempotent, an activity", []agents.ToolOption{agents.NotIdempotent(), agents.AsActivity()}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var keys []string
			fn := func(ctx context.Context, _ struct{}) (string, error) {
				key := agents.IdempotencyKey(ctx)
				mu.Lock()
				keys = append(keys, key)
				mu.Unlock()
				return "charged " + key, nil
			}
			charge := agents.MustFunctionTool("charge", "Charges.", fn, tc.opts...)
			var output string
			m := &workflowstest.FuncModel{Func: func(req model.Request) []agents.Item {
				for _, it := range req.Input {
					if it.Type == agents.ItemFunctionCallOutput {
						output = it.Output
						return []agents.Item{agents.AssistantMessage("done")}
					}
				}
				return []agents.Item{workflowstest.Call("c1", "charge", `{}`)}
			}}
			g := agents.MustGraph("pay", "payer", &agents.Agent{Name: "payer", Instructions: "pay", Tools: []agents.Tool{charge}})
			env := workflowstest.NewEnv()
			r, err := workflowstest.Serve(env, workflows.Config{Graphs: []*agents.Graph{g}, Model: m})
			if err != nil {
				t.Fatal(err)
			}
			env.OnActivity(workflows.ToolActivityName, mock.Anything, mock.Anything).Return(func(ctx context.Context, in troupe.ToolInput) (agents.Item, error) {
				if _, err := r.Activities().FunctionTool(ctx, in); err != nil { // The attempt whose result was lost.
					return agents.Item{}, err
				}
				return r.Activities().FunctionTool(ctx, in)
			})
			env.ExecuteWorkflow(troupe.AgentWorkflowName, troupe.AgentInput{Graph: "pay", Agent: "payer", RunID: "run", Pending: []agents.Item{agents.UserMessage("pay")}})
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(keys) != tc.runs || keys[0] == "" || slices.Compact(slices.Clone(keys))[0] != keys[len(keys)-1] {
				t.Fatalf("the tool ran %d times with keys %q, want %d times with one key", len(keys), keys, tc.runs)
			}
			var inDoubt []troupe.Event
			for _, e := range workflowstest.Recorded(t, env, 0) {
				if e.Kind == troupe.EventToolInDoubt {
					inDoubt = append(inDoubt, e)
				}
			}
			if tc.runs == 2 {
				if output != "charged "+keys[0] || len(inDoubt) != 0 {
					t.Errorf("output %q, %d in-doubt events; want the second run's output and none", output, len(inDoubt))
				}
				return
			}
			if !strings.HasPrefix(output, agents.InDoubtPrefix) || !strings.Contains(output, keys[0]) {
				t.Errorf("the model read %q, want it told the call may have taken effect, with its key", output)
			}
			if len(inDoubt) != 1 || inDoubt[0].Tool != "charge" || inDoubt[0].CallID != "c1" || !strings.Contains(inDoubt[0].Detail, keys[0]) {
				t.Errorf("in-doubt events %+v, want one for charge's call c1 naming its key", inDoubt)
			}
		})
	}
}
