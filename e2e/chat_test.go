package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"


	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/devserver"
)

// TestChat drives `troupe chat` as a user does, in a terminal (tmux, 160
// columns by 80 rows), against `troupe dev` (a process with its embedded
// server, its worker and the offline deal-desk scenario):
//
//  1. On the server of its TROUPE_HOME: /new (the --graph default), a
//     message whose turn shows live (the handoff, the agents-as-tools with
//     their own steps indented under the coordinator, their sandboxes) and
//     ends with the whole answer; /fork and /switch bwrap say what became
//     of them; /pause and /resume show in the header and are the session's
//     status; /done leaves the session running.
//  2. Over TEMPORAL_ADDRESS, from another TROUPE_HOME: --session opens the
//     same session with its conversation so far; /stop stops it; a message
//     then is refused in the UI, which goes on; /done.
//
// Each step waits, with a deadline, for the screen (capture-pane) and the
// session to show what it must.
func TestChat(t *testing.T) {
	parallel(t)
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is not installed (scripts/setup.sh installs it)")
	}
	home := t.TempDir()
	dev, address, cl := devWithClient(t, home)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a hang detector
	defer cancel()

	// 1. The home's server.
	chat := startChat(t, dev, []string{"TROUPE_HOME=" + home}, "--graph", "dealdesk")
	chat.waitFor("the chat", func(s string) bool { return strings.Contains(s, "no session open") })
	chat.enter("/new")
	screen := chat.waitFor("the new session", func(s string) bool {
		return strings.HasPrefix(shownSession(s), "session-dealdesk-") && strings.Contains(header(s), "· idle ·")
	})
	id := shownSession(screen)

	chat.enter("Review the Acme Corp deal: a 3-year, 5000-seat renewal at 35% off list, net-90, go-live in 3 weeks.")
	streamed := map[string][]string{} // the streaming replies seen, by agent
	screen = chat.waitFor("the answer", func(s string) bool {
		for _, m := range streamingReply.FindAllStringSubmatch(s, -1) {
			if seen := streamed[m[1]]; len(seen) == 0 || seen[len(seen)-1] != m[2] {
				streamed[m[1]] = append(seen, m[2])
			}
		}
		return strings.Contains(s, `"decision": "approve_with_conditions"`) && strings.Contains(header(s), "· 1 turn ·")
	})
	for _, want := range []string{
		"you › Review the Acme Corp deal",
		"↪ handoff: triage → coordinator",
		"\ncoordinator ⇉ review_pricing (agent as tool)",
		"\ncoordinator ⇉ review_rollout (agent as tool)",
		// The reviewers' steps, indented under the coordinator's.
		"\n  ▣ pricing_reviewer: sandbox provisioned: bwrap sandbox",
		"\n  pricing_reviewer → exec_command {\"cmd\":\"cat deal/pricing.json\"}",
		"\n  rollout_reviewer ← exec_command: ",
		"\ncoordinator ⇇ review_pricing: ",
		"\ncoordinator ›\n",
		`"summary": "Pricing risk is high and rollout risk is medium; approve only once both blockers are resolved."`,
	} {
		if !strings.Contains(screen, want) {
			t.Errorf("the turn's screen lacks %q:\n%s", want, screen)
		}
	}
	// Live streaming: each reply grew, and none is left growing once the
	// turn has ended.
	for agent, seen := range streamed {
		t.Logf("%s's reply seen growing in %d steps", agent, len(seen))
		for i := 1; i < len(seen); i++ {
			if !strings.HasPrefix(seen[i], seen[i-1]) {
				t.Errorf("%s's streamed reply did not grow: %q, then %q", agent, seen[i-1], seen[i])
			}
		}
	}
	// The coordinator's answer streams (its offline script paces it), so
	// the screen showed it growing.
	if len(streamed["coordinator"]) < 2 {
		t.Errorf("the coordinator's reply was not seen growing: %q", streamed)
	}
	if len(streamed) > 0 && strings.Contains(screen, "▍") {
		t.Errorf("a reply still streams after the turn:\n%s", screen)
	}
	s := cl.Session(id)
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Turns != 1 || len(info.Recent) != 1 || info.Recent[0].Outcome != runtime.TurnAnswered || info.Recent[0].Agent != "coordinator" {
		t.Errorf("the session after the message: %+v", info)
	}

	// /fork opens the fork, which has the conversation so far; the rest
	// goes on in it. /switch moves its workspaces to bwrap.
	chat.enter("/fork")
	chat.waitFor("the fork", func(s string) bool { return strings.Contains(s, "forked session "+id+" into ") })
	screen = chat.waitFor("the fork open", func(s string) bool { open := shownSession(s); return open != "" && open != id })
	id = shownSession(screen)
	s = cl.Session(id)
	if info, err := s.Info(ctx); err != nil || info.Turns != 1 || info.Agent != "coordinator" {
		t.Errorf("the fork: %+v (%v); want the source's turn and agent", info, err)
	}
	chat.enter("/switch bwrap")
	chat.waitFor("the switch", func(s string) bool { return strings.Contains(s, "its workspaces move to the bwrap backend") })
	if info, err := s.Info(ctx); err != nil || info.Backend != "bwrap" {
		t.Errorf("after /switch bwrap: %+v (%v)", info, err)
	}

	chat.enter("/pause")
	chat.waitFor("the pause", func(s string) bool {
		return strings.Contains(header(s), "· paused ·") && strings.Contains(s, "· paused: no turn starts")
	})
	waitStatus(t, ctx, s, runtime.SessionPaused)
	chat.enter("/resume")
	chat.waitFor("the resume", func(s string) bool {
		return strings.Contains(header(s), "· idle ·") && strings.Contains(s, "· resumed")
	})
	waitStatus(t, ctx, s, runtime.SessionIdle)

	chat.enter("/done")
	chat.waitFor("the chat's exit", func(s string) bool {
		return strings.Contains(s, "session "+id+" stays: troupe chat --session "+id) && strings.Contains(s, "chat exited: 0")
	})
	if info, err := s.Info(ctx); err != nil || info.Status != runtime.SessionIdle {
		t.Errorf("the session after /done: %+v (%v); want it idle", info, err)
	}

	// 2. TEMPORAL_ADDRESS, another home.
	chat = startChat(t, dev, []string{"TROUPE_HOME=" + t.TempDir(), "TEMPORAL_ADDRESS=" + address}, "--session", id)
	chat.waitFor("the session reopened", func(s string) bool {
		return strings.Contains(header(s), id) && strings.Contains(s, "you › Review the Acme Corp deal") && strings.Contains(s, `"decision": "approve_with_conditions"`)
	})
	chat.enter("/stop")
	chat.waitFor("the stop", func(s string) bool {
		return strings.Contains(header(s), "· stopped ·") && strings.Contains(s, "· session stopped after 1 turn")
	})
	if end, err := s.Result(ctx); err != nil || end.Status != runtime.SessionStopped {
		t.Errorf("the session's end: %+v (%v)", end, err)
	}
	chat.enter("anyone there?")
	chat.waitFor("the refusal", func(s string) bool { return strings.Contains(s, "✗ session "+id+" is stopped: /new starts another") })
	chat.enter("/done")
	screen = chat.waitFor("the chat's exit", func(s string) bool { return strings.Contains(s, "chat exited: 0") })
	if strings.Contains(screen, "stays") {
		t.Errorf("a stopped session is said to stay:\n%s", screen)
	}

	// No workspace outlives the sessions (the source of the fork is
	// stopped here).
	list, err := cl.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list {
		if e.Status == runtime.SessionStopped {
			continue
		}
		if _, err := cl.Session(e.ID).Command(ctx, troupeclient.SessionCommand{Op: "stop"}); err != nil {
			t.Errorf("stop %s: %v", e.ID, err)
		} else if _, err := cl.Session(e.ID).Result(ctx); err != nil {
			t.Errorf("session %s: %v", e.ID, err)
		}
	}
	emptyDirs(t, filepath.Join(home, "sandboxes", "bwrap"))
}

