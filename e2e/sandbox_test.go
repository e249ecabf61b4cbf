package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/model/scripted"
	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/bwrap"
	"github.com/troupe-dev/troupe/runtime/sandbox/docker"
	"github.com/troupe-dev/troupe/runtime/sandbox/local"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/lease"
)

// queryEvents returns a workflow's events (a closed workflow answers too).
func queryEvents(c client.Client, id string) ([]troupe.Event, error) {
	resp, err := c.QueryWorkflow(context.Background(), id, "", troupe.EventsQuery, 0)
	if err != nil {
		return nil, err
	}
	var evs []troupe.Event
	err = resp.Get(&evs)
	return evs, err
}

// eventsOf is queryEvents for a workflow that must answer.
func eventsOf(t *testing.T, c client.Client, id string) []troupe.Event {
	t.Helper()
	evs, err := queryEvents(c, id)
	if err != nil {
		t.Fatalf("events of %s: %v", id, err)
	}
	return evs
}

func countKinds(evs []troupe.Event) map[string]int {
	n := map[string]int{}
	for _, e := range evs {
		n[e.Kind]++
	}
	return n
}

// dirEntries lists what is left under a sandbox root.
func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") { // a backend's own files, such as bwrap's /etc
			names = append(names, e.Name())
		}
	}
	return names
}

var sha256Line = regexp.MustCompile(`[0-9a-f]{64}`)

// TestSandboxIdleSuspend: while the agent waits on a slow agent tool, its
// idle sandbox is suspended (snapshot, then stop); the next command
// restores it, and the file written before is byte-identical.
func TestSandboxIdleSuspend(t *testing.T) {
	parallel(t)
	c := dial(t)
	_, url := modelServer(t)
	root := t.TempDir()
	queue := startWorker(t, c, url, model.APIResponses, func(cfg *workflows.Config) {
		lc, err := local.New(local.Config{Root: root})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Graphs = append(cfg.Graphs, sandboxGraphs("")...)
		cfg.Sandboxes = map[string]sandbox.Client{"local": lc}
		cfg.SandboxIdleTimeout = time.Second
	})
	res, err := runGraph(t, c, queue, troupe.RunInput{Graph: "idle", Input: "go"})
	if err != nil {
		t.Fatal(err)
	}
	evs := eventsOf(t, c, res.WorkflowID+"/0-keeper")
	kinds := countKinds(evs)
	if kinds[troupe.EventSandboxSuspended] != 1 || kinds[troupe.EventSandboxRestored] != 1 || kinds[troupe.EventSandboxStopped] != 1 {
		t.Errorf("sandbox events = %v, want one suspend, one restore, one stop", kinds)
	}
	var sums []string
	for _, e := range evs {
		if e.Kind == troupe.EventToolResult && e.Tool == "exec_command" {
			sums = append(sums, sha256Line.FindString(e.Detail))
		}
	}
	if len(sums) != 2 || sums[0] == "" || sums[0] != sums[1] || !strings.Contains(string(res.Output), sums[0]) {
		t.Errorf("checksums before and after the suspend: %q, output %s", sums, res.Output)
	}
	if left := dirEntries(t, root); len(left) != 0 {
		t.Errorf("workspaces left: %v", left)
	}
}

