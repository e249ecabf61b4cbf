package e2e

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/troupe-dev/troupe"
	troupeclient "github.com/troupe-dev/troupe/client"
)

// TestClient drives runs through package client, as users' code, the CLI
// and the MCP server do: start, follow, result, describe, input, list; a
// start under an id twice is one run; cancel and terminate stop runs in
// flight with the errors Result documents.
func TestClient(t *testing.T) {
	parallel(t)
	if _, err := troupeclient.New(troupeclient.Config{}); err == nil {
		t.Error("New without a Temporal client: no error")
	}
	c := dial(t)
	srv, url := modelServer(t)
	queue := startWorker(t, c, url, "", nil)
	cl, err := troupeclient.New(troupeclient.Config{Temporal: c, TaskQueue: queue})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("start follow result", func(t *testing.T) {
		in := troupeclient.RunInput{Graph: "chain", Input: "pass it on"}
		run, err := cl.Start(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		var events []troupeclient.Event
		fctx, stop := context.WithCancel(ctx)
		followed := make(chan error, 1)
		go func() { followed <- run.Follow(fctx, func(e troupeclient.Event) { events = append(events, e) }) }()
		res, err := run.Result(ctx)
		stop()
		<-followed
		if err != nil || res.Agent != "c" {
			t.Fatalf("result %+v, %v; want the run to end at agent c", res, err)
		}
		// The run's own events tell its story: a hands off to b, b to c,
		// c answers; each agent's workflow tells its own.
		var story []string
		agentsSeen := map[string]bool{}
		for _, e := range events {
			if e.WorkflowID == run.ID() && e.Kind != troupe.EventRunStarted {
				story = append(story, string(e.Kind)+" "+e.Agent)
			} else if e.WorkflowID != run.ID() {
				agentsSeen[e.WorkflowID] = true
			}
		}
		want := "agent_started a,handoff a,agent_started b,handoff b,agent_started c,final_output c"
		if strings.Join(story, ",") != want || len(agentsSeen) != 3 {
			t.Errorf("followed the run's events %q and %d agent workflows; want %q and 3", strings.Join(story, ","), len(agentsSeen), want)
		}
		info, err := run.Describe(ctx)
		if err != nil || info.Status != "COMPLETED" || info.Graph != "chain" || info.TaskQueue != queue || info.Close == nil {
			t.Errorf("describe: %+v, %v", info, err)
		}
		if got, err := run.Input(ctx); err != nil || got.Graph != in.Graph || got.Input != in.Input {
			t.Errorf("input: %+v, %v; want %+v", got, err, in)
		}
		if evs, err := run.Events(ctx); err != nil || len(evs) != len(events) {
			t.Errorf("events: %d, %v; followed %d", len(evs), err, len(events))
		}
		list, err := cl.List(ctx, troupeclient.ListOptions{Limit: 1000})
		if err != nil || !slices.ContainsFunc(list, func(r troupeclient.RunInfo) bool { return r.WorkflowID == run.ID() }) {
			t.Errorf("list of %d runs (%v) lacks %s", len(list), err, run.ID())
		}
	})

	t.Run("start with an id twice", func(t *testing.T) {
		id := "client-idempotent-" + queue
		before := srv.Count("chain-a")
		first, err := cl.Start(ctx, troupeclient.RunInput{Graph: "chain", Input: "once"}, troupeclient.WithID(id))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := first.Result(ctx); err != nil {
			t.Fatal(err)
		}
		calls := srv.Count("chain-a") - before
		again, err := cl.Start(ctx, troupeclient.RunInput{Graph: "chain", Input: "twice"}, troupeclient.WithID(id))
		if err != nil || again.ID() != id {
			t.Fatalf("second start: %v, %v", again, err)
		}
		if res, err := again.Result(ctx); err != nil || res.Agent != "c" || srv.Count("chain-a")-before != calls {
			t.Errorf("second start: %+v, %v, %d model calls after %d; want the first run's result and no new call", res, err, srv.Count("chain-a")-before, calls)
		}
		if in, _ := again.Input(ctx); in.Input != "once" {
			t.Errorf("the run under %s has input %q; want the first start's", id, in.Input)
		}
		if _, err := cl.Start(ctx, troupeclient.RunInput{Graph: "chain", Input: "x"}, troupeclient.WithID("a/b")); err == nil || !strings.Contains(err.Error(), `holds a "/"`) {
			t.Errorf("an id with a slash: %v", err)
		}
	})

	// The crash graph's workers answer after 4 s: the runs are in flight
	// when they are stopped.
	stops := []struct {
		name string
		stop func(*troupeclient.Run) error
		want func(error) bool
	}{
		{"cancel", func(r *troupeclient.Run) error { return r.Cancel(ctx) },
			func(err error) bool { var ce *temporal.CanceledError; return errors.As(err, &ce) }},
		{"terminate", func(r *troupeclient.Run) error { return r.Terminate(ctx, "stopped by TestClient") },
			func(err error) bool { var te *temporal.TerminatedError; return errors.As(err, &te) }},
	}
	for _, tt := range stops {
		t.Run(tt.name, func(t *testing.T) {
			run, err := cl.Start(ctx, troupeclient.RunInput{Graph: "crash", Input: "parts"})
			if err != nil {
				t.Fatal(err)
			}
			started := make(chan struct{})
			var once sync.Once
			fctx, stop := context.WithCancel(ctx)
			defer stop()
			go func() {
				_ = run.Follow(fctx, func(e troupeclient.Event) {
					if e.Kind == troupe.EventAgentToolStarted {
						once.Do(func() { close(started) })
					}
				})
			}()
			select {
			case <-started:
			case <-ctx.Done():
				t.Fatal("no agent-as-tool started")
			}
			if err := tt.stop(run); err != nil {
				t.Fatal(err)
			}
			res, err := run.Result(ctx)
			if !tt.want(err) {
				t.Fatalf("after %s: %+v, %v", tt.name, res, err)
			}
			if info, err := run.Describe(ctx); err != nil || info.Close == nil {
				t.Errorf("after %s the run is %+v (%v)", tt.name, info, err)
			}
		})
	}
}
