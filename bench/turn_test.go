package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/model/scripted"
	"github.com/troupe-dev/troupe/workflows"
)

// BenchmarkTurnOverhead measures what a Troupe turn costs over a plain
// Temporal activity. Troupe runs the looper agent (200 turns calling a
// no-op function tool, then a text answer: 201 model calls) with its
// default configuration (model calls as local activities) and with
// Config.ModelActivities, each on its own worker; the baseline is a
// workflow running 200 sequential no-op activities with the model
// activity's options, on the default configuration's worker. Each is
// measured twice, in the order baseline, default, activities, activities, default,
// baseline, so that a drift in the machine's load weighs on all alike.
//
// Reported, per turn or activity:
//   - baseline-ms/activity, troupe-ms/turn, activity-ms/turn: wall time on
//     the server, and ratio, activity-ratio: Troupe's over the baseline's;
//   - model-ms/turn: the scripted model server's own time per call (request
//     arrival to answer sent), and overhead-ms/turn,
//     activity-overhead-ms/turn: Troupe's time per turn minus it;
//   - direct-ms/call: the same 201 requests, with the same growing
//     transcript, sent through model.Model outside Temporal: the model call
//     as the client sees it, openai-go's encoding included;
//   - cpu-ratio, activity-cpu-ratio: the process's CPU time per turn over the
//     baseline's per activity, which other load on the machine disturbs
//     less than wall time does (it includes the scripted server's CPU);
//   - rss-MB, heap-MB: the process's resident set and, after a GC, the Go
//     heap in use, after the runs. Worker, Temporal server and scripted
//     model server share this process, so both count all three.
func BenchmarkTurnOverhead(b *testing.B) {
	c := temporalClient(b)
	srv, url := modelServer(b)
	queue := startWorker(b, c, registerBaseline, troupeWorker(b, url, nil))
	aqueue := startWorker(b, c, troupeWorker(b, url, func(cfg *workflows.Config) { cfg.ModelActivities = true }))
	warmUp(b, c, queue, true)
	warmUp(b, c, aqueue, false)

	var base, def, act loopStats
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		base.add(runBaseline(b, c, queue, baselineActivitiesName, loopTurns), loopTurns, 0)
		def.add(runLoop(b, c, srv, queue))
		act.add(runLoop(b, c, srv, aqueue))
		act.add(runLoop(b, c, srv, aqueue))
		def.add(runLoop(b, c, srv, queue))
		base.add(runBaseline(b, c, queue, baselineActivitiesName, loopTurns), loopTurns, 0)
	}
	b.StopTimer()
	rss, heap := memory()

	var direct time.Duration
	var directCalls int
	skip := len(srv.Calls())
	for i := 0; i < b.N; i++ {
		d, n := directLoop(b, url)
		direct, directCalls = direct+d, directCalls+n
	}
	directServer, _ := modelTime(srv, skip)
	directPerCall := ms(direct) / float64(directCalls)

	perActivity := base.wallPer()
	b.ReportMetric(perActivity, "baseline-ms/activity")
	b.ReportMetric(def.wallPer(), "troupe-ms/turn")
	b.ReportMetric(def.wallPer()/perActivity, "ratio")
	b.ReportMetric(def.overheadPer(), "overhead-ms/turn")
	b.ReportMetric(act.wallPer(), "activity-ms/turn")
	b.ReportMetric(act.wallPer()/perActivity, "activity-ratio")
	b.ReportMetric(act.overheadPer(), "activity-overhead-ms/turn")
	b.ReportMetric(def.modelPer(), "model-ms/turn")
	b.ReportMetric(directPerCall, "direct-ms/call")
	b.ReportMetric(def.cpuPer()/base.cpuPer(), "cpu-ratio")
	b.ReportMetric(act.cpuPer()/base.cpuPer(), "activity-cpu-ratio")
	b.ReportMetric(rss, "rss-MB")
	b.ReportMetric(heap, "heap-MB")
	b.Logf("baseline: %.2f ms/activity (CPU %.2f ms)", perActivity, base.cpuPer())
	b.Logf("troupe, default (local model calls): %.2f ms/turn (ratio %.2f; CPU %.2f ms, ratio %.2f); model %.2f ms/turn; overhead %.2f ms/turn",
		def.wallPer(), def.wallPer()/perActivity, def.cpuPer(), def.cpuPer()/base.cpuPer(), def.modelPer(), def.overheadPer())
	b.Logf("troupe, model calls as activities: %.2f ms/turn (ratio %.2f; CPU %.2f ms, ratio %.2f); model %.2f ms/turn; overhead %.2f ms/turn",
		act.wallPer(), act.wallPer()/perActivity, act.cpuPer(), act.cpuPer()/base.cpuPer(), act.modelPer(), act.overheadPer())
	b.Logf("model call outside Temporal: %.2f ms, of which %.2f ms in the scripted server", directPerCall, ms(directServer)/float64(directCalls))
	b.Logf("memory after the runs: RSS %.0f MB, Go heap in use %.0f MB (worker, server and model server together)", rss, heap)
}

// loopStats sums the samples of several runs.
type loopStats struct {
	sample
	turns int
	model time.Duration // the scripted server's time
}

func (l *loopStats) add(s sample, turns int, model time.Duration) {
	l.sample = l.sample.add(s)
	l.turns += turns
	l.model += model
}

func (l *loopStats) wallPer() float64     { return ms(l.wall) / float64(l.turns) }
func (l *loopStats) cpuPer() float64      { return ms(l.cpu) / float64(l.turns) }
func (l *loopStats) modelPer() float64    { return ms(l.model) / float64(l.turns) }
func (l *loopStats) overheadPer() float64 { return l.wallPer() - l.modelPer() }

