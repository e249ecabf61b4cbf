package bench

import (
	"context"
	"fmt"
	"testing"
)

func BenchmarkZHist(b *testing.B) {
	c := temporalClient(b)
	_, url := modelServer(b)
	queue := startWorker(b, c, registerBaseline, troupe(b, url, nil))
	warmUp(b, c, queue, false)
	res, s := runTroupe(b, c, queue, "boss")
	fmt.Println("boss run", ms(s.wall))
	for _, id := range []string{res.WorkflowID, res.WorkflowID + "/0-boss", res.WorkflowID + "/0-boss/t1.0/0-fan_worker"} {
		it := c.GetWorkflowHistory(context.Background(), id, "", false, 0)
		n := 0
		counts := map[string]int{}
		var first, last int64
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				b.Fatal(err)
			}
			if n == 0 {
				first = e.GetEventTime().AsTime().UnixMicro()
			}
			last = e.GetEventTime().AsTime().UnixMicro()
			n++
			counts[e.GetEventType().String()]++
		}
		fmt.Printf("%s: %d events in %.1f ms: %v\n", id, n, float64(last-first)/1000, counts)
	}
}
