package bench

import (
	"encoding/json"
	"fmt"
	"testing"

	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/workflows"
)

// BenchmarkFanOut measures one turn that calls 50 agents-as-tools: the boss
// agent's first turn calls them all, each tool agent (a child workflow)
// answers in one model turn, and the boss's second turn answers. Troupe runs
// with its default configuration and with Config.ModelActivities, each on
// its own worker; the baseline is a workflow that starts 50 no-op child
// workflows at once and waits for them all, on the default configuration's
// worker. Each is measured twice, in the order baseline, default, activities,
// activities, default, baseline.
//
// Reported: baseline-ms, troupe-ms and activity-ms (wall time on the server),
// ratio and activity-ratio (Troupe's over the baseline's), and cpu-ratio,
// activity-cpu-ratio (the same for the process's CPU time, which other load on
// the machine disturbs less; it includes the scripted model server's).
func BenchmarkFanOut(b *testing.B) {
	c := temporalClient(b)
	_, url := modelServer(b)
	queue := startWorker(b, c, registerBaseline, troupeWorker(b, url, nil))
	aqueue := startWorker(b, c, troupeWorker(b, url, func(cfg *workflows.Config) { cfg.ModelActivities = true }))
	warmUp(b, c, queue, false)
	warmUp(b, c, aqueue, false)
	runBaseline(b, c, queue, baselineChildrenName, 1)

	var base, def, act sample
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		base = base.add(runBaseline(b, c, queue, baselineChildrenName, fanOutCalls))
		def = def.add(runFanOut(b, c, queue))
		act = act.add(runFanOut(b, c, aqueue))
		act = act.add(runFanOut(b, c, aqueue))
		def = def.add(runFanOut(b, c, queue))
		base = base.add(runBaseline(b, c, queue, baselineChildrenName, fanOutCalls))
	}
	b.StopTimer()

	runs := float64(2 * b.N)
	baseMS := ms(base.wall) / runs
	b.ReportMetric(baseMS, "baseline-ms")
	b.ReportMetric(ms(def.wall)/runs, "troupe-ms")
	b.ReportMetric(ms(def.wall)/runs/baseMS, "ratio")
	b.ReportMetric(ms(def.cpu)/ms(base.cpu), "cpu-ratio")
	b.ReportMetric(ms(act.wall)/runs, "activity-ms")
	b.ReportMetric(ms(act.wall)/runs/baseMS, "activity-ratio")
	b.ReportMetric(ms(act.cpu)/ms(base.cpu), "activity-cpu-ratio")
	b.Logf("baseline: %.0f ms (CPU %.0f ms) for %d no-op child workflows in parallel", baseMS, ms(base.cpu)/runs, fanOutCalls)
	for _, r := range []struct {
		name string
		s    sample
	}{{"default (local model calls)", def}, {"model calls as activities", act}} {
		b.Logf("troupe, %s: %.0f ms (CPU %.0f ms) for one turn calling %d agents-as-tools (ratio %.2f, CPU ratio %.2f)",
			r.name, ms(r.s.wall)/runs, ms(r.s.cpu)/runs, fanOutCalls, ms(r.s.wall)/runs/baseMS, ms(r.s.cpu)/ms(base.cpu))
	}
}

// runFanOut runs the boss once on queue and returns its sample.
func runFanOut(b *testing.B, c client.Client, queue string) sample {
	b.Helper()
	res, s := runTroupe(b, c, queue, "boss")
	var out string
	if err := json.Unmarshal(res.Output, &out); err != nil || out != fmt.Sprintf("%d parts done", fanOutCalls) {
		b.Fatalf("boss answered %s", res.Output)
	}
	if res.ToolCalls != fanOutCalls || res.Usage.Requests != fanOutCalls+2 {
		b.Fatalf("boss made %d tool calls and the run %d model requests, want %d and %d",
			res.ToolCalls, res.Usage.Requests, fanOutCalls, fanOutCalls+2)
	}
	return s
}

// BenchmarkFanOutWide measures one turn that calls 2,500 agents-as-tools
// (TROUPE_BENCH_WIDE=10000 for more), past the 2,000 child workflows
// Temporal lets one workflow have pending: the wide boss's first turn
// calls the part tool 2,500 times, at most the default bound
// (agents.DefaultMaxConcurrentCalls, 100) of them at once, each a tool
// agent answering in one model turn. The baseline is a workflow that runs
// as many no-op child workflows under the same bound. Each is measured
// twice, in the order baseline, troupe, troupe, baseline.
//
// Reported: baseline-ms, troupe-ms, ratio (wall) and cpu-ratio.
func BenchmarkFanOutWide(b *testing.B) {
	c := temporalClient(b)
	_, url := modelServer(b)
	queue := startWorker(b, c, registerBaseline, troupeWorker(b, url, nil))
	warmUp(b, c, queue, false)
	n := wideCallCount()
	var base, wide sample
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		base = base.add(runBaseline(b, c, queue, baselineCappedName, n))
		wide = wide.add(runWide(b, c, queue, n))
		wide = wide.add(runWide(b, c, queue, n))
		base = base.add(runBaseline(b, c, queue, baselineCappedName, n))
	}
	b.StopTimer()
	runs := float64(2 * b.N)
	baseMS := ms(base.wall) / runs
	b.ReportMetric(baseMS, "baseline-ms")
	b.ReportMetric(ms(wide.wall)/runs, "troupe-ms")
	b.ReportMetric(ms(wide.wall)/runs/baseMS, "ratio")
	b.ReportMetric(ms(wide.cpu)/ms(base.cpu), "cpu-ratio")
	b.Logf("baseline: %.0f ms for %d no-op child workflows, %d at once; troupe: %.0f ms for one turn calling %d agents-as-tools (ratio %.2f, CPU ratio %.2f)",
		baseMS, n, agents.DefaultMaxConcurrentCalls, ms(wide.wall)/runs, n, ms(wide.wall)/runs/baseMS, ms(wide.cpu)/ms(base.cpu))
}

// runWide runs the wide boss once on queue and returns its sample.
func runWide(b *testing.B, c client.Client, queue string, n int) sample {
	b.Helper()
	res, s := runTroupe(b, c, queue, "wide_boss")
	var out string
	if err := json.Unmarshal(res.Output, &out); err != nil || out != fmt.Sprintf("%d parts done", n) {
		b.Fatalf("wide boss answered %s", res.Output)
	}
	if res.ToolCalls != n || res.Usage.Requests != n+2 {
		b.Fatalf("wide boss made %d tool calls and the run %d model requests, want %d and %d", res.ToolCalls, res.Usage.Requests, n, n+2)
	}
	return s
}
