package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/local"
	"github.com/troupe-dev/troupe/workflows"
)

// The test binary doubles as a worker process when envWorker is set.
const (
	envWorker = "TROUPE_E2E_WORKER"
	envAddr   = "TROUPE_E2E_TEMPORAL"
	envModel  = "TROUPE_E2E_MODEL_URL"
	envBlob   = "TROUPE_E2E_BLOB"
	envQueue  = "TROUPE_E2E_QUEUE"
)

// workerProcess runs a worker until SIGTERM (or SIGKILL, which is the point).
func workerProcess() int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "worker:", err); return 1 }
	c, err := client.Dial(client.Options{HostPort: os.Getenv(envAddr), Logger: quiet()})
	if err != nil {
		return fail(err)
	}
	defer c.Close()
	m, err := model.New(model.Config{APIKey: "test", BaseURL: os.Getenv(envModel)})
	if err != nil {
		return fail(err)
	}
	store, err := blob.Open(context.Background(), os.Getenv(envBlob))
	if err != nil {
		return fail(err)
	}
	lc, err := local.New(local.Config{Root: os.Getenv(envBlob) + "-sandboxes"})
	if err != nil {
		return fail(err)
	}
	r, err := workflows.NewRunner(workflows.Config{
		Graphs: append(allGraphs(), sandboxGraphs("local")...), Model: m, Store: store,
		HeartbeatTimeout: time.Second, Host: os.Getenv(envQueue), HostTimeout: 2 * time.Second,
		Sandboxes: map[string]sandbox.Client{"local": lc},
	})
	if err != nil {
		return fail(err)
	}
	stop, err := r.StartWorkers(c, os.Getenv(envQueue), worker.Options{StickyScheduleToStartTimeout: time.Second})
	if err != nil {
		return fail(err)
	}
	fmt.Println("worker ready")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	<-sig
	stop()
	return 0
}

func spawnWorker(t *testing.T, modelURL, blobDir, queue string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envWorker+"=1", envAddr+"="+temporalAddr, envModel+"="+modelURL, envBlob+"="+blobDir, envQueue+"="+queue)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		// The worker's local sandboxes (a dead host's workspaces, in
		// TestHostLost) live beside the blob directory.
		_ = os.RemoveAll(blobDir + "-sandboxes")
	})
	return cmd
}

// TestWorkerCrash kills the worker process (SIGKILL) while four agents-as-
// tools run, two of them finished and two waiting on the model; a new
// worker process finishes the run with the same output, and the finished
// children's model calls are not made again.
func TestWorkerCrash(t *testing.T) {
	c := dial(t)
	ms, url := modelServer(t)
	blobDir, queue := t.TempDir(), fmt.Sprintf("crash-%d", os.Getpid())
	first := spawnWorker(t, url, blobDir, queue)

	run, err := workflows.StartRun(context.Background(), c, queue, workflows.RunInput{Graph: "crash", Input: "go"})
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
			case workflows.EventAgentToolStarted:
				started++
			case workflows.EventAgentToolFinished:
				finished++
			}
		}
		if started == 4 && finished == 2 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // the slow children are now waiting on their model calls
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
	var res workflows.RunResult
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
}

// TestHostLost kills the worker process that holds an agent's sandbox (its
// host) while a command runs there. Another worker, on another host, takes
// the run over: the sandbox is taken as lost once its host stops
// answering, re-provisioned from its last snapshot on the new host, and
// the run completes with the file written before the crash.
func TestHostLost(t *testing.T) {
	c := dial(t)
	ms, url := modelServer(t)
	blobDir, queue := t.TempDir(), fmt.Sprintf("hostlost-%d", os.Getpid())
	first := spawnWorker(t, url, blobDir, queue)
	run, err := workflows.StartRun(context.Background(), c, queue, workflows.RunInput{Graph: "fault", Input: "go"})
	if err != nil {
		t.Fatal(err)
	}
	childID := run.GetID() + "/0-survivor"
	waitForHang(t, c, ms, childID)
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
	var res workflows.RunResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(res.Output), "kept 42") {
		t.Errorf("output = %s, want the file written before the crash", res.Output)
	}
	var restoredOn string
	kinds := map[string]int{}
	for _, e := range eventsOf(t, c, childID) {
		kinds[e.Kind]++
		if e.Kind == workflows.EventSandboxRestored {
			restoredOn = e.Detail
		}
	}
	if kinds[workflows.EventSandboxLost] != 1 || kinds[workflows.EventSandboxRestored] != 1 {
		t.Errorf("sandbox events = %v, want it lost once and restored once", kinds)
	}
	if left := dirEntries(t, root); len(left) != 0 {
		t.Errorf("workspaces left on the new host: %v (restored: %s)", left, restoredOn)
	}
}
