package e2e

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/bwrap"
	"github.com/troupe-dev/troupe/runtime/sandbox/host"
	"github.com/troupe-dev/troupe/runtime/sandbox/local"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/events"
	"github.com/troupe-dev/troupe/workflows/lease"
)

// The test binary doubles as a worker process when envWorker is set.
const (
	envWorker = "TROUPE_E2E_WORKER"
	envAddr   = "TROUPE_E2E_TEMPORAL"
	envModel  = "TROUPE_E2E_MODEL_URL"
	envBlob   = "TROUPE_E2E_BLOB"
	envQueue  = "TROUPE_E2E_QUEUE"
	// envBackend is the worker's sandbox backend: local (the default) or
	// bwrap, with its root beside the blob directory.
	envBackend = "TROUPE_E2E_BACKEND"
	// envHold names a file; while it exists, the worker's bwrap Create
	// holds (see holdingClient).
	envHold = "TROUPE_E2E_HOLD"
	// envAllowRoot is a host directory the worker's sandboxes may copy
	// from (sandbox.Policy), such as the repository a code review reads.
	envAllowRoot = "TROUPE_E2E_ALLOW_ROOT"
)

// workerDeps are what a worker process of these tests connects to, from
// its environment: the Temporal server (envAddr), the scripted model
// (envModel) and the blob store (envBlob). The caller closes the client.
func workerDeps() (client.Client, model.Model, *blob.Store, error) {
	opts, err := workerTelemetry(client.Options{HostPort: os.Getenv(envAddr), Logger: quiet()}) // TestTracesAcrossCrash's; none unless asked.
	if err != nil {
		return nil, nil, nil, err
	}
	c, err := client.Dial(opts)
	if err != nil {
		return nil, nil, nil, err
	}
	m, err := model.New(model.Config{APIKey: "test", BaseURL: os.Getenv(envModel)})
	if err == nil {
		var store *blob.Store
		if store, err = blob.Open(context.Background(), os.Getenv(envBlob)); err == nil {
			return c, m, store, nil
		}
	}
	c.Close()
	return nil, nil, nil, err
}

// workerProcess runs a worker until SIGTERM (or SIGKILL, which is the point).
func workerProcess() int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "worker:", err); return 1 }
	c, m, store, err := workerDeps()
	if err != nil {
		return fail(err)
	}
	defer c.Close()
	backend := cmp.Or(os.Getenv(envBackend), "local")
	var policy sandbox.Policy
	if root := os.Getenv(envAllowRoot); root != "" {
		policy.AllowedRoots = []string{root}
	}
	var sc sandbox.Client
	switch backend {
	case "bwrap":
		bc, err := bwrap.New(bwrap.Config{Root: os.Getenv(envBlob) + "-bwrap", Policy: policy})
		if err != nil {
			return fail(err)
		}
		sc = holdingClient{Client: bc, hold: os.Getenv(envHold)}
	case "docker":
		if sc, err = phaseDocker(os.Getenv(envBlob) + "-docker"); err != nil {
			return fail(err)
		}
	default:
		if sc, err = local.New(local.Config{Root: os.Getenv(envBlob) + "-sandboxes", Policy: policy}); err != nil {
			return fail(err)
		}
	}
	reaped := sc
	sc, m = phaseHooks(sc, m) // TestWorkerKilledInEachPhase's; none unless asked.
	m = redeployHooks(m)      // TestRedeployMidRun's; none unless asked.
	r, err := workflows.NewRunner(workflows.Config{
		Graphs: workerGraphs(backend), Model: m, Store: store,
		// A bus, so its live feed serves followers of other processes
		// (stream_test.go).
		Events:           events.NewBus(),
		HeartbeatTimeout: time.Second, Host: os.Getenv(envQueue), HostTimeout: 2 * time.Second,
		Sandboxes: map[string]sandbox.Client{backend: sc},
	})
	if err != nil {
		return fail(err)
	}
	stop, err := r.StartWorkers(c, os.Getenv(envQueue), worker.Options{StickyScheduleToStartTimeout: time.Second})
	if err != nil {
		return fail(err)
	}
	defer startPhaseReaping(c, backend, reaped)()
	fmt.Println("worker ready")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	<-sig
	stop()
	return 0
}

