package workflows_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/capabilities"
	"github.com/troupe-dev/troupe/handoff"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/events"
	"github.com/troupe-dev/troupe/workflows/workflowstest"
)

type review struct {
	Risk     string   `json:"risk" jsonschema:"enum=low,enum=medium,enum=high"`
	Findings []string `json:"findings"`
}

func testGraph(t *testing.T) *agents.Graph {
	t.Helper()
	lookup := agents.MustFunctionTool("lookup", "Looks a key up.", func(_ context.Context, a struct {
		Key string `json:"key"`
	}) (string, error) {
		if a.Key == "bad" {
			return "", fmt.Errorf("no such key %q", a.Key)
		}
		return "value-of-" + a.Key, nil
	})
	return agents.MustGraph("test", "a",
		&agents.Agent{Name: "a", Instructions: "a: first", Handoffs: []agents.Handoff{agents.HandoffTo("b")}},
		&agents.Agent{Name: "b", Instructions: "b: second", Tools: []agents.Tool{lookup},
			Handoffs: []agents.Handoff{{Target: "c", InputFilter: handoff.RemoveToolCalls}}},
		&agents.Agent{Name: "c", Instructions: "c: third"},
		&agents.Agent{Name: "boss", Instructions: "boss: fans out", Tools: []agents.Tool{
			agents.AsTool("rev", "review_pricing", "Reviews pricing."),
			agents.AsTool("rev", "review_rollout", "Reviews rollout."),
		}},
		&agents.Agent{Name: "rev", Instructions: "rev: reviews", Output: agents.MustOutput[review]()},
		&agents.Agent{Name: "loop", Instructions: "loop: forever", Tools: []agents.Tool{lookup}, MaxTurns: 3},
	)
}

func newEnv(t *testing.T, fn workflowstest.TurnFunc) (*testsuite.TestWorkflowEnvironment, *workflowstest.FuncModel) {
	t.Helper()
	m := &workflowstest.FuncModel{Func: fn}
	env := workflowstest.NewRunnerEnv(t, workflows.Config{Graphs: []*agents.Graph{testGraph(t)}, Model: m})
	return env, m
}

// run runs agent of the test graph on input, and returns how the run
// ended.
func run(t *testing.T, env *testsuite.TestWorkflowEnvironment, agent, input string) (*troupe.RunResult, error) {
	t.Helper()
	env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "test", Agent: agent, Input: input})
	return workflowstest.Result(t, env)
}

func TestHandoffChain(t *testing.T) {
	var cSaw []agents.Item
	env, m := newEnv(t, func(req model.Request) []agents.Item {
		last := workflowstest.LastItem(req)
		switch workflowstest.FirstWord(req.Instructions) {
		case "a:":
			return []agents.Item{workflowstest.Call("h1", "transfer_to_b", "{}")}
		case "b:":
			if last.Type == agents.ItemFunctionCallOutput && last.CallID == "l1" {
				return []agents.Item{workflowstest.Call("h2", "transfer_to_c", "{}")}
			}
			return []agents.Item{workflowstest.Call("l1", "lookup", `{"key":"x"}`)}
		default:
			cSaw = req.Input
			return []agents.Item{agents.AssistantMessage("done by c")}
		}
	})
	res, err := run(t, env, "", "hello")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(res.Path, ">"); got != "a>b>c" {
		t.Errorf("path = %s, want a>b>c", got)
	}
	if string(res.Output) != `"done by c"` || res.Agent != "c" || res.Handoffs != 2 {
		t.Errorf("result = %+v", res)
	}
	if m.Calls("a:") != 1 || m.Calls("b:") != 2 || m.Calls("c:") != 1 {
		t.Errorf("model calls a=%d b=%d c=%d", m.Calls("a:"), m.Calls("b:"), m.Calls("c:"))
	}
	// RemoveToolCalls on b→c: c sees the user's message and no tool items.
	for _, it := range cSaw {
		if it.Type != agents.ItemMessage {
			t.Errorf("c saw a %s item after the filter", it.Type)
		}
	}
	if len(cSaw) == 0 || cSaw[0].Content != "hello" {
		t.Errorf("c saw %+v, want the user's message first", cSaw)
	}
}

