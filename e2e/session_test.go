package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/examples/codereview"
	"github.com/troupe-dev/troupe/examples/dealdesk"
	"github.com/troupe-dev/troupe/internal/exampletest"
	"github.com/troupe-dev/troupe/memory"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/model/scripted"
	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/bwrap"
	"github.com/troupe-dev/troupe/runtime/sandbox/docker"
	"github.com/troupe-dev/troupe/runtime/sandbox/local"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/lease"
)

// A three-turn session on the embedded server, its worker a separate
// process and its model the scripted one over HTTP. The worker is
// SIGKILLed while the second turn waits on the model (its model holds
// that call until it dies, however slow the machine: killed during the
// command the call asks for, the worker would leave it to run again,
// at least once, which TestWorkerKilledMidCommand shows), and a new worker
// process takes over: the turn completes once, and the third turn finds
// the workspace intact, with the notes of both turns before it. Stopping
// the session through its manager leaves no workspace behind.
func TestSessionSurvivesWorkerKill(t *testing.T) {
	parallel(t)
	c := dial(t)
	_, url := modelServer(t)
	blobDir, queue := t.TempDir(), fmt.Sprintf("session-%d", os.Getpid())
	held := filepath.Join(t.TempDir(), "held")
	first := spawnWorker(t, url, blobDir, queue, envHoldModel+"=session notekeeper", envHoldModelUser+"=slow note", envHoldModelFile+"="+held)
	cl, err := troupeclient.New(troupeclient.Config{Temporal: c, TaskQueue: queue})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, entry, err := cl.CreateSession(ctx, troupeclient.SessionInput{Graph: "notes", Name: "notebook"})
	if err != nil {
		t.Fatal(err)
	}
	if entry.Name != "notebook" || entry.Status != runtime.SessionIdle {
		t.Errorf("created %+v", entry)
	}
	var seen []string
	rec, err := s.Ask(ctx, "note alpha", func(e troupeclient.Event) { seen = append(seen, e.Kind) })
	if err != nil {
		t.Fatal(err)
	}
	if rec.Outcome != runtime.TurnAnswered || string(rec.Output) != `"saved"` {
		t.Fatalf("first turn %+v", rec)
	}
	if got := strings.Join(seen, ","); !strings.Contains(got, troupe.EventSandboxProvisioned) || !strings.HasSuffix(got, troupe.EventFinal) {
		t.Errorf("the first turn's follower saw %s, want the sandbox provisioned and the answer last", got)
	}

	sent, err := s.Send(ctx, "slow note beta", false)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := os.Stat(held); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the slow turn's model call never came")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	spawnWorker(t, url, blobDir, queue)

	rec, err = s.Ask(ctx, "show", nil)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Turn != "t3" || rec.Outcome != runtime.TurnAnswered || string(rec.Output) != `"alpha\nbeta\n"` {
		t.Errorf("third turn %+v, want the notes of both turns before it", rec)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}

	answered := 0
	for _, r := range info.Recent {
		if r.Turn == sent.Turn && r.Outcome == runtime.TurnAnswered {
			answered++
		}
	}
	if info.Turns != 3 || answered != 1 {
		t.Errorf("session %+v; want 3 turns, %s answered once", info, sent.Turn)
	}
	list, err := cl.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range list {
		if e.ID == s.ID() {
			found = e.Turns == 3 && e.Name == "notebook" && e.Agent == "notekeeper"
		}
	}
	if !found {
		t.Errorf("the manager lists %+v, want the session after 3 turns", list)
	}

	if _, err := s.Command(ctx, troupeclient.SessionCommand{Op: troupe.CommandStop}); err != nil {
		t.Fatal(err)
	}
	end, err := s.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if end.Status != runtime.SessionStopped {
		t.Errorf("ended %+v", end)
	}
	if left := dirEntries(t, blobDir+"-sandboxes"); len(left) != 0 {
		t.Errorf("workspaces left after the session stopped: %v", left)
	}
}

