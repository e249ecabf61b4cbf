package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/client"
)

// cliRun is a troupe command run by the test binary on one TROUPE_HOME,
// with no TEMPORAL_* variables and no temporal.toml (so on the home's own
// server), no
// OPENAI_API_KEY (so on the offline scenarios) and the plod graph.
type cliRun struct {
	cmd    *exec.Cmd
	stdout strings.Builder
	mu     sync.Mutex
	stderr strings.Builder
	lines  chan string // stderr, line by line
	done   chan struct{}
}

func startCLI(t *testing.T, home string, args ...string) *cliRun {
	t.Helper()
	return startCLIEnv(t, home, nil, args...)
}

// startCLIEnv is startCLI with env added to the command's environment.
func startCLIEnv(t *testing.T, home string, env []string, args ...string) *cliRun {
	t.Helper()
	cmd, _ := troupeCommand(t, args...)
	// Unset rather than empty: an empty TEMPORAL_ADDRESS would also
	// clear the address of a profile that env names (envconfig's rule).
	cmd.Env = slices.DeleteFunc(cmd.Env, func(kv string) bool { return strings.HasPrefix(kv, "TEMPORAL_") })
	cmd.Env = append(cmd.Env, "TROUPE_HOME="+home, "OPENAI_API_KEY=", "TEMPORAL_CONFIG_FILE="+filepath.Join(home, "no-temporal.toml"), envCLIPlod+"=1")
	cmd.Env = append(cmd.Env, env...)
	r := &cliRun{cmd: cmd, lines: make(chan string, 10000), done: make(chan struct{})}
	cmd.Stdout = &r.stdout
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(r.done)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			r.mu.Lock()
			r.stderr.WriteString(sc.Text() + "\n")
			r.mu.Unlock()
			r.lines <- sc.Text()
		}
		close(r.lines)
		_, _ = io.Copy(io.Discard, pipe)
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return r
}

// waitLine returns the first submatch of the first stderr line that re
// matches, failing if the command ends first.
func (r *cliRun) waitLine(t *testing.T, re *regexp.Regexp) string {
	t.Helper()
	for line := range r.lines {
		if m := re.FindStringSubmatch(line); m != nil {
			return m[len(m)-1]
		}
	}
	t.Fatalf("the command ended without a line matching %s; stderr:\n%s", re, r.errText())
	return ""
}

// wait waits for the command and returns its exit status.
func (r *cliRun) wait(t *testing.T) int {
	t.Helper()
	go func() {
		for range r.lines {
		}
	}()
	<-r.done
	err := r.cmd.Wait()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.ExitCode()
	}
	t.Fatal(err)
	return -1
}

func (r *cliRun) errText() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stderr.String()
}

// runCLI runs a troupe command to its end and returns its stdout.
func runCLI(t *testing.T, home string, args ...string) string {
	t.Helper()
	r := startCLI(t, home, args...)
	if code := r.wait(t); code != 0 {
		t.Fatalf("troupe %s: exit %d; stderr:\n%s", strings.Join(args, " "), code, r.errText())
	}
	return r.stdout.String()
}

var (
	runStarted = regexp.MustCompile(`^▶ run (\S+) `)
	// The plodder's turns run in one workflow task (its model calls and
	// tool calls are local activities), so its own events reach a
	// follower only when that task ends; its start, the parent's event,
	// comes at once, about six seconds before the run can end.
	plodding = regexp.MustCompile(`^(●) plodder started`)
)

// TestRunInterruptedAndResumed: a `troupe run` stopped by Ctrl-C (which
// says what happened and how to go on, exit 130) or killed outright
// leaves its run RUNNING on the home's server, and `troupe runs resume`
// finishes it with the result `troupe run` would have printed.
func TestRunInterruptedAndResumed(t *testing.T) {
	parallel(t) // mostly waiting, on a server or worker of its own
	for _, tc := range []struct {
		name string
		sig  os.Signal
		code int
	}{
		{"SIGINT", os.Interrupt, 130},
		{"SIGKILL", os.Kill, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			r := startCLI(t, home, "run", "--graph", "plod", "go")
			id := r.waitLine(t, runStarted)
			r.waitLine(t, plodding)
			if err := r.cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			if code := r.wait(t); code != tc.code {
				t.Fatalf("exit status %d after %s, want %d; stderr:\n%s", code, tc.name, tc.code, r.errText())
			}
			if tc.sig == os.Interrupt {
				if msg := r.errText(); !strings.Contains(msg, "interrupted: run "+id+" goes on") || !strings.Contains(msg, "troupe runs resume "+id) {
					t.Errorf("Ctrl-C does not say the run goes on and how to resume it:\n%s", msg)
				}
			}
			var before client.RunInfo
			if err := json.Unmarshal([]byte(runCLI(t, home, "runs", "show", "--json", id)), &before); err != nil || before.Status != "RUNNING" || before.Graph != "plod" {
				t.Fatalf("after %s the run is %+v (%v), want RUNNING", tc.name, before, err)
			}
			resumed := startCLI(t, home, "runs", "resume", id)
			if code := resumed.wait(t); code != 0 {
				t.Fatalf("troupe runs resume: exit %d; stderr:\n%s", code, resumed.errText())
			}
			if out := strings.TrimSpace(resumed.stdout.String()); out != "done after 41 turns" {
				t.Errorf("resumed run printed %q, want its result", out)
			}
			var after struct {
				client.RunInfo
				Result troupe.RunResult `json:"result"`
			}
			if err := json.Unmarshal([]byte(runCLI(t, home, "runs", "show", "--json", id)), &after); err != nil || after.Status != "COMPLETED" || after.Result.Turns != 41 || after.Result.ToolCalls != 40 {
				t.Errorf("after resume the run is %+v (%v), want COMPLETED after 41 turns and 40 tool calls", after, err)
			}
		})
	}
}

