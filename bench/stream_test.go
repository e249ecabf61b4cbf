package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/model/scripted"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/events"
)

const (
	// streamThinkMS is how long the scripted model thinks before the
	// streamer's first token, as a real model does.
	streamThinkMS = 200
	// streamRuns is how many runs each way one iteration times.
	streamRuns = 15
)

// streamAnswer is the streamer's answer: about 2 KB, some 130 deltas.
var streamAnswer = strings.Repeat("A streamed answer arrives a few tokens at a time. ", 40)

// BenchmarkTimeToFirstDelta measures how soon a follower shows the first
// piece of a turn's text: from the start of a one-turn run of the
// streamer (the scripted model thinks streamThinkMS, then streams about
// 2 KB) to the first text delta at the follower, through the worker's
// live feed (a follower with no bus, as `troupe sessions send` on another
// host: it finds the feed in the worker's identity and queries it through
// the server) and through the worker's bus (a follower in the worker's
// process, as `troupe run`), against the scripted server's own time to
// first token, measured in the same run by an HTTP client that posts the
// same request and reads the stream itself. It also reports how long a
// delta takes through the feed once the model has sent it (arrival at the
// follower minus the model call's start and the model's own time to first
// token, the one measured just before), and the history events per turn
// of the streamer's runs (its orchestrator's and agent's) followed with
// deltas against those of a worker with no bus, which serves none.
func BenchmarkTimeToFirstDelta(b *testing.B) {
	c := temporalClient(b)
	srv, url := modelServer(b)
	bus := events.NewBus()
	queue := streamWorker(b, c, url, bus)
	plainQueue := streamWorker(b, c, url, nil)
	warmUp(b, c, queue, false)
	warmUp(b, c, plainQueue, false)
	var direct, fed, local, afterModel []time.Duration
	var withText, without []int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for range streamRuns {
			direct = append(direct, modelFirstToken(b, url))
			first, call, run := firstDelta(b, c, srv, queue, nil)
			fed = append(fed, first)
			afterModel = append(afterModel, call-direct[len(direct)-1])
			withText = append(withText, runHistory(b, c, run))
			first, _, _ = firstDelta(b, c, srv, queue, bus)
			local = append(local, first)
		}
		without = append(without, runHistory(b, c, plainRun(b, c, plainQueue)))
	}
	b.StopTimer()
	d50, d95 := percentiles(direct)
	r50, r95 := percentiles(fed)
	l50, l95 := percentiles(local)
	a50, a95 := percentiles(afterModel)
	h1, h0 := mean(withText), mean(without)
	b.ReportMetric(d50, "model-ttft-p50-ms")
	b.ReportMetric(r50, "feed-ttfd-p50-ms")
	b.ReportMetric(r95, "feed-ttfd-p95-ms")
	b.ReportMetric(r50/d50, "feed-ttfd-p50-ratio")
	b.ReportMetric(l50, "bus-ttfd-p50-ms")
	b.ReportMetric(l50/d50, "bus-ttfd-p50-ratio")
	b.ReportMetric(a50, "feed-after-model-p50-ms")
	b.ReportMetric(h1, "history-events/turn-live")
	b.ReportMetric(h0, "history-events/turn-none")
	b.Logf("scripted model's own time to first token (HTTP client): p50 %.1f ms, p95 %.1f ms (%d)", d50, d95, len(direct))
	b.Logf("run start to first delta, follower through the live feed: p50 %.1f ms, p95 %.1f ms (ratio to the model's p50 %.2f)", r50, r95, r50/d50)
	b.Logf("run start to first delta, follower on the worker's bus: p50 %.1f ms, p95 %.1f ms (ratio %.2f)", l50, l95, l50/d50)
	b.Logf("a delta through the live feed after the model sent it: p50 %.2f ms, p95 %.2f ms", a50, a95)
	b.Logf("history events per one-turn run (orchestrator and agent): %.1f followed with live text, %.1f on a worker that serves none", h1, h0)
}

// runHistory returns the number of history events of run's orchestrator
// and its streamer agent.
func runHistory(b *testing.B, c client.Client, run string) int {
	b.Helper()
	n := 0
	for _, id := range []string{run, run + "/0-streamer"} {
		it := c.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			if _, err := it.Next(); err != nil {
				b.Fatal(err)
			}
			n++
		}
	}
	return n
}