// holdingClient is a bwrap client whose Create, while the file hold
// exists, holds after the workspace is made and a command has run in it
// (so the session has its cgroup, and a file the manifest did not ask
// for): a worker killed then leaves what a crash mid-create leaves. It
// writes the session's id, and how the worker bounds PIDs, to hold.id.
type holdingClient struct {
	*bwrap.Client
	hold string
}

func (h holdingClient) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Session, error) {
	s, err := h.Client.Create(ctx, spec)
	if err != nil || h.hold == "" {
		return s, err
	}
	if _, err := os.Stat(h.hold); err != nil {
		return s, nil
	}
	if _, err := s.Exec(ctx, sandbox.ExecRequest{Cmd: "echo stale > stale.txt"}); err != nil {
		return nil, err
	}
	if err := os.WriteFile(h.hold+".id", []byte(spec.ID+"\n"+h.LimitsMechanism()), 0o644); err != nil {
		return nil, err
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// spawnWorker starts a worker process; env adds NAME=value settings
// (envBackend, envHold).
func spawnWorker(t *testing.T, modelURL, blobDir, queue string, env ...string) *exec.Cmd {
	t.Helper()
	return spawnWorkerTo(t, os.Stderr, modelURL, blobDir, queue, env...)
}

// spawnWorkerTo starts a worker process as spawnWorker does, with its
// standard error (its log) going to stderr.
func spawnWorkerTo(t *testing.T, stderr io.Writer, modelURL, blobDir, queue string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envWorker+"=1", envAddr+"="+temporalAddr, envModel+"="+modelURL, envBlob+"="+blobDir, envQueue+"="+queue)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		// The worker's local sandboxes (a dead host's workspaces, in
		// TestHostLost) live beside the blob directory.
		_ = os.RemoveAll(blobDir + "-sandboxes")
		_ = os.RemoveAll(blobDir + "-bwrap")
		_ = os.RemoveAll(blobDir + "-docker")
	})
	return cmd
}

// TestWorkerCrash kills the worker process (SIGKILL) while four agents-as-
// tools run, two of them finished and two waiting on the model; a new
// worker process finishes the run with the same output, and the finished
// children's model calls are not made again. With a budget of exactly
// the run's model calls, the run still ends within it: the asks of the
// children cut off, which the new worker sends again (by update, with
// the same ids), count once.
func TestWorkerCrash(t *testing.T) {
	parallel(t)
	for _, tc := range []struct {
		name   string
		budget *agents.Budget
	}{{"no budget", nil}, {"a budget of its calls", &agents.Budget{ModelCalls: 6}}} {
		t.Run(tc.name, func(t *testing.T) { crashWorker(t, tc.budget) })
	}
}