func TestParallelAgentTools(t *testing.T) {
	env, m := newEnv(t, func(req model.Request) []agents.Item {
		last := workflowstest.LastItem(req)
		switch workflowstest.FirstWord(req.Instructions) {
		case "boss:":
			if last.Type == agents.ItemFunctionCallOutput {
				var outs []string
				for _, it := range req.Input {
					if it.Type == agents.ItemFunctionCallOutput {
						outs = append(outs, it.Output)
					}
				}
				return []agents.Item{agents.AssistantMessage(strings.Join(outs, "|"))}
			}
			return []agents.Item{workflowstest.Call("p", "review_pricing", `{"input":"pricing"}`), workflowstest.Call("r", "review_rollout", `{"input":"rollout"}`)}
		default:
			return []agents.Item{agents.AssistantMessage(fmt.Sprintf(`{"risk":"high","findings":[%q]}`, last.Content))}
		}
	})
	res, err := run(t, env, "boss", "review the deal")
	if err != nil {
		t.Fatal(err)
	}
	var text string
	_ = json.Unmarshal(res.Output, &text)
	want := `{"findings":["pricing"],"risk":"high"}|{"findings":["rollout"],"risk":"high"}`
	if text != `{"risk":"high","findings":["pricing"]}|{"risk":"high","findings":["rollout"]}` && text != want {
		t.Errorf("boss saw %s, want the two reviews as JSON", text)
	}
	if m.Calls("rev:") != 2 {
		t.Errorf("rev model calls = %d, want 2", m.Calls("rev:"))
	}
	if res.Usage.Requests != 4 {
		t.Errorf("usage requests = %d, want 4 (2 boss + 2 rev)", res.Usage.Requests)
	}
}

func TestStructuredOutputRetry(t *testing.T) {
	tests := []struct {
		name      string
		bad       int // invalid answers before a valid one
		wantErr   string
		wantCalls int
	}{
		{"corrected on retry", 1, "", 2},
		{"fails after retries", 5, troupe.ErrOutputInvalid, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			env, m := newEnv(t, func(req model.Request) []agents.Item {
				n++
				if n <= tc.bad {
					return []agents.Item{agents.AssistantMessage(`{"risk":"extreme","findings":[]}`)}
				}
				if !strings.Contains(workflowstest.LastItem(req).Content, "/risk") {
					t.Errorf("correction does not name the bad field: %q", workflowstest.LastItem(req).Content)
				}
				return []agents.Item{agents.AssistantMessage(`{"risk":"low","findings":["ok"]}`)}
			})
			res, err := run(t, env, "rev", "check")
			if m.Calls("rev:") != tc.wantCalls {
				t.Errorf("model calls = %d, want %d", m.Calls("rev:"), tc.wantCalls)
			}
			if tc.wantErr != "" {
				if troupe.ErrorType(err) != tc.wantErr {
					t.Fatalf("err = %v, want type %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(res.Output) != `{"risk":"low","findings":["ok"]}` {
				t.Errorf("output = %s", res.Output)
			}
		})
	}
}

func TestMaxTurns(t *testing.T) {
	env, m := newEnv(t, func(req model.Request) []agents.Item {
		return []agents.Item{workflowstest.Call(fmt.Sprintf("c%d", len(req.Input)), "lookup", `{"key":"k"}`)}
	})
	_, err := run(t, env, "loop", "go")
	if troupe.ErrorType(err) != troupe.ErrMaxTurns {
		t.Fatalf("err = %v, want %s", err, troupe.ErrMaxTurns)
	}
	if m.Calls("loop:") != 3 {
		t.Errorf("model calls = %d, want 3", m.Calls("loop:"))
	}
}

func TestToolErrorsReachTheModel(t *testing.T) {
	var outputs []string
	env, _ := newEnv(t, func(req model.Request) []agents.Item {
		last := workflowstest.LastItem(req)
		if last.Type == agents.ItemFunctionCallOutput {
			for _, it := range req.Input {
				if it.Type == agents.ItemFunctionCallOutput {
					outputs = append(outputs, it.Output)
				}
			}
			return []agents.Item{agents.AssistantMessage("recovered")}
		}
		return []agents.Item{
			workflowstest.Call("1", "lookup", `{"key":"bad"}`),
			workflowstest.Call("2", "nope", `{}`),
			workflowstest.Call("3", "lookup", `{"wrong":1}`),
		}
	})
	res, err := run(t, env, "loop", "go")
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Output) != `"recovered"` || len(outputs) != 3 {
		t.Fatalf("output %s, tool outputs %q", res.Output, outputs)
	}
	for i, want := range []string{`no such key "bad"`, `tool "nope" does not exist`, "invalid arguments for tool lookup"} {
		if !strings.Contains(outputs[i], want) {
			t.Errorf("output %d = %q, want it to contain %q", i, outputs[i], want)
		}
	}
}

