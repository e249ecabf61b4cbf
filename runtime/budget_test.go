package runtime_test

import (
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/model"
)

func TestUsagesAdd(t *testing.T) {
	call := func(agent string, in int, cost float64) runtime.AgentUsage {
		return runtime.AgentUsage{Agent: agent, Usage: model.Usage{Requests: 1, InputTokens: in, TotalTokens: in}, Cost: cost}
	}
	var u runtime.Usages
	u = u.Add(call("boss", 10, 0.1))
	before := u
	u = u.Add(call("left", 20, 0.2), call("boss", 5, 0.05))
	if len(before) != 1 || before[0].Usage.Requests != 1 {
		t.Errorf("Add changed its receiver: %+v", before)
	}
	if len(u) != 2 || u[0].Agent != "boss" || u[0].Usage.Requests != 2 || u[0].Usage.InputTokens != 15 || u[1].Agent != "left" {
		t.Errorf("usages %+v, want boss (2 calls, 15 tokens) then left", u)
	}
	if tot := u.Total(); tot.Requests != 3 || tot.InputTokens != 35 {
		t.Errorf("total %+v", tot)
	}
	if c := u.Cost(); c < 0.35-1e-12 || c > 0.35+1e-12 {
		t.Errorf("cost %v, want 0.35", c)
	}
}

func TestCallCost(t *testing.T) {
	prices := agents.Prices{
		"gpt-4.1": {InputPerMTok: 2, CachedInputPerMTok: 0.5, OutputPerMTok: 8},
		"flat":    {InputPerMTok: 1, OutputPerMTok: 1},
	}
	tests := []struct {
		name, model string
		u           model.Usage
		want        float64
		priced      bool
	}{
		{"input and output", "gpt-4.1", model.Usage{InputTokens: 1_000_000, OutputTokens: 500_000}, 2 + 4, true},
		{"cached input", "gpt-4.1", model.Usage{InputTokens: 1_000_000, CachedInputTokens: 800_000}, 0.2*2 + 0.8*0.5, true},
		{"no cached price: as input", "flat", model.Usage{InputTokens: 1_000_000, CachedInputTokens: 1_000_000}, 1, true},
		{"unpriced", "gpt-5", model.Usage{InputTokens: 1_000_000}, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, priced := runtime.CallCost(prices, tc.model, tc.u)
			if priced != tc.priced || got < tc.want-1e-9 || got > tc.want+1e-9 {
				t.Errorf("CallCost = %v, %v; want %v, %v", got, priced, tc.want, tc.priced)
			}
		})
	}
}

func TestBudgetLedger(t *testing.T) {
	call := func(agent string, in, out int, cost float64) runtime.AgentUsage {
		return runtime.AgentUsage{Agent: agent, Usage: model.Usage{Requests: 1, InputTokens: in, OutputTokens: out}, Cost: cost}
	}
	tests := []struct {
		name   string
		budget agents.Budget
		// calls are asked for, and counted, one after the other.
		calls  []runtime.AgentUsage
		asked  int    // calls let start
		refuse string // the refusal of the one after
	}{
		{"model calls", agents.Budget{ModelCalls: 2}, []runtime.AgentUsage{call("a", 1, 1, 0), call("b", 1, 1, 0), call("a", 1, 1, 0)}, 2, "2 of 2 model calls"},
		{"input tokens", agents.Budget{InputTokens: 100}, []runtime.AgentUsage{call("a", 60, 1, 0), call("a", 60, 1, 0), call("a", 1, 1, 0)}, 2, "120 of 100 input tokens"},
		{"output tokens", agents.Budget{OutputTokens: 10}, []runtime.AgentUsage{call("a", 1, 10, 0), call("a", 1, 1, 0)}, 1, "10 of 10 output tokens"},
		{"cost", agents.Budget{Cost: 0.5}, []runtime.AgentUsage{call("a", 1, 1, 0.3), call("b", 1, 1, 0.3), call("a", 1, 1, 0.3)}, 2, "cost 0.6 of 0.5"},
		{"two limits", agents.Budget{ModelCalls: 1, Cost: 0.1}, []runtime.AgentUsage{call("a", 1, 1, 0.3), call("a", 1, 1, 0.3)}, 1, "1 of 1 model calls, cost 0.3 of 0.1"},
		{"no limits", agents.Budget{}, []runtime.AgentUsage{call("a", 1e6, 1e6, 100), call("a", 1e6, 1e6, 100)}, 2, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := runtime.NewBudgetLedger(&tc.budget)
			asked, refused := 0, ""
			for _, c := range tc.calls {
				if refused = l.Ask(); refused != "" {
					break
				}
				asked++
				l.Count(c)
			}
			if asked != tc.asked || refused != tc.refuse {
				t.Errorf("%d calls let start, then %q; want %d, then %q", asked, refused, tc.asked, tc.refuse)
			}
			rep := l.Report()
			if rep.Calls != int64(asked) || rep.Usage.Requests != asked || rep.Spent != tc.refuse || rep.Budget != tc.budget {
				t.Errorf("report %+v", rep)
			}
		})
	}
	var none *runtime.BudgetLedger
	if none.Ask() != "" || none.Spent() != "" || none.Report() != nil || runtime.NewBudgetLedger(nil) != nil {
		t.Error("a nil ledger limits something")
	}
	l := runtime.NewBudgetLedger(&agents.Budget{ModelCalls: 1})
	l.Ask()
	if l.Ask() == "" {
		t.Fatal("a second call let start")
	}
	l.SetBudget(agents.Budget{ModelCalls: 3})
	if why := l.Ask(); why != "" || l.Calls != 2 {
		t.Errorf("raised: %q, %d calls", why, l.Calls)
	}
}