// plainRun runs the streamer on queue with no follower and returns its id.
func plainRun(b *testing.B, c client.Client, queue string) string {
	b.Helper()
	ctx := context.Background()
	run, err := troupeclient.StartRun(ctx, c, queue, troupe.RunInput{Graph: graphName, Agent: "streamer", Input: "go"})
	if err != nil {
		b.Fatal(err)
	}
	var res troupe.RunResult
	if err := run.Get(ctx, &res); err != nil {
		b.Fatal(err)
	}
	return run.GetID()
}

func mean(ns []int) float64 {
	if len(ns) == 0 {
		return 0
	}
	t := 0
	for _, n := range ns {
		t += n
	}
	return float64(t) / float64(len(ns))
}

// streamWorker starts Troupe's workers for the bench graph with bus as
// their EventBus (none when nil), through StartWorkers, which serves the
// bus through its live feed and advertises the feed in the workers'
// identity; it returns the queue.
func streamWorker(b *testing.B, c client.Client, baseURL string, bus *events.Bus) string {
	b.Helper()
	m, err := model.New(model.Config{APIKey: "bench", BaseURL: baseURL, API: model.APIResponses})
	if err != nil {
		b.Fatal(err)
	}
	store, err := blob.Open(context.Background(), b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	queue := fmt.Sprintf("bench-stream-%d", time.Now().UnixNano())
	r, err := workflows.NewRunner(workflows.Config{Graphs: []*agents.Graph{benchGraph()}, Model: m, Store: store, Events: bus, Host: queue})
	if err != nil {
		b.Fatal(err)
	}
	stop, err := r.StartWorkers(c, queue, workerOptions())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(stop)
	return queue
}

// modelFirstToken posts the streamer's request to the scripted server as
// a streamed Responses call and returns the time to its first text delta.
func modelFirstToken(b *testing.B, baseURL string) time.Duration {
	b.Helper()
	body := []byte(`{"model":"scripted","instructions":"bench streamer","input":"go","stream":true,"store":false}`)
	start := time.Now()
	req, err := http.NewRequest(http.MethodPost, baseURL+"/responses", bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer bench")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if sc.Text() == "event: response.output_text.delta" {
			took := time.Since(start)
			// The rest, so the server has recorded the call before the
			// run's call is looked for.
			_, _ = io.Copy(io.Discard, resp.Body)
			return took
		}
	}
	b.Fatalf("the scripted server's stream (%s) held no text delta", resp.Status)
	return 0
}

// firstDelta runs the streamer with a follower that asks for deltas (with
// bus: the worker's own; without: through its live feed) and returns the
// time from the run's start to the first delta at the follower, the time
// from the model call's start to that delta, and the run's id.
func firstDelta(b *testing.B, c client.Client, srv *scripted.Server, queue string, bus *events.Bus) (sinceStart, sinceCall time.Duration, id string) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	skip := len(srv.Calls())
	start := time.Now()
	run, err := troupeclient.StartRun(ctx, c, queue, troupe.RunInput{Graph: graphName, Agent: "streamer", Input: "go"})
	if err != nil {
		b.Fatal(err)
	}
	var once sync.Once
	var first time.Time
	var text strings.Builder
	fctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = troupeclient.FollowLive(fctx, c, run.GetID(), 100*time.Millisecond, bus, func(e troupe.Event) {
			if e.Kind == troupe.EventTextDelta {
				once.Do(func() { first = time.Now() })
				text.WriteString(e.Detail)
			}
		}, troupeclient.WithDeltas())
	}()
	var res troupe.RunResult
	err = run.Get(ctx, &res)
	stop()
	<-done
	if err != nil {
		b.Fatal(err)
	}
	if first.IsZero() || text.String() != streamAnswer {
		b.Fatalf("the follower (bus %v) of %s got %d bytes of deltas; want the whole answer (%d bytes)", bus != nil, run.GetID(), text.Len(), len(streamAnswer))
	}
	var calls []scripted.Call
	for _, call := range srv.Calls()[skip:] {
		if call.Start.After(start) {
			calls = append(calls, call)
		}
	}
	if len(calls) != 1 {
		b.Fatalf("%d model calls for the run; want 1", len(calls))
	}
	return first.Sub(start), first.Sub(calls[0].Start), run.GetID()
}