func crashWorker(t *testing.T, budget *agents.Budget) {
	c := dial(t)
	ms, url := modelServer(t)
	blobDir, queue := t.TempDir(), fmt.Sprintf("crash-%d-%d", os.Getpid(), queues.Add(1))
	// The first worker holds the slow children's model calls until it is
	// killed, so they are in flight then however slow the machine.
	held := filepath.Join(t.TempDir(), "held")
	first := spawnWorker(t, url, blobDir, queue, envHoldModel+"=fan worker crash", envHoldModelFile+"="+held)

	run, err := troupeclient.StartRun(context.Background(), c, queue, troupe.RunInput{Graph: "crash", Input: "go", Budget: budget})
	if err != nil {
		t.Fatal(err)
	}
	bossID := run.GetID() + "/0-boss"
	deadline := time.Now().Add(time.Minute)
	for {
		if time.Now().After(deadline) {
			t.Fatal("the fast agent tools did not finish in a minute")
		}
		finished, started := 0, 0
		evs, _ := queryEvents(c, bossID)
		for _, e := range evs {
			switch e.Kind {
			case troupe.EventAgentToolStarted:
				started++
			case troupe.EventAgentToolFinished:
				finished++
			}
		}
		// The slow children are waiting on their model calls.
		if data, _ := os.ReadFile(held); started == 4 && finished == 2 && strings.Count(string(data), "\n") == 2 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	if n := ms.Count("fan-crash"); n != 0 {
		t.Fatalf("%d slow calls answered before the kill, want 0", n)
	}

	spawnWorker(t, url, blobDir, queue)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var res troupe.RunResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	if want := `"part 1 done;part 2 done;part 3 survived;part 4 survived;"`; string(res.Output) != want {
		t.Errorf("output = %s, want %s", res.Output, want)
	}
	for rule, want := range map[string]int{"fan-boss-calls": 1, "fan-fast": 2, "fan-crash": 2, "fan-boss-joins": 1} {
		if got := ms.Count(rule); got != want {
			t.Errorf("%s answered %d times, want %d", rule, got, want)
		}
	}
	if budget == nil {
		return
	}
	// The four children's asks and the boss's second went by update.
	if tr := trafficOf(t, c, run.GetID(), nil); res.Budget == nil || res.Budget.Calls != 6 || tr.asksByUpdate != 5 {
		t.Errorf("budget %+v, %d asks by update; want the 6 calls counted once, 5 asks by update", res.Budget, tr.asksByUpdate)
	}
}

// TestHostLost kills the worker process that holds an agent's sandbox (its
// host) while a command runs there. Another worker, on another host, takes
// the run over: the sandbox is taken as lost once its host stops
// answering, re-provisioned from its last snapshot on the new host, and
// the run completes with the file written before the crash.
func TestHostLost(t *testing.T) {
	parallel(t)
	c := dial(t)
	ms, url := modelServer(t)
	blobDir, queue := t.TempDir(), fmt.Sprintf("hostlost-%d", os.Getpid())
	first := spawnWorker(t, url, blobDir, queue)
	run, err := troupeclient.StartRun(context.Background(), c, queue, troupe.RunInput{Graph: "fault", Input: "go"})
	if err != nil {
		t.Fatal(err)
	}
	childID := run.GetID() + "/0-survivor"
	waitForHang(t, c, ms, childID)
	// The kill comes once the hung call's heartbeat, which names its
	// worker, reached the server: the workflow then knows whose polls not
	// to count when it asks whether the store is still served. (Killed
	// before, on a loaded machine, the dead worker's own recent polls
	// answer yes, and the call is sent there once more: a second host
	// timeout, which this test would report.)
	awaitHeartbeat(t, c, childID, lease.SandboxToolActivityName)
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()

	// The new worker is on another host: same task queue and blob store,
	// its own host queue and sandbox root.
	m, err := model.New(model.Config{APIKey: "test", BaseURL: url})
	if err != nil {
		t.Fatal(err)
	}
	store, err := blob.Open(context.Background(), blobDir)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	lc, err := local.New(local.Config{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	r, err := workflows.NewRunner(workflows.Config{Graphs: append(allGraphs(), sandboxGraphs("local")...), Model: m, Store: store,
		Host: queue + "-second", HostTimeout: 2 * time.Second, Sandboxes: map[string]sandbox.Client{"local": lc}})
	if err != nil {
		t.Fatal(err)
	}
	stop, err := r.StartWorkers(c, queue, worker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var res troupe.RunResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(res.Output), "kept 42") {
		t.Errorf("output = %s, want the file written before the crash", res.Output)
	}
	var restoredOn, lostDetail string
	kinds := map[string]int{}
	for _, e := range eventsOf(t, c, childID) {
		kinds[e.Kind]++
		switch e.Kind {
		case troupe.EventSandboxRestored:
			restoredOn = e.Detail
		case troupe.EventSandboxLost:
			lostDetail = e.Detail
		}
	}
	// One host timeout, not two: the call is not sent to the dead host
	// again (no worker of its store polls), nor a stop after it.
	if kinds[troupe.EventSandboxLost] != 1 || kinds[troupe.EventSandboxRestored] != 1 || kinds[troupe.EventSandboxCallRetry] != 0 {
		t.Errorf("sandbox events = %v, want it lost once and restored once, the call not run again on the dead host", kinds)
	}
	if !strings.Contains(lostDetail, "its host is gone") || !strings.Contains(lostDetail, "exec_command") {
		t.Errorf("sandbox_lost detail = %q, want the host gone and the call lost named", lostDetail)
	}
	if n := sentAfterLoss(t, c, childID); n != 0 {
		t.Errorf("%d activities sent to the dead host's store after its sandbox was lost, want none", n)
	}
	// The model hears what the loss took: the hung call only (the file
	// was in the snapshot of turn 1).
	if n := ms.Count("fault-read-after-loss"); n != 1 {
		t.Errorf("the model was told that nothing but the lost call was lost %d times, want once", n)
	}
	if left := dirEntries(t, root); len(left) != 0 {
		t.Errorf("workspaces left on the new host: %v (restored: %s)", left, restoredOn)
	}
}

// sentAfterLoss counts the activities of workflow id scheduled on the
// task queue of its sandbox's store after the sandbox was lost there (the
// first sandbox tool activity that timed out).
func sentAfterLoss(t *testing.T, c client.Client, id string) int {
	t.Helper()
	queues := map[int64]string{}
	dead, n := "", 0
	it := c.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			queues[ev.GetEventId()] = a.GetTaskQueue().GetName()
			if dead != "" && a.GetTaskQueue().GetName() == dead {
				n++
			}
		}
		if a := ev.GetActivityTaskTimedOutEventAttributes(); a != nil && dead == "" && strings.HasPrefix(queues[a.GetScheduledEventId()], "troupe-sandbox-") {
			dead = queues[a.GetScheduledEventId()]
		}
	}
	if dead == "" {
		t.Fatalf("no sandbox activity of %s timed out", id)
	}
	return n
}

// TestWorkerKilledMidCommand kills the worker process (SIGKILL) while a
// sandbox command runs, its host and workspace intact. The worker that
// comes back on the same host runs the command again on the same
// workspace (at least once), with the same TROUPE_IDEMPOTENCY_KEY: the
// model is never told the sandbox was lost, nothing is restored from a
// snapshot, and the run ends as it would have.
func TestWorkerKilledMidCommand(t *testing.T) {
	parallel(t)
	c := dial(t)
	ms, url := modelServer(t)
	blobDir, queue := t.TempDir(), fmt.Sprintf("midcmd-%d-%d", os.Getpid(), queues.Add(1))
	first := spawnWorker(t, url, blobDir, queue)
	run, err := troupeclient.StartRun(context.Background(), c, queue, troupe.RunInput{Graph: "rerun", Input: "go"})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if ran, _ := filepath.Glob(filepath.Join(blobDir+"-sandboxes", "*", "ran.txt")); len(ran) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the hanging command never started")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	spawnWorker(t, url, blobDir, queue) // The same host: its queue and sandbox root.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var res troupe.RunResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	if got := string(res.Output); got != `"kept 42\n1\n2\n"` {
		t.Errorf("output = %s, want the command's second run to read the file written before the crash, and both runs to have had one idempotency key", got)
	}
	kinds := map[string]int{}
	for _, e := range eventsOf(t, c, run.GetID()+"/0-rerunner") {
		kinds[e.Kind]++
	}
	if kinds[troupe.EventSandboxCallRetry] != 1 || kinds[troupe.EventSandboxLost] != 0 || kinds[troupe.EventSandboxRestored] != 0 {
		t.Errorf("sandbox events = %v, want the call run again once, the sandbox neither lost nor restored", kinds)
	}
	if n := ms.Count("rerun-hang"); n != 1 {
		t.Errorf("the model was asked for the command %d times, want once (the call runs again, not the turn)", n)
	}
}

