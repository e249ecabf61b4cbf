package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/runtime"
)

// waitApprovals polls `troupe runs approvals ID --json` until n calls
// wait, and returns them.
func waitApprovals(t *testing.T, home, id string, n int) []troupeclient.Approval {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute) // a hang detector
	for {
		var list []troupeclient.Approval
		r := startCLI(t, home, "runs", "approvals", id, "--json")
		if r.wait(t) == 0 && json.Unmarshal([]byte(r.stdout.String()), &list) == nil && len(list) == n {
			return list
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d call(s) waiting for approval in %s, want %d; last answer:\n%s%s", len(list), id, n, r.stdout.String(), r.errText())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// sessionInfo is `troupe sessions show ID --json`.
func sessionInfo(t *testing.T, home, id string) troupeclient.SessionInfo {
	t.Helper()
	var info troupeclient.SessionInfo
	if err := json.Unmarshal([]byte(runCLI(t, home, "sessions", "show", id, "--json")), &info); err != nil {
		t.Fatal(err)
	}
	return info
}

// A call that waits for approval outlives the machine: a session of the
// gate graph on `troupe dev` asks to remove build/, and its call waits (the
// session says "waiting"); `troupe dev` is SIGKILLed, its worker and its
// embedded server with it, and started again on the same home; the call
// still waits, under the same id; `troupe runs approve` approves it, and
// the turn goes on: the tool runs once, and the answer says so.
func TestApprovalSurvivesWorkerAndServerKill(t *testing.T) {
	parallel(t)
	home := t.TempDir()
	port := strconv.Itoa(freePort(t))
	up := regexp.MustCompile(`^troupe: dev server up`)
	dev := startCLI(t, home, "dev", "--port", port, "--ui-port", "-1")
	dev.waitLine(t, up)
	id := strings.TrimSpace(runCLI(t, home, "sessions", "new", "gate", "--name", "cleaner"))
	runCLI(t, home, "sessions", "send", id, "clean build/", "--no-wait")
	waiting := waitApprovals(t, home, id, 1)
	if a := waiting[0]; a.Agent != "keeper" || a.Tool != "rm_rf" || a.Arguments != `{"path":"build/"}` {
		t.Errorf("waiting: %+v", a)
	}
	if info := sessionInfo(t, home, id); info.Status != runtime.SessionWaiting {
		t.Errorf("the session is %s while its call waits, want %s", info.Status, runtime.SessionWaiting)
	}

	if err := dev.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	dev.wait(t)
	dev = startCLI(t, home, "dev", "--port", port, "--ui-port", "-1")
	dev.waitLine(t, up)

	again := waitApprovals(t, home, id, 1)
	if again[0].ID != waiting[0].ID || !again[0].Since.Equal(waiting[0].Since) {
		t.Errorf("after the restart, waiting %+v; want the same call as before: %+v", again[0], waiting[0])
	}
	if out := runCLI(t, home, "runs", "approve", id, waiting[0].ID); !strings.Contains(out, waiting[0].ID+": approved") {
		t.Errorf("runs approve printed %q", out)
	}
	deadline := time.Now().Add(2 * time.Minute)
	var info troupeclient.SessionInfo
	for info = sessionInfo(t, home, id); info.Turns < 1; info = sessionInfo(t, home, id) {
		if time.Now().After(deadline) {
			t.Fatalf("the turn did not end after the approval: %+v\n%s", info, dev.errText())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if r := info.Recent[0]; r.Outcome != runtime.TurnAnswered || string(r.Output) != `"done: removed build/"` {
		t.Errorf("the turn: %+v", r)
	}
	if info.Status != runtime.SessionIdle {
		t.Errorf("the session is %s after the turn", info.Status)
	}
	if log, err := os.ReadFile(filepath.Join(home, "gate.log")); err != nil || string(log) != "build/\n" {
		t.Errorf("the tool ran %q (%v), want once, on build/", log, err)
	}
	runCLI(t, home, "sessions", "stop", id)
	if *historiesDir != "" {
		saveDevHistories(t, home, map[string]bool{id: true, id + "/t1/0-keeper": true}, "approval-session")
	}
}

// saveDevHistories saves the histories of ids from the server of
// `troupe dev` in home, once they have closed.
func saveDevHistories(t *testing.T, home string, ids map[string]bool, prefix string) {
	t.Helper()
	c := devClient(t, home)
	for id := range ids {
		_ = c.GetWorkflow(context.Background(), id, "").Get(context.Background(), nil)
	}
	saveHistories(t, c, ids, *historiesDir, prefix)
}

// `troupe run` asks on its terminal (tmux) for the decision on a call that
// waits: an answer it does not know asks again, "e" edits the arguments,
// and the run goes on with them.
func TestRunAsksForApproval(t *testing.T) {
	parallel(t)
	home := t.TempDir()
	port := strconv.Itoa(freePort(t))
	env := []string{"TROUPE_HOME=" + home, envCLIPlod + "=1"}
	dev := startTroupe(t, "dev", env, "troupe: dev server up", "dev", "--port", port, "--ui-port", "-1")
	term := startTerminal(t, dev, env, "run", "--graph", "gate", "clean dist/")
	question := "approve? [y]es, [n]o, [a]lways for this tool, [e]dit the arguments:"
	screen := term.waitFor("the question", func(s string) bool { return strings.Contains(s, question) })
	if !strings.Contains(screen, `keeper wants to run rm_rf: {"path":"dist/"}`) {
		t.Errorf("the question does not show the call:\n%s", screen)
	}
	term.enter("maybe")
	term.waitFor("the question again", func(s string) bool { return strings.Count(s, question) == 2 })
	term.enter("e")
	term.waitFor("the arguments", func(s string) bool { return strings.Contains(s, "new arguments (JSON):") })
	term.enter(`{"path":"dist/cache/"}`)
	screen = term.waitFor("the end", func(s string) bool { return strings.Contains(s, "chat exited: ") })
	for _, want := range []string{": approved with arguments {\"path\":\"dist/cache/\"}", "done: removed dist/cache/", "chat exited: 0"} {
		if !strings.Contains(screen, want) {
			t.Errorf("the terminal lacks %q:\n%s", want, screen)
		}
	}
	if log, err := os.ReadFile(filepath.Join(home, "gate.log")); err != nil || string(log) != "dist/cache/\n" {
		t.Errorf("the tool ran %q (%v), want once, on the edited path", log, err)
	}
	if *historiesDir != "" {
		run := regexp.MustCompile(`▶ run (\S+) `).FindStringSubmatch(screen)
		if run == nil {
			t.Fatalf("no run id on the screen:\n%s", screen)
		}
		saveDevHistories(t, home, map[string]bool{run[1]: true, run[1] + "/0-keeper": true}, "approval-run")
	}
}

// `troupe chat` (in tmux) shows a call that waits for approval, with the
// session waiting, and takes the decision: y, pressed with no Enter,
// approves the oldest, and the turn goes on.
func TestChatApproves(t *testing.T) {
	parallel(t)
	home := t.TempDir()
	port := strconv.Itoa(freePort(t))
	env := []string{"TROUPE_HOME=" + home, envCLIPlod + "=1"}
	dev := startTroupe(t, "dev", env, "troupe: dev server up", "dev", "--port", port, "--ui-port", "-1")
	chat := startChat(t, dev, env, "--graph", "gate")
	chat.waitFor("the chat", func(s string) bool { return strings.Contains(s, "no session open") })
	chat.enter("/new")
	chat.waitFor("the new session", func(s string) bool { return strings.Contains(header(s), "· idle ·") })
	chat.enter("clean build/")
	screen := chat.waitFor("the call that waits", func(s string) bool {
		return strings.Contains(s, `keeper wants to run rm_rf {"path":"build/"}: approve? press y / n / a (always)`) && strings.Contains(header(s), "· waiting ·")
	})
	if _, err := os.Stat(filepath.Join(home, "gate.log")); err == nil {
		t.Errorf("the tool ran before the approval:\n%s", screen)
	}
	chat.press("y")
	chat.waitFor("the answer", func(s string) bool {
		return strings.Contains(s, "done: removed build/") && strings.Contains(s, "keeper rm_rf: approved by user") && strings.Contains(header(s), "· idle ·")
	})
	if log, err := os.ReadFile(filepath.Join(home, "gate.log")); err != nil || string(log) != "build/\n" {
		t.Errorf("the tool ran %q (%v), want once, on build/", log, err)
	}
	chat.enter("/done")
	chat.waitFor("the end", func(s string) bool { return strings.Contains(s, "chat exited: 0") })
}
