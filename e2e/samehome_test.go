package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/internal/exampletest"
)

// inOwnMounts makes cmd run in a mount namespace of its own in which the
// directory disk is mounted at path: two commands so made see two disks
// at one path, as two hosts with one TROUPE_HOME path do.
func inOwnMounts(t *testing.T, disk, path string) func(*exec.Cmd) {
	t.Helper()
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Fatalf("unshare (util-linux) is missing: %v", err)
	}
	return func(cmd *exec.Cmd) {
		// unshare execs: the worker keeps its pid, which names it in
		// its identity.
		cmd.Args = append([]string{"unshare", "--mount", "--propagation", "private", "sh", "-c",
			`mount --bind "$1" "$2" && shift 2 && exec "$@"`, "sh", disk, path}, cmd.Path)
		cmd.Path, _ = exec.LookPath("unshare")
	}
}

// TestSameHostnameSameHome: two `troupe worker`s with one hostname (this
// machine's) and one TROUPE_HOME path, each on a disk of its own (a mount
// namespace each, a different directory mounted at that path), serve one
// task queue and run code reviews at once. Each store has its own
// identity, so its own sandbox queue: every sandbox activity reaches the
// process that holds the sandbox, no sandbox is lost (with queues named by
// hostname and home path, the other process answered about half the calls
// "sandbox gone"). A third worker that names the sandbox queue of the
// first by hand, with another store, refuses to start, naming both.
func TestSameHostnameSameHome(t *testing.T) {
	parallel(t)
	repo := exampletest.ReviewRepo(t)
	port := freePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	blobs := "file://" + t.TempDir()
	home := t.TempDir() // the one path; each worker sees its own disk there
	env := []string{"TROUPE_HOME=" + home, "TEMPORAL_ADDRESS=" + addr, "TROUPE_BLOB_URL=" + blobs, "TROUPE_SANDBOX_ALLOWED_ROOTS=" + repo}
	startTroupe(t, "dev", []string{"TROUPE_HOME=" + t.TempDir(), "TROUPE_BLOB_URL=" + blobs}, "troupe: dev server up",
		"dev", "--no-worker", "--port", strconv.Itoa(port), "--ui-port", "-1")
	diskA, diskB := t.TempDir(), t.TempDir()
	a := startTroupeWrapped(t, "worker A", inOwnMounts(t, diskA, home), env, "troupe: worker on", "worker", "--sandbox", "bwrap")
	b := startTroupeWrapped(t, "worker B", inOwnMounts(t, diskB, home), env, "troupe: worker on", "worker", "--sandbox", "bwrap")
	if a.queue == "" || a.queue == b.queue {
		t.Fatalf("sandbox queues: A %q, B %q; want two\nA:\n%s\nB:\n%s", a.queue, b.queue, a.log.String(), b.log.String())
	}

	c, err := client.Dial(client.Options{HostPort: addr, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	all := startReviews(t, c, repo, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a hang detector
	defer cancel()
	created := map[string]int{}
	for i, s := range all {
		var res troupe.RunResult
		if err := s.run.Get(ctx, &res); err != nil {
			t.Fatalf("run %d: %v\nA:\n%s\nB:\n%s", i, err, a.log.String(), b.log.String())
		}
		t.Run(fmt.Sprintf("run%d", i), func(t *testing.T) {
			exampletest.CheckReview(t, res.Output, s.out)
			for _, e := range runEvents(t, c, s.run.GetID()) {
				switch {
				case e.Kind == troupe.EventSandboxLost:
					t.Errorf("%s: sandbox lost: %s", e.Agent, e.Detail)
				case e.Kind == troupe.EventSandboxRerouted || strings.Contains(e.Detail, troupe.ErrSandboxMisrouted):
					t.Errorf("%s: %s: %s", e.Agent, e.Kind, e.Detail)
				case e.Kind == troupe.EventToolResult && sandboxTools[e.Tool] && strings.HasPrefix(e.Detail, "Error"):
					t.Errorf("%s: %s failed: %s", e.Agent, e.Tool, e.Detail)
				case e.Kind == troupe.EventAgentToolStarted:
					created[sandboxHolder(t, c, e.Child, map[int]string{a.cmd.Process.Pid: "A", b.cmd.Process.Pid: "B"})]++
				}
			}
		})
	}
	t.Logf("sandboxes created by process: %v", created)
	if created["A"] == 0 || created["B"] == 0 {
		t.Errorf("sandboxes created by process: %v; want some by each", created)
	}
	// Each disk holds its store's identity, and no workspace is left.
	for name, disk := range map[string]string{"A": diskA, "B": diskB} {
		if _, err := os.Stat(filepath.Join(disk, "sandboxes", ".troupe-store-id")); err != nil {
			t.Errorf("disk of %s: %v", name, err)
		}
	}
	emptyDirs(t, filepath.Join(diskA, "sandboxes", "bwrap"), filepath.Join(diskB, "sandboxes", "bwrap"))

	// One sandbox queue named by hand, two stores: the second worker
	// refuses to start, naming the first and both stores.
	shared := "troupe-sandbox-by-hand-" + strconv.Itoa(port)
	first := startTroupeWrapped(t, "worker C", inOwnMounts(t, diskA, home), env, "troupe: worker on",
		"worker", "--sandbox", "bwrap", "--sandbox-queue", shared)
	cmd, cliEnv := troupeCommand(t, "worker", "--sandbox", "bwrap", "--sandbox-queue", shared)
	inOwnMounts(t, diskB, home)(cmd)
	cmd.Env = append(cleanEnv(), append(env, cliEnv)...)
	timer := time.AfterFunc(2*time.Minute, func() { _ = cmd.Process.Kill() }) // a hang detector
	defer timer.Stop()
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("a second store's worker on sandbox queue %s started; its output:\n%s", shared, out)
	}
	want := []string{"sandbox queue " + shared, strconv.Itoa(first.cmd.Process.Pid) + "@", "sandbox store"}
	for _, w := range want {
		if !strings.Contains(string(out), w) {
			t.Errorf("refusal does not say %q:\n%s", w, out)
		}
	}
}

// cleanEnv is the test's environment less its Temporal, Troupe and OpenAI
// settings, as startTroupe gives its commands.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TEMPORAL_") && !strings.HasPrefix(kv, "TROUPE_") && !strings.HasPrefix(kv, "OPENAI_") {
			env = append(env, kv)
		}
	}
	return env
}
