package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.temporal.io/sdk/worker"

	"github.com/troupe-dev/troupe"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/local"
	"github.com/troupe-dev/troupe/workflows"
)

// TestSessionHostComesBack: a session's sandbox lives on host A, which
// goes down; the session's pause finds no worker of A's store within the
// host timeout, takes A as gone and loses the sandbox, and the next turn
// restores it on host B. Then B goes down the same way, and A comes back
// on the same disk (its store, and so its sandbox queue, are the ones it
// had): the next turn's agent restores the sandbox on A, and the session
// takes A as back: its pause suspends the sandbox there. Before, the
// session kept A as gone for good: it refused to send that pause's
// snapshot to A and took the sandbox as lost a third time, leaving its
// workspace on A to no one.
func TestSessionHostComesBack(t *testing.T) {
	parallel(t)
	c := dial(t)
	_, url := modelServer(t)
	queue := fmt.Sprintf("e2e-hostback-%d", queues.Add(1))
	blobs, err := blob.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { blobs.Close() })
	// host starts a worker of host name whose sandbox store is on disk
	// root, and returns what stops it.
	host := func(name, root string) func() {
		r := newRunner(t, url, model.APIResponses, name, func(cfg *workflows.Config) {
			lc, err := local.New(local.Config{Root: root})
			if err != nil {
				t.Fatal(err)
			}
			cfg.Graphs, cfg.Store, cfg.HostTimeout = sandboxGraphs("local"), blobs, 2*time.Second
			cfg.Sandboxes = map[string]sandbox.Client{"local": lc}
		})
		stop, err := r.StartWorkers(c, queue, worker.Options{Identity: name})
		if err != nil {
			t.Fatal(err)
		}
		return stop
	}
	rootA, rootB := t.TempDir(), t.TempDir()

	stopA := host("host-a", rootA)
	cl, err := troupeclient.New(troupeclient.Config{Temporal: c, TaskQueue: queue})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // a hang detector
	defer cancel()
	s, _, err := cl.CreateSession(ctx, troupeclient.SessionInput{Graph: "notes"})
	if err != nil {
		t.Fatal(err)
	}
	ask := func(msg string) {
		t.Helper()
		rec, err := s.Ask(ctx, msg, nil)
		if err != nil {
			t.Fatalf("%q: %v", msg, err)
		}
		if rec.Outcome != runtime.TurnAnswered || string(rec.Output) != `"saved"` {
			t.Fatalf("%q: turn %+v, want it answered %q", msg, rec, "saved")
		}
	}
	// pauseAndResume has the session suspend its sandbox, then resume.
	pauseAndResume := func() {
		t.Helper()
		for _, op := range []string{troupe.CommandPause, troupe.CommandResume} {
			if _, err := s.Command(ctx, troupeclient.SessionCommand{Op: op}); err != nil {
				t.Fatalf("%s: %v", op, err)
			}
		}
	}
	ask("note alpha") // on A
	stopA()
	stopB := host("host-b", rootB)
	pauseAndResume() // A is gone: lost
	ask("note beta") // restored on B
	stopB()
	stopA = host("host-a", rootA) // A is back, on its disk
	defer stopA()
	pauseAndResume()  // B is gone: lost
	ask("note gamma") // restored on A, taken as back
	pauseAndResume()  // suspended on A
	rec, err := s.Ask(ctx, "show", nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"alpha\nbeta\ngamma\n"`; string(rec.Output) != want {
		t.Errorf("the notes are %s, want %s", rec.Output, want)
	}

	var lost, restored []string
	suspended := 0
	for _, e := range runEvents(t, c, s.ID()) {
		switch e.Kind {
		case troupe.EventSandboxLost:
			lost = append(lost, e.Detail)
		case troupe.EventSandboxRestored:
			restored = append(restored, e.Detail)
		case troupe.EventSandboxSuspended:
			suspended++
		}
	}
	// Lost once on each host's going, and restored after each; the third
	// pause suspended the sandbox on A, where the agent had restored it.
	if len(lost) != 2 || suspended != 1 {
		t.Errorf("sandbox lost %d times (%q) and suspended %d times, want lost twice and suspended once", len(lost), lost, suspended)
	}
	if len(restored) != 3 {
		t.Errorf("sandbox restored %d times (%q), want 3 (on B, on A, after the last pause)", len(restored), restored)
	}
	if *historiesDir != "" {
		if _, err := s.Command(ctx, troupeclient.SessionCommand{Op: troupe.CommandStop}); err != nil {
			t.Fatal(err)
		}
		ids := map[string]bool{}
		for _, wf := range workflowTree(t, c, s.ID()) {
			ids[wf] = true
		}
		saveHistories(t, c, ids, *historiesDir, "hostback-session")
	}
}