// streamingReply is a one-line reply still streaming: indent and agent,
// then the text so far.
var streamingReply = regexp.MustCompile(`(?m)^( *\S+) › (.*) ▍ *$`)

// header is the first line of a chat's screen.
func header(screen string) string {
	line, _, _ := strings.Cut(screen, "\n")
	return line
}

// shownSession is the id of the session a chat's screen shows, from its
// header ("troupe chat · ID (NAME) · graph …"); empty for none.
func shownSession(screen string) string {
	fields := strings.Split(header(screen), " · ")
	if len(fields) < 3 || !strings.HasPrefix(fields[2], "graph ") {
		return ""
	}
	id, _, _ := strings.Cut(fields[1], " ")
	return id
}

// waitStatus waits for session s to say it is in status want.
func waitStatus(t *testing.T, ctx context.Context, s *troupeclient.Session, want runtime.SessionStatus) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		info, err := s.Info(ctx)
		if err == nil && info.Status == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s is %s (%v), want %s", s.ID(), info.Status, err, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// tmuxChat is `troupe chat` running in a tmux server of the test's own.
type tmuxChat struct {
	t      *testing.T
	socket string
	dev    *troupeProc // whose log a failure shows
}

var tmuxServers atomic.Int64

// startChat runs `troupe chat args` (the test binary as the troupe
// command) in a tmux window of 160 columns by 80 rows, with env and no
// other Temporal, Troupe or OpenAI settings. Once it ends, the window
// says "chat exited: STATUS". The test's cleanup ends the tmux server.
// devWithClient starts `troupe dev` on home (its embedded server and a
// worker) and returns it with its server's address and a Troupe client of
// that server.
func devWithClient(t *testing.T, home string) (dev *troupeProc, address string, cl *troupeclient.Client) {
	t.Helper()
	port := strconv.Itoa(freePort(t))
	dev = startTroupe(t, "dev", []string{"TROUPE_HOME=" + home}, "troupe: dev server up", "dev", "--port", port, "--ui-port", "-1")
	srv, err := devserver.Running(home)
	if err != nil {
		t.Fatal(err)
	}
	if cl, err = troupeclient.New(troupeclient.Config{Temporal: devClient(t, home)}); err != nil {
		t.Fatal(err)
	}
	return dev, srv.Address, cl
}

