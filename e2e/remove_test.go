package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/troupe-dev/troupe"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/local"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/lease"
	"github.com/troupe-dev/troupe/workflows/workflowstest"
)

// TestRemoveSession: a session goes with `RemoveSession` whatever its
// state — idle, paused, holding a live sandbox after a turn, in the
// middle of a turn (its agent terminated too), stuck on a
// graph no worker serves — and with it its workflows, its place in the
// manager's list, its sandboxes (the backend holds none after) and its
// blob data. An unknown id, and one removed already, are not found. With
// -histories, the manager's, the sessions' and their agents' histories
// are saved for the replay tests.
func TestRemoveSession(t *testing.T) {
	parallel(t)
	root := t.TempDir()
	var store *blob.Store
	c := dial(t)
	_, url := modelServer(t)
	saved := map[string]map[string]bool{} // by case
	queue := startWorker(t, c, url, model.APIResponses, func(cfg *workflows.Config) {
		cfg.Graphs = append(cfg.Graphs, sandboxGraphs("local")...)
		lc, err := local.New(local.Config{Root: root})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Sandboxes = map[string]sandbox.Client{"local": lc}
		store = cfg.Store
	})
	cl, err := troupeclient.New(troupeclient.Config{Temporal: c, TaskQueue: queue})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name string
		// make makes the session and returns its id.
		make func(t *testing.T) string
		// sandboxes is how many sandboxes the removal must remove.
		sandboxes int
		// ran is whether the session's workflow ran until removed (a
		// stuck one failed at its start, and stayed listed).
		ran bool
		// midTurn is whether a turn's agent runs when it is removed.
		midTurn bool
	}{
		{"idle", func(t *testing.T) string {
			s, _, err := cl.CreateSession(ctx, troupeclient.SessionInput{Graph: "notes"})
			if err != nil {
				t.Fatal(err)
			}
			return s.ID()
		}, 0, true, false},
		{"paused", func(t *testing.T) string {
			s, _, err := cl.CreateSession(ctx, troupeclient.SessionInput{Graph: "notes"})
			if err != nil {
				t.Fatal(err)
			}
			if e, err := s.Command(ctx, troupeclient.SessionCommand{Op: troupe.CommandPause}); err != nil || e.Status != runtime.SessionPaused {
				t.Fatalf("pause: %+v, %v", e, err)
			}
			return s.ID()
		}, 0, true, false},
		{"live sandbox", func(t *testing.T) string {
			s, _, err := cl.CreateSession(ctx, troupeclient.SessionInput{Graph: "notes"})
			if err != nil {
				t.Fatal(err)
			}
			if rec, err := s.Ask(ctx, "run: echo kept > f.txt", nil); err != nil || rec.Outcome != runtime.TurnAnswered {
				t.Fatalf("turn: %+v, %v", rec, err)
			}
			if left := workflowstest.Leftovers(t, root); len(left) != 2 {
				t.Fatalf("after a turn the backend holds %v, want the session's one workspace and its sidecar", left)
			}
			if keys, _, err := store.List(ctx, "transcripts/"+s.ID()+"/", 0); err != nil || len(keys) == 0 {
				t.Fatalf("after a turn the session has no transcript: %v, %v", keys, err)
			}
			return s.ID()
		}, 1, true, false},
		// A turn's agent ran its command and waits on the model (30 s).
		{"mid-turn", func(t *testing.T) string {
			s, _, err := cl.CreateSession(ctx, troupeclient.SessionInput{Graph: "notes"})
			if err != nil {
				t.Fatal(err)
			}
			slow, err := s.Send(ctx, "slow run: echo half > f.txt", false)
			if err != nil {
				t.Fatal(err)
			}
			agent := s.ID() + "/" + slow.Turn + "/0-notekeeper"
			for deadline := time.Now().Add(time.Minute); !activityDone(c, agent, lease.SandboxToolActivityName); time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the turn's command never ran")
				}
			}
			return s.ID()
		}, 1, true, true},
		// A session of a graph no worker serves (started directly, as a
		// manager from before graphs were checked at create did): its
		// workflow failed at once, its manager lists it idle for ever,
		// and no command reaches it.
		{"stuck", func(t *testing.T) string {
			id := fmt.Sprintf("session-nosuch-%d", os.Getpid())
			if _, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, troupe.SessionWorkflowName,
				troupe.SessionInput{Graph: "nosuch", Manager: troupe.SessionManagerIDFor(queue)}); err != nil {
				t.Fatal(err)
			}
			if err := c.SignalWorkflow(ctx, troupe.SessionManagerIDFor(queue), "", troupe.SessionChangedSignal,
				troupe.SessionEntry{ID: id, Graph: "nosuch", Status: runtime.SessionIdle}); err != nil {
				t.Fatal(err)
			}
			if err := c.GetWorkflow(ctx, id, "").Get(ctx, nil); err == nil {
				t.Fatal("a session of graph nosuch ran")
			}
			waitListed(t, cl, id)
			return id
		}, 0, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := tc.make(t)
			if tc.ran && !tc.midTurn {
				saved[tc.name] = map[string]bool{id: true}
				if tc.sandboxes > 0 {
					saved[tc.name][id+"/t1/0-notekeeper"] = true
				}
			}
			res, err := cl.RemoveSession(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Found || !res.Unlisted || slices.Contains(res.Terminated, id) != tc.ran || len(res.Sandboxes) != tc.sandboxes || len(res.Pending) != 0 {
				t.Errorf("removed %+v; want found, unlisted, %s terminated: %v, %d sandboxes removed, nothing pending", res, id, tc.ran, tc.sandboxes)
			}
			if tc.midTurn && !slices.Contains(res.Terminated, id+"/t1/0-notekeeper") {
				t.Errorf("removed %+v; want the turn's agent terminated too", res)
			}
			if tc.sandboxes > 0 && res.Blobs == 0 {
				t.Errorf("removed %+v; want its turn's blob data deleted", res)
			}
			list, err := cl.Sessions(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if slices.ContainsFunc(list, func(e troupeclient.SessionEntry) bool { return e.ID == id }) {
				t.Errorf("sessions ls still lists %s: %+v", id, list)
			}
			d, err := c.DescribeWorkflowExecution(ctx, id, "")
			if err != nil {
				t.Fatal(err)
			}
			if st := d.GetWorkflowExecutionInfo().GetStatus(); st == enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
				t.Errorf("the session's workflow is %s, want closed", st)
			}
			if left := workflowstest.Leftovers(t, root); len(left) != 0 {
				t.Errorf("the backend still holds %v", left)
			}
			for _, area := range []string{"transcripts/", "outputs/", "snapshots/", "events/"} {
				if keys, _, err := store.List(ctx, area+id+"/", 0); err != nil || len(keys) != 0 {
					t.Errorf("blob data left under %s%s/: %v, %v", area, id, keys, err)
				}
			}
			// Removed already: not found, and nothing done.
			again, err := cl.RemoveSession(ctx, id)
			if !errors.Is(err, troupeclient.ErrNoSession) || troupe.ErrorType(err) != troupe.ErrUnknownSession || strings.Contains(err.Error(), "removed already") != tc.ran || again.Found {
				t.Errorf("a second removal: %+v, %v; want not found (%s), removed already", again, err, troupe.ErrUnknownSession)
			}
		})
	}
	t.Run("unknown", func(t *testing.T) {
		res, err := cl.RemoveSession(ctx, "session-none-at-all")
		if !errors.Is(err, troupeclient.ErrNoSession) || troupe.ErrorType(err) != troupe.ErrUnknownSession || res.Found || len(res.Terminated) != 0 {
			t.Errorf("removing an unknown id: %+v, %v; want not found (%s)", res, err, troupe.ErrUnknownSession)
		}
	})
	t.Run("not a session", func(t *testing.T) {
		id := fmt.Sprintf("other-%d", os.Getpid())
		if _, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue + "-nobody"}, "not.a.session"); err != nil {
			t.Fatal(err)
		}
		res, err := cl.RemoveSession(ctx, id)
		if !errors.Is(err, troupeclient.ErrNoSession) || troupe.ErrorType(err) != troupe.ErrUnknownSession || res.Found || len(res.Terminated) != 0 {
			t.Errorf("removing a workflow that is not a session: %+v, %v; want not found (%s)", res, err, troupe.ErrUnknownSession)
		}
		d, err := c.DescribeWorkflowExecution(ctx, id, "")
		if err != nil || d.GetWorkflowExecutionInfo().GetStatus() != enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
			t.Errorf("the workflow that is not a session: %v, %v; want it left running", d.GetWorkflowExecutionInfo().GetStatus(), err)
		}
		_ = c.TerminateWorkflow(ctx, id, "", "test over")
	})
	if *historiesDir != "" {
		for name, ids := range saved {
			saveHistories(t, c, ids, *historiesDir, "removed-"+strings.ReplaceAll(name, " ", "-"))
		}
		saveHistories(t, c, map[string]bool{troupe.SessionManagerIDFor(queue): true}, *historiesDir, "session-manager")
	}
}

