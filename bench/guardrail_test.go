package bench

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/workflows"
)

// BenchmarkGuardrailTurnOverhead measures what a guardrail and an
// approval policy that never matches add to a turn: the looper's 201
// turns (200 calling the no-op tool) as the bench graph has it, against
// the same agent with a tool guardrail whose Before check passes every
// call and an approval policy whose predicate never makes a call wait
// (agents.When returning false). Each of those runs every turn that
// calls the tool, in the model call's local activity (gate.Precheck;
// each was a local activity of its own before). Both agents are served by one worker and run in
// alternation (plain, guarded, guarded, plain), so a drift in the
// machine's load weighs on both alike.
//
// Reported: plain-ms/turn, guarded-ms/turn and ratio (goal ≤ 1.1), the
// wall time on the server per turn, model calls included; cpu-ratio, the
// process's CPU time per turn; median-ratio and median-cpu-ratio, the
// medians of the rounds' ratios, which a burst of load on the machine
// moves less.
func BenchmarkGuardrailTurnOverhead(b *testing.B) {
	c := temporalClient(b)
	_, url := modelServer(b)
	queue := startWorker(b, c, troupeWorker(b, url, func(cfg *workflows.Config) {
		cfg.Graphs = append(cfg.Graphs, guardedGraph())
	}))
	warmUp(b, c, queue, false)
	guardedLoop(b, c, queue, guardedGraphName) // Warms the guarded path up too.

	var plain, guarded loopStats
	var rounds, cpuRounds []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var p, g loopStats
		p.add(guardedLoop(b, c, queue, graphName))
		g.add(guardedLoop(b, c, queue, guardedGraphName))
		g.add(guardedLoop(b, c, queue, guardedGraphName))
		p.add(guardedLoop(b, c, queue, graphName))
		rounds, cpuRounds = append(rounds, g.wallPer()/p.wallPer()), append(cpuRounds, g.cpuPer()/p.cpuPer())
		plain.add(p.sample, p.turns, 0)
		guarded.add(g.sample, g.turns, 0)
	}
	b.StopTimer()
	b.ReportMetric(plain.wallPer(), "plain-ms/turn")
	b.ReportMetric(guarded.wallPer(), "guarded-ms/turn")
	b.ReportMetric(guarded.wallPer()/plain.wallPer(), "ratio")
	b.ReportMetric(median(rounds), "median-ratio")
	b.ReportMetric(guarded.cpuPer()/plain.cpuPer(), "cpu-ratio")
	b.ReportMetric(median(cpuRounds), "median-cpu-ratio")
	b.Logf("plain looper: %.2f ms/turn (CPU %.2f ms); with a passing tool guardrail and an approval policy that never matches: %.2f ms/turn (CPU %.2f ms); ratio %.3f (CPU %.3f); median of %d rounds' ratios %.3f (CPU %.3f)",
		plain.wallPer(), plain.cpuPer(), guarded.wallPer(), guarded.cpuPer(), guarded.wallPer()/plain.wallPer(), guarded.cpuPer()/plain.cpuPer(),
		len(rounds), median(rounds), median(cpuRounds))
}

// median is the median of xs (which it sorts).
func median(xs []float64) float64 {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

const guardedGraphName = "bench-guarded"

// guardedGraph has the looper (its instructions, so the scenario answers
// it alike, and its tool) with a guardrail and an approval policy.
func guardedGraph() *agents.Graph {
	noop := agents.MustFunctionTool("noop", "Does nothing.", func(_ context.Context, a noopArgs) (string, error) {
		return "ok " + a.Turn, nil
	})
	return agents.MustGraph(guardedGraphName, "looper",
		&agents.Agent{Name: "looper", Instructions: "bench looper", Tools: []agents.Tool{noop}, MaxTurns: loopTurns + 1,
			ToolGuardrails: []agents.ToolGuardrail{{Name: "passes", Tool: "noop",
				Before: func(context.Context, agents.ToolCall) (agents.ToolVerdict, error) { return agents.ToolVerdict{}, nil }}},
			Approvals: []agents.Approval{agents.When("noop", func(context.Context, json.RawMessage) (bool, error) { return false, nil })},
		})
}

// guardedLoop runs the looper of graph once and returns its sample.
func guardedLoop(b *testing.B, c client.Client, queue, graph string) (sample, int, time.Duration) {
	b.Helper()
	var res troupe.RunResult
	s := timeRun(b, c, func(ctx context.Context) (client.WorkflowRun, error) {
		return troupeclient.StartRun(ctx, c, queue, troupe.RunInput{Graph: graph, Agent: "looper", Input: "go"})
	}, &res)
	if res.Turns != loopTurns+1 || res.ToolCalls != loopTurns {
		b.Fatalf("%s looper ran %d turns and %d tool calls, want %d and %d", graph, res.Turns, res.ToolCalls, loopTurns+1, loopTurns)
	}
	return s, res.Turns, 0
}
