// Package spend is how troupe's command line and its chat speak of what
// runs and sessions spend on model calls: a budget as a user writes it
// (Parse), a cost, the usage of a tree of agents in all and per agent,
// and where a budget stands. Package cli and package cli/chat both show
// them through it, so they read the same everywhere.
//
// Costs are in the currency of the run's price table (agents.Prices); they
// show with a dollar sign, the currency of the providers' list prices.
package spend

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/model"
)

// Syntax is how a budget is written, for usage lines.
const Syntax = "cost=N,model_calls=N,input_tokens=N,output_tokens=N (any of them) or off"

// Parse reads a budget as a user writes it for a run or a new session
// (--budget): NAME=VALUE pairs separated by commas or spaces, for the
// limits cost, model_calls, input_tokens and output_tokens, or "off". It
// returns the budget to start with, over the graph's default; "off" (or
// only zero limits) gives the zero Budget, which lifts it. Its errors say
// what is wrong with spec, which they quote.
//
// A session's budget command takes the same syntax as a change of the
// budget in force (agents.Budget.Change): Parse checks it too.
func Parse(spec string) (*agents.Budget, error) {
	b, err := agents.Budget{}.Change(spec)
	if err != nil {
		why := strings.TrimPrefix(err.Error(), agents.ErrInvalidBudget.Error()+": ")
		return nil, fmt.Errorf("%q: %s", spec, strings.ReplaceAll(why, "\n", "; "))
	}
	return &b, nil
}

// Refusal is why a budget was refused (the message of a troupe.BadBudget
// error) in a user's words, without the prefixes of the packages that
// refused it: "the budget limits cost, but graph g has no prices: ...".
func Refusal(msg string) string {
	msg = strings.TrimPrefix(msg, "budget: ") // the session's budget command
	return strings.Replace(msg, agents.ErrInvalidBudget.Error()+": ", "", 1)
}

// Cost is a cost for people: three significant digits and at least two
// decimals under $1 ("$0.25", "$0.0123", "$0.000968"), cents above
// ("$1.50", "$12.35"), "$0" for nothing.
func Cost(c float64) string {
	switch {
	case c == 0:
		return "$0"
	case c < 0 || math.IsNaN(c) || math.IsInf(c, 0):
		return "$" + strconv.FormatFloat(c, 'g', 3, 64)
	case c >= 1:
		return "$" + strconv.FormatFloat(c, 'f', 2, 64)
	}
	d := max(2, 2-int(math.Floor(math.Log10(c))))
	s := strconv.FormatFloat(c, 'f', d, 64)
	for ; d > 2 && strings.HasSuffix(s, "0"); d-- {
		s = s[:len(s)-1]
	}
	return "$" + s
}

// Usage says what model calls used, in all: "7 model calls, 4940 tokens
// (3900 in, 1040 out), $0.0112". The cost is left out when it is 0 (no
// prices), cached input tokens when there are none.
func Usage(u model.Usage, cost float64) string {
	total := u.TotalTokens
	if total == 0 {
		total = u.InputTokens + u.OutputTokens
	}
	s := fmt.Sprintf("%s, %d tokens (%d in, %d out", count(int64(u.Requests), "model call", "model calls"), total, u.InputTokens, u.OutputTokens)
	if u.CachedInputTokens > 0 {
		s += fmt.Sprintf(", %d cached", u.CachedInputTokens)
	}
	s += ")"
	if cost != 0 {
		s += ", " + Cost(cost)
	}
	return s
}

// Table is the usage per agent as the lines of a table: a header, a row
// per agent and, for more than one agent, the total. The cost column is
// there when a cost is known. No agent, no lines.
func Table(us runtime.Usages) []string {
	if len(us) == 0 {
		return nil
	}
	priced := us.Cost() != 0
	rows := [][]string{{"agent", "calls", "tokens in", "tokens out"}}
	if priced {
		rows[0] = append(rows[0], "cost")
	}
	row := func(name string, u model.Usage, cost float64) {
		r := []string{name, strconv.Itoa(u.Requests), strconv.Itoa(u.InputTokens), strconv.Itoa(u.OutputTokens)}
		if priced {
			r = append(r, Cost(cost))
		}
		rows = append(rows, r)
	}
	for _, a := range us {
		row(a.Agent, a.Usage, a.Cost)
	}
	if len(us) > 1 {
		row("total", us.Total(), us.Cost())
	}
	width := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, cell := range r {
			width[i] = max(width[i], len(cell))
		}
	}
	lines := make([]string, len(rows))
	for n, r := range rows {
		var b strings.Builder
		for i, cell := range r {
			switch {
			case i == 0:
				fmt.Fprintf(&b, "%-*s", width[i], cell) // names to the left, numbers to the right
			case i == len(r)-1 && priced:
				fmt.Fprintf(&b, "  %-*s", width[i], cell) // costs by their dollar sign
			default:
				fmt.Fprintf(&b, "  %*s", width[i], cell)
			}
		}
		lines[n] = strings.TrimRight(b.String(), " ")
	}
	return lines
}

