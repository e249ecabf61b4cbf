package budget_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/budget"
	"github.com/troupe-dev/troupe/workflows/workflowstest"
)

// budgetModel answers as the budget graph's agents do, each call using
// what usage gives its agent (by the first word of its instructions,
// "boss", "left", ...; 10 input and 5 output tokens otherwise). The first
// calls of left and right wait for each other (up to 10 s), so that both
// run at once. A user message that says "stuck" has the third call of its
// turn, and every call after, fail as an unreachable model does, so that
// the agent waits between retries; one that says "hiccup" only that
// call's first attempt.
type budgetModel struct {
	mu    sync.Mutex
	usage map[string]model.Usage
	calls map[string]int
	// turnCalls counts the calls by user message.
	turnCalls map[string]int
	// both is closed once left and right have both started a call.
	both chan struct{}
}

func (m *budgetModel) Respond(_ context.Context, req model.Request) (*model.Response, error) {
	agent := strings.TrimSuffix(workflowstest.FirstWord(req.Instructions), ":")
	m.mu.Lock()
	m.calls[agent]++
	user := workflowstest.LastUser(req)
	m.turnCalls[user]++
	n := m.turnCalls[user]
	u, ok := m.usage[agent]
	first := (agent == "left" || agent == "right") && m.calls[agent] == 1
	if first && m.calls["left"] >= 1 && m.calls["right"] >= 1 {
		close(m.both)
	}
	m.mu.Unlock()
	if strings.Contains(user, "stuck") && n >= 3 || strings.Contains(user, "hiccup") && n == 3 {
		return nil, errors.New("model: Post: dial tcp 127.0.0.1:9: connect: connection refused")
	}
	if first {
		select {
		case <-m.both:
		case <-time.After(10 * time.Second):
		}
	}
	if !ok {
		u = model.Usage{InputTokens: 10, OutputTokens: 5}
	}
	u.Requests, u.TotalTokens = 1, u.InputTokens+u.OutputTokens
	return &model.Response{Output: budgetTurn(agent, req), Usage: u}, nil
}

func (m *budgetModel) count(agent string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls[agent]
}

// budgetTurn is the budget graph's script. boss runs left and right in
// parallel ("fan out"), or flaky ("flaky"), with the user's message, then
// answers with their outputs. left, right and solo call lookup once and
// answer, or for ever when the message says "loop". flaky calls lookup
// and runs out of turns.
func budgetTurn(agent string, req model.Request) []agents.Item {
	outs := workflowstest.OutputsOf(req)
	user := workflowstest.LastUser(req)
	switch agent {
	case "boss":
		if len(outs) > 0 {
			return []agents.Item{agents.AssistantMessage(outs["b-left"] + "|" + outs["b-right"] + "|" + outs["b-flaky"])}
		}
		if strings.Contains(user, "flaky") {
			return []agents.Item{workflowstest.Call("b-flaky", "flaky", `{"input":"`+user+`"}`)}
		}
		return []agents.Item{workflowstest.Call("b-left", "left", `{"input":"`+user+`"}`), workflowstest.Call("b-right", "right", `{"input":"`+user+`"}`)}
	case "flaky":
		return []agents.Item{workflowstest.Call("f-1", "lookup", `{"key":"k"}`)}
	}
	if len(outs) == 0 || strings.Contains(user, "loop") {
		return []agents.Item{workflowstest.Call(agent+"-"+string(rune('a'+len(outs))), "lookup", `{"key":"k"}`)}
	}
	return []agents.Item{agents.AssistantMessage(agent + " done")}
}

// budgetPrices prices the default model: 100 per million input tokens,
// 200 per million output tokens, so a call of 10 in and 5 out costs
// 0.002.
var budgetPrices = agents.Prices{"gpt-4.1": {InputPerMTok: 100, OutputPerMTok: 200}}

func budgetGraph(lookups *int) *agents.Graph {
	var mu sync.Mutex
	lookup := agents.MustFunctionTool("lookup", "Looks a key up.", func(_ context.Context, a struct {
		Key string `json:"key"`
	}) (string, error) {
		mu.Lock()
		*lookups++
		mu.Unlock()
		return "value", nil
	})
	return agents.MustGraph("budget", "boss",
		&agents.Agent{Name: "boss", Instructions: "boss: fans out", Tools: []agents.Tool{
			agents.AsTool("left", "left", "Works on the left."), agents.AsTool("right", "right", "Works on the right."),
			agents.AsTool("flaky", "flaky", "Fails.")}},
		&agents.Agent{Name: "left", Instructions: "left: works", Tools: []agents.Tool{lookup}, MaxTurns: 50},
		&agents.Agent{Name: "right", Instructions: "right: works", Tools: []agents.Tool{lookup}, MaxTurns: 50},
		&agents.Agent{Name: "flaky", Instructions: "flaky: fails", Tools: []agents.Tool{lookup}, MaxTurns: 1},
		&agents.Agent{Name: "solo", Instructions: "solo: answers", Tools: []agents.Tool{lookup}, MaxTurns: 50},
	).WithPrices(budgetPrices)
}

