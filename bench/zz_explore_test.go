package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/devserver"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/workflows"
)

type fakeModel struct{}

func (fakeModel) Respond(_ context.Context, req model.Request) (*model.Response, error) {
	turns := 0
	for _, it := range req.Input {
		if it.Type == agents.ItemFunctionCall {
			turns++
		}
	}
	if req.Instructions != "bench looper" || turns >= loopTurns {
		return &model.Response{Output: []agents.Item{agents.AssistantMessage("done")}}, nil
	}
	return &model.Response{Output: []agents.Item{agents.FunctionCall(fmt.Sprintf("c%d", turns), "noop", `{"turn":"x"}`)}}, nil
}

func actPlusLA(ctx workflow.Context, n int) (int, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 5 * time.Minute, HeartbeatTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 10}})
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 30 * time.Second})
	for i := 0; i < n; i++ {
		if err := workflow.ExecuteActivity(ctx, baselineActivityName, i).Get(ctx, nil); err != nil {
			return i, err
		}
		if err := workflow.ExecuteLocalActivity(lctx, noopActivity, i).Get(ctx, nil); err != nil {
			return i, err
		}
	}
	return n, nil
}

func BenchmarkExplore(b *testing.B) {
	dc := map[string]any{}
	for _, kv := range strings.Fields(os.Getenv("EXPLORE_DC")) {
		k, v, _ := strings.Cut(kv, "=")
		switch v {
		case "true":
			dc[k] = true
		case "false":
			dc[k] = false
		default:
			var n int
			fmt.Sscan(v, &n)
			dc[k] = n
		}
	}
	srv, err := devserver.Start(context.Background(), devserver.Config{InMemory: true, UIPort: -1, DynamicConfig: dc})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Stop()
	c, err := client.Dial(client.Options{HostPort: srv.FrontendAddress(), Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	_, url := modelServer(b)
	mk := func(m model.Model, local bool, mem bool) func(worker.Registry) {
		var store *blob.Store
		if mem {
			store, _ = blob.Open(context.Background(), "mem://")
		} else {
			store, _ = blob.Open(context.Background(), b.TempDir())
		}
		if m == nil {
			m, _ = model.New(model.Config{APIKey: "x", BaseURL: url})
		}
		r, err := workflows.NewRunner(workflows.Config{Graphs: []*agents.Graph{benchGraph()}, Model: m, Store: store, LocalModelCalls: local})
		if err != nil {
			b.Fatal(err)
		}
		return r.Register
	}
	regLA := func(w worker.Registry) {
		w.RegisterWorkflowWithOptions(actPlusLA, workflow.RegisterOptions{Name: "bench.ActPlusLA"})
	}
	type variant struct {
		name string
		reg  func(worker.Registry)
	}
	vs := []variant{
		{"scripted-file", mk(nil, false, false)},
		{"fake-file", mk(fakeModel{}, false, false)},
		{"fake-mem", mk(fakeModel{}, false, true)},
		{"local-scripted-file", mk(nil, true, false)},
		{"local-fake-file", mk(fakeModel{}, true, false)},
		{"local-fake-mem", mk(fakeModel{}, true, true)},
	}
	if only := os.Getenv("EXPLORE_ONLY"); only != "" {
		var keep []variant
		for _, v := range vs {
			if v.name == only {
				keep = append(keep, v)
			}
		}
		vs = keep
	}
	type stat struct{ wall, cpu []float64 }
	stats := map[string]*stat{}
	add := func(name string, wall, cpu time.Duration, n int) {
		st := stats[name]
		if st == nil {
			st = &stat{}
			stats[name] = st
		}
		st.wall = append(st.wall, ms(wall)/float64(n))
		st.cpu = append(st.cpu, ms(cpu)/float64(n))
	}
	rounds := 3
	for round := 0; round < rounds; round++ {
		q, stop := startWorker(b, c, registerBaseline, regLA)
		runBaseline(b, c, q, baselineActivitiesName, 1)
		c0 := cpuTime()
		d := runBaseline(b, c, q, baselineActivitiesName, loopTurns)
		add("baseline", d, cpuTime()-c0, loopTurns)
		c0 = cpuTime()
		d = runBaseline(b, c, q, "bench.ActPlusLA", loopTurns)
		add("act+LA", d, cpuTime()-c0, loopTurns)
		stop()
		for _, v := range vs {
			q, stop := startWorker(b, c, v.reg)
			runTroupe(b, c, q, "warm")
			c0 := cpuTime()
			began := time.Now()
			res, d := runTroupe(b, c, q, "looper")
			add(v.name, d, cpuTime()-c0, res.Turns)
			if d > 5*time.Second {
				diagnose(c, res.WorkflowID, began)
				diagnose(c, res.WorkflowID+"/0-looper", began)
			}
			stop()
		}
	}
	for _, name := range append([]string{"baseline", "act+LA"}, func() []string {
		var n []string
		for _, v := range vs {
			n = append(n, v.name)
		}
		return n
	}()...) {
		st := stats[name]
		fmt.Printf("%-20s wall min %.2f all %.2f | cpu min %.2f all %.2f ms/turn\n", name, slices.Min(st.wall), st.wall, slices.Min(st.cpu), st.cpu)
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func diagnose(c client.Client, id string, began time.Time) {
	it := c.GetWorkflowHistory(context.Background(), id, "", false, 0)
	var prev time.Time
	var prevType string
	var last time.Time
	n := 0
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			fmt.Println("diag:", err)
			return
		}
		t := e.GetEventTime().AsTime()
		if n == 0 {
			fmt.Printf("diag %s: first event %s after client start\n", id, t.Sub(began))
		}
		if !prev.IsZero() && t.Sub(prev) > 500*time.Millisecond {
			fmt.Printf("diag %s: gap %s between event %d %s and %s\n", id, t.Sub(prev), e.GetEventId(), prevType, e.GetEventType())
		}
		prev, prevType, last = t, e.GetEventType().String(), t
		n++
	}
	fmt.Printf("diag %s: %d events, last at %s after client start; now %s\n", id, n, last.Sub(began), time.Since(began))
}