// A model that leaves its calls' ids empty, or repeats one (as some
// OpenAI-compatible servers do), gets each call run and answered under an
// id of its own, which the next turn shows it with its call.
func TestCallsWithoutTheirOwnIDs(t *testing.T) {
	var seen []agents.Item
	env, _ := newEnv(t, func(req model.Request) []agents.Item {
		if workflowstest.LastItem(req).Type == agents.ItemFunctionCallOutput {
			seen = req.Input
			return []agents.Item{agents.AssistantMessage("done")}
		}
		return []agents.Item{workflowstest.Call("", "lookup", `{"key":"a"}`), workflowstest.Call("", "lookup", `{"key":"b"}`), workflowstest.Call("x", "lookup", `{"key":"c"}`), workflowstest.Call("x", "lookup", `{"key":"d"}`)}
	})
	res, err := run(t, env, "loop", "go")
	if err != nil || string(res.Output) != `"done"` {
		t.Fatalf("run: %v, %v", res, err)
	}
	calls, outputs := map[string]string{}, map[string]string{}
	for _, it := range seen {
		switch it.Type {
		case agents.ItemFunctionCall:
			calls[it.CallID] = it.Arguments
		case agents.ItemFunctionCallOutput:
			outputs[it.CallID] = it.Output
		}
	}
	if len(calls) != 4 || len(outputs) != 4 {
		t.Fatalf("the model saw calls %q and outputs %q; want 4 of each, under 4 ids", calls, outputs)
	}
	for id, args := range calls {
		var a struct{ Key string }
		_ = json.Unmarshal([]byte(args), &a)
		if outputs[id] != "value-of-"+a.Key {
			t.Errorf("call %s (%s) answered %q", id, args, outputs[id])
		}
	}
}

// An agent tool that fails reaches its caller's model as what caused it,
// not as the workflow error that carried it.
func TestAgentToolFailureReadsPlainly(t *testing.T) {
	var saw string
	env, _ := newEnv(t, func(req model.Request) []agents.Item {
		switch workflowstest.FirstWord(req.Instructions) {
		case "rev:":
			return []agents.Item{agents.AssistantMessage("not JSON")}
		}
		if last := workflowstest.LastItem(req); last.Type == agents.ItemFunctionCallOutput {
			saw = last.Output
			return []agents.Item{agents.AssistantMessage("noted")}
		}
		return []agents.Item{workflowstest.Call("p1", "review_pricing", `{"input":"the deal"}`)}
	})
	if _, err := run(t, env, "boss", "review"); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(saw, "Error: agent tool review_pricing failed: "+troupe.ErrOutputInvalid+": ") || strings.Contains(saw, "child workflow") || strings.Contains(saw, "workflowID") {
		t.Errorf("the caller's model read %q", saw)
	}
}

// extrasGraph exercises the Go funcs an agent may carry: dynamic
// instructions, an on-handoff callback, an output extractor.
func extrasGraph(handoffs *[]string) *agents.Graph {
	return agents.MustGraph("extras", "front",
		&agents.Agent{Name: "front", Instructions: "front: routes",
			Handoffs: []agents.Handoff{{Target: "back", OnHandoff: func(_ context.Context, rc agents.RunContext) error {
				*handoffs = append(*handoffs, rc.Agent+"@"+rc.Vars["tenant"])
				return nil
			}}}},
		&agents.Agent{Name: "back", DynamicInstructions: func(_ context.Context, rc agents.RunContext) (string, error) {
			return fmt.Sprintf("back: tenant %s turn %d", rc.Vars["tenant"], rc.Turn), nil
		}, Tools: []agents.Tool{&agents.AgentTool{Agent: "rev", Name: "review", Extractor: func(_ context.Context, r agents.ToolRunResult) (string, error) {
			v, err := agents.Decode[review](r.Output)
			return "risk=" + v.Risk + " from " + r.Agent, err
		}}}},
		&agents.Agent{Name: "rev", Instructions: "rev: reviews", Output: agents.MustOutput[review]()},
		&agents.Agent{Name: "pingpong", Instructions: "pingpong: bounces", Handoffs: []agents.Handoff{agents.HandoffTo("pingpong")}},
	)
}