// limit is one limit of a budget and what was spent of it.
type limit struct {
	name         string // as a budget is written: cost, model_calls, ...
	spent, bound float64
	// show writes an amount of the limit: a cost, or a count of unit
	// (brief: in a few words).
	show        func(float64) string
	unit, brief string
}

// limits are the limits rep's budget sets, in the order Budget.String
// lists them.
func limits(rep *runtime.BudgetReport) []limit {
	if rep == nil {
		return nil
	}
	b := rep.Budget
	n := func(v float64) string { return strconv.FormatInt(int64(v), 10) }
	var out []limit
	if b.Cost != 0 {
		out = append(out, limit{name: "cost", spent: rep.Cost, bound: b.Cost, show: Cost})
	}
	if b.ModelCalls != 0 {
		out = append(out, limit{name: "model_calls", spent: float64(rep.Calls), bound: float64(b.ModelCalls), show: n, unit: "model calls", brief: "calls"})
	}
	if b.InputTokens != 0 {
		out = append(out, limit{name: "input_tokens", spent: float64(rep.Usage.InputTokens), bound: float64(b.InputTokens), show: n, unit: "input tokens", brief: "tokens in"})
	}
	if b.OutputTokens != 0 {
		out = append(out, limit{name: "output_tokens", spent: float64(rep.Usage.OutputTokens), bound: float64(b.OutputTokens), show: n, unit: "output tokens", brief: "tokens out"})
	}
	return out
}

func (l limit) reached() bool { return l.spent >= l.bound }

// of is "SPENT of BOUND UNIT", or with the brief unit.
func (l limit) of(brief bool) string {
	s := l.show(l.spent) + " of " + l.show(l.bound)
	switch {
	case brief && l.brief != "":
		s += " " + l.brief
	case l.unit != "":
		s += " " + l.unit
	}
	return s
}

// Budget says where a budget stands, limit by limit, after the budget as
// it is written: "cost=0.25 model_calls=40: $0.0112 of $0.25 ($0.239
// left), 7 of 40 model calls (33 left)"; a limit reached has "none left".
// A nil report, or a budget that limits nothing, is "off".
func Budget(rep *runtime.BudgetReport) string {
	ls := limits(rep)
	if len(ls) == 0 {
		return "off"
	}
	parts := make([]string, len(ls))
	for i, l := range ls {
		left := "none"
		if !l.reached() {
			left = l.show(l.bound - l.spent)
		}
		parts[i] = fmt.Sprintf("%s (%s left)", l.of(false), left)
	}
	return rep.Budget.String() + ": " + strings.Join(parts, ", ")
}

// Brief is what a session or run spent in a few words, for a status line:
// the cost against a cost limit ("$0.012 of $0.25") or alone, then the
// other limits ("7 of 40 calls"); empty when there is no cost and no
// budget.
func Brief(cost float64, rep *runtime.BudgetReport) string {
	var parts []string
	ls := limits(rep)
	if len(ls) == 0 || ls[0].name != "cost" {
		if cost != 0 {
			parts = append(parts, Cost(cost))
		}
	}
	for _, l := range ls {
		parts = append(parts, l.of(true))
	}
	return strings.Join(parts, ", ")
}

// Spent says which limits of rep's budget are reached ("3 of 3 model
// calls", "$0.26 of $0.25"); empty when none is.
func Spent(rep *runtime.BudgetReport) string {
	var parts []string
	for _, l := range limits(rep) {
		if l.reached() {
			parts = append(parts, l.of(false))
		}
	}
	return strings.Join(parts, ", ")
}

// Raise is the change of a budget that raises the limits reached, N for
// the new value to choose: "model_calls=N", "cost=N,output_tokens=N";
// "cost=N" when none is reached (or the report is unknown).
func Raise(rep *runtime.BudgetReport) string {
	var parts []string
	for _, l := range limits(rep) {
		if l.reached() {
			parts = append(parts, l.name+"=N")
		}
	}
	if len(parts) == 0 {
		return "cost=N"
	}
	return strings.Join(parts, ",")
}

func count(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.FormatInt(n, 10) + " " + many
}