func budgetEnv(t *testing.T, usage map[string]model.Usage, tweaks ...func(*workflows.Config)) (*testsuite.TestWorkflowEnvironment, *budgetModel, *int) {
	t.Helper()
	m := &budgetModel{usage: usage, calls: map[string]int{}, turnCalls: map[string]int{}, both: make(chan struct{})}
	lookups := new(int)
	cfg := workflows.Config{Graphs: []*agents.Graph{budgetGraph(lookups)}, Model: m}
	for _, tweak := range tweaks {
		tweak(&cfg)
	}
	return workflowstest.NewRunnerEnv(t, cfg), m, lookups
}

// byAgent is a tree's usage as a map, for comparisons.
func byAgent(u runtime.Usages) map[string]int {
	out := map[string]int{}
	for _, a := range u {
		out[a.Agent] = a.Usage.Requests
	}
	return out
}

func sameCalls(got map[string]int, want map[string]int) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// A budget exhausted by two parallel agents-as-tools stops both before
// their next model call: both calls run at once (each let start while the
// budget was not spent), the first to end spends it, and neither agent
// calls the model again; nor does their caller. The run ends with
// troupe.BudgetExceeded and the usage per agent.
func TestBudgetStopsParallelAgentTools(t *testing.T) {
	big := model.Usage{InputTokens: 100, OutputTokens: 50} // 0.02 a call
	tests := []struct {
		name   string
		budget agents.Budget
		usage  map[string]model.Usage
		spent  string
	}{
		{name: "model calls", budget: agents.Budget{ModelCalls: 3}, spent: "3 of 3 model calls"},
		{name: "input tokens", budget: agents.Budget{InputTokens: 100}, usage: map[string]model.Usage{"left": big, "right": big}, spent: "of 100 input tokens"},
		{name: "output tokens", budget: agents.Budget{OutputTokens: 40}, usage: map[string]model.Usage{"left": big, "right": big}, spent: "of 40 output tokens"},
		{name: "cost", budget: agents.Budget{Cost: 0.01}, usage: map[string]model.Usage{"left": big, "right": big}, spent: "of 0.01"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env, m, lookups := budgetEnv(t, tc.usage)
			b := tc.budget
			env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "budget", Input: "fan out and loop", Budget: &b})
			err := env.GetWorkflowError()
			if troupe.ErrorType(err) != troupe.ErrBudgetExceeded {
				t.Fatalf("run ended with %v, want %s", err, troupe.ErrBudgetExceeded)
			}
			for _, agent := range []string{"boss", "left", "right"} {
				if n := m.count(agent); n != 1 {
					t.Errorf("%s called the model %d times, want once", agent, n)
				}
			}
			if *lookups != 2 {
				t.Errorf("lookup ran %d times, want once for each worker", *lookups)
			}
			rep, ok := troupe.BudgetReportOf(err)
			if !ok {
				t.Fatalf("no budget report in %v", err)
			}
			if want := map[string]int{"boss": 1, "left": 1, "right": 1}; rep.Calls != 3 || !sameCalls(byAgent(rep.Agents), want) {
				t.Errorf("report: %d calls, per agent %v; want 3, %v", rep.Calls, byAgent(rep.Agents), want)
			}
			if !strings.Contains(rep.Spent, tc.spent) || rep.Budget != tc.budget || !strings.Contains(err.Error(), "the run's budget is spent") {
				t.Errorf("report %+v, error %v; want %q spent", rep, err, tc.spent)
			}
			if want := 0.002 + 2*0.02; tc.name == "cost" && (rep.Cost < want-1e-9 || rep.Cost > want+1e-9) {
				t.Errorf("cost %v, want %v", rep.Cost, want)
			}
			var refused []string
			for _, e := range workflowstest.Recorded(t, env, 0) {
				if e.Kind == troupe.EventBudgetExceeded {
					refused = append(refused, e.Agent)
				}
			}
			if len(refused) != 2 || refused[0] == refused[1] {
				t.Errorf("refusals recorded for %v, want left and right", refused)
			}
		})
	}
}

