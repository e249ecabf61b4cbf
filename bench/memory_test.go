package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	troupeclient "github.com/troupe-dev/troupe/client"
	mem "github.com/troupe-dev/troupe/memory"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/model/scripted"
	"github.com/troupe-dev/troupe/workflows"
)

// BenchmarkMemoryTurnLatency measures a user-visible session turn with
// memory generation on against off, in the same worker and run: two
// sessions take turns in alternation, one of an agent with memory (each
// turn appends its rollout and signals the scope, whose phase 1 and
// phase 2 then run in the background on the same model server, each call
// taking 50 ms), one of the same agent without.
//
// Reported: off-ms/turn, on-ms/turn and on-ratio, the one over the other
// (goal ≈ 1.0: consolidation is off the turn's path).
func BenchmarkMemoryTurnLatency(b *testing.B) {
	const turns = 100
	c := temporalClient(b)
	sc := &scripted.Scenario{Rules: []scripted.Rule{
		{Name: "talk", Match: scripted.Match{Instructions: "bench talker"}, Respond: scripted.Respond{Text: "heard"}},
		{Name: "phase1", Match: scripted.Match{Instructions: "memory phase 1"}, Respond: scripted.Respond{DelayMS: 50,
			JSON: map[string]any{"rollout_slug": "bench-lesson", "rollout_summary": "A turn.", "raw_memory": "- a lesson"}}},
		{Name: "phase2", Match: scripted.Match{Instructions: "memory phase 2"}, Respond: scripted.Respond{DelayMS: 50,
			JSON: map[string]any{"memory_md": "## lessons\n- a lesson", "memory_summary": "- a lesson"}}},
	}}
	if err := sc.Validate(); err != nil {
		b.Fatal(err)
	}
	srv := scripted.New(sc)
	url, err := srv.Start("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	m, err := model.New(model.Config{APIKey: "bench", BaseURL: url, API: model.APIResponses})
	if err != nil {
		b.Fatal(err)
	}
	store, err := blob.Open(context.Background(), b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	queue := fmt.Sprintf("bench-%d", queues.Add(1))
	graphs := []*agents.Graph{
		agents.MustGraph("bench-memory-off", "talker", &agents.Agent{Name: "talker", Instructions: "bench talker"}),
		agents.MustGraph("bench-memory-on", "talker", &agents.Agent{Name: "talker", Instructions: "bench talker",
			Memory: &agents.MemoryConfig{Scope: fmt.Sprintf("bench-%d", time.Now().UnixNano()), Mode: agents.MemoryGenerateOnly}}),
	}
	r, err := workflows.NewRunner(workflows.Config{Graphs: graphs, Model: m, Store: store, Host: queue})
	if err != nil {
		b.Fatal(err)
	}
	stop, err := r.StartWorkers(c, queue, workerOptions())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(stop)
	cl, err := troupeclient.New(troupeclient.Config{Temporal: c, TaskQueue: queue})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var sums [2]time.Duration
	for i := 0; i < b.N; i++ {
		var sessions [2]*troupeclient.Session
		for j, g := range graphs {
			if sessions[j], _, err = cl.CreateSession(ctx, troupeclient.SessionInput{Graph: g.Name()}); err != nil {
				b.Fatal(err)
			}
		}
		for turn := 1; turn <= turns; turn++ {
			for j, s := range sessions {
				began := time.Now()
				res, err := s.Send(ctx, "hello "+strconv.Itoa(turn), true)
				took := time.Since(began)
				if err != nil || res.Record == nil || string(res.Record.Output) != `"heard"` {
					b.Fatalf("turn %d: %+v, %v", turn, res, err)
				}
				if turn > 5 { // past the first turns' warm-up
					sums[j] += took
				}
			}
		}
		for _, s := range sessions {
			if _, err := s.Command(ctx, troupeclient.SessionCommand{Op: troupe.CommandStop}); err != nil {
				b.Fatal(err)
			}
		}
	}
	if srv.Count("phase1") == 0 {
		b.Fatal("no phase 1 ran: memory generation was off")
	}
	n := float64(b.N * (turns - 5))
	b.ReportMetric(ms(sums[0])/n, "off-ms/turn")
	b.ReportMetric(ms(sums[1])/n, "on-ms/turn")
	b.ReportMetric(float64(sums[1])/float64(sums[0]), "on-ratio")
	b.ReportMetric(float64(srv.Count("phase1")), "phase1-calls")
	b.ReportMetric(float64(srv.Count("phase2")), "phase2-calls")
}

// BenchmarkMemoryPhase1Throughput measures phase 1 of 100 rollouts (one
// batch of the scope's workflow, 4 at a time, each model call taking
// 20 ms, then one phase 2) against the same model calls made directly by
// a plain loop, 4 at a time.
//
// Reported: workflow-ms (start to the batch's end, phase 2 included,
// polled every 5 ms), loop-ms and ratio.
func BenchmarkMemoryPhase1Throughput(b *testing.B) {
	const rollouts, parallel = 100, 4
	c := temporalClient(b)
	sc := &scripted.Scenario{Rules: []scripted.Rule{
		{Name: "phase1", Match: scripted.Match{Instructions: "memory phase 1"}, Respond: scripted.Respond{DelayMS: 20,
			JSON: map[string]any{"rollout_slug": "bench-lesson", "rollout_summary": "A turn.", "raw_memory": "- a lesson"}}},
		{Name: "phase2", Match: scripted.Match{Instructions: "memory phase 2"}, Respond: scripted.Respond{
			JSON: map[string]any{"memory_md": "## lessons\n- a lesson", "memory_summary": "- a lesson"}}},
	}}
	if err := sc.Validate(); err != nil {
		b.Fatal(err)
	}
	srv := scripted.New(sc)
	url, err := srv.Start("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	m, err := model.New(model.Config{APIKey: "bench", BaseURL: url, API: model.APIResponses})
	if err != nil {
		b.Fatal(err)
	}
	store, err := blob.Open(context.Background(), b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	queue := fmt.Sprintf("bench-%d", queues.Add(1))
	r, err := workflows.NewRunner(workflows.Config{Graphs: []*agents.Graph{benchGraph()}, Model: m, Store: store, Host: queue})
	if err != nil {
		b.Fatal(err)
	}
	stop, err := r.StartWorkers(c, queue, workerOptions())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(stop)
	ctx := context.Background()
	var wfSum, loopSum time.Duration
	for i := 0; i < b.N; i++ {
		scope := fmt.Sprintf("bench-p1-%d-%d", i, time.Now().UnixNano())
		var refs []mem.MemoryRollout
		var inputs []string
		for k := range rollouts {
			id := fmt.Sprintf("r%03d", k)
			data, _, _, err := mem.AppendLine(nil, mem.Line{Seq: 1, Workflow: id, Input: "hello " + id, Outcome: mem.OutcomeAnswered, Ended: time.Now()})
			if err != nil {
				b.Fatal(err)
			}
			if err := store.Put(ctx, mem.Key(scope, mem.RolloutPath(id)), data); err != nil {
				b.Fatal(err)
			}
			refs = append(refs, mem.MemoryRollout{ID: id, Lines: 1})
			lines, _ := mem.ParseLines(data)
			inputs = append(inputs, mem.Phase1Input(id, lines, 64<<10))
		}
		began := time.Now()
		_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: mem.MemoryWorkflowID(queue, scope), TaskQueue: queue}, mem.MemoryWorkflowName,
			mem.MemoryInput{Scope: scope, Settings: mem.MemorySettings{Parallel: parallel}, Pending: refs})
		if err != nil {
			b.Fatal(err)
		}
		// The batch's end: the workflow counts it (polled every 5 ms).
		for {
			var st mem.MemoryStatus
			v, err := c.QueryWorkflow(ctx, mem.MemoryWorkflowID(queue, scope), "", mem.MemoryQuery)
			if err == nil && v.Get(&st) == nil && st.Batches >= 1 {
				if st.Phase2s != 1 || st.LastError != "" {
					b.Fatalf("memory status %+v", st)
				}
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		wfSum += time.Since(began)
		_ = c.TerminateWorkflow(ctx, mem.MemoryWorkflowID(queue, scope), "", "benchmark done")

		began = time.Now()
		sem := make(chan struct{}, parallel)
		var wg sync.WaitGroup
		for _, in := range inputs {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				resp, err := m.Respond(ctx, model.Request{Model: "gpt-4.1-mini", Instructions: mem.Phase1Instructions, Input: []agents.Item{agents.UserMessage(in)}})
				if err == nil {
					_, err = mem.ParsePhase1(resp.Output[len(resp.Output)-1].Content)
				}
				if err != nil {
					b.Error(err)
				}
			}()
		}
		wg.Wait()
		loopSum += time.Since(began)
	}
	if n := srv.Count("phase1"); n != 2*rollouts*b.N {
		b.Fatalf("%d phase-1 calls, want %d", n, 2*rollouts*b.N)
	}
	n := float64(b.N)
	b.ReportMetric(ms(wfSum)/n, "workflow-ms")
	b.ReportMetric(ms(loopSum)/n, "loop-ms")
	b.ReportMetric(float64(wfSum)/float64(loopSum), "ratio")
}