// TestSandboxDiesMidRun kills the sandbox while a command runs in it —
// the container (docker), the bwrap process (bwrap) — and the run
// completes from the last snapshot: the model sees a tool error for the
// command in flight, and the file written before is there.
func TestSandboxDiesMidRun(t *testing.T) {
	// Not parallel: it kills every bwrap process of the test binary, other tests' too.
	tests := []struct {
		backend string
		client  func(t *testing.T, root string) sandbox.Client
		kill    func(t *testing.T, childID string)
		lost    bool // the whole sandbox is gone, not just the command
	}{
		{"docker", func(t *testing.T, root string) sandbox.Client {
			dc, err := docker.New(docker.Config{Root: root, Image: docker.BusyboxImage})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { dc.Close() }) // Before root goes: it holds workspace file systems.
			if err := dc.Ping(context.Background()); err != nil {
				t.Fatalf("the Docker Engine does not answer (run scripts/setup.sh): %v", err)
			}
			if err := dc.BuildImage(context.Background(), docker.BuildOptions{Kind: "busybox", Name: docker.BusyboxImage}); err != nil {
				t.Fatal(err)
			}
			return dc
		}, func(t *testing.T, childID string) {
			// The container names its workflow, cluster and namespace
			// (see lease.KeepOpen).
			cluster, err := lease.ClusterID(context.Background(), dial(t))
			if err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command("docker", "ps", "-q", "--filter", "label=troupe.workflow="+childID,
				"--filter", "label="+troupe.LabelCluster+"="+cluster, "--filter", "label="+troupe.LabelNamespace+"=default").Output()
			ids := strings.Fields(string(out))
			if err != nil || len(ids) != 1 {
				t.Fatalf("containers of %s: %q, %v", childID, out, err)
			}
			if out, err := exec.Command("docker", "kill", ids[0]).CombinedOutput(); err != nil {
				t.Fatalf("docker kill: %v: %s", err, out)
			}
		}, true},
		{"bwrap", func(t *testing.T, root string) sandbox.Client {
			bc, err := bwrap.New(bwrap.Config{Root: root})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { bc.Close() }) // Before root goes: it holds workspace file systems.
			return bc
		}, func(t *testing.T, _ string) {
			if n := killChildren(t, "bwrap"); n == 0 {
				t.Fatal("no bwrap process to kill")
			}
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.backend, func(t *testing.T) {
			c := dial(t)
			ms, url := modelServer(t)
			root := t.TempDir()
			queue := startWorker(t, c, url, model.APIResponses, func(cfg *workflows.Config) {
				cfg.Graphs = append(cfg.Graphs, sandboxGraphs(tc.backend)...)
				cfg.Sandboxes[tc.backend] = tc.client(t, root)
			})
			run, err := troupeclient.StartRun(context.Background(), c, queue, troupe.RunInput{Graph: "fault", Input: "go"})
			if err != nil {
				t.Fatal(err)
			}
			childID := run.GetID() + "/0-survivor"
			// Wait until the hanging command runs, then kill the sandbox.
			waitForHang(t, c, ms, childID)
			time.Sleep(500 * time.Millisecond)
			tc.kill(t, childID)
			var res troupe.RunResult
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := run.Get(ctx, &res); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(res.Output), "kept 42") {
				t.Errorf("output = %s, want the file written before the kill", res.Output)
			}
			kinds := countKinds(eventsOf(t, c, childID))
			if tc.lost && (kinds[troupe.EventSandboxLost] != 1 || kinds[troupe.EventSandboxRestored] != 1) {
				// The kill shows either in the command in flight or in
				// the next one; either way, once.
				t.Errorf("sandbox events = %v, want it lost once and restored once", kinds)
			}
			if left := dirEntries(t, root); len(left) != 0 {
				t.Errorf("workspaces left: %v", left)
			}
			if tc.backend == "docker" {
				out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=troupe.workflow="+childID).Output()
				if ids := strings.Fields(string(out)); len(ids) != 0 {
					t.Errorf("containers left: %v", ids)
				}
			}
		})
	}
}

