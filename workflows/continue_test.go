package workflows_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/local"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/workflowstest"
)

// An agent workflow continues as new every few turns, carrying its state:
// the run goes on as one (turns, tool calls and usage add up), its sandbox
// stays up across runs with its workspace, and a follower's cursor gets
// every event once, in order, across the runs.
func TestContinueAsNew(t *testing.T) {
	root := t.TempDir()
	lc, err := local.New(local.Config{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	store, _ := blob.Open(context.Background(), "mem://")
	g := agents.MustGraph("can", "worker", &agents.Agent{Name: "worker", Instructions: "worker: counts", MaxTurns: 50,
		Sandbox: &agents.Sandbox{}})
	const echoes = 10
	m := &workflowstest.FuncModel{Func: func(req model.Request) []agents.Item {
		n := 0
		for _, it := range req.Input {
			if it.Type == agents.ItemFunctionCallOutput {
				n++
			}
		}
		switch {
		case n < echoes:
			return []agents.Item{workflowstest.Call(fmt.Sprintf("c%d", n), "exec_command", fmt.Sprintf(`{"cmd":"echo %d >> count.txt"}`, n))}
		case n == echoes:
			return []agents.Item{workflowstest.Call("cat", "exec_command", `{"cmd":"cat count.txt"}`)}
		}
		return []agents.Item{agents.AssistantMessage("counted: " + workflowstest.LastItem(req).Output)}
	}}
	r, err := workflows.NewRunner(workflows.Config{Graphs: []*agents.Graph{g}, Model: m, Store: store,
		Sandboxes: map[string]sandbox.Client{"local": lc}, ContinueAfterTurns: 4})
	if err != nil {
		t.Fatal(err)
	}
	in := workflows.AgentWorkflowInput{AgentInput: troupe.AgentInput{Graph: "can", Agent: "worker", RunID: "run", Pending: []agents.Item{agents.UserMessage("count")}}}
	var events []troupe.Event
	runs := 1
	var res troupe.AgentResult
	for ; ; runs++ {
		if runs > 10 {
			t.Fatal("more than 10 runs")
		}
		env := workflowstest.NewEnv()
		r.Register(env)
		env.ExecuteWorkflow(troupe.AgentWorkflowName, in)
		err := env.GetWorkflowError()
		// A follower's cursor: the events after the last one seen.
		after := 0
		if len(events) > 0 {
			after = events[len(events)-1].Seq
		}
		events = append(events, workflowstest.Recorded(t, env, after)...)
		var can *workflow.ContinueAsNewError
		if errors.As(err, &can) {
			in = workflows.AgentWorkflowInput{}
			if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &in); err != nil {
				t.Fatal(err)
			}
			if in.Carry == nil || in.Carry.State.Lease == nil || !in.Carry.State.Lease.Live() || in.Carry.Lease != nil {
				t.Fatalf("run %d carried %+v, want the state with the live sandbox's lease in it", runs, in.Carry)
			}
			if runs == 1 {
				// As a worker from before the lease was part of the state
				// carried it: beside the state. The next run takes it up.
				in.Carry.Lease, in.Carry.State.Lease = in.Carry.State.Lease, nil
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := env.GetWorkflowResult(&res); err != nil {
			t.Fatal(err)
		}
		break
	}
	if runs < 3 {
		t.Errorf("%d runs, want the agent to continue as new every 4 turns", runs)
	}
	if res.Turns != echoes+2 || res.ToolCalls != echoes+1 || res.Usage.Requests != echoes+2 {
		t.Errorf("result %+v, want %d turns, %d tool calls, %d requests over all runs", res, echoes+2, echoes+1, echoes+2)
	}
	var want strings.Builder
	for i := range echoes {
		fmt.Fprintf(&want, "%d\n", i)
	}
	var out string
	if err := json.Unmarshal(res.Output, &out); err != nil || !strings.HasSuffix(out, "Output:\n"+want.String()) {
		t.Errorf("output %s, want the count written across all runs", res.Output)
	}
	kinds := map[string]int{}
	for i, e := range events {
		if e.Seq != i+1 {
			t.Fatalf("event %d has number %d: a gap or a repeat across runs", i+1, e.Seq)
		}
		kinds[e.Kind]++
	}
	if kinds[troupe.EventContinued] != runs-1 || kinds[troupe.EventSandboxProvisioned] != 1 || kinds[troupe.EventSandboxStopped] != 1 || kinds[troupe.EventAgentStarted] != 1 {
		t.Errorf("event kinds %v: want %d continued_as_new, one sandbox provisioned and stopped, one agent_started", kinds, runs-1)
	}
	if left := workflowstest.Leftovers(t, root); len(left) != 0 {
		t.Errorf("workspaces left: %v", left)
	}
	if in.Carry == nil || len(in.Carry.Pages) != runs-1 {
		t.Fatalf("the last run carried %+v; want a page of events per earlier run", in.Carry)
	}
	checkPages(t, store, in.Carry.Pages, events)
}

// checkPages checks that pages, read from the store, hold the events a
// follower saw before the last run, each once, in order, from the first.
func checkPages(t *testing.T, store *blob.Store, pages []troupe.EventPage, followed []troupe.Event) {
	t.Helper()
	next := 1
	for _, p := range pages {
		data, err := store.Get(context.Background(), p.Key)
		if err != nil {
			t.Fatal(err)
		}
		var evs []troupe.Event
		if err := json.Unmarshal(data, &evs); err != nil {
			t.Fatal(err)
		}
		if p.From != next || len(evs) != p.To-p.From+1 || !strings.HasPrefix(p.Key, "events/") {
			t.Fatalf("page %+v holds %d events; want events %d on, one per number, under events/", p, len(evs), next)
		}
		for _, e := range evs {
			if e.Seq != next || e.Seq > len(followed) || followed[e.Seq-1].Kind != e.Kind || followed[e.Seq-1].Detail != e.Detail {
				t.Fatalf("page %+v: event %d is %+v; the follower saw %+v", p, next, e, followed[min(e.Seq, len(followed))-1])
			}
			next++
		}
	}
	if after := followed[next-1]; after.Kind != troupe.EventContinued {
		t.Errorf("the pages end at event %d, followed by %s; want them to end where the last run continued as new", next-1, after.Kind)
	}
}
