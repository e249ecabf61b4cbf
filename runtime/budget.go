package runtime

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/model"
)

// This file holds the model usage of an agent tree as plain Go: per agent,
// priced by the run's price table, and the ledger the root of a run or
// session keeps against its budget (agents.Budget). The workflows carry
// the messages: each agent asks the root before a model call (AskCall)
// and tells it what the call used after (CountCall).

// AgentUsage is what one agent of a tree used of the model: its own calls
// (every workflow of the agent in the tree, not the agents it ran as
// tools), and their cost in the price table's currency (0 without a
// price).
type AgentUsage struct {
	Agent string      `json:"agent"`
	Usage model.Usage `json:"usage"`
	Cost  float64     `json:"cost,omitempty"`
}

// Usages is the usage of a tree, one entry per agent, in the order the
// agents first used the model. It is bounded by the graph's agents.
type Usages []AgentUsage

// Add returns u with more added, agent by agent; u is not changed.
func (u Usages) Add(more ...AgentUsage) Usages {
	if len(more) == 0 {
		return u
	}
	out := slices.Clone(u)
	for _, m := range more {
		i := slices.IndexFunc(out, func(a AgentUsage) bool { return a.Agent == m.Agent })
		if i < 0 {
			out = append(out, m)
			continue
		}
		out[i].Usage = out[i].Usage.Add(m.Usage)
		out[i].Cost += m.Cost
	}
	return out
}

// Total sums the usage of every agent.
func (u Usages) Total() model.Usage {
	var t model.Usage
	for _, a := range u {
		t = t.Add(a.Usage)
	}
	return t
}

// Cost sums the cost of every agent.
func (u Usages) Cost() float64 {
	var c float64
	for _, a := range u {
		c += a.Cost
	}
	return c
}

// CallCost is what a call of modelName that used u costs by prices, and
// whether prices has a price for it.
func CallCost(prices agents.Prices, modelName string, u model.Usage) (float64, bool) {
	p, ok := prices[modelName]
	if !ok {
		return 0, false
	}
	return p.Cost(u.InputTokens, u.CachedInputTokens, u.OutputTokens), true
}

// BudgetLedger is what an agent tree spent against its budget, kept by
// the root of the tree (a run's orchestrator, a session): the model calls
// it let start, and the usage of those that ended, per agent.
type BudgetLedger struct {
	Budget agents.Budget `json:"budget"`
	// Calls counts the model calls let start (Ask).
	Calls int64 `json:"calls"`
	// Agents is the usage of the calls that ended (Count).
	Agents Usages `json:"agents,omitempty"`
	// Counted is, per agent workflow of the tree that may still tell
	// it, the last turn whose call it counted: an agent tells a call's
	// usage twice (right after the call, and with its next ask, whichever
	// comes first), and the second is not counted again.
	Counted map[string]int `json:"counted,omitempty"`
	// Started is, per agent workflow of the tree that may still ask, the
	// last turn whose call it let start (AskCall): an ask that comes
	// twice (an update retried, then sent again as a signal) counts
	// once.
	Started map[string]int `json:"started,omitempty"`
}

// NewBudgetLedger is the ledger of a tree with budget b that has spent
// nothing yet, or nil for no budget.
func NewBudgetLedger(b *agents.Budget) *BudgetLedger {
	if b == nil {
		return nil
	}
	return &BudgetLedger{Budget: *b}
}

// Spent says which limits the tree has reached ("" when none): once one
// is, no model call may start.
func (l *BudgetLedger) Spent() string {
	if l == nil {
		return ""
	}
	b, t := l.Budget, l.Agents.Total()
	var spent []string
	if b.ModelCalls > 0 && l.Calls >= b.ModelCalls {
		spent = append(spent, fmt.Sprintf("%d of %d model calls", l.Calls, b.ModelCalls))
	}
	if b.InputTokens > 0 && int64(t.InputTokens) >= b.InputTokens {
		spent = append(spent, fmt.Sprintf("%d of %d input tokens", t.InputTokens, b.InputTokens))
	}
	if b.OutputTokens > 0 && int64(t.OutputTokens) >= b.OutputTokens {
		spent = append(spent, fmt.Sprintf("%d of %d output tokens", t.OutputTokens, b.OutputTokens))
	}
	if c := l.Agents.Cost(); b.Cost > 0 && c >= b.Cost {
		spent = append(spent, "cost "+FormatCost(c)+" of "+FormatCost(b.Cost))
	}
	return strings.Join(spent, ", ")
}

// Ask lets a model call start, and counts it, unless the budget is spent:
// then it returns which limits are reached.
func (l *BudgetLedger) Ask() (refused string) {
	if l == nil {
		return ""
	}
	if why := l.Spent(); why != "" {
		return why
	}
	l.Calls++
	return ""
}