func newExtrasEnv(t *testing.T, fn workflowstest.TurnFunc, handoffs *[]string) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	env := workflowstest.NewRunnerEnv(t, workflows.Config{Graphs: []*agents.Graph{extrasGraph(handoffs)}, Model: &workflowstest.FuncModel{Func: fn}, MaxHandoffs: 3})
	return env
}

func TestAgentFuncs(t *testing.T) {
	var handoffs, instructions []string
	var backSaw string
	env := newExtrasEnv(t, func(req model.Request) []agents.Item {
		last := workflowstest.LastItem(req)
		switch workflowstest.FirstWord(req.Instructions) {
		case "front:":
			return []agents.Item{workflowstest.Call("h", "transfer_to_back", "{}")}
		case "back:":
			instructions = append(instructions, req.Instructions)
			if last.Type == agents.ItemFunctionCallOutput && last.CallID == "r" {
				backSaw = last.Output
				return []agents.Item{agents.AssistantMessage("ok")}
			}
			return []agents.Item{workflowstest.Call("r", "review", `{"input":"look"}`)}
		default:
			return []agents.Item{agents.AssistantMessage(`{"risk":"medium","findings":[]}`)}
		}
	}, &handoffs)
	env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "extras", Input: "hi", Vars: map[string]string{"tenant": "acme"}})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if strings.Join(handoffs, ",") != "front@acme" {
		t.Errorf("on-handoff calls = %v", handoffs)
	}
	if strings.Join(instructions, "|") != "back: tenant acme turn 1|back: tenant acme turn 2" {
		t.Errorf("dynamic instructions = %q", instructions)
	}
	if backSaw != "risk=medium from rev" {
		t.Errorf("extractor output = %q", backSaw)
	}
}

func TestMaxHandoffs(t *testing.T) {
	env := newExtrasEnv(t, func(req model.Request) []agents.Item {
		return []agents.Item{workflowstest.Call(fmt.Sprintf("h%d", len(req.Input)), "transfer_to_pingpong", "{}")}
	}, new([]string))
	env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "extras", Agent: "pingpong", Input: "go"})
	err := env.GetWorkflowError()
	if troupe.ErrorType(err) != troupe.ErrMaxHandoffs || !strings.Contains(err.Error(), "exceeded 3 handoffs") {
		t.Fatalf("err = %v, want %s", err, troupe.ErrMaxHandoffs)
	}
}

func TestBadRunInput(t *testing.T) {
	tests := []struct {
		name    string
		in      troupe.RunInput
		wantErr string
		msg     string
	}{
		{"unknown graph", troupe.RunInput{Graph: "nope", Input: "x"}, troupe.ErrUnknownAgent, `graph "nope"`},
		{"unknown agent", troupe.RunInput{Graph: "extras", Agent: "ghost", Input: "x"}, troupe.ErrUnknownAgent, `"ghost"`},
		{"oversized input", troupe.RunInput{Graph: "extras", Input: strings.Repeat("x", 600<<10)}, troupe.ErrPayloadTooLarge, "bound for one Temporal payload"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := newExtrasEnv(t, func(model.Request) []agents.Item { return nil }, new([]string))
			env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, tc.in)
			err := env.GetWorkflowError()
			if troupe.ErrorType(err) != tc.wantErr || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want %s with %q", err, tc.wantErr, tc.msg)
			}
		})
	}
}

func TestOversizedToolArguments(t *testing.T) {
	env, _ := newEnv(t, func(req model.Request) []agents.Item {
		return []agents.Item{workflowstest.Call("1", "lookup", fmt.Sprintf(`{"key":%q}`, strings.Repeat("k", 600<<10)))}
	})
	_, err := run(t, env, "loop", "go")
	if troupe.ErrorType(err) != troupe.ErrPayloadTooLarge {
		t.Fatalf("err = %v, want %s", err, troupe.ErrPayloadTooLarge)
	}
}