// TestTwoRunsOneHome: two `troupe run`s on one TROUPE_HOME share its one
// server. The first, which started the server, finishes first and keeps
// the server up until the second is done; both print their results.
func TestTwoRunsOneHome(t *testing.T) {
	parallel(t) // mostly waiting, on a server or worker of its own
	home := t.TempDir()
	first := startCLI(t, home, "run", "--graph", "plod", "medium")
	firstID := first.waitLine(t, runStarted)
	second := startCLI(t, home, "run", "--graph", "plod", "long")
	secondID := second.waitLine(t, runStarted)
	for _, r := range []*cliRun{first, second} {
		if code := r.wait(t); code != 0 {
			t.Fatalf("troupe run: exit %d; stderr:\n%s", code, r.errText())
		}
	}
	if out := strings.TrimSpace(first.stdout.String()); out != "done after 21 turns" {
		t.Errorf("first run printed %q", out)
	}
	if out := strings.TrimSpace(second.stdout.String()); out != "done after 41 turns" {
		t.Errorf("second run printed %q", out)
	}
	if !strings.Contains(first.errText(), "keeping the Temporal server of "+home+" up for the other troupe commands") {
		t.Errorf("the first run, done first, does not say it keeps the server up for the second:\n%s", first.errText())
	}
	var list []client.RunInfo
	if err := json.Unmarshal([]byte(runCLI(t, home, "runs", "ls", "--json")), &list); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range list {
		got[r.WorkflowID] = r.Status
	}
	if len(list) != 2 || got[firstID] != "COMPLETED" || got[secondID] != "COMPLETED" {
		t.Errorf("troupe runs ls: %+v, want the two runs COMPLETED", list)
	}
}

// TestRunsCancelAndTerminate: `troupe runs cancel` and `terminate` stop
// runs left going by a Ctrl-C, refuse the id of one of a run's agents and
// a run that has closed, and `runs show` says how each ended, typed.
func TestRunsCancelAndTerminate(t *testing.T) {
	parallel(t) // mostly waiting, on a server or worker of its own
	home := t.TempDir()
	interrupted := func() string {
		r := startCLI(t, home, "run", "--graph", "plod", "go")
		id := r.waitLine(t, runStarted)
		r.waitLine(t, plodding)
		if err := r.cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		if code := r.wait(t); code != 130 {
			t.Fatalf("exit status %d after Ctrl-C; stderr:\n%s", code, r.errText())
		}
		if strings.Contains(r.errText(), "limits per session") {
			t.Errorf("troupe run without --verbose lists the sandboxes' limits:\n%s", r.errText())
		}
		return id
	}
	fails := func(want string, args ...string) {
		t.Helper()
		r := startCLI(t, home, args...)
		if code := r.wait(t); code == 0 || !strings.Contains(r.errText(), want) {
			t.Errorf("troupe %s: exit %d, stderr %q; want a failure saying %q", strings.Join(args, " "), code, r.errText(), want)
		}
	}
	type shown struct {
		client.RunInfo
		Error struct{ Type, Message string } `json:"error"`
	}
	show := func(id string) shown {
		t.Helper()
		var s shown
		if err := json.Unmarshal([]byte(runCLI(t, home, "runs", "show", "--json", id)), &s); err != nil {
			t.Fatal(err)
		}
		return s
	}

	if out := runCLI(t, home, "runs", "ls"); strings.TrimSpace(out) != "no runs" {
		t.Errorf("troupe runs ls on a new home printed %q, want \"no runs\"", out)
	}
	cancelled, terminated := interrupted(), interrupted()
	fails("is not a run but a workflow of run "+cancelled, "runs", "cancel", cancelled+"/0-plodder")
	fails("not found", "runs", "terminate", "no-such-run")

	runCLI(t, home, "runs", "terminate", "--reason", "test", terminated)
	if s := show(terminated); s.Status != "TERMINATED" || s.Error.Type != "troupe.Terminated" {
		t.Errorf("after terminate: %+v", s)
	}
	// No worker serves the run (the server restarted with the command):
	// follow says so and shows how the run ended.
	followed := startCLI(t, home, "runs", "follow", terminated)
	if code := followed.wait(t); code == 0 || !strings.Contains(followed.errText(), "no worker serves task queue") || !strings.Contains(followed.errText(), "the run was terminated") {
		t.Errorf("troupe runs follow of a terminated run with no worker: exit %d, stderr:\n%s", code, followed.errText())
	}
	// Nothing serves the run's queue since the Ctrl-C: cancel says so, and
	// a worker takes the cancellation in.
	asked := startCLI(t, home, "runs", "cancel", cancelled)
	if code := asked.wait(t); code != 0 || strings.TrimSpace(asked.stdout.String()) != "run "+cancelled+": cancel requested" ||
		!strings.Contains(asked.errText(), "no worker serves task queue") {
		t.Errorf("troupe runs cancel with no worker: exit %d, stdout %q, stderr:\n%s", code, asked.stdout.String(), asked.errText())
	}
	resumed := startCLI(t, home, "runs", "resume", cancelled)
	if code := resumed.wait(t); code == 0 || !strings.Contains(resumed.errText(), "the run was cancelled") {
		t.Errorf("resuming a cancelled run: exit %d, stderr:\n%s", code, resumed.errText())
	}
	if s := show(cancelled); s.Status != "CANCELED" || s.Error.Type != "troupe.Canceled" {
		t.Errorf("after cancel: %+v", s)
	}
	fails("has closed", "runs", "cancel", cancelled)
	fails("has closed", "runs", "terminate", terminated)

	// Under --json, a failure to find or stop a run is a document too.
	for _, tc := range []struct{ id, typ string }{{cancelled, "troupe.RunClosed"}, {"no-such-run", "troupe.NoRun"}, {cancelled + "/0-plodder", "troupe.NotRun"}} {
		r := startCLI(t, home, "runs", "cancel", "--json", tc.id)
		var f struct {
			WorkflowID string                         `json:"workflow_id"`
			Error      struct{ Type, Message string } `json:"error"`
		}
		code := r.wait(t)
		if err := json.Unmarshal([]byte(r.stdout.String()), &f); code == 0 || err != nil || f.WorkflowID != tc.id || f.Error.Type != tc.typ || f.Error.Message == "" {
			t.Errorf("troupe runs cancel --json %s: exit %d, stdout %q (%v); want a failure of type %s", tc.id, code, r.stdout.String(), err, tc.typ)
		}
	}
}