func startChat(t *testing.T, dev *troupeProc, env []string, args ...string) *tmuxChat {
	t.Helper()
	return startTerminal(t, dev, env, append([]string{"chat"}, args...)...)
}

// startTerminal runs `troupe args` in a tmux window as startChat runs
// `troupe chat`.
func startTerminal(t *testing.T, dev *troupeProc, env []string, args ...string) *tmuxChat {
	t.Helper()
	return startTerminalWrapped(t, dev, nil, env, args...)
}

// startTerminalWrapped is startTerminal with the command rewritten by
// wrap (run under another program, say), as startTroupeWrapped does.
func startTerminalWrapped(t *testing.T, dev *troupeProc, wrap func(*exec.Cmd), env []string, args ...string) *tmuxChat {
	t.Helper()
	cmd, cliEnv := troupeCommand(t, args...)
	if wrap != nil {
		wrap(cmd)
	}
	vars := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "LANG=C.UTF-8", cliEnv}
	vars = append(vars, env...)
	quoted := make([]string, len(vars))
	for i, v := range vars {
		quoted[i] = shellQuote(v)
	}
	script := filepath.Join(t.TempDir(), "chat.sh")
	argv := []string{shellQuote(cmd.Path)}
	for _, a := range cmd.Args[1:] {
		argv = append(argv, shellQuote(a))
	}
	body := fmt.Sprintf("#!/bin/sh\nenv -i TERM=\"$TERM\" %s %s\necho \"chat exited: $?\"\nexec sleep 3600\n", strings.Join(quoted, " "), strings.Join(argv, " "))
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	c := &tmuxChat{t: t, socket: fmt.Sprintf("troupe-e2e-%d-%d", os.Getpid(), tmuxServers.Add(1)), dev: dev}
	c.tmux("new-session", "-d", "-s", "chat", "-x", "160", "-y", "80", script)
	t.Cleanup(func() { _ = exec.Command("tmux", "-L", c.socket, "kill-server").Run() })
	return c
}

func (c *tmuxChat) tmux(args ...string) string {
	c.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", c.socket, "-f", "/dev/null"}, args...)...).CombinedOutput()
	if err != nil {
		c.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// enter types line and Enter.
func (c *tmuxChat) enter(line string) {
	c.t.Helper()
	c.tmux("send-keys", "-t", "chat", "-l", line)
	c.tmux("send-keys", "-t", "chat", "Enter")
}

// press types keys with no Enter after them.
func (c *tmuxChat) press(keys string) {
	c.t.Helper()
	c.tmux("send-keys", "-t", "chat", "-l", keys)
}

// screen is what the chat's terminal shows now.
func (c *tmuxChat) screen() string {
	c.t.Helper()
	return c.tmux("capture-pane", "-p", "-t", "chat")
}

// close closes the chat's terminal (its tmux server), as a machine's
// restart does.
func (c *tmuxChat) close() {
	_ = exec.Command("tmux", "-L", c.socket, "kill-server").Run()
}

// waitFor returns the screen once ok says it shows what, and fails the
// test if it does not within two minutes.
func (c *tmuxChat) waitFor(what string, ok func(screen string) bool) string {
	c.t.Helper()
	deadline := time.Now().Add(2 * time.Minute) // a hang detector
	for {
		screen := c.tmux("capture-pane", "-p", "-t", "chat")
		if ok(screen) {
			return screen
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the chat did not show %s within 2 minutes; its screen:\n%s\ntroupe dev:\n%s", what, screen, c.dev.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
