package spend

import (
	"slices"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/model"
)

func TestParse(t *testing.T) {
	tests := []struct {
		spec string
		want agents.Budget
		err  string // a part of the error; "" for none
	}{
		{spec: "cost=0.5", want: agents.Budget{Cost: 0.5}},
		{spec: "cost=0.5,model_calls=40", want: agents.Budget{Cost: 0.5, ModelCalls: 40}},
		{spec: "model_calls=3 input_tokens=1000, output_tokens=200", want: agents.Budget{ModelCalls: 3, InputTokens: 1000, OutputTokens: 200}},
		{spec: "off", want: agents.Budget{}},
		{spec: "cost=0", want: agents.Budget{}},
		{spec: "", err: `"": name a limit`},
		{spec: "cost", err: `"cost": "cost": want NAME=VALUE`},
		{spec: "cost=abc", err: `"cost=abc": cost: "abc" is not a number`},
		{spec: "calls=3", err: `"calls=3": unknown limit "calls" (want cost, model_calls, input_tokens or output_tokens)`},
		{spec: "model_calls=-1", err: `"model_calls=-1": model_calls is negative (-1)`},
		{spec: "cost=-1,model_calls=-2", err: `"cost=-1,model_calls=-2": model_calls is negative (-2); cost is -1`},
		{spec: "off,cost=1", err: `"off,cost=1": "off": want NAME=VALUE`},
	}
	for _, tc := range tests {
		t.Run(tc.spec, func(t *testing.T) {
			b, err := Parse(tc.spec)
			switch {
			case tc.err != "":
				if err == nil || !strings.HasPrefix(err.Error(), tc.err) || strings.Contains(err.Error(), "agents:") {
					t.Errorf("Parse(%q) = %+v, %v; want an error starting %q", tc.spec, b, err, tc.err)
				}
			case err != nil || b == nil || *b != tc.want:
				t.Errorf("Parse(%q) = %+v, %v; want %+v", tc.spec, b, err, tc.want)
			}
		})
	}
}

func TestCost(t *testing.T) {
	tests := []struct {
		c    float64
		want string
	}{
		{0, "$0"},
		{0.25, "$0.25"},
		{0.5, "$0.50"},
		{0.1, "$0.10"},
		{0.0123456, "$0.0123"},
		{0.012, "$0.012"},
		{0.000968, "$0.000968"},
		{0.00999, "$0.00999"},
		{0.9996, "$1.00"},
		{1.5, "$1.50"},
		{12.345, "$12.35"},
		{1234.5, "$1234.50"},
		{-0.5, "$-0.5"},
	}
	for _, tc := range tests {
		if got := Cost(tc.c); got != tc.want {
			t.Errorf("Cost(%v) = %q, want %q", tc.c, got, tc.want)
		}
	}
}