// TestWorkerKilledDuringCreate kills the worker process (SIGKILL) while it
// creates an agent's bwrap sandbox, after the workspace, its sidecar and
// its cgroup are made. The create's heartbeats stop, so it is retried
// within the heartbeat timeout (not the 30 min start-to-close); the retry,
// on the host's next worker, replaces what the dead one left, the run
// completes, and no workspace, sidecar or cgroup is left behind.
func TestWorkerKilledDuringCreate(t *testing.T) {
	parallel(t)
	c := dial(t)
	ms, url := modelServer(t)
	blobDir, queue := t.TempDir(), fmt.Sprintf("killcreate-%d", os.Getpid())
	root, hold := blobDir+"-bwrap", blobDir+"-hold"
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(hold); os.Remove(hold + ".id") })
	first := spawnWorker(t, url, blobDir, queue, envBackend+"=bwrap", envHold+"="+hold)
	run, err := troupeclient.StartRun(context.Background(), c, queue, troupe.RunInput{Graph: "recreate", Input: "go"})
	if err != nil {
		t.Fatal(err)
	}
	var held []byte
	for deadline := time.Now().Add(time.Minute); len(held) == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the sandbox create did not start in a minute")
		}
		held, _ = os.ReadFile(hold + ".id")
	}
	id, mechanism, _ := strings.Cut(string(held), "\n")
	name := host.DirName(id)
	for _, p := range []string{filepath.Join(root, name), filepath.Join(root, "."+name+".json")} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("before the kill: %v", err)
		}
	}
	if strings.HasPrefix(mechanism, "cgroup") && len(cgroupsNamed(t, name)) == 0 {
		t.Fatalf("before the kill: no cgroup %s (%s)", name, mechanism)
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}

	spawnWorker(t, url, blobDir, queue, envBackend+"=bwrap")
	// The bound: the heartbeat timeout (HostTimeout, 2 s here), the retry's
	// backoff and the run itself; the old 10 min start-to-close would not
	// fit.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var res troupe.RunResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	if out := string(res.Output); !strings.Contains(out, "risen") || !strings.Contains(out, "ash.txt") || strings.Contains(out, "stale") {
		t.Errorf("output = %s, want the manifest's file and nothing of the dead create's", res.Output)
	}
	if n := ms.Count("recreate-read"); n != 1 {
		t.Errorf("recreate-read answered %d times, want 1", n)
	}
	if kinds := countKinds(eventsOf(t, c, run.GetID()+"/0-phoenix")); kinds[troupe.EventSandboxProvisioned] != 1 || kinds[troupe.EventSandboxStopped] != 1 {
		t.Errorf("sandbox events = %v, want one provisioned and stopped", kinds)
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		// Dot directories are the backend's own: .bwrap-etc, .disks.
		if !e.IsDir() || !strings.HasPrefix(e.Name(), ".") {
			t.Errorf("left in the sandbox root: %s", e.Name())
		}
	}
	if _, err := os.Stat(filepath.Join(root, ".disks", name+".img")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the workspace's disk image: %v, want it removed", err)
	}
	if left := cgroupsNamed(t, name); len(left) != 0 {
		t.Errorf("cgroups left: %v", left)
	}
}