// AskCall is Ask for the model call of turn of the agent workflow wf: a
// call it let start already is let start again, and not counted again
// (each turn's call counts once, however many times it is asked for).
func (l *BudgetLedger) AskCall(wf string, turn int) (refused string) {
	if l == nil {
		return ""
	}
	if last, ok := l.Started[wf]; ok && last >= turn {
		return ""
	}
	if why := l.Ask(); why != "" {
		return why
	}
	if l.Started == nil {
		l.Started = map[string]int{}
	}
	l.Started[wf] = turn
	return ""
}

// Count takes what a call that ended used.
func (l *BudgetLedger) Count(u AgentUsage) {
	if l != nil {
		l.Agents = l.Agents.Add(u)
	}
}

// CountCall takes what the call of turn of the agent workflow wf used,
// unless it was counted already.
func (l *BudgetLedger) CountCall(wf string, turn int, u AgentUsage) {
	if l == nil {
		return
	}
	if last, ok := l.Counted[wf]; ok && last >= turn {
		return
	}
	if l.Counted == nil {
		l.Counted = map[string]int{}
	}
	l.Counted[wf] = turn
	l.Count(u)
}

// Settle forgets which turns were asked for and counted, once no agent
// of the tree lives to ask or tell one again (between a session's turns,
// before a run continues as new).
func (l *BudgetLedger) Settle() {
	if l != nil {
		l.Counted, l.Started = nil, nil
	}
}

// SetBudget replaces the budget, keeping what was spent: a session's
// budget raised, or lifted (the zero Budget).
func (l *BudgetLedger) SetBudget(b agents.Budget) { l.Budget = b }

// BudgetLease is a tree's ledger lent by its root to the one agent of the
// tree at work, which decides its own model calls while it holds it
// (Ask, Count) and gives it back with what it spent (Repay). The root
// lends it only where no other agent of the tree can spend meanwhile, so
// the holder decides as the root would.
type BudgetLease struct {
	// Ledger is the root's ledger as lent, with what the holder spent
	// since.
	Ledger BudgetLedger `json:"ledger"`
	// Calls and Agents are what the holder spent since it was lent: the
	// calls it let start, and the usage of those that ended.
	Calls  int64  `json:"calls,omitempty"`
	Agents Usages `json:"agents,omitempty"`
}

// Lend is a lease of the ledger, which spent nothing yet; nil for a nil
// ledger.
func (l *BudgetLedger) Lend() *BudgetLease {
	if l == nil {
		return nil
	}
	return &BudgetLease{Ledger: BudgetLedger{Budget: l.Budget, Calls: l.Calls, Agents: slices.Clone(l.Agents)}}
}

// Ask lets the holder's model call start, and counts it, unless the
// budget is spent: then it returns which limits are reached.
func (s *BudgetLease) Ask() (refused string) {
	if why := s.Ledger.Ask(); why != "" {
		return why
	}
	s.Calls++
	return ""
}

// Count takes what a call of the holder's used.
func (s *BudgetLease) Count(u AgentUsage) {
	s.Ledger.Count(u)
	s.Agents = s.Agents.Add(u)
}

// Repay takes a lease of the ledger back: what its holder spent counts.
func (l *BudgetLedger) Repay(s *BudgetLease) {
	if l == nil || s == nil {
		return
	}
	l.Calls += s.Calls
	l.Agents = l.Agents.Add(s.Agents...)
}

// BudgetReport is a tree's budget and what it spent: what a
// troupe.BudgetExceeded error carries, and what runs and sessions
// report.
type BudgetReport struct {
	Budget agents.Budget `json:"budget"`
	// Calls counts the model calls started; Usage and Cost sum those that
	// ended, which Agents has per agent.
	Calls  int64       `json:"calls"`
	Usage  model.Usage `json:"usage"`
	Cost   float64     `json:"cost"`
	Agents Usages      `json:"agents,omitempty"`
	// Spent says which limits are reached, if any.
	Spent string `json:"spent,omitempty"`
}

// Report is the ledger as a report; nil for a nil ledger.
func (l *BudgetLedger) Report() *BudgetReport {
	if l == nil {
		return nil
	}
	return &BudgetReport{Budget: l.Budget, Calls: l.Calls, Usage: l.Agents.Total(), Cost: l.Agents.Cost(),
		Agents: slices.Clone(l.Agents), Spent: l.Spent()}
}

// FormatCost writes a cost with up to six significant digits, as events
// and errors show it.
func FormatCost(c float64) string { return strconv.FormatFloat(c, 'g', 6, 64) }