// TestRemoveSessionWithoutWorker: with the queue's only worker gone, a
// removal does not wait for one. It terminates the session's workflow
// at once and says what waits; the next worker's manager drops the
// session from its list. With -histories, the manager's history is saved
// for the replay tests.
func TestRemoveSessionWithoutWorker(t *testing.T) {
	parallel(t)
	c := dial(t)
	_, url := modelServer(t)
	queue := fmt.Sprintf("e2e-rm-%d-%d", os.Getpid(), queues.Add(1))
	start := func() func() {
		r := newRunner(t, url, model.APIResponses, queue, nil)
		stop, err := r.StartWorkers(c, queue, worker.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return stop
	}
	stop := start()
	cl, err := troupeclient.New(troupeclient.Config{Temporal: c, TaskQueue: queue})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, _, err := cl.CreateSession(ctx, troupeclient.SessionInput{Graph: "dealdesk"})
	if err != nil {
		t.Fatal(err)
	}
	kept, _, err := cl.CreateSession(ctx, troupeclient.SessionInput{Graph: "dealdesk"})
	if err != nil {
		t.Fatal(err)
	}
	stop()

	res, err := cl.RemoveSession(ctx, s.ID())
	if err != nil {
		t.Fatal(err)
	}
	if !res.Found || res.Unlisted || !slices.Contains(res.Terminated, s.ID()) || len(res.Pending) != 1 || !strings.Contains(res.Pending[0], "no worker serves task queue "+queue) {
		t.Errorf("removed without a worker: %+v; want its workflow terminated, and the rest said to wait for a worker", res)
	}
	d, err := c.DescribeWorkflowExecution(ctx, s.ID(), "")
	if err != nil {
		t.Fatal(err)
	}
	if st := d.GetWorkflowExecutionInfo().GetStatus(); st != enums.WORKFLOW_EXECUTION_STATUS_TERMINATED {
		t.Errorf("the session's workflow is %s, want terminated", st)
	}

	t.Cleanup(start())
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		list, err := cl.Sessions(ctx)
		if err == nil && len(list) == 1 && list[0].ID == kept.ID() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("with a worker back, sessions ls gives %+v, %v; want only %s", list, err, kept.ID())
		}
	}
	if *historiesDir != "" {
		manager := troupe.SessionManagerIDFor(queue)
		for deadline := time.Now().Add(time.Minute); !activityDone(c, manager, workflows.RemoveSessionDataActivityName); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the manager never removed the session's data")
			}
		}
		saveHistories(t, c, map[string]bool{manager: true}, *historiesDir, "session-manager-signalled")
	}
}