// An ask for a call let start already (an update retried, then sent again
// as a signal) lets it start again without counting it, even once the
// budget is spent; Settle forgets the asks, with the reports.
func TestBudgetLedgerAskCallOnce(t *testing.T) {
	l := runtime.NewBudgetLedger(&agents.Budget{ModelCalls: 2})
	for i, step := range []struct {
		wf      string
		turn    int
		refused bool
		calls   int64
	}{
		{"a", 1, false, 1},
		{"a", 1, false, 1}, // the same ask again
		{"b", 1, false, 2},
		{"b", 1, false, 2}, // again, the budget spent
		{"a", 1, false, 2}, // an ask of an earlier turn, late
		{"a", 2, true, 2},
	} {
		if why := l.AskCall(step.wf, step.turn); (why != "") != step.refused || l.Calls != step.calls {
			t.Errorf("ask %d (%s, turn %d): refused %q, %d calls; want refused %v, %d calls", i, step.wf, step.turn, why, l.Calls, step.refused, step.calls)
		}
	}
	l.Settle()
	l.SetBudget(agents.Budget{ModelCalls: 3})
	if why := l.AskCall("a", 1); why != "" || l.Calls != 3 || len(l.Started) != 1 {
		t.Errorf("after Settle, a new tree's ask: %q, %d calls, started %v", why, l.Calls, l.Started)
	}
	var none *runtime.BudgetLedger
	if none.AskCall("a", 1) != "" {
		t.Error("a nil ledger refused a call")
	}
}

// A lease decides as its ledger would, and what its holder spent counts
// once it is repaid, over what the ledger counted meanwhile.
func TestBudgetLease(t *testing.T) {
	call := func(agent string, cost float64) runtime.AgentUsage {
		return runtime.AgentUsage{Agent: agent, Usage: model.Usage{Requests: 1, InputTokens: 10}, Cost: cost}
	}
	l := runtime.NewBudgetLedger(&agents.Budget{ModelCalls: 4, Cost: 1})
	l.Ask()
	l.Count(call("a", 0.25))
	s := l.Lend()
	for i := 0; i < 2; i++ {
		if why := s.Ask(); why != "" {
			t.Fatalf("call %d under the lease refused: %s", i, why)
		}
		s.Count(call("b", 0.25))
	}
	if why := s.Ask(); why != "" {
		t.Fatalf("the fourth call (3 of 4 calls, cost 0.75 of 1 spent) refused: %s", why)
	}
	if why := s.Ask(); !strings.Contains(why, "4 of 4 model calls") {
		t.Errorf("the fifth call under the lease: %q, want refused on model calls", why)
	}
	if l.Calls != 1 || len(l.Agents) != 1 {
		t.Errorf("the ledger changed while lent: %+v", l)
	}
	l.Repay(s)
	if l.Calls != 4 || l.Agents.Cost() != 0.75 || len(l.Agents) != 2 || l.Spent() != "4 of 4 model calls" {
		t.Errorf("repaid: %d calls, cost %v, agents %+v, spent %q", l.Calls, l.Agents.Cost(), l.Agents, l.Spent())
	}
	var none *runtime.BudgetLedger
	if none.Lend() != nil {
		t.Error("a nil ledger lent a lease")
	}
	none.Repay(s)
}