// A run's usage is reported per agent, priced, whether it has a budget or
// not; a failed agent-as-tool's usage counts.
func TestBudgetUsagePerAgent(t *testing.T) {
	tests := []struct {
		name   string
		input  string
		budget *agents.Budget
		want   map[string]int
	}{
		{name: "parallel", input: "fan out", want: map[string]int{"boss": 2, "left": 2, "right": 2}},
		{name: "parallel within a budget", input: "fan out", budget: &agents.Budget{ModelCalls: 6, Cost: 1}, want: map[string]int{"boss": 2, "left": 2, "right": 2}},
		{name: "a failed agent tool", input: "flaky", want: map[string]int{"boss": 2, "flaky": 1}},
		{name: "a failed agent tool within a budget", input: "flaky", budget: &agents.Budget{ModelCalls: 3}, want: map[string]int{"boss": 2, "flaky": 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env, _, _ := budgetEnv(t, nil)
			env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "budget", Input: tc.input, Budget: tc.budget})
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			var res troupe.RunResult
			if err := env.GetWorkflowResult(&res); err != nil {
				t.Fatal(err)
			}
			calls := 0
			for _, n := range tc.want {
				calls += n
			}
			if !sameCalls(byAgent(res.Agents), tc.want) || res.Usage.Requests != calls || res.Usage != res.Agents.Total() {
				t.Errorf("usage %+v, per agent %v; want %d calls: %v", res.Usage, byAgent(res.Agents), calls, tc.want)
			}
			if want := 0.002 * float64(calls); res.Cost < want-1e-9 || res.Cost > want+1e-9 {
				t.Errorf("cost %v, want %v", res.Cost, want)
			}
			switch {
			case tc.budget == nil && res.Budget != nil:
				t.Errorf("a run without a budget reports one: %+v", res.Budget)
			case tc.budget != nil && (res.Budget == nil || res.Budget.Calls != int64(calls) || !sameCalls(byAgent(res.Budget.Agents), tc.want) || res.Budget.Spent != "" && calls < 3):
				t.Errorf("budget report %+v, want %d calls: %v", res.Budget, calls, tc.want)
			}
		})
	}
}

// A session's budget spans its turns: once spent, a message is refused
// with a clear error; the budget command raises it; a turn that runs out
// fails with troupe.BudgetExceeded and the session lives on.
func TestSessionBudget(t *testing.T) {
	env, m, _ := budgetEnv(t, nil)
	var u []*workflowstest.Update
	at := func(d time.Duration, name string, arg any) {
		env.RegisterDelayedCallback(func() { u = append(u, workflowstest.SendUpdate(env, name, arg)) }, d)
	}
	var spentInfo, endInfo troupe.SessionInfo
	// solo calls lookup once and answers: two calls a turn, or, told to
	// loop, one call after another.
	at(time.Second, troupe.SendUpdate, troupe.SendInput{Message: "one", Wait: true}) // u[0]: 2 calls, spent
	at(time.Minute, troupe.SendUpdate, troupe.SendInput{Message: "two", Wait: true}) // u[1]: refused
	env.RegisterDelayedCallback(func() { spentInfo = workflowstest.SessionInfo(t, env) }, 90*time.Second)
	at(2*time.Minute, troupe.CommandUpdate, troupe.SessionCommand{Op: troupe.CommandBudget, Arg: "nope=1"})        // u[2]: refused
	at(3*time.Minute, troupe.CommandUpdate, troupe.SessionCommand{Op: troupe.CommandBudget, Arg: "model_calls=3"}) // u[3]
	at(4*time.Minute, troupe.SendUpdate, troupe.SendInput{Message: "loop", Wait: true})                            // u[4]: 1 call, then refused
	at(5*time.Minute, troupe.CommandUpdate, troupe.SessionCommand{Op: troupe.CommandBudget, Arg: "off"})           // u[5]
	at(6*time.Minute, troupe.SendUpdate, troupe.SendInput{Message: "four", Wait: true})                            // u[6]: 2 calls
	env.RegisterDelayedCallback(func() { endInfo = workflowstest.SessionInfo(t, env) }, 7*time.Minute)
	env.RegisterDelayedCallback(func() {
		workflowstest.SendUpdate(env, troupe.CommandUpdate, troupe.SessionCommand{Op: troupe.CommandStop})
	}, time.Hour)
	env.ExecuteWorkflow(troupe.SessionWorkflowName, troupe.SessionInput{Graph: "budget", Agent: "solo", Budget: &agents.Budget{ModelCalls: 2}})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	outcome := func(i int) runtime.TurnRecord {
		t.Helper()
		if u[i].Err() != nil {
			t.Fatalf("update %d: %v", i, u[i].Err())
		}
		var r troupe.SendResult
		u[i].Decode(t, &r)
		if r.Record == nil {
			t.Fatalf("update %d: no record", i)
		}
		return *r.Record
	}
	if r := outcome(0); r.Outcome != runtime.TurnAnswered || r.Usage.Requests != 2 {
		t.Errorf("turn one: %+v, want it answered in two calls", r)
	}
	if troupe.ErrorType(u[1].Err()) != troupe.ErrBudgetExceeded || !strings.Contains(u[1].Err().Error(), "budget model_calls=N") {
		t.Errorf("a message once the budget was spent: %v, want refused, saying how to go on", u[1].Err())
	}
	if spentInfo.Budget == nil || spentInfo.Budget.Calls != 2 || spentInfo.Budget.Spent != "2 of 2 model calls" || !sameCalls(byAgent(spentInfo.Agents), map[string]int{"solo": 2}) {
		t.Errorf("session once spent: budget %+v, agents %+v", spentInfo.Budget, spentInfo.Agents)
	}
	if troupe.ErrorType(u[2].Err()) != troupe.ErrBadBudget {
		t.Errorf("a bad budget command: %v", u[2].Err())
	}
	if u[3].Err() != nil || u[5].Err() != nil {
		t.Errorf("budget commands: %v, %v", u[3].Err(), u[5].Err())
	}
	if r := outcome(4); r.Outcome != runtime.TurnFailed || r.ErrorType != troupe.ErrBudgetExceeded || !sameCalls(byAgent(r.Agents), map[string]int{"solo": 1}) {
		t.Errorf("a turn that runs out: %+v, want failed on the budget after one call", r)
	}
	if r := outcome(6); r.Outcome != runtime.TurnAnswered {
		t.Errorf("a turn once the budget was lifted: %+v", r)
	}
	if n := m.count("solo"); n != 4 || endInfo.Usage.Requests != 4 || endInfo.Budget == nil || endInfo.Budget.Calls != 4 || endInfo.Budget.Budget.Limits() {
		t.Errorf("%d calls; session usage %+v, budget %+v", n, endInfo.Usage, endInfo.Budget)
	}
	refused := 0
	for _, e := range workflowstest.Recorded(t, env, 0) {
		if e.Kind == troupe.EventBudgetExceeded {
			refused++
		}
	}
	if refused != 1 {
		t.Errorf("%d refusals recorded, want the one of the turn that ran out", refused)
	}
}

