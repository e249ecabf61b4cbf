package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/examples/dealdesk"
	"github.com/troupe-dev/troupe/runtime/model/scripted"
	"github.com/troupe-dev/troupe/workflows"
)

// budgetTraffic is what the agents of a run said to its root about the
// budget, read from the histories: at the root (every one of its runs),
// the asks taken by update and the signals taken, by name; and the
// signals the agent workflows sent from their own workflow code.
type budgetTraffic struct {
	runs         int
	asksByUpdate int
	signals      map[string]int
	agentSignals int
}

// trafficOf reads the budget traffic of the run root, whose agent
// workflows are agents.
func trafficOf(t *testing.T, c client.Client, root string, agents map[string]bool) budgetTraffic {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tr := budgetTraffic{signals: map[string]int{}}
	d, err := c.DescribeWorkflowExecution(ctx, root, "")
	if err != nil {
		t.Fatal(err)
	}
	for runID := d.GetWorkflowExecutionInfo().GetExecution().GetRunId(); runID != ""; {
		it := c.GetWorkflowHistory(ctx, root, runID, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		runID = ""
		tr.runs++
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			if a := e.GetWorkflowExecutionStartedEventAttributes(); a != nil {
				runID = a.GetContinuedExecutionRunId()
			}
			if a := e.GetWorkflowExecutionUpdateAcceptedEventAttributes(); a != nil && a.GetAcceptedRequest().GetInput().GetName() == troupe.BudgetAskUpdate {
				tr.asksByUpdate++
			}
			if a := e.GetWorkflowExecutionSignaledEventAttributes(); a != nil && strings.HasPrefix(a.GetSignalName(), "troupe.budget-") {
				tr.signals[a.GetSignalName()]++
			}
		}
	}
	for id := range agents {
		if id == root {
			continue
		}
		it := c.GetWorkflowHistory(ctx, id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			if e.GetSignalExternalWorkflowExecutionInitiatedEventAttributes() != nil {
				tr.agentSignals++
			}
		}
	}
	return tr
}

