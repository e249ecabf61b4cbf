package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/examples/codereview"
	"github.com/troupe-dev/troupe/internal/exampletest"
	"github.com/troupe-dev/troupe/memory"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/devserver"
	"github.com/troupe-dev/troupe/runtime/model/scripted"
)

// TestChatCodeReviewDay is the code review as a user lives it in `troupe
// chat`, over two sessions, on `troupe dev` (the server) and `troupe
// worker` (a process of its own), with the graph's offline scenario
// served over HTTP as a model would be:
//
//  1. The first session's review finds a hard-coded credential; the user
//     dismisses it as a false positive. Memory phase 1 of that turn starts
//     in the background; the worker is SIGKILLed during its model call and
//     started again; phase 1 ends after the restart, with one answered
//     call, and phase 2 consolidates it. /stop ends the session.
//  2. A second session (/new) reviews the same repository: the security
//     reviewer reports the credential as info, dismissed before.
//  3. A fix, for which the fixer loads its review-go skill on demand
//     (load_skill, shown on the screen).
//  4. "Clean build/": the fixer's rm -rf waits for approval (the session
//     is waiting). The machine restarts: the worker and the server are
//     SIGKILLed, the chat's terminal closed, and all started again on the
//     same home. The reopened chat shows the call that waits; "y"
//     approves it, and the turn goes on.
func TestChatCodeReviewDay(t *testing.T) {
	parallel(t) // mostly waiting, on a server or worker of its own
	sc, err := scripted.ParseScenario(codereview.Scenario)
	if err != nil {
		t.Fatal(err)
	}
	const phase1 = "codereview-memory-phase1"
	for i := range sc.Rules {
		if sc.Rules[i].Name == phase1 {
			sc.Rules[i].Respond.DelayMS = 4000 // Time to kill the worker in the middle.
		}
	}
	srv, url := serveScenario(t, sc)
	repo := exampletest.ReviewRepo(t)
	out := filepath.Join(t.TempDir(), "review")
	home := t.TempDir()
	port := strconv.Itoa(freePort(t))
	env := []string{"TROUPE_HOME=" + home, "OPENAI_API_KEY=sk-offline", "OPENAI_BASE_URL=" + url, "TROUPE_SANDBOX_ALLOWED_ROOTS=" + repo}
	dev := startTroupe(t, "dev", env, "troupe: dev server up", "dev", "--no-worker", "--port", port, "--ui-port", "-1")
	running, err := devserver.Running(home)
	if err != nil {
		t.Fatal(err)
	}
	workerEnv := append([]string{"TEMPORAL_ADDRESS=" + running.Address, "TEMPORAL_NAMESPACE=" + running.Namespace}, env...)
	worker := startTroupe(t, "worker", workerEnv, "troupe: worker on", "worker")
	chatArgs := []string{"--graph", "codereview", "--var", codereview.VarRepo + "=" + repo, "--var", codereview.VarRef + "=HEAD", "--var", codereview.VarOut + "=" + out}
	chat := startChat(t, dev, env, chatArgs...)
	chat.waitFor("the chat", func(s string) bool { return strings.Contains(s, "no session open") })
	c := devClient(t, home)
	memoryID := memory.MemoryWorkflowID(troupe.DefaultTaskQueue, codereview.MemoryScope)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a hang detector
	defer cancel()

	// 1. A lesson, consolidated in the background through a killed worker.
	chat.enter("/new")
	screen := chat.waitFor("the new session", func(s string) bool {
		return strings.HasPrefix(shownSession(s), "session-codereview-") && strings.Contains(header(s), "· idle ·")
	})
	first := shownSession(screen)
	chat.enter("Review this change")
	chat.waitFor("the review", func(s string) bool { return strings.Contains(header(s), "· 1 turn ·") })
	if f := securityFinding(t, out); f.Severity != codereview.SeverityHigh || f.File != "auth/login.go" {
		t.Fatalf("the first review's security finding %+v; want high, in auth/login.go", f)
	}
	chat.enter("The credential in auth/login.go is a test fixture: dismiss it as a false positive.")
	chat.waitFor("the dismissal", func(s string) bool {
		return strings.Contains(header(s), "· 2 turns ·") && strings.Contains(header(s), "· idle ·")
	})
	waitInFlight(ctx, t, srv, phase1)
	if err := worker.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if n := srv.Count(phase1); n != 0 {
		t.Fatalf("%d phase-1 calls answered before the kill, want 0: the worker was not killed in the middle of phase 1", n)
	}
	worker = startTroupe(t, "worker", workerEnv, "troupe: worker on", "worker")
	st := waitMemory(ctx, t, c, memoryID, func(st memory.MemoryStatus) bool { return st.Phase2s >= 1 && st.Phase == "idle" && st.Pending == 0 })
	store, err := blob.Open(ctx, "file://"+filepath.Join(home, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	handbook, err := readFresh(ctx, store, memory.Key(codereview.MemoryScope, memory.HandbookPath))
	if err != nil || !strings.Contains(string(handbook), "- false positive: hard-coded credential in auth/login.go") || st.LastError != "" {
		t.Fatalf("MEMORY.md %q (%v), memory %+v; want the dismissal kept", handbook, err, st)
	}
	if n := srv.Count(phase1); n != 1 {
		t.Errorf("%d answered phase-1 calls for the dismissal, want 1 (once, after the restart)", n)
	}
	chat.enter("/stop")
	chat.waitFor("the stop", func(s string) bool { return strings.Contains(header(s), "· stopped ·") })

	// 2. A second session remembers.
	chat.enter("/new")
	screen = chat.waitFor("the second session", func(s string) bool {
		open := shownSession(s)
		return open != "" && open != first && strings.Contains(header(s), "· idle ·")
	})
	id := shownSession(screen)
	chat.enter("Review this change")
	chat.waitFor("the second review", func(s string) bool { return strings.Contains(header(s), "· 1 turn ·") })
	if f := securityFinding(t, out); f.Severity != codereview.SeverityInfo || !strings.Contains(f.Message, "dismissed before as a false positive") {
		t.Errorf("the second review's security finding %+v; want info: dismissed before", f)
	}

	// 3. A fix that loads a skill on demand.
	if strings.Contains(chat.screen(), "load_skill") {
		t.Errorf("a skill was loaded before one was needed:\n%s", chat.screen())
	}
	chat.enter("Now fix the finding in auth/login.go and show the diff")
	screen = chat.waitFor("the fix", func(s string) bool { return strings.Contains(header(s), "· 2 turns ·") })
	for _, want := range []string{`fixer → load_skill {"name":"review-go"}`, `password := os.Getenv("APP_SECRET")`} {
		if !strings.Contains(screen, want) {
			t.Errorf("the fix's screen lacks %q:\n%s", want, screen)
		}
	}

	// 4. A removal waits for approval across a restart of the machine.
	chat.enter("Clean build/")
	chat.waitFor("the call that waits", func(s string) bool {
		return strings.Contains(s, "fixer wants to run exec_command") && strings.Contains(s, "rm -rf repo/build/") &&
			strings.Contains(header(s), "· waiting ·")
	})
	for _, p := range []*troupeProc{worker, dev} {
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	chat.close()
	dev = startTroupe(t, "dev", env, "troupe: dev server up", "dev", "--no-worker", "--port", port, "--ui-port", "-1")
	startTroupe(t, "worker", workerEnv, "troupe: worker on", "worker")
	chat = startChat(t, dev, env, append([]string{"--session", id}, chatArgs...)...)
	chat.waitFor("the call still waiting", func(s string) bool {
		return strings.Contains(s, "fixer wants to run exec_command") && strings.Contains(header(s), "· waiting ·")
	})
	chat.enter("y")
	chat.waitFor("the cleaning", func(s string) bool {
		return strings.Contains(s, "fixer › Removed build/.") && strings.Contains(header(s), "· 3 turns ·") && strings.Contains(header(s), "· idle ·")
	})
	chat.enter("/stop")
	chat.waitFor("the second stop", func(s string) bool { return strings.Contains(header(s), "· stopped ·") })
	chat.enter("/done")
	chat.waitFor("the chat's exit", func(s string) bool { return strings.Contains(s, "chat exited: 0") })
}

// securityFinding is the finding on the hard-coded password in the
// review's findings file.
func securityFinding(t *testing.T, out string) codereview.Finding {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(out, codereview.FindingsFile))
	if err != nil {
		t.Fatal(err)
	}
	findings, err := codereview.ParseFindings(string(data))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range findings {
		if strings.Contains(f.Message, "password := \"hunter2\"") {
			return f
		}
	}
	t.Fatalf("no finding on the hard-coded password: %s", data)
	return codereview.Finding{}
}

// devClient dials the embedded server of `troupe dev` in home.
func devClient(t *testing.T, home string) client.Client {
	t.Helper()
	srv, err := devserver.Running(home)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(client.Options{HostPort: srv.Address, Namespace: srv.Namespace, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// waitInFlight waits until a model call of rule is under way at srv: the
// rule's delay_ms is then the window in which to kill its client, with
// the call's answer not yet given.
func waitInFlight(ctx context.Context, t *testing.T, srv *scripted.Server, rule string) {
	t.Helper()
	for srv.InFlight(rule) == 0 {
		if ctx.Err() != nil {
			t.Fatalf("no model call of %s came", rule)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitMemory queries the memory workflow id until its status is done.
func waitMemory(ctx context.Context, t *testing.T, c client.Client, id string, done func(memory.MemoryStatus) bool) memory.MemoryStatus {
	t.Helper()
	var last memory.MemoryStatus
	for {
		v, err := c.QueryWorkflow(ctx, id, "", memory.MemoryQuery)
		if err == nil && v.Get(&last) == nil && done(last) {
			return last
		}
		if ctx.Err() != nil {
			t.Fatalf("memory workflow %s: last status %+v (%v)", id, last, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