// cgroupsNamed lists the cgroups named name in every hierarchy mounted
// under /sys/fs/cgroup.
// cgroupsPrefixed returns the cgroup directories whose name begins with
// prefix, in every hierarchy (not below them).
func cgroupsPrefixed(t *testing.T, prefix string) []string {
	t.Helper()
	var found []string
	filepath.WalkDir("/sys/fs/cgroup", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if strings.HasPrefix(d.Name(), prefix) {
			found = append(found, p)
			return fs.SkipDir
		}
		return nil
	})
	return found
}

func cgroupsNamed(t *testing.T, name string) []string {
	t.Helper()
	var found []string
	filepath.WalkDir("/sys/fs/cgroup", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if d.Name() == name {
			found = append(found, p)
			return fs.SkipDir
		}
		return nil
	})
	return found
}

// awaitHeartbeat waits until an activity of type typ of workflow id has
// heartbeat details recorded on the server.
func awaitHeartbeat(t *testing.T, c client.Client, id, typ string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no heartbeat of %s in %s within a minute", typ, id)
		}
		d, err := c.DescribeWorkflowExecution(context.Background(), id, "")
		if err != nil {
			continue
		}
		for _, a := range d.GetPendingActivities() {
			if a.GetActivityType().GetName() == typ && len(a.GetHeartbeatDetails().GetPayloads()) > 0 {
				return
			}
		}
	}
}
