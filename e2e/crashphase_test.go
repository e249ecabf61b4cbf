package e2e

// TestWorkerKilledInEachPhase: the worker process SIGKILLed in each phase
// of a sandboxed fan-out's life, on bwrap and docker. The worker process
// (crash_test.go's workerProcess) takes its hooks from here: phaseHooks
// wraps its sandbox client and model so that they hold, in the phase
// named by envPhase, until the worker dies; startPhaseReaping reaps its
// orphans every envReap.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/docker"
	"github.com/troupe-dev/troupe/runtime/sandbox/host"
	"github.com/troupe-dev/troupe/workflows/lease"
)

const (
	// envPhase is the phase in which the worker holds until it is killed:
	// one of phases. Holding needs the file envPhaseHold names.
	envPhase     = "TROUPE_E2E_PHASE"
	envPhaseHold = "TROUPE_E2E_PHASE_HOLD"
	// envPhaseIDs names a file to which the worker appends the id of
	// every sandbox it creates; phaseHooks wraps nothing without it.
	envPhaseIDs = "TROUPE_E2E_PHASE_IDS"
	// envReap is the worker's reap interval (a time.Duration); unset, the
	// worker does not reap.
	envReap = "TROUPE_E2E_REAP"
)

// The phases of a sandbox's life the worker is killed in.
var phases = []string{"create", "command", "snapshot", "stop", "model call"}

// phaseBound is how long a run may take after its worker is killed: the
// worker process's HostTimeout (2 s) for a sandbox activity, or the
// workflow task timeout (10 s) for a model call (a local activity), then
// the create's retry backoff (1 s), the new worker's start and the rest
// of the run, with room for a loaded machine. A hang detector, not a
// measurement: the test logs what each case took.
const phaseBound = 3 * time.Minute

// phaseDocker is the worker process's docker client, on the busybox test
// image (the test builds it).
func phaseDocker(root string) (sandbox.Client, error) {
	return docker.New(docker.Config{Root: root, Image: docker.BusyboxImage})
}

// phaseHooks wraps a worker process's sandbox client and model for
// TestWorkerKilledInEachPhase; without envPhaseIDs they are returned as
// they are.
func phaseHooks(sc sandbox.Client, m model.Model) (sandbox.Client, model.Model) {
	ids := os.Getenv(envPhaseIDs)
	if ids == "" {
		return sc, m
	}
	pc := phaseClient{Client: sc, phase: os.Getenv(envPhase), hold: os.Getenv(envPhaseHold), ids: ids}
	return pc, phaseModel{Model: m, c: pc}
}

// startPhaseReaping reaps the worker process's orphan sandboxes every
// envReap (lease.StartReaping); it returns the func that stops it.
// The docker reaper is held to the containers whose workspaces are under
// the client's root: the engine is shared with the other tests and
// packages, whose containers are not this reaper's to judge.
func startPhaseReaping(c client.Client, backend string, sc sandbox.Client) (stop func()) {
	interval, err := time.ParseDuration(os.Getenv(envReap))
	if err != nil {
		return func() {}
	}
	if dc, ok := sc.(*docker.Client); ok {
		sc = rootedReaper{Client: dc, root: dc.Root()}
	}
	return lease.StartReaping(context.Background(), c, "default", map[string]sandbox.Client{backend: sc}, interval,
		func(_ map[string][]string, err error) {
			if err != nil {
				fmt.Fprintln(os.Stderr, "worker: reaping:", err)
			}
		})
}

// rootedReaper keeps the docker sandboxes whose workspaces are not under
// root.
type rootedReaper struct {
	*docker.Client
	root string
}

func (r rootedReaper) Reap(ctx context.Context, keep func(labels map[string]string) bool) ([]string, error) {
	return r.Client.Reap(ctx, func(labels map[string]string) bool {
		return !strings.HasPrefix(labels[docker.LabelWorkspace], r.root+string(filepath.Separator)) || keep(labels)
	})
}

// phaseClient records the id of each sandbox it creates, and holds in
// its phase (while the hold file exists) until the activity's context
// ends, which in the test is when the worker is killed. Entering the
// hold, it adds a line to the file hold+".in".
type phaseClient struct {
	sandbox.Client
	phase, hold, ids string
}

// Root is the wrapped client's, so the worker's sandbox queue is the one
// of its store (workflows.Config.SandboxQueue).
func (c phaseClient) Root() string { return c.Client.(interface{ Root() string }).Root() }

func (c phaseClient) holds(phase string) bool {
	if c.phase != phase {
		return false
	}
	_, err := os.Stat(c.hold)
	return err == nil
}