// TestWorkersAgreeOnTheBlobStore: a `troupe run` beside a `troupe dev` on
// the same home, with a blob store of its own (TROUPE_BLOB_URL), would
// serve the same task queue, and a run moving between the two would look
// for its transcript in the wrong store for ever. It refuses to start,
// naming the other worker and both stores, and starts no run.
func TestWorkersAgreeOnTheBlobStore(t *testing.T) {
	parallel(t)
	home := t.TempDir()
	dev := startCLI(t, home, "dev", "--port", strconv.Itoa(freePort(t)), "--ui-port", "-1")
	dev.waitLine(t, regexp.MustCompile(`^troupe: dev server up`))
	other := t.TempDir()
	run := startCLIEnv(t, home, []string{"TROUPE_BLOB_URL=file://" + other}, "run", "--graph", "plod", "go")
	if code := run.wait(t); code == 0 {
		t.Fatalf("troupe run beside troupe dev, with a blob store of its own, succeeded; stderr:\n%s", run.errText())
	}
	msg := run.errText()
	for _, want := range []string{"served by another troupe worker", "keeps its blobs in file://" + filepath.Join(home, "blobs") + "#",
		"would keep them in file://" + other + "#", "TROUPE_BLOB_URL"} {
		if !strings.Contains(msg, want) {
			t.Errorf("troupe run's refusal lacks %q:\n%s", want, msg)
		}
	}
	if runStarted.MatchString(msg) || strings.Contains(msg, "▶ run") {
		t.Errorf("a run started:\n%s", msg)
	}
}

// TestWorkersAgreeOnTheModel: a `troupe run` with a model of its own
// (OPENAI_API_KEY) beside an offline `troupe dev` on the same home would
// serve the same task queue, and each run's turns would go to either
// model. It refuses to start, naming the other worker and both models,
// and starts no run.
func TestWorkersAgreeOnTheModel(t *testing.T) {
	parallel(t)
	home := t.TempDir()
	dev := startCLI(t, home, "dev", "--port", strconv.Itoa(freePort(t)), "--ui-port", "-1")
	dev.waitLine(t, regexp.MustCompile(`^troupe: dev server up`))
	run := startCLIEnv(t, home, []string{"OPENAI_API_KEY=test", "OPENAI_BASE_URL=http://127.0.0.1:9/v1"}, "run", "--graph", "plod", "go")
	if code := run.wait(t); code == 0 {
		t.Fatalf("troupe run beside an offline troupe dev, with a model of its own, succeeded; stderr:\n%s", run.errText())
	}
	msg := run.errText()
	for _, want := range []string{"served by another troupe worker", "calls the offline scenarios", "would call the responses API at http://127.0.0.1:9/v1"} {
		if !strings.Contains(msg, want) {
			t.Errorf("troupe run's refusal lacks %q:\n%s", want, msg)
		}
	}
	if runStarted.MatchString(msg) || strings.Contains(msg, "▶ run") {
		t.Errorf("a run started:\n%s", msg)
	}
}
