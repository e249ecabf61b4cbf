package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/temporal"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/model"
)

// A --budget flag gives the budget it says, or none when it is not set;
// a bad one is refused, saying what is wrong and what a budget looks
// like, before the command dials any server (there is none to dial here).
func TestBudgetFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want *agents.Budget // the flag's budget, for a test command
		err  string         // a part of the error; "" for none
	}{
		{name: "unset", args: nil, want: nil},
		{name: "cost and calls", args: []string{"--budget", "cost=0.5,model_calls=40"}, want: &agents.Budget{Cost: 0.5, ModelCalls: 40}},
		{name: "off lifts the default", args: []string{"--budget", "off"}, want: &agents.Budget{}},
		{name: "empty", args: []string{"--budget", ""}, err: `--budget "": name a limit`},
		{name: "run", args: []string{"run", "--graph", "g", "--budget", "cost=abc", "hello"},
			err: `--budget "cost=abc": cost: "abc" is not a number (want cost=N,model_calls=N,input_tokens=N,output_tokens=N (any of them) or off)`},
		{name: "sessions new", args: []string{"sessions", "new", "g", "--budget", "calls=3"}, err: `--budget "calls=3": unknown limit "calls"`},
		{name: "sessions budget", args: []string{"sessions", "budget", "session-g-1", "model_calls=-1"}, err: `budget "model_calls=-1": model_calls is negative (-1)`},
		{name: "chat", args: []string{"chat", "--budget", "cost"}, err: `--budget "cost": "cost": want NAME=VALUE`},
	}
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1") // Nothing listens: a command that dials fails otherwise.
	t.Setenv("TROUPE_HOME", t.TempDir())
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.args) > 0 && !strings.HasPrefix(tc.args[0], "-") {
				// A troupe command.
				g := Graph{Graph: agents.MustGraph("g", "a", &agents.Agent{Name: "a", Instructions: "x"})}
				cmd := Command([]Graph{g}, io.Discard, io.Discard)
				cmd.SetArgs(tc.args)
				err := cmd.ExecuteContext(context.Background())
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("troupe %s: %v; want an error with %q", strings.Join(tc.args, " "), err, tc.err)
				}
				return
			}
			var spec string
			var got *agents.Budget
			var err error
			cmd := &cobra.Command{Use: "x", RunE: func(cmd *cobra.Command, _ []string) error {
				got, err = budgetFlag(cmd, spec)
				return nil
			}}
			cmd.Flags().StringVar(&spec, "budget", "", "")
			cmd.SetArgs(tc.args)
			if err := cmd.Execute(); err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("budgetFlag = %+v, %v; want an error with %q", got, err, tc.err)
				}
			case err != nil || (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want:
				t.Errorf("budgetFlag = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

var reviewUsage = runtime.Usages{
	{Agent: "triage", Usage: model.Usage{Requests: 1, InputTokens: 412, OutputTokens: 18, TotalTokens: 430}, Cost: 0.000968},
	{Agent: "coordinator", Usage: model.Usage{Requests: 2, InputTokens: 1893, OutputTokens: 402, TotalTokens: 2295}, Cost: 0.007002},
}

func TestPrintSpend(t *testing.T) {
	tests := []struct {
		name string
		us   runtime.Usages
		rep  *runtime.BudgetReport
		want string
	}{
		{"nothing", nil, nil, ""},
		{"one agent", reviewUsage[:1], nil,
			"usage: 1 model call, 430 tokens (412 in, 18 out), $0.000968\n"},
		{"agents, budget", reviewUsage, &runtime.BudgetReport{Budget: agents.Budget{Cost: 0.25}, Calls: 3, Usage: reviewUsage.Total(), Cost: reviewUsage.Cost(), Agents: reviewUsage},
			"usage: 3 model calls, 2725 tokens (2305 in, 420 out), $0.00797\n" +
				"  agent        calls  tokens in  tokens out  cost\n" +
				"  triage           1        412          18  $0.000968\n" +
				"  coordinator      2       1893         402  $0.007\n" +
				"  total            3       2305         420  $0.00797\n" +
				"budget cost=0.25: $0.00797 of $0.25 ($0.242 left)\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			printSpend(&b, "", tc.us.Total(), tc.us.Cost(), tc.us, tc.rep)
			if b.String() != tc.want {
				t.Errorf("printed\n%s\nwant\n%s", b.String(), tc.want)
			}
		})
	}
}

// A run its budget stopped is one line that says so (no agent failed),
// and carries the budget's report; its event says which call was refused.
func TestBudgetExceededFailure(t *testing.T) {
	rep := runtime.BudgetReport{Budget: agents.Budget{ModelCalls: 3}, Calls: 3, Usage: reviewUsage.Total(), Cost: reviewUsage.Cost(), Agents: reviewUsage,
		Spent: "3 of 3 model calls"}
	cause := temporal.NewNonRetryableApplicationError("agent pricing_reviewer stopped before its model call of turn 1: the run's budget is spent (3 of 3 model calls)",
		troupe.ErrBudgetExceeded, nil)
	err := fmt.Errorf("workflow failed: %w", temporal.NewNonRetryableApplicationError("the run's budget is spent (3 of 3 model calls)", troupe.ErrBudgetExceeded, cause, rep))
	f := describeFailure("dealdesk-1", err)
	if want := "the run stopped: troupe.BudgetExceeded: the run's budget is spent (3 of 3 model calls)"; f.Error() != want {
		t.Errorf("Error() = %q, want %q", f.Error(), want)
	}
	if f.Budget == nil || f.Budget.Calls != 3 || len(f.Budget.Agents) != 2 {
		t.Errorf("the failure's budget: %+v", f.Budget)
	}
	if f := describeFailure("dealdesk-1", fmt.Errorf("workflow failed: %w", temporal.NewNonRetryableApplicationError("bad", troupe.ErrModel, nil))); f.Budget != nil {
		t.Errorf("a model error carries a budget: %+v", f.Budget)
	}

	var b bytes.Buffer
	printEvent(&b, troupe.Event{Kind: troupe.EventBudgetExceeded, WorkflowID: "dealdesk-1", Agent: "pricing_reviewer", Turn: 1,
		Detail: "the model call of pricing_reviewer (turn 1) was refused: the run's budget is spent (3 of 3 model calls)"})
	if want := "  [pricing_reviewer] ✗ the model call of pricing_reviewer (turn 1) was refused: the run's budget is spent (3 of 3 model calls)\n"; b.String() != want {
		t.Errorf("event printed %q, want %q", b.String(), want)
	}
}

// A call not run again because it may have taken effect is shown.
func TestPrintToolInDoubt(t *testing.T) {
	var b bytes.Buffer
	printEvent(&b, troupe.Event{Kind: troupe.EventToolInDoubt, WorkflowID: "pay-1/0-payer", Agent: "payer", Turn: 1, Tool: "file_ticket", CallID: "c1",
		Detail: "not run again: an earlier attempt started it and did not finish; idempotency key troupe-0f"})
	if want := "  [payer] ⚠ file_ticket may or may not have taken effect, not run again: an earlier attempt started it and did not finish; idempotency key troupe-0f\n"; b.String() != want {
		t.Errorf("event printed %q, want %q", b.String(), want)
	}
}

// A session shows what it spent, per agent, and its budget; a spent one
// says how to go on, and its turn the budget stopped says so.
func TestPrintSessionSpend(t *testing.T) {
	info := troupeclient.SessionInfo{ID: "session-dealdesk-1", Graph: "dealdesk", Status: runtime.SessionIdle, Agent: "triage", Policy: runtime.PolicyEnqueue,
		Turns: 1, Usage: reviewUsage.Total(), Agents: reviewUsage, Cost: reviewUsage.Cost(),
		Budget: &runtime.BudgetReport{Budget: agents.Budget{ModelCalls: 3}, Calls: 3, Usage: reviewUsage.Total(), Cost: reviewUsage.Cost(), Agents: reviewUsage},
		Recent: []troupeclient.TurnRecord{{Turn: "t1", Message: "Review the Acme Corp deal", Outcome: runtime.TurnFailed, Cost: reviewUsage.Cost(),
			Error: "troupe.BudgetExceeded: agent coordinator stopped before its model call of turn 2: the session's budget is spent", ErrorType: troupe.ErrBudgetExceeded}}}
	var b bytes.Buffer
	printSession(&b, info)
	want := []string{
		"  usage: 3 model calls, 2725 tokens (2305 in, 420 out), $0.00797",
		"    agent        calls  tokens in  tokens out  cost",
		"    total            3       2305         420  $0.00797",
		"  budget model_calls=3: 3 of 3 model calls (none left)",
		"  the budget is spent (3 of 3 model calls): troupe sessions budget session-dealdesk-1 model_calls=N raises it (N the new limit), troupe sessions budget session-dealdesk-1 off lifts it",
		"  t1 failed ($0.00797): Review the Acme Corp deal → stopped by the budget",
	}
	for _, line := range want {
		if !strings.Contains(b.String(), line+"\n") {
			t.Errorf("the session's lines lack\n%s\nin\n%s", line, b.String())
		}
	}
	// Raised: no longer spent.
	info.Budget.Budget.ModelCalls = 10
	b.Reset()
	printSession(&b, info)
	if out := b.String(); !strings.Contains(out, "  budget model_calls=10: 3 of 10 model calls (7 left)\n") || strings.Contains(out, "is spent") {
		t.Errorf("a raised budget shows\n%s", out)
	}
}