func TestUsage(t *testing.T) {
	tests := []struct {
		name string
		u    model.Usage
		cost float64
		want string
	}{
		{"priced", model.Usage{Requests: 7, InputTokens: 3900, OutputTokens: 1040, TotalTokens: 4940}, 0.0112,
			"7 model calls, 4940 tokens (3900 in, 1040 out), $0.0112"},
		{"one call, no price", model.Usage{Requests: 1, InputTokens: 10, OutputTokens: 5, TotalTokens: 15}, 0,
			"1 model call, 15 tokens (10 in, 5 out)"},
		{"cached", model.Usage{Requests: 2, InputTokens: 100, CachedInputTokens: 60, OutputTokens: 5}, 0.001,
			"2 model calls, 105 tokens (100 in, 5 out, 60 cached), $0.001"},
		{"nothing", model.Usage{}, 0, "0 model calls, 0 tokens (0 in, 0 out)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Usage(tc.u, tc.cost); got != tc.want {
				t.Errorf("Usage = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestTable(t *testing.T) {
	u := func(agent string, calls, in, out int, cost float64) runtime.AgentUsage {
		return runtime.AgentUsage{Agent: agent, Usage: model.Usage{Requests: calls, InputTokens: in, OutputTokens: out, TotalTokens: in + out}, Cost: cost}
	}
	tests := []struct {
		name string
		us   runtime.Usages
		want []string
	}{
		{"none", nil, nil},
		{"one agent, no price", runtime.Usages{u("triage", 1, 412, 18, 0)}, []string{
			"agent   calls  tokens in  tokens out",
			"triage      1        412          18",
		}},
		{"agents with prices, and their total", runtime.Usages{u("triage", 1, 412, 18, 0.000968), u("pricing_reviewer", 2, 1893, 402, 0.007002)}, []string{
			"agent             calls  tokens in  tokens out  cost",
			"triage                1        412          18  $0.000968",
			"pricing_reviewer      2       1893         402  $0.007",
			"total                 3       2305         420  $0.00797",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Table(tc.us); !slices.Equal(got, tc.want) {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestBudget(t *testing.T) {
	agentsUsed := runtime.Usages{{Agent: "triage", Usage: model.Usage{Requests: 7, InputTokens: 3900, OutputTokens: 1040}, Cost: 0.0112}}
	report := func(b agents.Budget, calls int64) *runtime.BudgetReport {
		return &runtime.BudgetReport{Budget: b, Calls: calls, Usage: agentsUsed.Total(), Cost: agentsUsed.Cost(), Agents: agentsUsed}
	}
	tests := []struct {
		name                       string
		rep                        *runtime.BudgetReport
		cost                       float64
		budget, brief, spent, lift string
	}{
		{name: "no budget", cost: 0.0112, budget: "off", brief: "$0.0112", lift: "cost=N"},
		{name: "no budget, no price", budget: "off", lift: "cost=N"},
		{name: "budget lifted", rep: report(agents.Budget{}, 7), cost: 0.0112, budget: "off", brief: "$0.0112", lift: "cost=N"},
		{name: "cost", rep: report(agents.Budget{Cost: 0.25}, 7), cost: 0.0112,
			budget: "cost=0.25: $0.0112 of $0.25 ($0.239 left)", brief: "$0.0112 of $0.25", lift: "cost=N"},
		{name: "cost and calls", rep: report(agents.Budget{Cost: 0.25, ModelCalls: 40}, 7), cost: 0.0112,
			budget: "cost=0.25 model_calls=40: $0.0112 of $0.25 ($0.239 left), 7 of 40 model calls (33 left)",
			brief:  "$0.0112 of $0.25, 7 of 40 calls", lift: "cost=N"},
		{name: "calls spent", rep: report(agents.Budget{ModelCalls: 7}, 7), cost: 0.0112,
			budget: "model_calls=7: 7 of 7 model calls (none left)", brief: "$0.0112, 7 of 7 calls",
			spent: "7 of 7 model calls", lift: "model_calls=N"},
		{name: "cost passed, and tokens spent", rep: report(agents.Budget{Cost: 0.01, InputTokens: 100000, OutputTokens: 1000}, 7), cost: 0.0112,
			budget: "cost=0.01 input_tokens=100000 output_tokens=1000: $0.0112 of $0.01 (none left), 3900 of 100000 input tokens (96100 left), 1040 of 1000 output tokens (none left)",
			brief:  "$0.0112 of $0.01, 3900 of 100000 tokens in, 1040 of 1000 tokens out",
			spent:  "$0.0112 of $0.01, 1040 of 1000 output tokens", lift: "cost=N,output_tokens=N"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Budget(tc.rep); got != tc.budget {
				t.Errorf("Budget = %q, want %q", got, tc.budget)
			}
			if got := Brief(tc.cost, tc.rep); got != tc.brief {
				t.Errorf("Brief = %q, want %q", got, tc.brief)
			}
			if got := Spent(tc.rep); got != tc.spent {
				t.Errorf("Spent = %q, want %q", got, tc.spent)
			}
			if got := Raise(tc.rep); got != tc.lift {
				t.Errorf("Raise = %q, want %q", got, tc.lift)
			}
		})
	}
}

func TestRefusal(t *testing.T) {
	for in, want := range map[string]string{
		"budget: agents: invalid budget: the budget limits cost, but graph g has no prices": "the budget limits cost, but graph g has no prices",
		"agents: invalid budget: the budget limits cost, but graph g has no prices":         "the budget limits cost, but graph g has no prices",
		"the budget limits cost": "the budget limits cost",
	} {
		if got := Refusal(in); got != want {
			t.Errorf("Refusal(%q) = %q, want %q", in, got, want)
		}
	}
}