// waitForHang waits until the fault scenario's hanging command runs.
func waitForHang(t *testing.T, c client.Client, ms *scripted.Server, childID string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for ms.Count("fault-hang") == 0 || !hasEvent(c, childID, troupe.EventToolCalled, 2) {
		if time.Now().After(deadline) {
			t.Fatal("the hanging command never started")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func hasEvent(c client.Client, id, kind string, turn int) bool {
	evs, _ := queryEvents(c, id)
	for _, e := range evs {
		if e.Kind == kind && e.Turn == turn {
			return true
		}
	}
	return false
}

// killChildren SIGKILLs this process's children named comm and returns
// how many it killed.
func killChildren(t *testing.T, comm string) int {
	t.Helper()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	n := 0
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		s := string(data)
		open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || closing < 0 || s[open+1:closing] != comm {
			continue
		}
		fields := strings.Fields(s[closing+1:])
		if len(fields) < 2 || fields[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		if err := exec.Command("kill", "-9", fmt.Sprint(pid)).Run(); err == nil {
			n++
		}
	}
	return n
}

// TestSandboxStoppedOnCancel cancels a run while a command runs in its
// sandbox: the sandbox is stopped all the same.
func TestSandboxStoppedOnCancel(t *testing.T) {
	parallel(t)
	c := dial(t)
	ms, url := modelServer(t)
	root := t.TempDir()
	queue := startWorker(t, c, url, model.APIResponses, func(cfg *workflows.Config) {
		lc, err := local.New(local.Config{Root: root})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Graphs = append(cfg.Graphs, sandboxGraphs("local")...)
		cfg.Sandboxes = map[string]sandbox.Client{"local": lc}
	})
	run, err := troupeclient.StartRun(context.Background(), c, queue, troupe.RunInput{Graph: "fault", Input: "go"})
	if err != nil {
		t.Fatal(err)
	}
	childID := run.GetID() + "/0-survivor"
	waitForHang(t, c, ms, childID)
	if err := c.CancelWorkflow(context.Background(), run.GetID(), ""); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run.Get(ctx, nil); err == nil {
		t.Fatal("a cancelled run succeeded")
	}
	// The child closes after its clean-up; wait for it.
	for {
		d, err := c.DescribeWorkflowExecution(ctx, childID, "")
		if err != nil {
			t.Fatal(err)
		}
		if d.WorkflowExecutionInfo.CloseTime != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if kinds := countKinds(eventsOf(t, c, childID)); kinds[troupe.EventSandboxStopped] != 1 {
		t.Errorf("sandbox events = %v, want it stopped", kinds)
	}
	if left := dirEntries(t, root); len(left) != 0 {
		t.Errorf("workspaces left after the cancel: %v", left)
	}
}

// TestReapOrphans: the sandboxes (docker containers, local and bwrap
// workspaces) whose workflow has closed are reaped by a worker's
// StartReaping; those of an open workflow, and of another cluster or
// namespace, are kept.
func TestReapOrphans(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	c := dial(t)
	_, url := modelServer(t)
	queue := startWorker(t, c, url, model.APIResponses, nil)
	closed, err := runGraph(t, c, queue, troupe.RunInput{Graph: "chain", Input: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	// No worker listens on this queue: the run stays open.
	open, err := troupeclient.StartRun(ctx, c, "nobody-listens", troupe.RunInput{Graph: "chain", Input: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.TerminateWorkflow(ctx, open.GetID(), "", "test over")
	dc, err := docker.New(docker.Config{Root: t.TempDir(), Image: docker.BusyboxImage})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dc.Close() })
	if err := dc.BuildImage(ctx, docker.BuildOptions{Kind: "busybox", Name: docker.BusyboxImage}); err != nil {
		t.Fatal(err)
	}
	cluster, err := lease.ClusterID(ctx, c)
	if err != nil || cluster == "" {
		t.Fatalf("cluster id %q: %v", cluster, err)
	}
	ours := func(wf string) map[string]string {
		return map[string]string{"troupe.workflow": wf, troupe.LabelCluster: cluster, troupe.LabelNamespace: "default"}
	}
	specs := map[string]map[string]string{
		"orphan": ours(closed.WorkflowID),
		"owned":  ours(open.GetID()),
		// Sandboxes of another server's or namespace's workflows are not
		// this reaper's to judge, though it does not know their workflows.
		"foreign-cluster":   {"troupe.workflow": "elsewhere", troupe.LabelCluster: "another-cluster", troupe.LabelNamespace: "default"},
		"foreign-namespace": {"troupe.workflow": "elsewhere", troupe.LabelCluster: cluster, troupe.LabelNamespace: "other"},
	}
	lc, err := local.New(local.Config{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	bc, err := bwrap.New(bwrap.Config{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	clients := map[string]sandbox.Client{"docker": dc, "local": lc, "bwrap": bc}
	sessions := map[string]map[string]sandbox.Session{}
	for backend, sc := range clients {
		sessions[backend] = map[string]sandbox.Session{}
		for name, labels := range specs {
			s, err := sc.Create(ctx, sandbox.Spec{ID: fmt.Sprintf("reap-%s-%d", name, os.Getpid()), Labels: labels})
			if err != nil {
				t.Fatal(err)
			}
			sessions[backend][name] = s
			defer s.Stop(ctx)
		}
	}
	// The docker reaper judges only the containers of this test's root:
	// the engine is shared with the other packages' tests, whose
	// containers (of no cluster, of workflows this server does not know)
	// it would take for orphans.
	reapers := map[string]sandbox.Client{"docker": rootedReaper{Client: dc, root: dc.Root()}, "local": lc, "bwrap": bc}
	rounds := make(chan map[string][]string, 1)
	stop := lease.StartReaping(ctx, c, "default", reapers, time.Hour, func(removed map[string][]string, err error) {
		if err != nil {
			t.Errorf("reaping: %v", err)
		}
		rounds <- removed
	})
	removed := <-rounds // The first round runs at once.
	stop()
	out, err := exec.Command("docker", "ps", "-aq", "--filter", "label=troupe.session="+sessions["docker"]["orphan"].State().ID).Output()
	if err != nil || len(strings.Fields(string(out))) != 0 {
		t.Errorf("the orphan's container is still there: %q %v", out, err)
	}
	for backend, byName := range sessions {
		if backend != "docker" && !slices.Contains(removed[backend], byName["orphan"].State().ID) {
			t.Errorf("%s: removed %v, want the orphan among them", backend, removed[backend])
		}
		if err := byName["orphan"].Alive(ctx); !errors.Is(err, sandbox.ErrGone) {
			t.Errorf("%s: the orphan: Alive = %v, want ErrGone", backend, err)
		}
		for _, name := range []string{"owned", "foreign-cluster", "foreign-namespace"} {
			if err := byName[name].Alive(ctx); err != nil {
				t.Errorf("%s: the %s sandbox was reaped: %v", backend, name, err)
			}
		}
	}
}