// runLoop runs the looper once on queue and returns its sample, turns and
// the scripted server's time for them.
func runLoop(b *testing.B, c client.Client, srv *scripted.Server, queue string) (sample, int, time.Duration) {
	b.Helper()
	skip := len(srv.Calls())
	res, s := runTroupe(b, c, queue, "looper")
	if res.Turns != loopTurns+1 || res.ToolCalls != loopTurns {
		b.Fatalf("looper ran %d turns and %d tool calls, want %d and %d", res.Turns, res.ToolCalls, loopTurns+1, loopTurns)
	}
	model, calls := modelTime(srv, skip)
	if calls != res.Turns {
		b.Fatalf("the scripted server answered %d calls for %d turns", calls, res.Turns)
	}
	return s, res.Turns, model
}

// directLoop sends the looper's requests straight to the model, outside
// Temporal, growing the transcript as the agent loop does, and returns the
// time spent in Respond and the number of calls.
func directLoop(b *testing.B, baseURL string) (time.Duration, int) {
	b.Helper()
	m, err := model.New(model.Config{APIKey: "bench", BaseURL: baseURL, API: model.APIResponses})
	if err != nil {
		b.Fatal(err)
	}
	g := benchGraph()
	looper, err := g.Agent("looper")
	if err != nil {
		b.Fatal(err)
	}
	req := model.Request{Model: "gpt-4.1", Instructions: looper.Instructions, Tools: g.ToolSpecs(looper.Name)}
	input := []agents.Item{agents.UserMessage("go")}
	ctx := context.Background()
	var total time.Duration
	for n := 1; ; n++ {
		req.Input = input
		began := time.Now()
		resp, err := m.Respond(ctx, req)
		total += time.Since(began)
		if err != nil {
			b.Fatal(err)
		}
		input = append(input, resp.Output...)
		called := false
		for _, it := range resp.Output {
			if it.Type == agents.ItemFunctionCall {
				called = true
				input = append(input, agents.FunctionCallOutput(it.CallID, "ok"))
			}
		}
		if !called {
			if n != loopTurns+1 {
				b.Fatalf("direct loop ended after %d calls, want %d", n, loopTurns+1)
			}
			return total, n
		}
	}
}

// BenchmarkLongAgent runs one agent for 5,001 turns (5,000 calling a
// no-op tool, continuing as new every 500) and compares the cost of a
// turn late in the run with one early: the time from one model request to
// the next, over turns 10 to 59 against turns 4,950 to 4,999.
//
// "compacted" is the agent a long run needs: a Compaction capability
// bounds what the model is shown (marathonWindow items at most), and the
// runtime loads only that window, so a turn's cost should not grow with
// the run. "whole" sends the model the whole transcript every turn, so
// its requests grow to 15,000 items: a model's context would not hold it,
// and the growth is the request's size.
func BenchmarkLongAgent(b *testing.B) {
	c := temporalClient(b)
	srv, url := modelServer(b)
	queue := startWorker(b, c, troupeWorker(b, url, nil))
	warmUp(b, c, queue, false)
	for _, agent := range []struct{ name, agent string }{{"compacted", "compacted_marathoner"}, {"whole", "marathoner"}} {
		b.Run(agent.name, func(b *testing.B) { longAgent(b, c, srv, queue, agent.agent) })
	}
}

// longSpan is how many turns BenchmarkLongAgent times early and late.
const longSpan = 50

func longAgent(b *testing.B, c client.Client, srv *scripted.Server, queue, agent string) {
	var early, late time.Duration
	var earlyModel, lateModel time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		skip := len(srv.Calls())
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		res, err := troupeclient.Execute(ctx, c, queue, troupe.RunInput{Graph: graphName, Agent: agent, Input: "go"})
		cancel()
		if err != nil || res.Turns != marathonTurns+1 || string(res.Output) != fmt.Sprintf("%q", fmt.Sprintf("done after %d turns", marathonTurns+1)) {
			b.Fatalf("%s: %v, %+v", agent, err, res)
		}
		calls := srv.Calls()[skip:]
		span := func(from, to int) (wall, model time.Duration) {
			for k := from; k < to; k++ {
				wall += calls[k].Start.Sub(calls[k-1].Start)
				model += calls[k-1].End.Sub(calls[k-1].Start)
			}
			return wall, model
		}
		w, m := span(10, 10+longSpan)
		early, earlyModel = early+w, earlyModel+m
		w, m = span(marathonTurns-longSpan, marathonTurns)
		late, lateModel = late+w, lateModel+m
	}
	b.StopTimer()
	per := func(d time.Duration) float64 { return ms(d) / float64(longSpan*b.N) }
	b.ReportMetric(per(early), "early-ms/turn")
	b.ReportMetric(per(late), "late-ms/turn")
	b.ReportMetric(per(late)/per(early), "ratio")
	b.ReportMetric((per(late)-per(lateModel))/(per(early)-per(earlyModel)), "overhead-ratio")
	b.Logf("turns 10-%d: %.2f ms/turn (model server %.2f); turns %d-%d: %.2f ms/turn (model server %.2f); ratio %.2f, without the model server's time %.2f",
		9+longSpan, per(early), per(earlyModel), marathonTurns-longSpan, marathonTurns-1, per(late), per(lateModel), per(late)/per(early), (per(late)-per(lateModel))/(per(early)-per(earlyModel)))
}