func (c phaseClient) holdHere(ctx context.Context, what string) error {
	if err := appendLine(c.hold+".in", c.phase+": "+what); err != nil {
		return err
	}
	<-ctx.Done()
	return ctx.Err()
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(f, line)
	return errors.Join(err, f.Close())
}

// Create holds after the sandbox is made and a command has run in it (so
// a bwrap session has its cgroup, a container has run a command).
func (c phaseClient) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Session, error) {
	if err := appendLine(c.ids, spec.ID); err != nil {
		return nil, err
	}
	s, err := c.Client.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	if c.holds("create") {
		if _, err := s.Exec(ctx, sandbox.ExecRequest{Cmd: "echo stale > stale.txt"}); err != nil {
			return nil, err
		}
		return nil, c.holdHere(ctx, spec.ID)
	}
	return phaseSession{Session: s, c: c}, nil
}

func (c phaseClient) Resume(ctx context.Context, st sandbox.State) (sandbox.Session, error) {
	s, err := c.Client.Resume(ctx, st)
	if err != nil {
		return nil, err
	}
	return phaseSession{Session: s, c: c}, nil
}

type phaseSession struct {
	sandbox.Session
	c phaseClient
}

// Exec holds while a process runs in the sandbox: the command the worker
// is killed in (bwrap's dies with the worker; docker's runs on in its
// container).
func (s phaseSession) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if !s.c.holds("command") {
		return s.Session.Exec(ctx, req)
	}
	go s.Session.Exec(ctx, sandbox.ExecRequest{Cmd: "touch .held && exec sleep 600", Timeout: time.Hour})
	for {
		if _, err := os.Stat(filepath.Join(s.State().Workspace, ".held")); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return sandbox.ExecResult{}, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return sandbox.ExecResult{}, s.c.holdHere(ctx, s.State().ID)
}

// Snapshot holds at the archive's first write.
func (s phaseSession) Snapshot(ctx context.Context, w io.Writer) error {
	if !s.c.holds("snapshot") {
		return s.Session.Snapshot(ctx, w)
	}
	return s.Session.Snapshot(ctx, holdWriter{ctx: ctx, s: s})
}

type holdWriter struct {
	ctx context.Context
	s   phaseSession
}

func (h holdWriter) Write([]byte) (int, error) { return 0, h.s.c.holdHere(h.ctx, h.s.State().ID) }

func (s phaseSession) Stop(ctx context.Context) error {
	if s.c.holds("stop") {
		return s.c.holdHere(ctx, s.State().ID)
	}
	return s.Session.Stop(ctx)
}

// phaseModel holds the model call a sandboxed agent makes after its
// command, while its sandbox is up.
type phaseModel struct {
	model.Model
	c phaseClient
}

func (m phaseModel) Respond(ctx context.Context, req model.Request) (*model.Response, error) {
	if strings.Contains(req.Instructions, "phase worker") && m.c.holds("model call") &&
		slices.ContainsFunc(req.Input, func(it agents.Item) bool { return it.Type == agents.ItemFunctionCallOutput }) {
		return nil, m.c.holdHere(ctx, "model")
	}
	return m.Model.Respond(ctx, req)
}

// TestWorkerKilledInEachPhase kills the worker process (SIGKILL) while
// the sandboxes of a fan-out (an agent calling two sandboxed agents as
// tools in one turn, each running a command) are in one phase of their
// lives, on bwrap and docker. A fresh worker process on the same sandbox
// roots (so the same sandbox queue), reaping every second, takes over:
// the run completes within phaseBound with the right output, and once it
// has, the reaper leaves no workspace, sidecar, workspace disk, mount,
// bwrap cgroup or container behind.
func TestWorkerKilledInEachPhase(t *testing.T) {
	parallel(t)
	dc, err := docker.New(docker.Config{Root: t.TempDir(), Image: docker.BusyboxImage})
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	if err := dc.Ping(context.Background()); err != nil {
		t.Fatalf("the Docker Engine does not answer (run scripts/setup.sh): %v", err)
	}
	if err := dc.BuildImage(context.Background(), docker.BuildOptions{Kind: docker.KindBusybox, Name: docker.BusyboxImage}); err != nil {
		t.Fatal(err)
	}
	for _, backend := range []string{"bwrap", "docker"} {
		for _, phase := range phases {
			t.Run(backend+"/"+phase, func(t *testing.T) {
				parallel(t)
				killInPhase(t, backend, phase)
			})
		}
	}
}

