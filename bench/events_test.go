package bench

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/runtime/model/scripted"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/events"
)

const echoWorkflowName = "bench.Echo"

// echo answers the update "ping" at once until it is signalled "stop".
func echo(ctx workflow.Context) error {
	if err := workflow.SetUpdateHandler(ctx, "ping", func(ctx workflow.Context, i int) (int, error) { return i, nil }); err != nil {
		return err
	}
	workflow.GetSignalChannel(ctx, "stop").Receive(ctx, nil)
	return nil
}

func registerEcho(w worker.Registry) {
	w.RegisterWorkflowWithOptions(echo, workflow.RegisterOptions{Name: echoWorkflowName})
}

// BenchmarkEventLatency measures how long an event takes from the workflow
// that records it to a follower: the looper's 201 turns, against a bare
// Temporal update round trip on the same server, followed
//
//   - by polls only (PollOnly: workflows.Follow's history watch and events
//     query, polls every 100 ms besides), model calls local activities
//     (the default) and activities;
//   - through the worker's live feed (a follower with no bus, as on
//     another host: its queries go through the server), model calls local;
//   - in the worker's own process (FollowLive with the worker's EventBus,
//     as `troupe run` does), model calls local.
//
// An event's time is the workflow time of the task that recorded it, so
// with local activities, whose turns share one workflow task, a follower
// by polls gets it only when that task ends.
func BenchmarkEventLatency(b *testing.B) {
	c := temporalClient(b)
	srv, url := modelServer(b)
	queue := startWorker(b, c, registerBaseline, registerEcho, troupeWorker(b, url, nil))
	aqueue := startWorker(b, c, troupeWorker(b, url, func(cfg *workflows.Config) { cfg.ModelActivities = true }))
	bus := events.NewBus()
	lqueue := streamWorker(b, c, url, bus) // StartWorkers: the live feed
	warmUp(b, c, queue, false)
	warmUp(b, c, aqueue, false)
	warmUp(b, c, lqueue, false)
	var update, local, acts, feed, live []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		update = append(update, updateRoundTrips(b, c, queue, loopTurns)...)
		local = append(local, followedLatencies(b, c, srv, lqueue, nil, troupeclient.PollOnly())...)
		acts = append(acts, followedLatencies(b, c, srv, aqueue, nil, troupeclient.PollOnly())...)
		feed = append(feed, followedLatencies(b, c, srv, lqueue, nil)...)
		live = append(live, followedLatencies(b, c, srv, lqueue, bus)...)
	}
	b.StopTimer()
	up50, up95 := percentiles(update)
	l50, l95 := percentiles(local)
	a50, a95 := percentiles(acts)
	f50, f95 := percentiles(feed)
	v50, v95 := percentiles(live)
	b.ReportMetric(up50, "update-p50-ms")
	b.ReportMetric(up95, "update-p95-ms")
	b.ReportMetric(l50, "local-p50-ms")
	b.ReportMetric(l95, "local-p95-ms")
	b.ReportMetric(l50/up50, "local-p50-ratio")
	b.ReportMetric(a50, "activities-p50-ms")
	b.ReportMetric(a95, "activities-p95-ms")
	b.ReportMetric(a50/up50, "activities-p50-ratio")
	b.ReportMetric(f50, "feed-p50-ms")
	b.ReportMetric(f95, "feed-p95-ms")
	b.ReportMetric(f50/up50, "feed-p50-ratio")
	b.ReportMetric(v50, "live-p50-ms")
	b.ReportMetric(v95, "live-p95-ms")
	b.ReportMetric(v50/up50, "live-p50-ratio")
	b.Logf("update round trip: p50 %.1f ms, p95 %.1f ms (%d)", up50, up95, len(update))
	b.Logf("event to follower by polls only, model calls local: p50 %.1f ms, p95 %.1f ms (%d events; ratio to the update p50 %.1f)", l50, l95, len(local), l50/up50)
	b.Logf("event to follower by polls only, model calls as activities: p50 %.1f ms, p95 %.1f ms (%d events; ratio %.1f)", a50, a95, len(acts), a50/up50)
	b.Logf("event to follower through the worker's live feed, model calls local: p50 %.1f ms, p95 %.1f ms (%d events; ratio %.1f)", f50, f95, len(feed), f50/up50)
	b.Logf("event to follower in the worker's process (FollowLive), model calls local: p50 %.2f ms, p95 %.2f ms (%d events; ratio %.2f)", v50, v95, len(live), v50/up50)
}

// updateRoundTrips times n updates of a fresh echo workflow, each until
// its result is back.
func updateRoundTrips(b *testing.B, c client.Client, queue string, n int) []time.Duration {
	b.Helper()
	ctx := context.Background()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, echoWorkflowName)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = c.SignalWorkflow(ctx, run.GetID(), "", "stop", nil) }()
	out := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		start := time.Now()
		h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: run.GetID(), UpdateName: "ping", Args: []any{i}, WaitForStage: client.WorkflowUpdateStageCompleted})
		if err != nil {
			b.Fatal(err)
		}
		var got int
		if err := h.Get(ctx, &got); err != nil || got != i {
			b.Fatalf("ping %d answered %d, %v", i, got, err)
		}
		out = append(out, time.Since(start))
	}
	return out
}

// followedLatencies runs the looper on queue with a follower and returns,
// for each of its turns, the time from the model's answer (the scripted
// server's End) to the arrival of the turn's event at the follower.
func followedLatencies(b *testing.B, c client.Client, srv *scripted.Server, queue string, bus *events.Bus, opts ...troupeclient.FollowOption) []time.Duration {
	b.Helper()
	ctx := context.Background()
	skip := len(srv.Calls())
	run, err := troupeclient.StartRun(ctx, c, queue, troupe.RunInput{Graph: graphName, Agent: "looper", Input: "go"})
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	arrived := map[int]time.Time{}
	fctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = troupeclient.FollowLive(fctx, c, run.GetID(), 100*time.Millisecond, bus, func(e troupe.Event) {
			if e.Kind == troupe.EventTurn {
				mu.Lock()
				arrived[e.Turn] = time.Now()
				mu.Unlock()
			}
		}, opts...)
	}()
	var res troupe.RunResult
	err = run.Get(ctx, &res)
	cancel()
	<-done
	if err != nil || res.Turns != loopTurns+1 {
		b.Fatalf("looper: %d turns, %v", res.Turns, err)
	}
	var out []time.Duration
	for _, call := range srv.Calls()[skip:] {
		if at, ok := arrived[call.Turn]; ok {
			out = append(out, at.Sub(call.End))
		}
	}
	if len(out) != loopTurns+1 {
		b.Fatalf("%d turn events matched the model's answers, want %d", len(out), loopTurns+1)
	}
	return out
}

// percentiles returns the 50th and 95th percentiles of ds, in ms.
func percentiles(ds []time.Duration) (p50, p95 float64) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return ms(s[len(s)/2]), ms(s[len(s)*95/100])
}
