package bench

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// BenchmarkFanOut measures one turn that calls 50 agents-as-tools: the boss
// agent's first turn calls them all, each tool agent (a child workflow)
// answers in one model turn, and the boss's second turn answers. The
// baseline is a workflow that starts 50 no-op child workflows at once and
// waits for them all, on the same worker.
func BenchmarkFanOut(b *testing.B) {
	c := temporalClient(b)
	_, url := modelServer(b)
	queue, _ := startWorker(b, c, registerBaseline, troupe(b, url, nil))
	warmUp(b, c, queue, false)
	runBaseline(b, c, queue, baselineChildrenName, 1)
	b.ResetTimer()
	var base, tr time.Duration
	for i := 0; i < b.N; i++ {
		base += runBaseline(b, c, queue, baselineChildrenName, fanOutCalls)
		res, took := runTroupe(b, c, queue, "boss")
		var out string
		if err := json.Unmarshal(res.Output, &out); err != nil || out != fmt.Sprintf("%d parts done", fanOutCalls) {
			b.Fatalf("boss answered %s", res.Output)
		}
		tr += took
	}
	b.StopTimer()
	baseMS, trMS := ms(base)/float64(b.N), ms(tr)/float64(b.N)
	b.ReportMetric(baseMS, "baseline-ms")
	b.ReportMetric(trMS, "troupe-ms")
	b.ReportMetric(trMS/baseMS, "ratio")
	b.Logf("baseline %.0f ms for %d parallel no-op children; troupe %.0f ms for %d agents-as-tools in one turn (ratio %.2f)",
		baseMS, fanOutCalls, trMS, fanOutCalls, trMS/baseMS)
}
