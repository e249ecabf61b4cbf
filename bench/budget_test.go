package bench

import (
	"context"
	"testing"

	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	troupeclient "github.com/troupe-dev/troupe/client"
)

// BenchmarkBudgetOverhead measures what a budget costs, on one worker, in
// the order without, with, with, without, so that a drift in the
// machine's load weighs on both alike:
//
//   - a turn: the looper's 201 turns (as in BenchmarkTurnOverhead)
//     without a budget and with one it stays under (a model-call limit).
//     The looper is the one agent of its run at work, so its root lends
//     it the budget's ledger and it decides its calls itself: no message
//     per call.
//   - a fan-out: the boss's turn calling 50 agents-as-tools (as in
//     BenchmarkFanOut; 52 model calls), without and with a budget. The
//     boss gives the ledger back before the agents start; each of them
//     asks the root before its call, by update from a local activity,
//     and tells it what the call used after.
//
// Reported: plain-ms/turn and budget-ms/turn, wall time on the server;
// ratio, the second over the first; budget-extra-ms/turn, their
// difference; and fanout-plain-ms, fanout-budget-ms and fanout-ratio, the
// same for the fan-out's run.
//
// Measured on a shared 2-core machine, three runs of each, alternated:
// before ledgers were lent and asks went by update (each call a round
// trip of two signals and two workflow tasks through the root), a turn
// took 5.0 to 5.8 ms without a budget and 34 to 90 ms with one (ratio
// 6.8 to 15.6), the fan-out 2.2 to 2.8 times as long with one; after,
// the ratio is 0.84 to 1.06 (a turn with a budget does the same work as
// one without; the spread is the machine's), the fan-out's 1.2 to 1.4.
// See budget.go.
func BenchmarkBudgetOverhead(b *testing.B) {
	c := temporalClient(b)
	_, url := modelServer(b)
	queue := startWorker(b, c, troupeWorker(b, url, nil))
	warmUp(b, c, queue, false)
	run := func(agent string, budget *agents.Budget, turns, calls int) sample {
		var res troupe.RunResult
		s := timeRun(b, c, func(ctx context.Context) (client.WorkflowRun, error) {
			return troupeclient.StartRun(ctx, c, queue, troupe.RunInput{Graph: graphName, Agent: agent, Input: "go", Budget: budget})
		}, &res)
		if res.Turns != turns || res.Usage.Requests != calls || (budget != nil) != (res.Budget != nil) {
			b.Fatalf("%s ran %d turns and %d model calls (want %d and %d), budget %+v", agent, res.Turns, res.Usage.Requests, turns, calls, res.Budget)
		}
		if budget != nil && (res.Budget.Calls != int64(calls) || res.Budget.Spent != "") {
			b.Fatalf("the root counted %d calls (want %d), spent %q", res.Budget.Calls, calls, res.Budget.Spent)
		}
		return s
	}
	loop := func(budget *agents.Budget) sample { return run("looper", budget, loopTurns+1, loopTurns+1) }
	fan := func(budget *agents.Budget) sample { return run("boss", budget, 2, fanOutCalls+2) }
	budget := &agents.Budget{ModelCalls: 10 * loopTurns}
	var plain, budgeted, fanPlain, fanBudgeted sample
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		plain = plain.add(loop(nil))
		budgeted = budgeted.add(loop(budget))
		budgeted = budgeted.add(loop(budget))
		plain = plain.add(loop(nil))
		fanPlain = fanPlain.add(fan(nil))
		fanBudgeted = fanBudgeted.add(fan(budget))
		fanBudgeted = fanBudgeted.add(fan(budget))
		fanPlain = fanPlain.add(fan(nil))
	}
	b.StopTimer()
	turns := float64(2 * b.N * (loopTurns + 1))
	p, w := ms(plain.wall)/turns, ms(budgeted.wall)/turns
	b.ReportMetric(p, "plain-ms/turn")
	b.ReportMetric(w, "budget-ms/turn")
	b.ReportMetric(w/p, "ratio")
	b.ReportMetric(w-p, "budget-extra-ms/turn")
	runs := float64(2 * b.N)
	fp, fw := ms(fanPlain.wall)/runs, ms(fanBudgeted.wall)/runs
	b.ReportMetric(fp, "fanout-plain-ms")
	b.ReportMetric(fw, "fanout-budget-ms")
	b.ReportMetric(fw/fp, "fanout-ratio")
}
