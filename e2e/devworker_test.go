package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/examples/codereview"
	"github.com/troupe-dev/troupe/internal/exampletest"
)

// TestDevBesideWorker: `troupe dev` (with its worker) and a `troupe
// worker` against it, two processes of one host with their own
// TROUPE_HOMEs (and one blob store) on the one task queue, both with bwrap sandboxes, run six
// code reviews at once. Each reviewer's sandbox lives in the store of the
// process that created it, and every one of its activities reaches that
// process: each review quotes what its commands read in its sandbox,
// every sandbox tool call succeeds, no sandbox is lost or misrouted, and
// each is removed by its holder. (With sandbox queues named by the host
// alone, about half of the reviewers' commands reach the other process
// and fail with troupe.SandboxMisrouted.)
func TestDevBesideWorker(t *testing.T) {
	parallel(t) // mostly waiting, on a server or worker of its own
	repo := exampletest.ReviewRepo(t)
	port := freePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	// Their own homes, one blob store: the workers of a queue must share
	// it, or a run moving between them would not find its transcript
	// (the second refuses to start otherwise).
	blobs := "file://" + t.TempDir()
	env := func(home string) []string {
		return []string{"TROUPE_HOME=" + home, "TEMPORAL_ADDRESS=" + addr, "TROUPE_BLOB_URL=" + blobs}
	}
	devHome, workerHome := t.TempDir(), t.TempDir()
	// The repository is an allowed root of each: by flag for one, by the
	// environment for the other.
	dev := startTroupe(t, "dev", env(devHome), "troupe: dev server up",
		"dev", "--port", strconv.Itoa(port), "--ui-port", "-1", "--sandbox", "bwrap", "--allow-root", repo)
	worker := startTroupe(t, "worker", append(env(workerHome), "TROUPE_SANDBOX_ALLOWED_ROOTS="+repo), "troupe: worker on", "worker", "--sandbox", "bwrap")
	if dev.queue == "" || dev.queue == worker.queue {
		t.Errorf("sandbox queues: dev %q, worker %q; want two", dev.queue, worker.queue)
	}

	c, err := client.Dial(client.Options{HostPort: addr, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	all := startReviews(t, c, repo, 6)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a hang detector
	defer cancel()
	created := map[string]int{} // sandboxes by the process that created them
	for i, s := range all {
		var res troupe.RunResult
		if err := s.run.Get(ctx, &res); err != nil {
			t.Fatalf("run %d: %v\ndev:\n%s\nworker:\n%s", i, err, dev.log.String(), worker.log.String())
		}
		t.Run(fmt.Sprintf("run%d", i), func(t *testing.T) {
			exampletest.CheckReview(t, res.Output, s.out)
			for _, e := range runEvents(t, c, s.run.GetID()) {
				switch {
				case e.Kind == troupe.EventSandboxLost:
					t.Errorf("%s: sandbox lost: %s", e.Agent, e.Detail)
				case strings.Contains(e.Detail, troupe.ErrSandboxMisrouted):
					t.Errorf("%s: %s: %s", e.Agent, e.Kind, e.Detail)
				case e.Kind == troupe.EventToolResult && sandboxTools[e.Tool] && strings.HasPrefix(e.Detail, "Error"):
					t.Errorf("%s: %s failed: %s", e.Agent, e.Tool, e.Detail)
				case e.Kind == troupe.EventAgentToolStarted:
					by := sandboxHolder(t, c, e.Child, map[int]string{dev.cmd.Process.Pid: "dev", worker.cmd.Process.Pid: "worker"})
					created[by]++
				}
			}
		})
	}
	// Both processes held sandboxes, or the runs did not test routing.
	t.Logf("sandboxes created by process: %v", created)
	if created["dev"] == 0 || created["worker"] == 0 {
		t.Errorf("sandboxes created by process: %v; want some by each", created)
	}
	// Each sandbox was stopped, and so removed, by the process that held it.
	emptyDirs(t, filepath.Join(devHome, "sandboxes", "bwrap"), filepath.Join(workerHome, "sandboxes", "bwrap"))
}

// sandboxTools are the tools that run in an agent's sandbox.
var sandboxTools = map[string]bool{"exec_command": true, "apply_patch": true, "view_image": true}

// troupeProc is a troupe command running as a process of the test.
type troupeProc struct {
	cmd   *exec.Cmd
	log   *lockedBuffer // its stderr
	queue string        // its sandbox queue, from its start-up line
}

var sandboxQueueLine = regexp.MustCompile(`; sandbox queue (\S+)`)

// startTroupe runs the troupe command line args as a process, with env
// on top of the test's environment less its Temporal, Troupe and OpenAI
// settings (so the offline scenarios answer), and returns once its
// stderr shows ready. The test's cleanup stops it with SIGTERM.
func startTroupe(t *testing.T, name string, env []string, ready string, args ...string) *troupeProc {
	t.Helper()
	return startTroupeWrapped(t, name, nil, env, ready, args...)
}

// startTroupeWrapped is startTroupe with the command rewritten by wrap
// (run under another program, say) before it starts.
func startTroupeWrapped(t *testing.T, name string, wrap func(*exec.Cmd), env []string, ready string, args ...string) *troupeProc {
	t.Helper()
	cmd, cliEnv := troupeCommand(t, args...)
	if wrap != nil {
		wrap(cmd)
	}
	cmd.Env = []string{cliEnv}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TEMPORAL_") && !strings.HasPrefix(kv, "TROUPE_") && !strings.HasPrefix(kv, "OPENAI_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &troupeProc{cmd: cmd, log: &lockedBuffer{}}
	exited := make(chan struct{})
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(time.Minute): // a hang detector
			t.Errorf("troupe %s did not exit within a minute of SIGTERM", name)
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	up := make(chan struct{})
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			p.log.WriteLine(line)
			if m := sandboxQueueLine.FindStringSubmatch(line); m != nil && p.queue == "" {
				p.queue = m[1]
			}
			if strings.Contains(line, ready) {
				close(up)
			}
		}
		_ = cmd.Wait()
	}()
	select {
	case <-up:
	case <-exited:
		t.Fatalf("troupe %s exited:\n%s", name, p.log.String())
	case <-time.After(2 * time.Minute): // a hang detector
		t.Fatalf("troupe %s did not start in 2 minutes:\n%s", name, p.log.String())
	}
	return p
}

