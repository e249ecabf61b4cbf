package dealdesk_test

import (
	"slices"
	"strings"
	"testing"

	"go.temporal.io/sdk/testsuite"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/examples/dealdesk"
	_ "github.com/troupe-dev/troupe/internal/binarychecksum" // no executable hashed in workflow code
	"github.com/troupe-dev/troupe/internal/exampletest"
	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// env runs the deal desk on a test environment (exampletest.Env): the
// offline scenario on the scripted model server, the reviewers'
// workspaces on the local backend.
func env(t *testing.T) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	e, _, _ := exampletest.Env(t, dealdesk.Graph(), dealdesk.Scenario, sandbox.Policy{})
	return e
}

// TestReview runs the whole deal desk offline: triage hands off to the
// coordinator, which calls both reviewers in parallel; each reads its
// deal document in its sandbox. The typed recommendation carries what
// the reviewers read (the 35% discount, the 3-week go-live) through
// their typed reviews.
func TestReview(t *testing.T) {
	e := env(t)
	e.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "dealdesk",
		Input: "Review the Acme Corp deal: a 3-year, 5000-seat renewal at 35% off list, net-90, go-live in 3 weeks."})
	if err := e.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res troupe.RunResult
	if err := e.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	// Triage's turn (the handoff), then the coordinator's two (the fan-out,
	// the recommendation); with the reviewers' two each, seven model calls.
	if res.Agent != "coordinator" || res.Turns != 3 || res.Usage.Requests != 7 {
		t.Errorf("agent %s, turns %d (want 3), model calls %d (want 7)", res.Agent, res.Turns, res.Usage.Requests)
	}
	var agentsRun []string
	for _, a := range res.Agents {
		agentsRun = append(agentsRun, a.Agent)
	}
	slices.Sort(agentsRun)
	if strings.Join(agentsRun, ",") != "coordinator,pricing_reviewer,rollout_reviewer,triage" {
		t.Errorf("agents %v, want all four", agentsRun)
	}
	rec, err := agents.Decode[dealdesk.Recommendation](res.Output)
	if err != nil {
		t.Fatalf("output %s: %v", res.Output, err)
	}
	want := dealdesk.Recommendation{
		Decision:    "approve_with_conditions",
		PricingRisk: "high",
		RolloutRisk: "medium",
		Conditions:  []string{"CFO approval for the 35% discount", "Extend go-live to 8 weeks and assign a dedicated CSM"},
		Summary:     "Pricing risk is high and rollout risk is medium; approve only once both blockers are resolved.",
	}
	if rec.Decision != want.Decision || rec.PricingRisk != want.PricingRisk || rec.RolloutRisk != want.RolloutRisk ||
		!slices.Equal(rec.Conditions, want.Conditions) || rec.Summary != want.Summary {
		t.Errorf("recommendation\n%+v\nwant\n%+v", rec, want)
	}
}

// The deal-desk graph has a cost budget, which a review stays well under.
func TestReviewStaysUnderBudget(t *testing.T) {
	b := dealdesk.Graph().Budget()
	if b == nil || b.Cost == 0 {
		t.Fatalf("the graph's budget is %+v, want a cost limit", b)
	}
	e := env(t)
	e.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "dealdesk", Input: "Review the Acme Corp deal"})
	if err := e.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res troupe.RunResult
	if err := e.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	t.Logf("a review: %d model calls, %d input and %d output tokens, cost %v of %v", res.Usage.Requests, res.Usage.InputTokens, res.Usage.OutputTokens, res.Cost, b.Cost)
	if res.Budget == nil || res.Budget.Spent != "" || res.Cost <= 0 || res.Cost > b.Cost/4 || len(res.Agents) != 4 {
		t.Errorf("a review: cost %v, budget %+v, agents %+v; want it well under %v, all four agents", res.Cost, res.Budget, res.Agents, b.Cost)
	}
}

// A budget stops a runaway fan-out: the coordinator asking for round
// after round of reviews is stopped by the cost budget before its turns
// run out, with the usage per agent.
func TestBudgetStopsRunawayFanOut(t *testing.T) {
	e := env(t)
	e.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "dealdesk", Input: "Review every deal in the pipeline, again and again"})
	err := e.GetWorkflowError()
	if troupe.ErrorType(err) != troupe.ErrBudgetExceeded {
		t.Fatalf("the runaway ended with %v, want %s", err, troupe.ErrBudgetExceeded)
	}
	rep, ok := troupe.BudgetReportOf(err)
	if !ok {
		t.Fatalf("no report in %v", err)
	}
	t.Logf("stopped: %v; %d calls, cost %v", err, rep.Calls, rep.Cost)
	calls := map[string]int{}
	for _, a := range rep.Agents {
		calls[a.Agent] = a.Usage.Requests
	}
	// The coordinator fans out once a turn: under its turn limit.
	if c := calls["coordinator"]; c < 2 || c >= agents.DefaultMaxTurns || calls["pricing_reviewer"] < 8 || calls["rollout_reviewer"] < 8 {
		t.Errorf("calls per agent %v: want rounds of reviews stopped before the coordinator's %d turns", calls, agents.DefaultMaxTurns)
	}
	if over := rep.Cost - rep.Budget.Cost; rep.Cost < rep.Budget.Cost || over > rep.Budget.Cost/2 {
		t.Errorf("cost %v for a budget of %v: want it spent, by no more than the calls then running", rep.Cost, rep.Budget.Cost)
	}
}