// TestRunContinuesAsNew bounces a run between agents past the
// orchestrator's history bound: each run of the orchestrator ends in a
// continue-as-new that carries the chain so far, the next run (on a fresh
// environment, as on another worker) goes on from it, and the last gives
// the result of the whole chain, with events numbered on across runs.
func TestRunContinuesAsNew(t *testing.T) {
	const handoffs = 12
	bounce := func(req model.Request) []agents.Item {
		n := 0
		for _, it := range req.Input {
			if it.Type == agents.ItemFunctionCall {
				n++
			}
		}
		if n == handoffs {
			return []agents.Item{agents.AssistantMessage(fmt.Sprintf("done after %d handoffs", n))}
		}
		return []agents.Item{workflowstest.Call(fmt.Sprintf("h%d", n), "transfer_to_pingpong", "{}")}
	}
	store, _ := blob.Open(context.Background(), "mem://")
	in := workflows.OrchestratorInput{RunInput: troupe.RunInput{Graph: "extras", Agent: "pingpong", Input: "go"}}
	var runs []workflows.OrchestratorInput
	var res troupe.RunResult
	for len(runs) < 2*handoffs {
		env := workflowstest.NewRunnerEnv(t, workflows.Config{Graphs: []*agents.Graph{extrasGraph(new([]string))}, Model: &workflowstest.FuncModel{Func: bounce},
			Store: store, MaxHandoffs: 2 * handoffs, ContinueAfterEvents: 20})
		// Past the bound from the start: each run starts one agent, then
		// continues as new before the next.
		env.SetCurrentHistoryLength(25)
		env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, in)
		runs = append(runs, in)
		err := env.GetWorkflowError()
		var cae *workflow.ContinueAsNewError
		if errors.As(err, &cae) {
			if cae.WorkflowType.Name != troupe.OrchestratorWorkflowName {
				t.Fatalf("continued as %s", cae.WorkflowType.Name)
			}
			var next workflows.OrchestratorInput
			if err := converter.GetDefaultDataConverter().FromPayloads(cae.Input, &next); err != nil {
				t.Fatal(err)
			}
			if next.Carry == nil || next.Carry.Spec == nil || next.Input != in.Input || next.Graph != in.Graph {
				t.Fatalf("run %d continued with %+v", len(runs), next)
			}
			if prev := in.Carry; prev != nil && next.Carry.NextEvent <= prev.NextEvent {
				t.Fatalf("run %d numbers its events from %d, not past the previous run's %d", len(runs), next.Carry.NextEvent, prev.NextEvent)
			}
			// The Web UI shows each run's message and agent at work
			// (continue-as-new keeps no static summary).
			q, err := env.QueryWorkflow("__temporal_workflow_metadata")
			if err != nil {
				t.Fatal(err)
			}
			var md sdkpb.WorkflowMetadata
			if err := q.Get(&md); err != nil {
				t.Fatal(err)
			}
			if d := md.GetCurrentDetails(); d != "extras: go\n\nagent at work: pingpong" {
				t.Fatalf("run %d shows current details %q; want the run's message and agent", len(runs), d)
			}
			in = next
			continue
		}
		if err != nil {
			t.Fatalf("run %d: %v", len(runs), err)
		}
		if err := env.GetWorkflowResult(&res); err != nil {
			t.Fatal(err)
		}
		break
	}
	if len(runs) != handoffs+1 {
		t.Errorf("the run took %d runs of its orchestrator; want one per agent, %d", len(runs), handoffs+1)
	}
	// Each earlier run saved its events as a page; each run after the
	// first starts with its continue-as-new.
	pages := in.Carry.Pages
	if len(pages) != handoffs {
		t.Fatalf("%d pages of events; want one per earlier run", len(pages))
	}
	next := 1
	for _, p := range pages {
		data, err := store.Get(context.Background(), p.Key)
		var evs []troupe.Event
		if err == nil {
			err = json.Unmarshal(data, &evs)
		}
		first := troupe.EventRunStarted
		if next > 1 {
			first = troupe.EventContinued
		}
		if err != nil || p.From != next || len(evs) != p.To-p.From+1 || evs[0].Seq != next || evs[0].Kind != first {
			t.Fatalf("page %+v (%v): want the events from %d on, starting with %s", p, err, next, first)
		}
		next = p.To + 1
	}
	if string(res.Output) != fmt.Sprintf("%q", fmt.Sprintf("done after %d handoffs", handoffs)) || res.Handoffs != handoffs || len(res.Path) != handoffs+1 || res.Turns != handoffs+1 {
		t.Errorf("result after %d runs: %s, %d handoffs, path %v, %d turns", len(runs), res.Output, res.Handoffs, res.Path, res.Turns)
	}
}