// sandboxHolder names the process that ran the sandbox activities of the
// agent workflow id, by the pids in the identities of the workers that
// ran them (pids maps them to names), and fails the test unless one
// process ran them all.
func sandboxHolder(t *testing.T, c client.Client, id string, pids map[int]string) string {
	t.Helper()
	ran := map[string][]string{} // process → activities
	it := c.GetWorkflowHistory(context.Background(), id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	types := map[int64]string{}
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", id, err)
		}
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil && strings.HasPrefix(a.GetActivityType().GetName(), "troupe.Sandbox") {
			types[e.GetEventId()] = a.GetActivityType().GetName()
		}
		if a := e.GetActivityTaskStartedEventAttributes(); a != nil && types[a.GetScheduledEventId()] != "" {
			pid, _, _ := strings.Cut(a.GetIdentity(), "@")
			n, _ := strconv.Atoi(pid)
			by := pids[n]
			if by == "" {
				by = a.GetIdentity()
			}
			ran[by] = append(ran[by], types[a.GetScheduledEventId()])
		}
	}
	if len(ran) != 1 {
		t.Errorf("%s: sandbox activities ran on %d processes, want one: %v", id, len(ran), ran)
	}
	for by := range ran {
		return by
	}
	return ""
}

// startedReview is a code review started, and the file its output goes
// to.
type startedReview struct {
	run client.WorkflowRun
	out string
}

// startReviews starts n code reviews of repo's HEAD on the default task
// queue, each writing its output to a file of its own.
func startReviews(t *testing.T, c client.Client, repo string, n int) []startedReview {
	t.Helper()
	var all []startedReview
	for i := range n {
		out := filepath.Join(t.TempDir(), "review")
		run, err := troupeclient.StartRun(context.Background(), c, troupe.DefaultTaskQueue, troupe.RunInput{
			Graph: "codereview", Input: "Review this change",
			Vars: map[string]string{codereview.VarRepo: repo, codereview.VarRef: "HEAD", codereview.VarOut: out},
		})
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		all = append(all, startedReview{run, out})
	}
	return all
}
