package bench

import (
	"context"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/workflows"
)

// BenchmarkTurnOverhead measures what a Troupe turn costs over a plain
// Temporal activity. Troupe runs the looper agent (200 turns calling a
// no-op function tool, then a text answer: 201 model calls) with its
// default configuration (model calls as regular activities) and with
// Config.LocalModelCalls; the baseline is a workflow running 200
// sequential no-op activities with the model activity's options, on the
// same worker as the default configuration.
//
// The model's own time is what the scripted server spent per call (request
// arrival to answer sent); overhead-ms/turn is Troupe's time per turn minus
// it. direct-ms/call is a loop of the same 201 requests, with the same
// growing transcript, sent through model.Model outside Temporal: the model
// call as the client sees it, openai-go's encoding included.
//
// Worker and server share this process, so rss-MB counts both, plus the
// benchmark's own scripted model server; heap-MB is the Go heap in use after
// a GC, of all of them.
func BenchmarkTurnOverhead(b *testing.B) {
	c := temporalClient(b)
	srv, url := modelServer(b)

	queue, stop := startWorker(b, c, registerBaseline, troupe(b, url, nil))
	warmUp(b, c, queue, true)
	b.ResetTimer()
	var base, def, defModel time.Duration
	var defTurns, defCalls int
	for i := 0; i < b.N; i++ {
		base += runBaseline(b, c, queue, baselineActivitiesName, loopTurns)
		skip := len(srv.Calls())
		res, took := runTroupe(b, c, queue, "looper")
		checkLoop(b, res)
		def += took
		defTurns += res.Turns
		mt, n := modelTime(srv, skip)
		defModel, defCalls = defModel+mt, defCalls+n
	}
	b.StopTimer()
	stop()

	lqueue, _ := startWorker(b, c, troupe(b, url, func(cfg *workflows.Config) { cfg.LocalModelCalls = true }))
	warmUp(b, c, lqueue, false)
	b.StartTimer()
	var local, localModel time.Duration
	var localTurns, localCalls int
	for i := 0; i < b.N; i++ {
		skip := len(srv.Calls())
		res, took := runTroupe(b, c, lqueue, "looper")
		checkLoop(b, res)
		local += took
		localTurns += res.Turns
		mt, n := modelTime(srv, skip)
		localModel, localCalls = localModel+mt, localCalls+n
	}
	b.StopTimer()
	rss, heap := memory()

	var direct time.Duration
	var directCalls int
	for i := 0; i < b.N; i++ {
		d, n := directLoop(b, url)
		direct, directCalls = direct+d, directCalls+n
	}

	perActivity := ms(base) / float64(b.N*loopTurns)
	perTurn := ms(def) / float64(defTurns)
	modelPerTurn := ms(defModel) / float64(defCalls)
	localPerTurn := ms(local) / float64(localTurns)
	localModelPerTurn := ms(localModel) / float64(localCalls)
	directPerCall := ms(direct) / float64(directCalls)

	b.ReportMetric(perActivity, "baseline-ms/activity")
	b.ReportMetric(perTurn, "troupe-ms/turn")
	b.ReportMetric(perTurn/perActivity, "ratio")
	b.ReportMetric(perTurn-modelPerTurn, "overhead-ms/turn")
	b.ReportMetric(localPerTurn, "local-ms/turn")
	b.ReportMetric(localPerTurn/perActivity, "local-ratio")
	b.ReportMetric(localPerTurn-localModelPerTurn, "local-overhead-ms/turn")
	b.ReportMetric(modelPerTurn, "model-ms/turn")
	b.ReportMetric(directPerCall, "direct-ms/call")
	b.ReportMetric(rss, "rss-MB")
	b.ReportMetric(heap, "heap-MB")
	b.Logf("baseline %.2f ms/activity; troupe %.2f ms/turn (ratio %.2f, model %.2f, overhead %.2f, over baseline %.2f); "+
		"local model calls %.2f ms/turn (ratio %.2f, model %.2f, overhead %.2f); direct model call %.2f ms; RSS %.0f MB, heap %.0f MB",
		perActivity, perTurn, perTurn/perActivity, modelPerTurn, perTurn-modelPerTurn, perTurn-modelPerTurn-perActivity,
		localPerTurn, localPerTurn/perActivity, localModelPerTurn, localPerTurn-localModelPerTurn, directPerCall, rss, heap)
}

func checkLoop(b *testing.B, res *workflows.RunResult) {
	b.Helper()
	if res.Turns != loopTurns+1 || res.ToolCalls != loopTurns {
		b.Fatalf("looper ran %d turns and %d tool calls, want %d and %d", res.Turns, res.ToolCalls, loopTurns+1, loopTurns)
	}
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
