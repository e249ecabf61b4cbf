package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/troupe-dev/troupe"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/lease"
)

// TestSandboxRoutingByStore: two workers of one host on one task queue,
// each with its own sandbox root (two TROUPE_HOMEs): every sandbox command
// of a run reaches the worker that holds its workspace, so each run reads
// the file its manifest wrote, and no sandbox is ever taken as lost.
func TestSandboxRoutingByStore(t *testing.T) {
	parallel(t)
	c := dial(t)
	_, url := modelServer(t)
	queue := fmt.Sprintf("e2e-routing-%d", queues.Add(1))
	for range 2 {
		startWorkerOn(t, c, url, model.APIResponses, queue, func(cfg *workflows.Config) {
			cfg.Graphs = sandboxGraphs("local")
			cfg.Host = "one-host"
		})
	}
	for i := range 8 {
		res, err := runGraph(t, c, queue, troupe.RunInput{Graph: "recreate", Input: "go"})
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		var out string
		if err := json.Unmarshal(res.Output, &out); err != nil || !strings.HasPrefix(out, "risen") {
			t.Errorf("run %d read %q from its sandbox, want the manifest's \"risen\"", i, out)
		}
	}
}

// TestSandboxRerouted: worker A names its sandbox queue by hand, and only
// worker B, of another store on the same host, serves that queue (a
// second store's worker that joined it before A, say). The sandbox's
// first command reaches B, which refuses it as misrouted instead of
// answering "gone"; the run sends it on to the queue of A's store, by the
// identity in the sandbox's state, and every later activity of the
// sandbox goes there at once: the run reads its file, one
// sandbox_rerouted event, no sandbox lost.
func TestSandboxRerouted(t *testing.T) {
	parallel(t)
	c := dial(t)
	_, url := modelServer(t)
	queue := fmt.Sprintf("e2e-reroute-%d", queues.Add(1))
	a := twoStoresOneQueue(t, url, queue, c, c)

	// Two runs, each rerouted once: the replay tests' set
	// (v15-sandbox-reroute, recorded with -histories) holds both.
	for i := 1; i <= 2; i++ {
		rerouteRun(t, c, queue, a.Store().ID, fmt.Sprintf("rerouted-%d", i))
	}
}

// twoStoresOneQueue starts two runners of the sandbox graphs on one host,
// of two stores, A and B, sharing a sandbox queue named by hand
// (queue-sandboxes) that only B's worker serves: A's workers, on ca, take
// queue's workflows and activities and its store's identity queue; B's,
// on cb, only the shared sandbox queue, so that every sandbox's first
// call reaches B. It returns A.
func twoStoresOneQueue(t *testing.T, url, queue string, ca, cb client.Client) *workflows.Runner {
	t.Helper()
	byHand := queue + "-sandboxes"
	tweak := func(cfg *workflows.Config) {
		cfg.Graphs = sandboxGraphs("local")
		cfg.Host = "one-host"
		cfg.SandboxQueue = byHand
	}
	a, b := newRunner(t, url, model.APIResponses, "one-host", tweak), newRunner(t, url, model.APIResponses, "one-host", tweak)
	if a.Store().ID == "" || a.Store().ID == b.Store().ID {
		t.Fatalf("stores %q and %q: want two identities", a.Store().ID, b.Store().ID)
	}
	start := func(c client.Client, queue string, register func(worker.Worker)) {
		w := worker.New(c, queue, worker.Options{})
		register(w)
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
	}
	start(ca, queue, func(w worker.Worker) { a.Register(w) })
	start(ca, lease.IdentityQueue(a.Store().ID), func(w worker.Worker) { a.RegisterActivities(w) })
	start(cb, byHand, func(w worker.Worker) { b.RegisterActivities(w) })
	return a
}

// rerouteRun runs the recreate graph on queue, whose first sandbox
// command reaches a worker of another store, and checks that it was sent
// on to store once, and nothing lost; with -histories, it saves the
// run's histories under prefix.
func rerouteRun(t *testing.T, c client.Client, queue, store, prefix string) {
	t.Helper()
	run, err := troupeclient.StartRun(context.Background(), c, queue, troupe.RunInput{Graph: "recreate", Input: "go"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang detector
	defer cancel()
	var res troupe.RunResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	var out string
	if err := json.Unmarshal(res.Output, &out); err != nil || !strings.HasPrefix(out, "risen") {
		t.Errorf("the run read %q from its sandbox, want the manifest's \"risen\"", out)
	}
	rerouted := 0
	ids := map[string]bool{}
	for _, e := range runEvents(t, c, run.GetID()) {
		ids[e.WorkflowID] = true
		switch e.Kind {
		case troupe.EventSandboxRerouted:
			rerouted++
			if !strings.Contains(e.Detail, store) {
				t.Errorf("rerouted: %s; want it to name store %s", e.Detail, store)
			}
		case troupe.EventSandboxLost:
			t.Errorf("sandbox lost: %s", e.Detail)
		}
	}
	// The first command only: the snapshot and the stop went straight to
	// A's store.
	if rerouted != 1 {
		t.Errorf("%d sandbox_rerouted events, want 1", rerouted)
	}
	if *historiesDir != "" {
		saveHistories(t, c, ids, *historiesDir, prefix)
	}
}