// Budgets a run could not keep are refused: by NewRunner for a graph's
// default, at the start for a run's own.
func TestBadBudgets(t *testing.T) {
	store, _ := blob.Open(context.Background(), "mem://")
	g := agents.MustGraph("nop", "a", &agents.Agent{Name: "a", Instructions: "a: answers"})
	for name, g := range map[string]*agents.Graph{
		"cost without prices":  g.WithBudget(agents.Budget{Cost: 1}),
		"cost, model unpriced": g.WithBudget(agents.Budget{Cost: 1}).WithPrices(agents.Prices{"gpt-5": {InputPerMTok: 1}}),
		"negative":             g.WithBudget(agents.Budget{ModelCalls: -1}),
		"negative price":       g.WithPrices(agents.Prices{"gpt-4.1": {InputPerMTok: -1}}),
	} {
		if _, err := workflows.NewRunner(workflows.Config{Graphs: []*agents.Graph{g}, Model: &budgetModel{}, Store: store}); err == nil {
			t.Errorf("%s: NewRunner took it", name)
		}
	}
	if _, err := workflows.NewRunner(workflows.Config{Graphs: []*agents.Graph{g.WithBudget(agents.Budget{Cost: 1})}, Model: &budgetModel{}, Store: store,
		Prices: agents.Prices{"gpt-4.1": {InputPerMTok: 2, OutputPerMTok: 8}}}); err != nil {
		t.Errorf("a cost budget priced by the worker: %v", err)
	}
	env, _, _ := budgetEnv(t, nil)
	env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "budget", Agent: "solo", Input: "hi", Budget: &agents.Budget{InputTokens: -5}})
	if err := env.GetWorkflowError(); troupe.ErrorType(err) != troupe.ErrBadBudget {
		t.Errorf("a run with a negative budget: %v", err)
	}
}

// update has TestGoldenBudgetPayloads rewrite its fixtures.
var update = flag.Bool("update", false, "rewrite the golden payload fixtures")

