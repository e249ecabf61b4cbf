package bench

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/worker"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/model/scripted"
	"github.com/troupe-dev/troupe/workflows"
)

// BenchmarkRateLimitedModel runs 50 loopers at once (201 model turns
// each: 10,050 model calls) on two workers of one queue against a model
// server allowing 50 calls at once and 100 per second, which answers 429
// past either, both workers keeping the endpoint within that limit
// together (Config.ModelLimits). It reports the wall time against the
// limit's own floor (calls / rate), and what the server saw: the most
// calls at once, the most in a second, and the calls it turned away (the
// limit held when these are within it and none were turned away).
func BenchmarkRateLimitedModel(b *testing.B) {
	const runs, workers = 50, 2
	limit := agents.ModelLimit{MaxConcurrent: 50, Requests: 100}
	c := temporalClient(b)
	srv := scripted.New(benchScenario(b), scripted.WithLimits(scripted.Limits{MaxConcurrent: limit.MaxConcurrent, Requests: limit.Requests}))
	url, err := srv.Start("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	store, err := blob.Open(context.Background(), b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	queue := fmt.Sprintf("bench-%d", queues.Add(1))
	for range workers {
		m, err := model.New(model.Config{APIKey: "bench", BaseURL: url})
		if err != nil {
			b.Fatal(err)
		}
		r, err := workflows.NewRunner(workflows.Config{Graphs: []*agents.Graph{benchGraph()}, Model: m, Store: store,
			ModelLimits: map[string]agents.ModelLimit{"": limit}})
		if err != nil {
			b.Fatal(err)
		}
		stop, err := r.StartWorkers(c, queue, worker.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(stop)
	}
	for b.Loop() {
		before := srv.Stats().Requests
		began := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, runs)
		for range runs {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
				defer cancel()
				res, err := troupeclient.Execute(ctx, c, queue, troupe.RunInput{Graph: graphName, Agent: "looper", Input: "go"})
				if err == nil && res.Turns != loopTurns+1 {
					err = fmt.Errorf("looper ran %d turns, want %d", res.Turns, loopTurns+1)
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		wall := time.Since(began)
		st := srv.Stats()
		calls := st.Requests - before
		floor := time.Duration(float64(calls) / float64(limit.Requests) * float64(time.Second))
		b.ReportMetric(float64(calls), "calls")
		b.ReportMetric(wall.Seconds(), "wall-s")
		b.ReportMetric(floor.Seconds(), "floor-s")
		b.ReportMetric(wall.Seconds()/floor.Seconds(), "ratio")
		b.ReportMetric(float64(st.PeakConcurrent), "peak-concurrent")
		b.ReportMetric(float64(st.MaxInWindow), "max-per-s")
		b.ReportMetric(float64(st.RateLimited), "rate-limited")
		if st.PeakConcurrent > limit.MaxConcurrent || st.MaxInWindow > limit.Requests || st.RateLimited > 0 {
			b.Errorf("the model server saw %d calls at once, %d in a second and turned %d away; limit %s", st.PeakConcurrent, st.MaxInWindow, st.RateLimited, limit)
		}
	}
}