// TestHandoffDropsTheWindow: an agent whose compaction trimmed its
// context hands off, and the target, with a compaction of its own, is
// shown the whole conversation, not the window the first agent's trim
// left; the first agent itself was shown its window.
func TestHandoffDropsTheWindow(t *testing.T) {
	noop := agents.MustFunctionTool("noop", "Does nothing.", func(context.Context, struct{}) (string, error) { return "ok", nil })
	g := agents.MustGraph("windows", "small",
		&agents.Agent{Name: "small", Instructions: "small: trims hard", Tools: []agents.Tool{noop}, Handoffs: []agents.Handoff{agents.HandoffTo("big")},
			Capabilities: []agents.Capability{capabilities.Compaction(capabilities.CompactionConfig{MaxItems: 6, KeepLast: 2})}},
		&agents.Agent{Name: "big", Instructions: "big: keeps much",
			Capabilities: []agents.Capability{capabilities.Compaction(capabilities.CompactionConfig{})}},
	)
	var smallWidest int
	var bigSaw []agents.Item
	fn := func(req model.Request) []agents.Item {
		if workflowstest.FirstWord(req.Instructions) == "big:" {
			bigSaw = req.Input
			return []agents.Item{agents.AssistantMessage("done")}
		}
		smallWidest = max(smallWidest, len(req.Input))
		// The trimmed context does not show every call: count them by
		// the ids, which carry the turn.
		last := workflowstest.LastItem(req)
		if last.Type == agents.ItemFunctionCallOutput && last.CallID == "p5" {
			return []agents.Item{workflowstest.Call("h", "transfer_to_big", "{}")}
		}
		n := 1
		if last.Type == agents.ItemFunctionCallOutput {
			fmt.Sscanf(last.CallID, "p%d", &n)
			n++
		}
		return []agents.Item{workflowstest.Call(fmt.Sprintf("p%d", n), "noop", "{}")}
	}
	env := workflowstest.NewRunnerEnv(t, workflows.Config{Graphs: []*agents.Graph{g}, Model: &workflowstest.FuncModel{Func: fn}})
	env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "windows", Input: "the task"})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if smallWidest > 6+2 {
		t.Errorf("small was shown up to %d items; its compaction keeps at most 6 (and the turn's outputs)", smallWidest)
	}
	calls := 0
	for _, it := range bigSaw {
		if it.Type == agents.ItemFunctionCall && it.Name == "noop" {
			calls++
		}
		if it.Type == agents.ItemMessage && strings.HasPrefix(it.Content, "[Context trimmed") {
			t.Errorf("big was shown small's trim note: %q", it.Content)
		}
	}
	if calls != 5 || len(bigSaw) == 0 || bigSaw[0].Content != "the task" {
		t.Errorf("big was shown %d items with %d of small's 5 calls; want the whole conversation", len(bigSaw), calls)
	}
}

// TestCancelAtContinueAsNew: a run cancelled while its orchestrator is
// about to continue as new ends cancelled; it does not start a next run
// that would go on as if nothing was asked. The agent stands in with a
// mock that hands off after the cancellation has arrived.
func TestCancelAtContinueAsNew(t *testing.T) {
	env := workflowstest.NewRunnerEnv(t, workflows.Config{Graphs: []*agents.Graph{extrasGraph(new([]string))}, Model: &workflowstest.FuncModel{}, MaxHandoffs: 10, ContinueAfterEvents: 20})
	handoff := agents.FunctionCall("h", "transfer_to_pingpong", "{}")
	env.OnWorkflow(troupe.AgentWorkflowName, mock.Anything, mock.Anything).
		Return(&troupe.AgentResult{Agent: "pingpong", Handoff: &handoff}, nil).After(2 * time.Second)
	env.SetCurrentHistoryLength(25)
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Second)
	env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "extras", Agent: "pingpong", Input: "go"})
	err := env.GetWorkflowError()
	var cae *workflow.ContinueAsNewError
	var ce *temporal.CanceledError
	if errors.As(err, &cae) || !errors.As(err, &ce) {
		t.Fatalf("cancelled before continuing as new: %v; want a cancelled run", err)
	}
}