// TestGoldenBudgetPayloads pins the JSON shape of the budgets' payloads,
// as package workflows' TestGoldenPayloads does the others', in the same
// directory of fixtures (workflows/testdata/golden).
func TestGoldenBudgetPayloads(t *testing.T) {
	usage := runtime.AgentUsage{Agent: "pricing_reviewer", Usage: model.Usage{Requests: 1, InputTokens: 1200, CachedInputTokens: 1024, OutputTokens: 80, TotalTokens: 1280}, Cost: 0.00109}
	limits := agents.Budget{Cost: 0.25, ModelCalls: 40}
	ledger := runtime.BudgetLedger{Budget: limits, Calls: 7, Agents: runtime.Usages{usage}, Counted: map[string]int{"run-1/1-coordinator/t1.0/0-pricing_reviewer": 1}}
	payloads := map[string]any{
		"budget_ask": troupe.BudgetAsk{Workflow: "run-1/1-coordinator/t1.0/0-pricing_reviewer", Agent: "pricing_reviewer", Turn: 2,
			Last: &troupe.BudgetUsage{Workflow: "run-1/1-coordinator/t1.0/0-pricing_reviewer", Turn: 1, Usage: usage}},
		"budget_answer": troupe.BudgetAnswer{Turn: 2, Refused: "the run's budget is spent (40 of 40 model calls)"},
		"budget_usage":  troupe.BudgetUsage{Workflow: "run-1/1-coordinator/t1.0/0-pricing_reviewer", Turn: 2, Usage: usage},
		"budget_report": ledger.Report(),
		"run_carry_budget": workflows.RunCarry{Budget: &ledger, NextEvent: 12,
			Spec: &runtime.GraphSpec{Graph: "dealdesk", Entry: "triage", RunSettings: runtime.RunSettings{MaxHandoffs: 10, Budget: &limits,
				Prices: agents.Prices{"gpt-4.1": {InputPerMTok: 2, CachedInputPerMTok: 0.5, OutputPerMTok: 8}}, Unpriced: []string{"gpt-5"}}}},
		"run_result_budget": troupe.RunResult{WorkflowID: "run-1", Graph: "dealdesk", Agent: "coordinator", Output: json.RawMessage(`{"decision":"approve"}`),
			Path: []string{"triage", "coordinator"}, Usage: usage.Usage, Agents: runtime.Usages{usage}, Cost: usage.Cost, Budget: ledger.Report()},
	}
	coordinator := "run-1/1-coordinator"
	lease := runtime.BudgetLease{Ledger: runtime.BudgetLedger{Budget: limits, Calls: 9, Agents: runtime.Usages{usage}}, Calls: 2, Agents: runtime.Usages{usage}}
	loan := troupe.BudgetLoan{Lease: lease, What: "session", Hint: "raise it with the session's budget command",
		Refused: &troupe.BudgetRefusal{Agent: "coordinator", Turn: 3, Reason: "the session's budget is spent (cost 0.25 of 0.25)"}}
	ref := runtime.TranscriptRef{Key: "transcripts/run-1/1-coordinator", Segments: 3}
	last := troupe.BudgetUsage{Workflow: coordinator, Turn: 2, Usage: usage}
	payloads["budget_loan"] = loan
	payloads["budget_ask_input"] = budget.BudgetAskInput{Root: "run-1", Ask: troupe.BudgetAsk{Workflow: coordinator, Agent: "coordinator", Turn: 3, Last: &last, Alone: true}}
	payloads["budget_ask_output"] = budget.BudgetAskOutput{Answer: &troupe.BudgetAnswer{Turn: 3, Loan: &troupe.BudgetLoan{Lease: *ledger.Lend(), What: "run"}}}
	payloads["budget_ask_unsent"] = budget.BudgetAskOutput{Unsent: "no Temporal client: the activity does not run on a worker"}
	payloads["budget_return_input"] = budget.BudgetReturnInput{Root: "run-1", Return: troupe.BudgetReturn{Workflow: coordinator, Loan: loan}}
	payloads["model_input_budget"] = workflows.ModelInput{Graph: "dealdesk", Agent: "pricing_reviewer", Run: agents.RunContext{WorkflowID: coordinator + "/t1.0/0-pricing_reviewer", RunID: "run-1", Agent: "pricing_reviewer", Turn: 1},
		Transcript: ref, Budget: &troupe.ModelBudget{Root: "run-1", Workflow: coordinator + "/t1.0/0-pricing_reviewer", Prices: agents.Prices{"gpt-4.1": {InputPerMTok: 2, CachedInputPerMTok: 0.5, OutputPerMTok: 8}}}}
	payloads["model_output_told"] = workflows.ModelOutput{Transcript: ref, Usage: usage.Usage, Model: "gpt-4.1", Told: "sent"}
	payloads["agent_input_budget"] = troupe.AgentInput{Graph: "dealdesk", Agent: "coordinator", RunID: "run-1", Transcript: ref, Budget: &troupe.BudgetLoan{Lease: *ledger.Lend(), What: "run"}}
	payloads["agent_result_budget"] = troupe.AgentResult{Agent: "coordinator", Output: json.RawMessage(`{"decision":"approve"}`), Transcript: ref, Turns: 3, Usage: usage.Usage, Budget: &loan}
	payloads["agent_carry_budget"] = workflows.AgentCarry{State: runtime.AgentState{Agent: "coordinator", Transcript: ref, Turn: 101}, NextEvent: 611,
		Budget: &budget.Carry{Loan: &loan, Last: &last}}
	for name, v := range payloads {
		t.Run(name, func(t *testing.T) {
			workflowstest.Golden(t, filepath.Join("..", "testdata", "golden", name+".json"), v, *update)
		})
	}
}