// TestCLISessionsRm: `troupe sessions rm` removes sessions (here one
// stopped, one idle) and says what it did; --json prints the results; an
// unknown id among them is reported as not found, with exit status 1.
func TestCLISessionsRm(t *testing.T) {
	parallel(t)
	home := t.TempDir()
	port := strconv.Itoa(freePort(t))
	dev := startCLI(t, home, "dev", "--port", port, "--ui-port", "-1")
	dev.waitLine(t, regexp.MustCompile(`^troupe: dev server up`))
	first := strings.TrimSpace(runCLI(t, home, "sessions", "new", "dealdesk"))
	second := strings.TrimSpace(runCLI(t, home, "sessions", "new", "dealdesk"))
	runCLI(t, home, "sessions", "stop", first)

	out := runCLI(t, home, "sessions", "rm", first)
	if !strings.Contains(out, "removed session "+first+": unlisted") {
		t.Errorf("sessions rm of a stopped session printed:\n%s", out)
	}
	rm := startCLI(t, home, "sessions", "rm", second, "session-none-at-all", "--json")
	if code := rm.wait(t); code != 1 {
		t.Errorf("sessions rm with an unknown id exited %d, want 1; stderr:\n%s", code, rm.errText())
	}
	var results []troupeclient.RemoveSessionResult
	if err := json.Unmarshal([]byte(rm.stdout.String()), &results); err != nil {
		t.Fatalf("sessions rm --json printed %q: %v", rm.stdout.String(), err)
	}
	if len(results) != 2 || results[0].ID != second || !results[0].Found || !results[0].Unlisted || !slices.Contains(results[0].Terminated, second) ||
		results[1].Found {
		t.Errorf("sessions rm --json: %+v; want %s removed and the unknown id not found", results, second)
	}
	if !strings.Contains(rm.errText(), "troupe: no session session-none-at-all") {
		t.Errorf("sessions rm of an unknown id said:\n%s", rm.errText())
	}
	if out := runCLI(t, home, "sessions", "ls"); !strings.Contains(out, "no sessions") {
		t.Errorf("sessions ls after rm:\n%s", out)
	}
}

// waitListed waits until the manager lists session id.
func waitListed(t *testing.T, cl *troupeclient.Client, id string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		list, err := cl.Sessions(context.Background())
		if err == nil && slices.ContainsFunc(list, func(e troupeclient.SessionEntry) bool { return e.ID == id }) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the manager never listed %s: %+v, %v", id, list, err)
		}
	}
}
