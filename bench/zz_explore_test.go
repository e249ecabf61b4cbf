package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
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
	regLA := func(w worker.Registry) { w.RegisterWorkflowWithOptions(actPlusLA, workflow.RegisterOptions{Name: "bench.ActPlusLA"}) }
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
	for round := 0; round < 2; round++ {
		q, stop := startWorker(b, c, registerBaseline, regLA)
		runBaseline(b, c, q, baselineActivitiesName, 1)
		d := runBaseline(b, c, q, baselineActivitiesName, loopTurns)
		d2 := runBaseline(b, c, q, "bench.ActPlusLA", loopTurns)
		stop()
		fmt.Printf("round %d baseline %.2f ms/act, act+LA %.2f\n", round, ms(d)/loopTurns, ms(d2)/loopTurns)
		for _, v := range vs {
			q, stop := startWorker(b, c, v.reg)
			runTroupe(b, c, q, "warm")
			res, d := runTroupe(b, c, q, "looper")
			stop()
			fmt.Printf("round %d %-20s %.2f ms/turn\n", round, v.name, ms(d)/float64(res.Turns))
		}
	}
}