// loanWatch counts, in env, the budget asks and returns the agents' local
// activities made, and records the ledger each agent workflow of the
// run's chain was lent when it started.
type loanWatch struct {
	mu            sync.Mutex
	asks, returns int
	lent          map[string]*troupe.BudgetLoan
}

func watchLoans(env *testsuite.TestWorkflowEnvironment) *loanWatch {
	w := &loanWatch{lent: map[string]*troupe.BudgetLoan{}}
	env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, _ []any) {
		w.mu.Lock()
		defer w.mu.Unlock()
		switch info.ActivityType.Name {
		case budget.BudgetAskActivityName:
			w.asks++
		case budget.BudgetReturnActivityName:
			w.returns++
		}
	})
	env.SetOnChildWorkflowStartedListener(func(info *workflow.Info, _ workflow.Context, args converter.EncodedValues) {
		var in workflows.AgentWorkflowInput
		if args.Get(&in) != nil || in.Carry != nil {
			return
		}
		w.mu.Lock()
		w.lent[in.Agent] = in.Budget
		w.mu.Unlock()
	})
	return w
}

// refusals are the agents whose refusals the root recorded.
func refusals(t *testing.T, env *testsuite.TestWorkflowEnvironment) []string {
	var out []string
	for _, e := range workflowstest.Recorded(t, env, 0) {
		if e.Kind == troupe.EventBudgetExceeded {
			out = append(out, e.Agent)
		}
	}
	return out
}

// The root lends its ledger to the one agent of its tree at work, an
// agent of the run's chain, which then decides its model calls itself,
// asking no one, as the root would: the call that would pass the budget
// does not start, whatever the limit, through continue-as-new too; the
// ledger comes back with every call counted, and the refusal recorded at
// the root.
func TestBudgetLoans(t *testing.T) {
	big := model.Usage{InputTokens: 100, OutputTokens: 50} // 0.02 a call
	tests := []struct {
		name          string
		budget        agents.Budget
		usage         map[string]model.Usage
		continueAfter int
		calls         int
		spent         string
	}{
		{name: "model calls", budget: agents.Budget{ModelCalls: 5}, calls: 5, spent: "5 of 5 model calls"},
		{name: "input tokens", budget: agents.Budget{InputTokens: 350}, usage: map[string]model.Usage{"solo": big}, calls: 4, spent: "400 of 350 input tokens"},
		{name: "cost", budget: agents.Budget{Cost: 0.05}, usage: map[string]model.Usage{"solo": big}, calls: 3, spent: "cost 0.06 of 0.05"},
		{name: "through continue-as-new", budget: agents.Budget{ModelCalls: 5}, continueAfter: 2, calls: 5, spent: "5 of 5 model calls"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env, m, _ := budgetEnv(t, tc.usage, func(c *workflows.Config) { c.ContinueAfterTurns = tc.continueAfter })
			w := watchLoans(env)
			b := tc.budget
			env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "budget", Agent: "solo", Input: "loop", Budget: &b})
			err := env.GetWorkflowError()
			if troupe.ErrorType(err) != troupe.ErrBudgetExceeded || !strings.Contains(err.Error(), "the run's budget is spent ("+tc.spent+")") {
				t.Fatalf("run ended with %v, want %s, %q spent", err, troupe.ErrBudgetExceeded, tc.spent)
			}
			if n := m.count("solo"); n != tc.calls {
				t.Errorf("solo called the model %d times, want %d", n, tc.calls)
			}
			rep, ok := troupe.BudgetReportOf(err)
			if !ok || rep.Calls != int64(tc.calls) || byAgent(rep.Agents)["solo"] != tc.calls || rep.Spent != tc.spent {
				t.Errorf("report %+v, want %d calls, each counted, %q spent", rep, tc.calls, tc.spent)
			}
			if r := refusals(t, env); len(r) != 1 || r[0] != "solo" {
				t.Errorf("refusals recorded for %v, want solo's", r)
			}
			if loan := w.lent["solo"]; loan == nil || loan.Lease.Ledger.Budget != tc.budget || loan.What != "run" {
				t.Errorf("solo was lent %+v, want the run's ledger", loan)
			}
			if w.asks != 0 || w.returns != 0 {
				t.Errorf("solo asked its root %d times and gave the ledger back %d times, want neither", w.asks, w.returns)
			}
		})
	}
}