// TestBudgetEndToEnd runs the deal desk with budgets on a real server.
// The agents of the run's chain (triage, then the coordinator) hold the
// run's ledger and ask no one, but the coordinator, which gives it back
// before its reviewers start; the reviewers, in parallel, ask the root
// by update before each call and tell it what the call used, from their
// activities: no agent workflow sends a budget signal of its own. A
// model-call limit is never passed, however many reviewers run at once;
// the cost budget stops a runaway fan-out. With -histories the runs'
// histories are saved for the replay tests (set v11-budget-asks):
//
//	go test ./e2e -run 'TestBudgetEndToEnd|TestDealDeskSession' -histories ../workflows/testdata/histories/v11-budget-asks
func TestBudgetEndToEnd(t *testing.T) {
	parallel(t)
	c := dial(t)
	ms, url := modelServer(t)
	queue := startWorker(t, c, url, "", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// start runs the deal desk on input, following its events to know
	// its workflows, and returns its result, or its error, and them (the
	// run's first).
	start := func(input string, budget *agents.Budget) (*troupe.RunResult, []string, error) {
		t.Helper()
		run, err := troupeclient.StartRun(ctx, c, queue, troupe.RunInput{Graph: "dealdesk", Input: input, Budget: budget})
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]bool{}
		fctx, stop := context.WithCancel(ctx)
		followed := make(chan struct{})
		go func() {
			defer close(followed)
			_ = troupeclient.Follow(fctx, c, run.GetID(), 50*time.Millisecond, func(e troupe.Event) { ids[e.WorkflowID] = true })
		}()
		var res troupe.RunResult
		err = run.Get(ctx, &res)
		// The events of the last workflows to end reach the follower
		// shortly after the run's end.
		time.Sleep(300 * time.Millisecond)
		stop()
		<-followed
		list := []string{run.GetID()}
		for id := range ids {
			if id != run.GetID() {
				list = append(list, id)
			}
		}
		return &res, list, err
	}
	set := func(ids []string) map[string]bool {
		m := map[string]bool{}
		for _, id := range ids {
			m[id] = true
		}
		return m
	}
	// calls counts the model calls of the runs' agents since the call
	// numbered before (memory's consolidation, in the background, has
	// calls of its own), each once: a call made again on a loaded machine
	// is one call of the budget (see requests).
	calls := func(before int) int {
		var made []scripted.Call
		for _, call := range ms.Calls()[before:] {
			if !call.Canceled && !strings.Contains(call.Rule, "memory") {
				made = append(made, call)
			}
		}
		n := requests(made, nil)
		if len(made) > n {
			t.Logf("%d model calls for %d requests: calls made again by workflow tasks that timed out", len(made), n)
		}
		return n
	}

	t.Run("a review", func(t *testing.T) {
		before := len(ms.Calls())
		res, ids, err := start("Review the Acme Corp deal", nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Budget == nil || res.Budget.Calls != 7 || res.Usage.Requests != 7 || res.Budget.Spent != "" || calls(before) != 7 {
			t.Errorf("budget %+v, usage %+v, %d model calls; want the 7 calls counted, within the graph's budget", res.Budget, res.Usage, calls(before))
		}
		if len(ids) != 5 {
			t.Errorf("events from %d workflows, want 5", len(ids))
		}
		// Two calls of each reviewer, and the coordinator's second; the
		// coordinator gave the ledger back once.
		tr := trafficOf(t, c, ids[0], set(ids))
		if tr.asksByUpdate != 5 || tr.signals[troupe.BudgetReturnSignal] != 1 || tr.signals[troupe.BudgetAskSignal] != 0 || tr.agentSignals != 0 {
			t.Errorf("%d asks by update, signals %v at the root, %d sent by agents; want 5 asks, 1 return, no ask signal, none sent by agents", tr.asksByUpdate, tr.signals, tr.agentSignals)
		}
		if *historiesDir != "" {
			saveHistories(t, c, set(ids), *historiesDir, "dealdesk")
		}
	})

	t.Run("a runaway, model calls", func(t *testing.T) {
		// Rounds of eight reviewers at once, every one asking the root.
		before := len(ms.Calls())
		_, ids, err := start("Review every deal in the pipeline, again and again", &agents.Budget{ModelCalls: 30})
		if troupe.ErrorType(err) != troupe.ErrBudgetExceeded {
			t.Fatalf("the runaway ended with %v, want %s", err, troupe.ErrBudgetExceeded)
		}
		rep, ok := troupe.BudgetReportOf(err)
		if n := calls(before); !ok || n != 30 || rep.Calls != 30 || rep.Spent != "30 of 30 model calls" {
			t.Errorf("%d model calls, report %+v; want exactly the 30 of the budget", n, rep)
		}
		if tr := trafficOf(t, c, ids[0], set(ids)); tr.asksByUpdate < 16 || tr.signals[troupe.BudgetAskSignal] != 0 || tr.agentSignals != 0 {
			t.Errorf("%d asks by update, signals %v at the root, %d sent by agents; want the reviewers' asks by update, none by signal", tr.asksByUpdate, tr.signals, tr.agentSignals)
		}
		if *historiesDir != "" {
			saveHistories(t, c, set(ids), *historiesDir, "runaway")
		}
	})

	t.Run("a runaway, cost", func(t *testing.T) {
		_, _, err := start("Review every deal in the pipeline, again and again", nil)
		if troupe.ErrorType(err) != troupe.ErrBudgetExceeded {
			t.Fatalf("the runaway ended with %v, want %s", err, troupe.ErrBudgetExceeded)
		}
		rep, ok := troupe.BudgetReportOf(err)
		if !ok || rep.Budget != dealdesk.Budget {
			t.Fatalf("report %+v, want the graph's budget", rep)
		}
		if over := rep.Cost - rep.Budget.Cost; rep.Cost < rep.Budget.Cost || over > rep.Budget.Cost/2 {
			t.Errorf("cost %v for a budget of %v: want it spent, by no more than the calls then running", rep.Cost, rep.Budget.Cost)
		}
	})
}

// TestBudgetAcrossContinueAsNew runs an agent that hands off to itself 40
// times, its orchestrator continuing as new as it goes, with a budget of
// model calls: each agent of the chain holds the run's ledger in turn,
// asks no one, and gives it back with its calls counted, across the
// orchestrator's runs; a budget one call short stops the chain at the
// call that would pass it.
func TestBudgetAcrossContinueAsNew(t *testing.T) {
	parallel(t)
	c := dial(t)
	ms, url := modelServer(t)
	queue := startWorker(t, c, url, "", func(cfg *workflows.Config) {
		cfg.ContinueAfterEvents = 40
		cfg.MaxHandoffs = 40
	})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	for _, tc := range []struct {
		calls int64
		ok    bool
	}{{41, true}, {40, false}} {
		t.Run(fmt.Sprintf("%d calls", tc.calls), func(t *testing.T) {
			before := len(ms.Calls())
			run, err := troupeclient.StartRun(ctx, c, queue, troupe.RunInput{Graph: "bounce", Input: "bounce", Budget: &agents.Budget{ModelCalls: tc.calls}})
			if err != nil {
				t.Fatal(err)
			}
			var res troupe.RunResult
			err = run.Get(ctx, &res)
			made := int64(requests(ms.Calls()[before:], nil))
			switch {
			case tc.ok && (err != nil || res.Budget == nil || res.Budget.Calls != 41 || res.Handoffs != 40):
				t.Fatalf("run: %v, %+v; want 41 calls through 40 handoffs, within the budget", err, res.Budget)
			case !tc.ok && troupe.ErrorType(err) != troupe.ErrBudgetExceeded:
				t.Fatalf("run ended with %v, want %s", err, troupe.ErrBudgetExceeded)
			case !tc.ok:
				if rep, _ := troupe.BudgetReportOf(err); rep == nil || rep.Calls != tc.calls {
					t.Errorf("report %+v, want %d calls", rep, tc.calls)
				}
			}
			if made != tc.calls {
				t.Errorf("the model got %d calls, want %d", made, tc.calls)
			}
			tr := trafficOf(t, c, run.GetID(), nil)
			if tr.asksByUpdate != 0 || len(tr.signals) != 0 {
				t.Errorf("%d asks by update and signals %v at the root, want none: each agent decides with the ledger lent", tr.asksByUpdate, tr.signals)
			}
			if tr.runs < 3 {
				t.Errorf("the orchestrator took %d runs, want it to continue as new as it goes", tr.runs)
			}
		})
	}
}