// An agent workflow cancelled during a turn, at a point where its next
// step is to continue as new, ends cancelled: the cancellation does not
// pass silently into a new run that would take more turns.
func TestAgentCancelAtContinueAsNew(t *testing.T) {
	env := workflowstest.NewEnv()
	store, _ := blob.Open(context.Background(), "mem://")
	// The tool asks the environment to cancel the workflow while it runs,
	// so the turn ends with the cancellation pending and the loop's next
	// step is the bound's continue-as-new.
	slow := agents.MustFunctionTool("slow", "Works a while.", func(context.Context, struct{}) (string, error) {
		env.CancelWorkflow()
		return "done", nil
	})
	g := agents.MustGraph("cancel", "worker", &agents.Agent{Name: "worker", Instructions: "worker: works", Tools: []agents.Tool{slow}})
	m := &workflowstest.FuncModel{Func: func(req model.Request) []agents.Item {
		if workflowstest.LastItem(req).Type == agents.ItemFunctionCallOutput {
			return []agents.Item{agents.AssistantMessage("finished")}
		}
		return []agents.Item{workflowstest.Call("s", "slow", "{}")}
	}}
	r, err := workflows.NewRunner(workflows.Config{Graphs: []*agents.Graph{g}, Model: m, Store: store, ContinueAfterTurns: 1})
	if err != nil {
		t.Fatal(err)
	}
	r.Register(env)
	env.ExecuteWorkflow(troupe.AgentWorkflowName, troupe.AgentInput{Graph: "cancel", Agent: "worker", RunID: "run",
		Pending: []agents.Item{agents.UserMessage("go")}})
	err = env.GetWorkflowError()
	var cae *workflow.ContinueAsNewError
	var ce *temporal.CanceledError
	if errors.As(err, &cae) || !errors.As(err, &ce) {
		t.Fatalf("agent cancelled at its continue-as-new bound ended with %v; want it cancelled", err)
	}
	if n := m.Calls("worker:"); n != 1 {
		t.Errorf("%d model calls, want 1: no turn after the cancellation", n)
	}
}

// An agent cancelled while it saves its page of events, on its way to
// continue as new, ends cancelled, and no event says it continued.
func TestAgentCancelWhileSavingEvents(t *testing.T) {
	noop := agents.MustFunctionTool("noop", "Does nothing.", func(context.Context, struct{}) (string, error) { return "ok", nil })
	g := agents.MustGraph("cancel", "worker", &agents.Agent{Name: "worker", Instructions: "worker: works", Tools: []agents.Tool{noop}})
	m := &workflowstest.FuncModel{Func: func(req model.Request) []agents.Item {
		return []agents.Item{workflowstest.Call(fmt.Sprintf("n%d", len(req.Input)), "noop", "{}")}
	}}
	env := workflowstest.NewRunnerEnv(t, workflows.Config{Graphs: []*agents.Graph{g}, Model: m, ContinueAfterTurns: 1})
	saved := 0
	env.OnActivity(events.SaveEventsActivityName, mock.Anything, mock.Anything).Return(func(context.Context, events.SaveEventsInput) error {
		saved++
		env.CancelWorkflow()
		return nil
	})
	env.ExecuteWorkflow(troupe.AgentWorkflowName, troupe.AgentInput{Graph: "cancel", Agent: "worker", RunID: "run",
		Pending: []agents.Item{agents.UserMessage("go")}})
	var ce *temporal.CanceledError
	if err := env.GetWorkflowError(); !errors.As(err, &ce) || saved != 1 {
		t.Fatalf("ended with %v after %d page saves; want it cancelled after one", err, saved)
	}
	evs := workflowstest.Recorded(t, env, 0)
	for _, e := range evs {
		if e.Kind == troupe.EventContinued {
			t.Errorf("event %d says the agent continued as new: %+v", e.Seq, e)
		}
	}
	if last := evs[len(evs)-1]; last.Kind != troupe.EventFailed {
		t.Errorf("last event %+v, want the agent's failure (cancelled)", last)
	}
}