func killInPhase(t *testing.T, backend, phase string) {
	c := dial(t)
	_, url := modelServer(t)
	blobDir := t.TempDir()
	queue := fmt.Sprintf("phase-%s-%s-%d", backend, strings.ReplaceAll(phase, " ", "-"), os.Getpid())
	root, hold, ids := blobDir+"-"+backend, blobDir+"-hold", blobDir+"-ids"
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(hold); os.Remove(hold + ".in"); os.Remove(ids) })
	env := []string{envBackend + "=" + backend, envPhaseIDs + "=" + ids}
	first := spawnWorker(t, url, blobDir, queue, append(env, envPhase+"="+phase, envPhaseHold+"="+hold)...)
	run, err := troupeclient.StartRun(context.Background(), c, queue, troupe.RunInput{Graph: "phases", Input: "go"})
	if err != nil {
		t.Fatal(err)
	}
	// Both agents' sandboxes are in the phase when the worker is killed.
	awaitHeld(t, hold, 2, fmt.Sprintf("the worker did not reach the %s phase in a minute", phase))
	// What the checks after the run look for is there now (bwrap's
	// cgroups where it uses them).
	before := strings.Join(phaseLeftovers(t, root, ids), "; ")
	wants := map[string][]string{"bwrap": {"workspace"}, "docker": {"workspace", "container"}}[backend]
	if backend == "bwrap" && len(cgroupsPrefixed(t, "troupe-bwrap-")) > 0 {
		wants = append(wants, "cgroup")
	}
	for _, want := range wants {
		if strings.Count(before, want+" ") < 2 {
			t.Fatalf("before the kill: want a %s per agent, have %s", want, before)
		}
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	killed := time.Now()

	spawnWorker(t, url, blobDir, queue, append(env, envReap+"=1s")...)
	ctx, cancel := context.WithTimeout(context.Background(), phaseBound)
	defer cancel()
	var res troupe.RunResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatalf("the run, %v after the kill: %v", time.Since(killed).Round(time.Millisecond), err)
	}
	took := time.Since(killed)
	var out string
	if err := json.Unmarshal(res.Output, &out); err != nil || strings.ReplaceAll(out, "\n", "") != "part 1 written;part 2 written" {
		t.Errorf("output = %s, want both parts written", res.Output)
	}
	for _, child := range []string{"t1.0/0-left_part", "t1.1/0-right_part"} {
		t.Logf("%s: sandbox events %v", child, countKinds(eventsOf(t, c, run.GetID()+"/0-boss/"+child)))
	}

	// The reaper runs every second: poll until nothing is left, with a
	// deadline that only detects a leftover it never removes.
	var left []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if left = phaseLeftovers(t, root, ids); len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) != 0 {
		t.Errorf("left 30 s after the run: %s", strings.Join(left, "; "))
	}
	t.Logf("%s/%s: the run completed %v after the kill (bound %v); cleaned up %v after the kill",
		backend, phase, took.Round(time.Millisecond), phaseBound, time.Since(killed).Round(time.Millisecond))
}

// phaseLeftovers lists what is left of the sandboxes under root, whose ids
// the file ids holds: workspaces, sidecars, workspace disks and their
// mounts and loop devices, bwrap cgroups, and containers.
func phaseLeftovers(t *testing.T, root, ids string) []string {
	t.Helper()
	return leftovers(t, root, ids, true)
}

// leftovers is phaseLeftovers, the containers left only when containers
// is set (a test on bwrap alone needs no Docker Engine).
func leftovers(t *testing.T, root, ids string, containers bool) []string {
	t.Helper()
	data, err := os.ReadFile(ids)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, id := range strings.Fields(string(data)) {
		names[host.DirName(id)] = true
	}
	if len(names) < 2 {
		t.Fatalf("sandboxes created: %q, want one per agent at least", data)
	}
	var left []string
	for _, e := range dirEntries(t, root) {
		left = append(left, "workspace "+e)
	}
	for name := range names {
		for _, p := range []string{"." + name + ".json", filepath.Join(".disks", name+".img")} {
			if _, err := os.Lstat(filepath.Join(root, p)); !errors.Is(err, fs.ErrNotExist) {
				left = append(left, p)
			}
		}
	}
	// The worker's own disks (the ready pool, templates) are not a
	// session's.
	own := func(p string) bool {
		for _, d := range []string{"pool", "templates", "probe"} {
			if strings.HasPrefix(p, filepath.Join(root, ".disks", d)+"/") {
				return true
			}
		}
		return !strings.HasPrefix(p, root+"/")
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 4 && !own(f[4]) {
				left = append(left, "mount "+f[4])
			}
		}
	}
	loops, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, l := range loops {
		if b, err := os.ReadFile(l); err == nil && !own(strings.TrimSpace(string(b))) {
			left = append(left, "loop device of "+strings.TrimSpace(string(b)))
		}
	}
	filepath.WalkDir("/sys/fs/cgroup", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if names[d.Name()] {
			left = append(left, "cgroup "+p)
			return fs.SkipDir
		}
		return nil
	})
	if !containers {
		slices.Sort(left)
		return left
	}
	out, err := exec.Command("docker", "ps", "-a", "--filter", "label="+docker.LabelBackend+"="+docker.Backend,
		"--format", `{{.ID}} {{.Label "`+docker.LabelWorkspace+`"}}`).Output()
	if err != nil {
		t.Fatalf("docker ps: %v", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if id, ws, _ := strings.Cut(line, " "); strings.HasPrefix(ws, root+"/") {
			left = append(left, "container "+id+" of "+filepath.Base(ws))
		}
	}
	slices.Sort(left)
	return left
}