// An agent that holds its root's ledger gives it back before it runs
// agents as tools, with the call it made counted: they and it ask the
// root after, which stops them all at the budget.
func TestBudgetLoanGivenBack(t *testing.T) {
	env, m, _ := budgetEnv(t, nil)
	w := watchLoans(env)
	env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "budget", Input: "fan out", Budget: &agents.Budget{ModelCalls: 5}})
	err := env.GetWorkflowError()
	if troupe.ErrorType(err) != troupe.ErrBudgetExceeded {
		t.Fatalf("run ended with %v, want %s", err, troupe.ErrBudgetExceeded)
	}
	calls := map[string]int{"boss": m.count("boss"), "left": m.count("left"), "right": m.count("right")}
	if want := map[string]int{"boss": 1, "left": 2, "right": 2}; !sameCalls(calls, want) {
		t.Errorf("calls %v, want %v: boss's second call refused", calls, want)
	}
	if rep, _ := troupe.BudgetReportOf(err); rep == nil || rep.Calls != 5 {
		t.Errorf("report %+v, want 5 calls", rep)
	}
	if r := refusals(t, env); len(r) != 1 || r[0] != "boss" {
		t.Errorf("refusals recorded for %v, want boss's", r)
	}
	// left's two, right's two, boss's second; boss gave the ledger back
	// once.
	if w.lent["boss"] == nil || w.asks != 5 || w.returns != 1 {
		t.Errorf("boss lent %v; %d asks, %d returns; want 5 asks, 1 return", w.lent["boss"] != nil, w.asks, w.returns)
	}
}

// In a session, the agent of a turn holds the session's ledger: a turn
// rolled back gives it back with the calls it made, which count; a budget
// lowered during a turn stops the turn's agent at its next call.
func TestSessionBudgetLoans(t *testing.T) {
	t.Run("a turn rolled back", func(t *testing.T) {
		env, m, _ := budgetEnv(t, nil)
		var stuck, after *workflowstest.Update
		env.RegisterDelayedCallback(func() {
			stuck = workflowstest.SendUpdate(env, troupe.SendUpdate, troupe.SendInput{Message: "loop, then stuck", Wait: true})
		}, time.Second)
		env.RegisterDelayedCallback(func() {
			after = workflowstest.SendUpdate(env, troupe.SendUpdate, troupe.SendInput{Message: "one", Wait: true})
		}, 30*time.Second)
		var info troupe.SessionInfo
		env.RegisterDelayedCallback(func() { info = workflowstest.SessionInfo(t, env) }, time.Minute)
		env.RegisterDelayedCallback(func() {
			workflowstest.SendUpdate(env, troupe.CommandUpdate, troupe.SessionCommand{Op: troupe.CommandStop})
		}, time.Hour)
		env.ExecuteWorkflow(troupe.SessionWorkflowName, troupe.SessionInput{Graph: "budget", Agent: "solo", Policy: runtime.PolicyRollback,
			Budget: &agents.Budget{ModelCalls: 20}})
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		var rs, ra troupe.SendResult
		stuck.Decode(t, &rs)
		after.Decode(t, &ra)
		if rs.Record == nil || rs.Record.Outcome != runtime.TurnRolledBack || ra.Record == nil || ra.Record.Outcome != runtime.TurnAnswered {
			t.Fatalf("turns %+v and %+v, want the first rolled back, the second answered", rs.Record, ra.Record)
		}
		// Three calls let start in the turn rolled back (the third
		// failing), two in the next.
		if b := info.Budget; b == nil || b.Calls != 5 || b.Usage.Requests != 4 {
			t.Errorf("session budget %+v, want 5 calls, 4 of them ended (model saw %d)", b, m.count("solo"))
		}
	})
	t.Run("a budget lowered during a turn", func(t *testing.T) {
		env, m, _ := budgetEnv(t, nil)
		var turn, cmd *workflowstest.Update
		env.RegisterDelayedCallback(func() {
			turn = workflowstest.SendUpdate(env, troupe.SendUpdate, troupe.SendInput{Message: "loop, then hiccup", Wait: true})
		}, time.Second)
		// The turn's third call waits a second for its retry.
		env.RegisterDelayedCallback(func() {
			cmd = workflowstest.SendUpdate(env, troupe.CommandUpdate, troupe.SessionCommand{Op: troupe.CommandBudget, Arg: "model_calls=4"})
		}, 1500*time.Millisecond)
		env.RegisterDelayedCallback(func() {
			workflowstest.SendUpdate(env, troupe.CommandUpdate, troupe.SessionCommand{Op: troupe.CommandStop})
		}, time.Hour)
		env.ExecuteWorkflow(troupe.SessionWorkflowName, troupe.SessionInput{Graph: "budget", Agent: "solo", Budget: &agents.Budget{ModelCalls: 20}})
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		if cmd.Err() != nil {
			t.Fatal(cmd.Err())
		}
		var rs troupe.SendResult
		turn.Decode(t, &rs)
		// Calls 1 to 3 (the third's retry included) under the old
		// budget, the fourth under the new one, and no fifth.
		if rs.Record == nil || rs.Record.ErrorType != troupe.ErrBudgetExceeded || rs.Record.Usage.Requests != 4 ||
			!strings.Contains(rs.Record.Error, "4 of 4 model calls") {
			t.Errorf("turn %+v, want it stopped by the budget after 4 calls (model saw %d)", rs.Record, m.count("solo"))
		}
	})
}

