package bench

import (
	"context"
	"testing"

	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/workflows"
)

// BenchmarkBudgetOverhead measures what a budget costs a turn: the looper
// (201 turns, as in BenchmarkTurnOverhead) without a budget and with one
// it stays under (a model-call limit), on the same worker, in the order
// without, with, with, without, so that a drift in the machine's load
// weighs on both alike. With a budget, each model call asks the run's
// root first (a signal there and its answer back) and reports its usage
// after (a signal).
//
// Reported, per turn: plain-ms/turn and budget-ms/turn, wall time on the
// server; ratio, the second over the first; and budget-extra-ms/turn,
// their difference.
func BenchmarkBudgetOverhead(b *testing.B) {
	c := temporalClient(b)
	_, url := modelServer(b)
	queue := startWorker(b, c, troupe(b, url, nil))
	warmUp(b, c, queue, false)
	budget := &agents.Budget{ModelCalls: 10 * loopTurns}
	run := func(budget *agents.Budget) sample {
		var res workflows.RunResult
		s := timeRun(b, c, func(ctx context.Context) (client.WorkflowRun, error) {
			return workflows.StartRun(ctx, c, queue, workflows.RunInput{Graph: graphName, Agent: "looper", Input: "go", Budget: budget})
		}, &res)
		if res.Turns != loopTurns+1 || (budget != nil) != (res.Budget != nil) {
			b.Fatalf("looper ran %d turns, budget %+v", res.Turns, res.Budget)
		}
		if budget != nil && res.Budget.Calls != loopTurns+1 {
			b.Fatalf("the root let %d calls start, want %d", res.Budget.Calls, loopTurns+1)
		}
		return s
	}
	var plain, budgeted sample
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		plain = plain.add(run(nil))
		budgeted = budgeted.add(run(budget))
		budgeted = budgeted.add(run(budget))
		plain = plain.add(run(nil))
	}
	b.StopTimer()
	turns := float64(2 * b.N * (loopTurns + 1))
	p, w := ms(plain.wall)/turns, ms(budgeted.wall)/turns
	b.ReportMetric(p, "plain-ms/turn")
	b.ReportMetric(w, "budget-ms/turn")
	b.ReportMetric(w/p, "ratio")
	b.ReportMetric(w-p, "budget-extra-ms/turn")
}