// TestWorkerKilledDuringStop kills the worker process (SIGKILL) while it
// stops the deal desk's reviewers' bwrap sandboxes at their end, their
// host and workspaces intact. The stops go again on the host's next
// worker (which does not reap): each reviewer records the retry and a
// stop that did not fail, the run completes, and nothing of the
// sandboxes is left. Before, the stop was recorded as failed and the
// workspaces stayed on the host until a reaper found them. With
// -histories, the run's histories are a replay set (go test ./e2e -run
// TestWorkerKilledDuringStop -histories
// ../workflows/testdata/histories/v14-stop-retry).
func TestWorkerKilledDuringStop(t *testing.T) {
	parallel(t)
	c := dial(t)
	_, url := modelServer(t)
	blobDir := t.TempDir()
	queue := fmt.Sprintf("killstop-%d-%d", os.Getpid(), queues.Add(1))
	root, hold, ids := blobDir+"-bwrap", blobDir+"-hold", blobDir+"-ids"
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(hold); os.Remove(hold + ".in"); os.Remove(ids) })
	env := []string{envBackend + "=bwrap", envPhaseIDs + "=" + ids}
	first := spawnWorker(t, url, blobDir, queue, append(env, envPhase+"=stop", envPhaseHold+"="+hold)...)
	run, err := troupeclient.StartRun(context.Background(), c, queue, troupe.RunInput{Graph: "dealdesk", Input: "Review the Acme Corp deal"})
	if err != nil {
		t.Fatal(err)
	}
	// Both reviewers' stops are under way when the worker is killed.
	awaitHeld(t, hold, 2, "the reviewers' sandboxes were not stopping within a minute")
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}
	spawnWorker(t, url, blobDir, queue, env...)
	ctx, cancel := context.WithTimeout(context.Background(), phaseBound)
	defer cancel()
	var res troupe.RunResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(res.Output), `"pricing_risk":"high"`) {
		t.Errorf("output = %s, want the deal desk's recommendation", res.Output)
	}
	events, err := troupeclient.Events(ctx, c, run.GetID())
	if err != nil {
		t.Fatal(err)
	}
	workflows := map[string]bool{}
	retries, stops := map[string]int{}, map[string][]string{}
	for _, e := range events {
		workflows[e.WorkflowID] = true
		switch e.Kind {
		case troupe.EventSandboxStopRetry:
			retries[e.Agent]++
		case troupe.EventSandboxStopped:
			stops[e.Agent] = append(stops[e.Agent], e.Detail)
		}
	}
	for _, agent := range []string{"pricing_reviewer", "rollout_reviewer"} {
		if retries[agent] != 1 || len(stops[agent]) != 1 || strings.Contains(stops[agent][0], "stop failed") {
			t.Errorf("%s: %d stop retries, stopped %q; want the stop run again once, and done", agent, retries[agent], stops[agent])
		}
	}
	if left := leftovers(t, root, ids, false); len(left) != 0 {
		t.Errorf("left after the run: %s", strings.Join(left, "; "))
	}
	if *historiesDir != "" {
		saveHistories(t, c, workflows, *historiesDir, "dealdesk")
	}
}

// awaitHeld waits until n sandboxes are held in the worker's phase (each
// writes a line to hold+".in" as it is held), for a minute at most, and
// fails the test with failure after that.
func awaitHeld(t *testing.T, hold string, n int, failure string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if in, _ := os.ReadFile(hold + ".in"); strings.Count(string(in), "\n") == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(failure)
		}
	}
}