// guardedLoopModel answers "looper" with a lookup call, for ever, and
// "vet", a tool guardrail agent, with verdict; it counts the calls of each.
type guardedLoopModel struct {
	verdict any
	mu      sync.Mutex
	calls   map[string]int
}

func (m *guardedLoopModel) Respond(_ context.Context, req model.Request) (*model.Response, error) {
	agent := strings.TrimSuffix(workflowstest.FirstWord(req.Instructions), ":")
	m.mu.Lock()
	m.calls[agent]++
	n := m.calls[agent]
	m.mu.Unlock()
	out := []agents.Item{workflowstest.Call(fmt.Sprintf("c%d", n), "lookup", `{"key":"k"}`)}
	if agent == "vet" {
		v, _ := json.Marshal(m.verdict)
		out = []agents.Item{agents.AssistantMessage(string(v))}
	}
	return &model.Response{Output: out, Usage: model.Usage{Requests: 1, InputTokens: 10, OutputTokens: 5, TotalTokens: 15}}, nil
}

// A ModelCalls limit is never passed when the agent at work, which holds
// its root's ledger, has tool guardrail agents, checking its calls before
// they run or their outputs: it gives the ledger back before they start,
// so the root counts both theirs and its own.
func TestBudgetCountsToolGuardrailAgents(t *testing.T) {
	lookup := agents.MustFunctionTool("lookup", "Looks a key up.", func(_ context.Context, a struct {
		Key string `json:"key"`
	}) (string, error) {
		return "value", nil
	})
	for _, tc := range []struct {
		name    string
		guard   agents.ToolGuardrail
		output  *agents.OutputType
		verdict any
	}{
		{"before", agents.ToolGuardrail{Name: "vetted", Tool: "lookup", BeforeAgent: "vet"}, agents.MustOutput[agents.ToolCallVerdict](),
			agents.ToolCallVerdict{Action: agents.ToolCallAllow, Reason: "fine"}},
		{"after", agents.ToolGuardrail{Name: "vetted", Tool: "lookup", AfterAgent: "vet"}, agents.MustOutput[agents.ToolOutputVerdict](),
			agents.ToolOutputVerdict{Action: agents.ToolOutputKeep, Reason: "fine"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := agents.MustGraph("rg", "looper",
				&agents.Agent{Name: "looper", Instructions: "looper: loops", Tools: []agents.Tool{lookup}, MaxTurns: 50, ToolGuardrails: []agents.ToolGuardrail{tc.guard}},
				&agents.Agent{Name: "vet", Instructions: "vet: vets", Output: tc.output},
			)
			m := &guardedLoopModel{verdict: tc.verdict, calls: map[string]int{}}
			env := workflowstest.NewRunnerEnv(t, workflows.Config{Graphs: []*agents.Graph{g}, Model: m})
			env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "rg", Input: "go", Budget: &agents.Budget{ModelCalls: 4}})
			err := env.GetWorkflowError()
			rep, ok := troupe.BudgetReportOf(err)
			if !ok || troupe.ErrorType(err) != troupe.ErrBudgetExceeded {
				t.Fatalf("run ended with %v, want %s", err, troupe.ErrBudgetExceeded)
			}
			m.mu.Lock()
			defer m.mu.Unlock()
			if m.calls["looper"]+m.calls["vet"] != 4 || rep.Calls != 4 {
				t.Errorf("the model was called %v under a budget of 4 calls; the report counts %d", m.calls, rep.Calls)
			}
		})
	}
}