// The deal desk as a session: the follow-up ("what if the discount were
// 25%?") goes to the coordinator, who answered the first message, with
// the conversation so far; it asks pricing again with the new terms and
// answers on that review. With -histories, the session's, its manager's
// and its agents' histories are saved for the replay tests.
func TestDealDeskSession(t *testing.T) {
	parallel(t)
	c := dial(t)
	ms, url := modelServer(t)
	queue := startWorker(t, c, url, model.APIResponses, nil)
	cl, err := troupeclient.New(troupeclient.Config{Temporal: c, TaskQueue: queue})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, _, err := cl.CreateSession(ctx, troupeclient.SessionInput{Graph: "dealdesk", Name: "acme"}, troupeclient.WithID(fmt.Sprintf("dealdesk-session-%d", os.Getpid())))
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{s.ID(): true}
	follow := func(e troupeclient.Event) { ids[e.WorkflowID] = true }
	first, err := s.Ask(ctx, "Review the Acme Corp deal", follow)
	if err != nil {
		t.Fatal(err)
	}
	if first.Agent != "coordinator" || !strings.Contains(string(first.Output), `"pricing_risk":"high"`) {
		t.Fatalf("first turn %+v", first)
	}
	again, err := s.Ask(ctx, "What if the discount were 25%?", follow)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := agents.Decode[dealdesk.Recommendation](again.Output)
	if err != nil {
		t.Fatalf("follow-up %+v: %v", again, err)
	}
	if again.Agent != "coordinator" || strings.Join(again.Path, ">") != "coordinator" || rec.PricingRisk != "medium" || rec.Decision != "approve" ||
		!strings.Contains(rec.Conditions[0], "25%") || !strings.Contains(rec.Summary, "a 25% discount") {
		t.Errorf("follow-up %+v: %+v; want the coordinator's answer on a new pricing review at 25%%", again, rec)
	}
	if ms.Requests("triage-hands-off") != 1 || ms.Requests("pricing-reviews-again") != 1 || ms.Requests("rollout-reviews") != 1 {
		t.Errorf("triage %d, pricing again %d, rollout %d: want the follow-up to skip triage and rollout",
			ms.Requests("triage-hands-off"), ms.Requests("pricing-reviews-again"), ms.Requests("rollout-reviews"))
	}
	// A fork goes on from the same conversation on its own.
	fork, fe, err := s.Fork(ctx, "acme at 20%")
	if err != nil {
		t.Fatal(err)
	}
	if fe.Turns != 2 || fe.Agent != "coordinator" || fe.Name != "acme at 20%" {
		t.Errorf("fork %+v", fe)
	}
	forkIDs := map[string]bool{fork.ID(): true}
	third, err := fork.Ask(ctx, "What if the discount were 20%?", func(e troupeclient.Event) { forkIDs[e.WorkflowID] = true })
	if err != nil {
		t.Fatal(err)
	}
	if third.Turn != "t3" || !strings.Contains(string(third.Output), "VP Sales approval for the 20% discount") {
		t.Errorf("the fork's turn %+v", third)
	}
	for _, x := range []*troupeclient.Session{s, fork} {
		if _, err := x.Command(ctx, troupeclient.SessionCommand{Op: troupe.CommandStop}); err != nil {
			t.Fatal(err)
		}
		if _, err := x.Result(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if *historiesDir != "" {
		saveHistories(t, c, ids, *historiesDir, "dealdesk-session")
		saveHistories(t, c, forkIDs, *historiesDir, "dealdesk-fork")
		saveHistories(t, c, map[string]bool{troupe.SessionManagerIDFor(queue): true}, *historiesDir, "session-manager")
	}
}

// A user's session outlives the machine's server: `troupe dev`, a
// session of the deal desk and its first turn through `troupe sessions`;
// then `troupe dev` stops (its embedded server with it) and starts again
// on the same SQLite file, and the follow-up is answered with the
// conversation so far.
func TestSessionSurvivesServerRestart(t *testing.T) {
	parallel(t)
	home := t.TempDir()
	port := strconv.Itoa(freePort(t))
	dev := startCLI(t, home, "dev", "--port", port, "--ui-port", "-1")
	dev.waitLine(t, regexp.MustCompile(`^troupe: dev server up`))
	id := strings.TrimSpace(runCLI(t, home, "sessions", "new", "dealdesk", "--name", "acme"))
	if !strings.HasPrefix(id, "session-dealdesk-") {
		t.Fatalf("sessions new printed %q, want the session's id", id)
	}
	if out := runCLI(t, home, "sessions", "send", id, "Review the Acme Corp deal"); !strings.Contains(out, "approve_with_conditions") {
		t.Fatalf("first turn printed:\n%s", out)
	}
	if err := dev.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := dev.wait(t); code != 0 {
		t.Fatalf("troupe dev exited %d:\n%s", code, dev.errText())
	}

	dev = startCLI(t, home, "dev", "--port", port, "--ui-port", "-1")
	dev.waitLine(t, regexp.MustCompile(`^troupe: dev server up`))
	out := runCLI(t, home, "sessions", "send", id, "What if the discount were 25%?")
	if !strings.Contains(out, "VP Sales approval for the 25% discount") || !strings.Contains(out, `"pricing_risk": "medium"`) {
		t.Errorf("the follow-up after the restart printed:\n%s", out)
	}
	var info troupeclient.SessionInfo
	if err := json.Unmarshal([]byte(runCLI(t, home, "sessions", "show", id, "--json")), &info); err != nil {
		t.Fatal(err)
	}
	if info.Turns != 2 || info.Agent != "coordinator" || info.Name != "acme" || len(info.Recent) != 2 || info.Recent[1].Outcome != runtime.TurnAnswered {
		t.Errorf("session after the restart: %+v", info)
	}
	var list []troupeclient.SessionEntry
	if err := json.Unmarshal([]byte(runCLI(t, home, "sessions", "ls", "--json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != id || list[0].Turns != 2 || list[0].Status != runtime.SessionIdle {
		t.Errorf("sessions ls: %+v", list)
	}
	runCLI(t, home, "sessions", "stop", id)
}

// sessionClient is a session client on a worker of its own (all test
// graphs, the notes graph on backend, with tweak), on the test's Temporal.
func sessionClient(t *testing.T, backend string, tweak func(*workflows.Config)) (*troupeclient.Client, *scripted.Server, client.Client) {
	t.Helper()
	c := dial(t)
	ms, url := modelServer(t)
	queue := startWorker(t, c, url, model.APIResponses, func(cfg *workflows.Config) {
		cfg.Graphs = append(cfg.Graphs, sandboxGraphs(backend)...)
		if tweak != nil {
			tweak(cfg)
		}
	})
	cl, err := troupeclient.New(troupeclient.Config{Temporal: c, TaskQueue: queue})
	if err != nil {
		t.Fatal(err)
	}
	return cl, ms, c
}

// The rollback policy on real sandboxes: a message sent while a turn
// waits on the model, after its command changed one file and made
// another, rolls the turn back; the next command finds the workspace as
// the turn before left it.
func TestSessionRollbackRestoresFiles(t *testing.T) {
	parallel(t)
	cl, _, c := sessionClient(t, "local", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, _, err := cl.CreateSession(ctx, troupeclient.SessionInput{Graph: "notes", Policy: runtime.PolicyRollback})
	if err != nil {
		t.Fatal(err)
	}
	if rec, err := s.Ask(ctx, "run: echo one > f.txt", nil); err != nil || rec.Outcome != runtime.TurnAnswered {
		t.Fatalf("first turn %+v, %v", rec, err)
	}
	slow, err := s.Send(ctx, "slow run: echo two > f.txt && echo new > g.txt", false)
	if err != nil {
		t.Fatal(err)
	}
	// The command's end is read from the agent's history: a query would
	// wait for the model call's workflow task to be extended (up to two
	// extensions, near 5 s), by when the slow answer could have come.
	agent := s.ID() + "/" + slow.Turn + "/0-notekeeper"
	for deadline := time.Now().Add(time.Minute); !activityDone(c, agent, lease.SandboxToolActivityName); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the slow turn's command never ran")
		}
	}
	rec, err := s.Ask(ctx, "run: cat f.txt; ls", nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(rec.Output) != `"one\nf.txt\n"` {
		t.Errorf("after the rollback the workspace shows %s, want f.txt as the first turn left it, and no g.txt", rec.Output)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := turnOf(info, slow.Turn); !ok || r.Outcome != runtime.TurnRolledBack {
		t.Errorf("turn %s: %+v, want rolled back", slow.Turn, r)
	}
	if _, err := s.Command(ctx, troupeclient.SessionCommand{Op: troupe.CommandStop}); err != nil {
		t.Fatal(err)
	}
}

// activityDone reports whether workflow id's history, as it stands, has
// an activity of type name that completed (false while the workflow does
// not exist yet).
func activityDone(c client.Client, id, name string) bool {
	scheduled := map[int64]bool{}
	it := c.GetWorkflowHistory(context.Background(), id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return false
		}
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == name {
			scheduled[e.GetEventId()] = true
		}
		if a := e.GetActivityTaskCompletedEventAttributes(); a != nil && scheduled[a.GetScheduledEventId()] {
			return true
		}
	}
	return false
}

// A turn that fails after changing the workspace loses nothing: the
// failed agent gives its sandbox back to the session as the failure left
// it, and the next turn finds its files. With -histories, the session's,
// its agents' and its manager's histories are saved for the replay tests.
func TestSessionFailedTurnKeepsFiles(t *testing.T) {
	parallel(t)
	cl, _, c := sessionClient(t, "local", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, _, err := cl.CreateSession(ctx, troupeclient.SessionInput{Graph: "notes"}, troupeclient.WithID(fmt.Sprintf("failed-turn-%d", os.Getpid())))
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{s.ID(): true}
	follow := func(e troupeclient.Event) { ids[e.WorkflowID] = true }
	if rec, err := s.Ask(ctx, "run: echo one > f.txt", follow); err != nil || rec.Outcome != runtime.TurnAnswered {
		t.Fatalf("first turn %+v, %v", rec, err)
	}
	failed, err := s.Ask(ctx, "loop run: echo x >> f.txt", follow)
	if err != nil {
		t.Fatal(err)
	}
	if failed.Outcome != runtime.TurnFailed || failed.ErrorType != troupe.ErrMaxTurns {
		t.Fatalf("the looping turn: %+v; want it failed with %s", failed, troupe.ErrMaxTurns)
	}
	rec, err := s.Ask(ctx, "run: wc -l < f.txt", follow)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(`"%d\n"`, 1+agents.DefaultMaxTurns); string(rec.Output) != want {
		t.Errorf("after the failed turn wc -l reads %s, want %s: the first line and one per turn of the failed agent", rec.Output, want)
	}
	if _, err := s.Command(ctx, troupeclient.SessionCommand{Op: troupe.CommandStop}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Result(ctx); err != nil {
		t.Fatal(err)
	}
	if *historiesDir != "" {
		saveHistories(t, c, ids, *historiesDir, "failed-turn")
	}
}

// turnOf is turn id's record among the session's recent turns.
func turnOf(info troupeclient.SessionInfo, id string) (troupeclient.TurnRecord, bool) {
	for _, r := range info.Recent {
		if r.Turn == id {
			return r, true
		}
	}
	return troupeclient.TurnRecord{}, false
}

// Switch backend mid-conversation, docker → bwrap → docker: every file
// of the workspace is byte-identical on each backend (checksums of a
// random file and a nested one), and the conversation goes on.
func TestSessionSwitchDockerBwrap(t *testing.T) {
	parallel(t)
	dockerRoot, bwrapRoot := t.TempDir(), t.TempDir()
	dc, err := docker.New(docker.Config{Root: dockerRoot, Image: docker.BusyboxImage})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dc.Close() })
	if err := dc.Ping(context.Background()); err != nil {
		t.Fatalf("the Docker Engine does not answer (run scripts/setup.sh): %v", err)
	}
	if err := dc.BuildImage(context.Background(), docker.BuildOptions{Kind: "busybox", Name: docker.BusyboxImage}); err != nil {
		t.Fatal(err)
	}
	bc, err := bwrap.New(bwrap.Config{Root: bwrapRoot})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bc.Close() })
	cl, _, _ := sessionClient(t, "docker", func(cfg *workflows.Config) {
		cfg.Sandboxes["docker"], cfg.Sandboxes["bwrap"] = dc, bc
	})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	s, _, err := cl.CreateSession(ctx, troupeclient.SessionInput{Graph: "notes"})
	if err != nil {
		t.Fatal(err)
	}
	const sums = "sha256sum blob.bin d/e/x.txt"
	first, err := s.Ask(ctx, "run: head -c 300000 /dev/urandom > blob.bin && mkdir -p d/e && printf 'a\\tb\\n' > d/e/x.txt && "+sums, nil)
	if err != nil || first.Outcome != runtime.TurnAnswered || !strings.Contains(string(first.Output), "blob.bin") {
		t.Fatalf("first turn %+v, %v", first, err)
	}
	backendOf := func() string {
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Sandboxes) != 1 {
			t.Fatalf("sandboxes %+v", info.Sandboxes)
		}
		return info.Sandboxes[0].Backend
	}
	if b := backendOf(); b != "docker" {
		t.Fatalf("first turn on %q, want docker", b)
	}
	for _, to := range []string{"bwrap", "docker"} {
		if _, err := s.SwitchBackend(ctx, to); err != nil {
			t.Fatal(err)
		}
		rec, err := s.Ask(ctx, "run: "+sums, nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(rec.Output) != string(first.Output) {
			t.Errorf("on %s the checksums are %s, want %s", to, rec.Output, first.Output)
		}
		if b := backendOf(); b != to {
			t.Errorf("after switching to %s the workspace is on %q", to, b)
		}
	}
	if _, err := s.Command(ctx, troupeclient.SessionCommand{Op: troupe.CommandStop}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Result(ctx); err != nil {
		t.Fatal(err)
	}
	if left := dirEntries(t, bwrapRoot); len(left) != 0 {
		t.Errorf("bwrap workspaces left: %v", left)
	}
	if out, err := exec.Command("docker", "ps", "-aq", "--filter", "label=troupe.workflow="+s.ID()).Output(); err != nil || strings.TrimSpace(string(out)) != "" {
		t.Errorf("containers of the session left: %q, %v", out, err)
	}
}

// sessionScale is how many turns TestSessionScale's session takes and
// the worker's ContinueAfterEvents: 200 turns on a bound of 100 events
// continue the session and its manager as new many times each (the
// session about every 6 turns; today's runs also right after the last
// turn, whose news must reach the manager all the same); -scale takes
// 2,000 on 1,000.
func sessionScale() (turns, bound int) {
	if *fullScale {
		return 2000, 1000
	}
	return 200, 100
}

// A session of 200 turns (2,000 with -scale), each with a 200 KB tool
// output, completes on the embedded server; its real histories stay
// within Temporal's limits: the session continues as new on its bound
// (its queue of messages carried), no history of its runs nears the
// event or size limits, and no payload nears the 2 MB limit (the outputs
// go to the blob store by reference). No run continues as new before its
// news to the manager went out (the server drops the signals of a closed
// run), so the manager lists the session as it stands. With -histories,
// the manager's and three of the session's runs are saved for the replay
// tests (v14-news-before-continue).
func TestSessionScale(t *testing.T) {
	parallelLong(t) // long and on its own worker
	sessionTurns, bound := sessionScale()
	cl, _, c := sessionClient(t, "local", func(cfg *workflows.Config) { cfg.ContinueAfterEvents = bound })
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute) // a hang detector
	defer cancel()
	s, _, err := cl.CreateSession(ctx, troupeclient.SessionInput{Graph: "chatter"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= sessionTurns; i++ {
		if _, err := s.Send(ctx, fmt.Sprintf("msg %d", i), false); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	var info troupeclient.SessionInfo
	for {
		if info, err = s.Info(ctx); err != nil {
			t.Fatal(err)
		}
		if info.Turns == sessionTurns {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%d turns after 15 minutes", info.Turns)
		}
		time.Sleep(time.Second)
	}
	last := info.Recent[len(info.Recent)-1]
	if last.Turn != fmt.Sprintf("t%d", sessionTurns) || string(last.Output) != fmt.Sprintf(`"ok %d"`, sessionTurns) {
		t.Errorf("last turn %+v", last)
	}
	for _, r := range info.Recent {
		if r.Outcome != runtime.TurnAnswered {
			t.Errorf("turn %s: %s %s", r.Turn, r.Outcome, r.Error)
		}
	}
	// The session's runs, newest first, and one turn's agent.
	runs, largest, largestBytes, largestPayload := 0, 0, 0, 0
	// unsent counts the signals (the session's news to its manager) that
	// a run of the session sent and the server never took: a run that
	// closes first has its signals dropped.
	unsent := 0
	measure := func(id, runID string) (next string) {
		events, bytes := 0, 0
		signals := map[int64]bool{}
		it := c.GetWorkflowHistory(ctx, id, runID, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			if e.GetSignalExternalWorkflowExecutionInitiatedEventAttributes() != nil {
				signals[e.GetEventId()] = true
			}
			if a := e.GetExternalWorkflowExecutionSignaledEventAttributes(); a != nil {
				delete(signals, a.GetInitiatedEventId())
			}
			if e.GetWorkflowExecutionContinuedAsNewEventAttributes() != nil {
				unsent += len(signals)
			}
			events++
			n := proto.Size(e)
			bytes += n
			largestPayload = max(largestPayload, n)
			if a := e.GetWorkflowExecutionStartedEventAttributes(); a != nil {
				next = a.GetContinuedExecutionRunId()
			}
		}
		largest, largestBytes = max(largest, events), max(largestBytes, bytes)
		return next
	}
	var sessionRuns []string // the earlier ones, newest first
	for runID := ""; ; runs++ {
		prev := measure(s.ID(), runID)
		if prev == "" {
			runs++
			break
		}
		runID = prev
		sessionRuns = append(sessionRuns, prev)
	}
	measure(fmt.Sprintf("%s/t%d/0-chatter", s.ID(), sessionTurns/2), "")
	// The manager took the session's news of every turn: it continued as
	// new along the way, carrying its registry in blob pages, and lists
	// the session as it stands.
	mgr := troupe.SessionManagerIDFor(cl.TaskQueue())
	var mgrRuns []string // newest first
	for runID := ""; ; {
		it := c.GetWorkflowHistory(ctx, mgr, runID, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if runID == "" {
			d, err := c.DescribeWorkflowExecution(ctx, mgr, "")
			if err != nil {
				t.Fatal(err)
			}
			runID = d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
		}
		mgrRuns = append(mgrRuns, runID)
		if runID = e.GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId(); runID == "" {
			break
		}
	}
	// The session's news of its last turn reaches the manager after the
	// session has it: wait for it, a minute at most (a hang detector).
	var listed []troupeclient.SessionEntry
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if listed, err = cl.Sessions(ctx); err != nil {
			t.Fatal(err)
		}
		if len(listed) != 1 || listed[0].Turns == sessionTurns || time.Now().After(deadline) {
			break
		}
	}
	if len(mgrRuns) < 2 || len(listed) != 1 || listed[0].ID != s.ID() || listed[0].Turns != sessionTurns {
		t.Errorf("the manager ran %d runs and lists %+v; want it continued as new, listing the session at %d turns", len(mgrRuns), listed, sessionTurns)
	}
	if *historiesDir != "" && len(mgrRuns) >= 3 {
		// A run that read its registry from pages and saved it in pages.
		index := openIndex(t, *historiesDir)
		index.files["scale-manager.json"] = mgr
		writeHistory(t, c, mgr, mgrRuns[1], filepath.Join(*historiesDir, "scale-manager.json"))
		index.save(t)
	}
	if *historiesDir != "" && len(sessionRuns) >= 3 {
		// Runs of the session that continued as new after their turns'
		// news (v14-news-before-continue).
		index := openIndex(t, *historiesDir)
		for i, runID := range sessionRuns[:3] {
			file := fmt.Sprintf("scale-session-%d.json", i+1)
			index.files[file] = s.ID()
			writeHistory(t, c, s.ID(), runID, filepath.Join(*historiesDir, file))
		}
		index.save(t)
	}
	t.Logf("%d turns in %d runs of the session; the largest history holds %d events, %d bytes; the largest event is %d bytes",
		sessionTurns, runs, largest, largestBytes, largestPayload)
	if unsent > 0 {
		t.Errorf("the session's runs continued as new before %d of their signals to the manager went out: that news was lost", unsent)
	}
	if runs < 3 || largest > 2*bound || largestBytes > 4<<20 || largestPayload > 512<<10 {
		t.Errorf("%d runs; largest history %d events, %d bytes; largest event %d bytes: want several runs of at most %d events and 4 MB, no event over 512 KB (Temporal's limits: 51,200 events, 50 MB, 2 MB)",
			runs, largest, largestBytes, largestPayload, 2*bound)
	}
	if _, err := s.Command(ctx, troupeclient.SessionCommand{Op: troupe.CommandStop}); err != nil {
		t.Fatal(err)
	}
}

// The code review as a session: the review, then "now fix the finding in
// auth/login.go and show the diff" goes from the coordinator to the fixer,
// who changes the file in its workspace and answers with the diff; the
// next message finds the change there (the session keeps the fixer's
// workspace between turns).
func TestCodeReviewSession(t *testing.T) {
	parallel(t)
	c := dial(t)
	repo := exampletest.ReviewRepo(t)
	_, url := modelServer(t)
	sandboxes := t.TempDir()
	queue := startWorker(t, c, url, model.APIResponses, func(cfg *workflows.Config) {
		lc, err := local.New(local.Config{Root: sandboxes, Policy: sandbox.Policy{AllowedRoots: []string{repo}}})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Sandboxes = map[string]sandbox.Client{local.Backend: lc}
	})
	cl, err := troupeclient.New(troupeclient.Config{Temporal: c, TaskQueue: queue})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out := filepath.Join(t.TempDir(), "review")
	s, _, err := cl.CreateSession(ctx, troupeclient.SessionInput{Graph: "codereview",
		Vars: map[string]string{codereview.VarRepo: repo, codereview.VarRef: "HEAD", codereview.VarOut: out}})
	if err != nil {
		t.Fatal(err)
	}
	review, err := s.Ask(ctx, "Review this change", nil)
	if err != nil || review.Outcome != runtime.TurnAnswered {
		t.Fatalf("review %+v, %v", review, err)
	}
	exampletest.CheckReview(t, review.Output, out)
	var loaded []string
	fix, err := s.Ask(ctx, "Now fix the finding in auth/login.go and show the diff", func(e troupeclient.Event) {
		if e.Kind == troupe.EventToolCalled && e.Tool == "load_skill" {
			loaded = append(loaded, e.Detail)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded) != 1 || !strings.Contains(loaded[0], "review-go") {
		t.Errorf("the fixer loaded skills %q; want review-go, once, on demand", loaded)
	}
	var diff string
	if err := json.Unmarshal(fix.Output, &diff); err != nil || fix.Agent != "fixer" || strings.Join(fix.Path, ">") != "coordinator>fixer" ||
		!strings.Contains(diff, "-\tpassword := \"hunter2\"") || !strings.Contains(diff, "+\tpassword := os.Getenv(\"APP_SECRET\")") {
		t.Fatalf("the fix %+v (%v); want the fixer's diff of auth/login.go", fix, err)
	}
	shown, err := s.Ask(ctx, "Show auth/login.go", nil)
	if err != nil {
		t.Fatal(err)
	}
	if shown.Agent != "fixer" || !strings.Contains(string(shown.Output), `password := os.Getenv(\"APP_SECRET\")`) {
		t.Errorf("the next turn %+v; want the fixer, its workspace with the fix", shown)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Sandboxes) != 1 || info.Sandboxes[0].Agent != "fixer" {
		t.Errorf("the session keeps %+v; want the fixer's workspace", info.Sandboxes)
	}
	// A recursive removal waits for the user (FixerApproval): the session
	// is waiting until the user approves, and the turn then goes on.
	type asked struct {
		rec troupeclient.TurnRecord
		err error
	}
	cleaned := make(chan asked, 1)
	go func() {
		rec, err := s.Ask(ctx, "Clean build/", nil)
		cleaned <- asked{rec, err}
	}()
	var waiting []troupeclient.Approval
	for deadline := time.Now().Add(time.Minute); len(waiting) == 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the removal never waited for approval")
		}
		waiting, _ = s.Approvals(ctx)
	}
	if w := waiting[0]; w.Agent != "fixer" || w.Tool != "exec_command" || !strings.Contains(w.Arguments, "rm -rf repo/build/") {
		t.Errorf("waiting %+v", w)
	}
	if info, err := s.Info(ctx); err != nil || info.Status != runtime.SessionWaiting {
		t.Errorf("the session is %s (%v) while the removal waits", info.Status, err)
	}
	if _, err := s.Decide(ctx, troupeclient.Decision{ID: waiting[0].ID, Approve: true}); err != nil {
		t.Fatal(err)
	}
	if got := <-cleaned; got.err != nil || string(got.rec.Output) != `"Removed build/."` {
		t.Errorf("the cleaning turn %+v, %v", got.rec, got.err)
	}
	if _, err := s.Command(ctx, troupeclient.SessionCommand{Op: troupe.CommandStop}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Result(ctx); err != nil {
		t.Fatal(err)
	}
	if left := dirEntries(t, sandboxes); len(left) != 0 {
		t.Errorf("workspaces left: %v", left)
	}
}

// A fork on real sandboxes: after the fork, each branch writes its own
// file and note; each then sees its own files and conversation and not
// the other's, and the fork's first command restored the workspace as it
// stood at the fork.
func TestSessionForkDiverges(t *testing.T) {
	parallel(t)
	cl, _, _ := sessionClient(t, "local", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	src, _, err := cl.CreateSession(ctx, troupeclient.SessionInput{Graph: "notes"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.Ask(ctx, "note shared", nil); err != nil {
		t.Fatal(err)
	}
	fork, _, err := src.Fork(ctx, "branch")
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		s    *troupeclient.Session
		note string
	}{{src, "note main only"}, {fork, "note branch only"}} {
		if rec, err := step.s.Ask(ctx, step.note, nil); err != nil || rec.Outcome != runtime.TurnAnswered {
			t.Fatalf("%s: %+v, %v", step.note, rec, err)
		}
	}
	for _, tc := range []struct {
		s    *troupeclient.Session
		want string
	}{{src, `"shared\nmain only\n"`}, {fork, `"shared\nbranch only\n"`}} {
		rec, err := tc.s.Ask(ctx, "show", nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(rec.Output) != tc.want {
			t.Errorf("session %s shows %s, want %s", tc.s.ID(), rec.Output, tc.want)
		}
		info, err := tc.s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var said []string
		for _, r := range info.Recent {
			said = append(said, r.Message)
		}
		other := "note branch only"
		if tc.s == fork {
			other = "note main only"
		}
		if len(said) != 3 || said[0] != "note shared" || slices.Contains(said, other) {
			t.Errorf("session %s's turns %q: want its own three, not %q", tc.s.ID(), said, other)
		}
	}
	for _, s := range []*troupeclient.Session{src, fork} {
		if _, err := s.Command(ctx, troupeclient.SessionCommand{Op: troupe.CommandStop}); err != nil {
			t.Fatal(err)
		}
	}
}

// The deal desk remembers: a first session reviews the Acme Corp deal and
// stops; the coordinator's memory workflow consolidates the review in the
// background (phase 1, then phase 2, on the scripted model); a second
// session's coordinator gets the decision in its instructions and says what
// was decided before, while a review of another customer says nothing of
// Acme's.
func TestDealDeskRemembers(t *testing.T) {
	parallel(t)
	c := dial(t)
	ms, url := modelServer(t)
	var store *blob.Store
	queue := startWorker(t, c, url, model.APIResponses, func(cfg *workflows.Config) {
		cfg.Memory = memory.MemoryOptions{IdleTimeout: 2 * time.Second}
		store = cfg.Store
	})
	cl, err := troupeclient.New(troupeclient.Config{Temporal: c, TaskQueue: queue})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	review := func(deal string) dealdesk.Recommendation {
		t.Helper()
		s, _, err := cl.CreateSession(ctx, troupeclient.SessionInput{Graph: "dealdesk"})
		if err != nil {
			t.Fatal(err)
		}
		rec, err := s.Ask(ctx, "Review the "+deal+" deal", nil)
		if err != nil {
			t.Fatal(err)
		}
		out, err := agents.Decode[dealdesk.Recommendation](rec.Output)
		if err != nil {
			t.Fatalf("review of %s: %+v: %v", deal, rec, err)
		}
		if _, err := s.Command(ctx, troupeclient.SessionCommand{Op: troupe.CommandStop}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	first := review("Acme Corp")
	if strings.Contains(first.Summary, "Earlier for") {
		t.Fatalf("the first review remembers something: %q", first.Summary)
	}
	// The memory workflow ends once idle, its phases done.
	st := memoryDone(ctx, t, c, memory.MemoryWorkflowID(queue, dealdesk.MemoryScope))
	if st.Phase2s < 1 || st.LastError != "" || ms.Count("dealdesk-memory-phase1") != 1 {
		t.Fatalf("memory %+v after %d phase-1 calls; want a phase 2 and no error", st, ms.Count("dealdesk-memory-phase1"))
	}
	summary, err := store.Get(ctx, memory.Key(dealdesk.MemoryScope, memory.SummaryPath))
	want := "- Acme Corp: approve_with_conditions (Pricing risk is high and rollout risk is medium; approve only once both blockers are resolved.)"
	if err != nil || !strings.Contains(string(summary), want) {
		t.Fatalf("memory summary %q, %v; want the line %q", summary, err, want)
	}
	again := review("Acme Corp")
	if !strings.HasSuffix(again.Summary, " Earlier for Acme Corp: approve_with_conditions (Pricing risk is high and rollout risk is medium; approve only once both blockers are resolved.)") {
		t.Errorf("the second review of Acme says %q; want what was decided before", again.Summary)
	}
	if other := review("Globex"); strings.Contains(other.Summary, "Earlier") {
		t.Errorf("a review of Globex says %q; want nothing of Acme's", other.Summary)
	}
}

// The code review remembers what the user taught it: in a first session
// the review finds a hard-coded credential (the security reviewer greps
// with the pattern file of its review-security skill, materialised in its
// workspace), and the user dismisses it as a false positive; the
// coordinator's memory workflow consolidates that in the background. A
// second session's review of the same repository passes the dismissal on
// to the security reviewer, who reports the value as info, not high.
func TestCodeReviewRemembers(t *testing.T) {
	parallel(t)
	c := dial(t)
	repo := exampletest.ReviewRepo(t)
	ms, url := modelServer(t)
	sandboxes := t.TempDir()
	var store *blob.Store
	queue := startWorker(t, c, url, model.APIResponses, func(cfg *workflows.Config) {
		lc, err := local.New(local.Config{Root: sandboxes, Policy: sandbox.Policy{AllowedRoots: []string{repo}}})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Sandboxes = map[string]sandbox.Client{local.Backend: lc}
		cfg.Memory = memory.MemoryOptions{IdleTimeout: 2 * time.Second}
		store = cfg.Store
	})
	cl, err := troupeclient.New(troupeclient.Config{Temporal: c, TaskQueue: queue})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	session := func() (*troupeclient.Session, string) {
		out := filepath.Join(t.TempDir(), "review")
		s, _, err := cl.CreateSession(ctx, troupeclient.SessionInput{Graph: "codereview",
			Vars: map[string]string{codereview.VarRepo: repo, codereview.VarRef: "HEAD", codereview.VarOut: out}})
		if err != nil {
			t.Fatal(err)
		}
		return s, out
	}
	first, out := session()
	if _, err := first.Ask(ctx, "Review this change", nil); err != nil {
		t.Fatal(err)
	}
	if f := securityFinding(t, out); f.Severity != codereview.SeverityHigh || f.File != "auth/login.go" {
		t.Fatalf("the first review's security finding %+v; want high, in auth/login.go", f)
	}
	dismissed, err := first.Ask(ctx, "The credential in auth/login.go is a test fixture: dismiss it as a false positive.", nil)
	if err != nil || dismissed.Outcome != runtime.TurnAnswered {
		t.Fatalf("dismissal %+v, %v", dismissed, err)
	}
	if _, err := first.Command(ctx, troupeclient.SessionCommand{Op: troupe.CommandStop}); err != nil {
		t.Fatal(err)
	}
	st := memoryDone(ctx, t, c, memory.MemoryWorkflowID(queue, codereview.MemoryScope))
	summary, err := store.Get(ctx, memory.Key(codereview.MemoryScope, memory.SummaryPath))
	if err != nil || st.Phase2s < 1 || ms.Count("codereview-memory-phase1") != 1 ||
		!strings.Contains(string(summary), "- false positive: hard-coded credential in auth/login.go") {
		t.Fatalf("memory %+v, summary %q (%v); want the dismissal kept", st, summary, err)
	}
	second, out := session()
	if _, err := second.Ask(ctx, "Review this change", nil); err != nil {
		t.Fatal(err)
	}
	if f := securityFinding(t, out); f.Severity != codereview.SeverityInfo || !strings.Contains(f.Message, "dismissed before as a false positive") {
		t.Errorf("the second review's security finding %+v; want info: dismissed before", f)
	}
	if _, err := second.Command(ctx, troupeclient.SessionCommand{Op: troupe.CommandStop}); err != nil {
		t.Fatal(err)
	}
}
