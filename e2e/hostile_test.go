package e2e

// A hostile model against the worker that reads its workspace (issue 8):
// TestHostileWorkspace runs, in a worker process of its own (so that its
// memory is its own to measure), an agent whose scripted model fills its
// workspace with what could crash, exhaust or block that worker, then
// points apply_patch and view_image at it.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"
	"golang.org/x/sys/unix"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/runtime/model/scripted"
	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/bwrap"
	"github.com/troupe-dev/troupe/runtime/sandbox/docker"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/lease"
)

// envHostile makes the test binary the worker of TestHostileWorkspace,
// for the backend it names; envAddr, envModel, envBlob and envQueue say
// the rest, as for workerProcess.
const envHostile = "TROUPE_E2E_HOSTILE_WORKER"

// hostileRSSBound bounds the worker process's peak RSS (VmHWM) over a run
// whose workspace holds 1.1 GiB (3.1 GiB apparent, with the sparse file):
// a worker that held a file or a snapshot in memory would pass it.
// Measured on 2 cores: 183-208 MiB with bwrap and with docker, of which
// 112-160 MiB before the run (the test binary links a Temporal server);
// the run itself adds 45-57 MiB, with GOMAXPROCS=16 too.
const hostileRSSBound = 320 << 20

// hostileGraph is the graph of TestHostileWorkspace; its scenario rules
// are the hostile-* ones. The workspace may hold 4 GiB, room for the
// files the model makes.
func hostileGraph(backend string) *agents.Graph {
	return agents.MustGraph("hostile", "vandal", &agents.Agent{Name: "vandal", Instructions: "hostile workspace",
		Sandbox: &agents.Sandbox{Backend: backend, Options: sandbox.Options{Limits: sandbox.Limits{DiskBytes: 4 << 30}}}})
}

// hostileWorkerProcess runs the worker of TestHostileWorkspace until
// SIGTERM, with the runner's default timeouts: the test asserts the
// worker's memory and that it stops, not how fast it is.
func hostileWorkerProcess() int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "hostile worker:", err); return 1 }
	backend := os.Getenv(envHostile)
	c, m, store, err := workerDeps()
	if err != nil {
		return fail(err)
	}
	defer c.Close()
	defer store.Close()
	root := os.Getenv(envBlob) + "-" + backend
	var sc sandbox.Client
	switch backend {
	case bwrap.Backend:
		sc, err = bwrap.New(bwrap.Config{Root: root})
	case docker.Backend:
		sc, err = docker.New(docker.Config{Root: root, Image: docker.BusyboxImage})
	default:
		err = fmt.Errorf("backend %q: want bwrap or docker", backend)
	}
	if err != nil {
		return fail(err)
	}
	r, err := workflows.NewRunner(workflows.Config{Graphs: []*agents.Graph{hostileGraph(backend)}, Model: m, Store: store,
		Host: os.Getenv(envQueue), Sandboxes: map[string]sandbox.Client{backend: sc}})
	if err != nil {
		return fail(err)
	}
	stop, err := r.StartWorkers(c, os.Getenv(envQueue), worker.Options{})
	if err != nil {
		return fail(err)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	fmt.Println("worker ready")
	<-sig
	stop()
	return 0
}

// TestHostileWorkspace: turn 1 of the model makes a 2 GiB sparse file, a
// 100 MB line, 1 GiB of random data, a tree 200 deep, a FIFO with no
// writer, a FIFO and a symlink loop; turn 2 writes to the second FIFO
// forever in one call (and the test from the host, see fifoWriter) while,
// in parallel, apply_patch edits the sparse file, the line and both FIFOs
// and view_image shows both FIFOs, the random data and the loop; turn 3
// answers with their outputs. The run completes with a clear error for
// each; nothing reads the FIFO; the snapshots of the 1 GiB workspace
// succeed at their first attempt (and hold it), no sandbox is lost; the
// worker's peak RSS stays under hostileRSSBound; and the worker, stopped
// with SIGTERM, exits.
func TestHostileWorkspace(t *testing.T) {
	parallel(t)
	for _, backend := range []string{bwrap.Backend, docker.Backend} {
		t.Run(backend, func(t *testing.T) {
			if backend == docker.Backend {
				buildBusybox(t)
			}
			c := dial(t)
			dir := t.TempDir()
			blobDir, tmp := filepath.Join(dir, "blob"), filepath.Join(dir, "tmp")
			if err := os.Mkdir(tmp, 0o700); err != nil {
				t.Fatal(err)
			}
			fed := &fifoWriter{root: blobDir + "-" + backend}
			defer fed.stop()
			ms := scripted.New(scenario(t))
			modelSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				fed.beforeModelCall()
				ms.ServeHTTP(w, r)
			}))
			defer modelSrv.Close()
			queue := fmt.Sprintf("e2e-hostile-%d-%d", os.Getpid(), queues.Add(1))
			w := spawnHostileWorker(t, backend, modelSrv.URL+"/v1", blobDir, queue, tmp)
			idle := peakRSS(t, w.Process.Pid)

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // a hang detector
			defer cancel()
			res, err := troupeclient.Execute(ctx, c, queue, troupe.RunInput{Graph: "hostile", Input: "go"})
			if err != nil {
				t.Fatal(err)
			}
			rss := peakRSS(t, w.Process.Pid)
			t.Logf("%s: the worker's peak RSS: %.1f MiB (%.1f MiB before the run; bound %d MiB)",
				backend, float64(rss)/(1<<20), float64(idle)/(1<<20), hostileRSSBound>>20)
			if rss > hostileRSSBound {
				t.Errorf("the worker's peak RSS is %d MiB, over %d MiB", rss>>20, hostileRSSBound>>20)
			}
			fed.stop()
			if err := fed.check(); err != nil {
				t.Error(err)
			}

			out := string(res.Output)
			for _, want := range []string{
				"sparse: the file is larger than apply_patch edits (16 MiB at most)",
				"line: the file is larger than apply_patch edits (16 MiB at most)",
				"idle: not a regular file",
				"fed: not a regular file",
				"image path `idle` is not a regular file",
				"image path `fed` is not a regular file",
				"image path `random` exceeded the allowed size",
				"unable to read image at `loop`: ",
				"too many levels of symbolic links",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			if n := ms.Requests("hostile-answer"); n != 1 {
				t.Errorf("hostile-answer answered %d times, want 1", n)
			}

			childID := res.WorkflowID + "/0-vandal"
			evs := eventsOf(t, c, childID)
			for _, e := range evs {
				if e.Kind == troupe.EventSandboxLost {
					t.Errorf("sandbox lost: %s", e.Detail)
				}
			}
			snaps := snapshotsOf(t, c, childID)
			if len(snaps) < 2 {
				t.Errorf("%d snapshots, want one after each turn that used the sandbox", len(snaps))
			}
			for i, s := range snaps {
				if s.failure != "" || s.attempt != 1 {
					t.Errorf("snapshot %d: attempt %d, failure %q; want it done at the first attempt", i+1, s.attempt, s.failure)
					continue
				}
				fi, err := os.Stat(filepath.Join(blobDir, filepath.FromSlash(s.key)))
				if err != nil || fi.Size() < 1<<30 {
					t.Errorf("snapshot %d (%s): %v; want an archive of at least the 1 GiB of random data", i+1, s.key, err)
				}
			}
			if spools, _ := filepath.Glob(filepath.Join(tmp, "troupe-*")); len(spools) != 0 {
				t.Errorf("spool files left: %v", spools)
			}

			// The worker is not blocked on anything the workspace holds:
			// it stops when asked.
			if err := w.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- w.Wait() }()
			select {
			case err := <-exited:
				if err != nil {
					t.Errorf("the worker exited with %v after SIGTERM", err)
				}
			case <-time.After(2 * time.Minute): // a hang detector
				t.Errorf("the worker did not exit within 2 minutes of SIGTERM")
			}
		})
	}
}

// fifoWriter writes to the workspace FIFO fed from the host, from the
// first model call that finds it (turn 2's: turn 1 made it) to the next:
// from before turn 2's calls start to after they and the turn's snapshot
// are over. Turn 2's own writer, a
// command, starts when it starts (after the reads, as often as not); this
// one is there whatever the order. It never stops writing, so what it
// wrote tells whether anything read from the FIFO: no more than the
// pipe's capacity if nothing did.
type fifoWriter struct {
	root string // The sandbox root: the FIFO is ROOT/WORKSPACE/fed.

	mu       sync.Mutex
	f        *os.File
	done     bool  // It wrote, and closed the FIFO.
	capacity int   // The pipe's, in bytes.
	err      error // Why it could not write, if it could not.
	wrote    atomic.Int64
	writing  sync.WaitGroup
}

// beforeModelCall opens the FIFO once it exists, and closes it on the
// next call.
func (fw *fifoWriter) beforeModelCall() {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	switch {
	case fw.f != nil:
		fw.closeLocked()
		fw.done = true
	case !fw.done && fw.err == nil:
		fw.start()
	}
}

func (fw *fifoWriter) start() {
	found, err := filepath.Glob(filepath.Join(fw.root, "*", "fed"))
	if err != nil || len(found) > 1 {
		fw.err = fmt.Errorf("the FIFO fed: found %v (%v)", found, err)
		return
	}
	if len(found) == 0 {
		return // Turn 1 has not run yet.
	}
	// Opened for reading and writing, a FIFO needs no peer to open.
	f, err := os.OpenFile(found[0], os.O_RDWR, 0)
	if err != nil {
		fw.err = err
		return
	}
	if sc, err := f.SyscallConn(); err == nil {
		sc.Control(func(fd uintptr) { fw.capacity, fw.err = unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0) })
	}
	fw.f = f
	fw.writing.Add(1)
	go func() {
		defer fw.writing.Done()
		buf := bytes.Repeat([]byte("y\n"), 2048)
		for {
			n, err := f.Write(buf)
			fw.wrote.Add(int64(n))
			if err != nil {
				return
			}
		}
	}()
}

func (fw *fifoWriter) closeLocked() {
	if fw.f != nil {
		fw.f.Close() // This ends the write that blocks on a full pipe.
		fw.f = nil
	}
}

// stop closes the FIFO, if open, and waits for the writes to end.
func (fw *fifoWriter) stop() {
	fw.mu.Lock()
	fw.closeLocked()
	fw.mu.Unlock()
	fw.writing.Wait()
}

// check, after stop, says whether the writer wrote, and no one read.
func (fw *fifoWriter) check() error {
	switch n := fw.wrote.Load(); {
	case fw.err != nil:
		return fmt.Errorf("writing to the FIFO fed from the host: %w", fw.err)
	case fw.capacity == 0 || n == 0:
		return errors.New("the FIFO fed was never written to from the host")
	case n > int64(fw.capacity):
		return fmt.Errorf("%d bytes were written to the FIFO fed, more than its %d-byte pipe holds: something read it", n, fw.capacity)
	}
	return nil
}

// buildBusybox builds docker.BusyboxImage when it is missing.
func buildBusybox(t *testing.T) {
	t.Helper()
	dc, err := docker.New(docker.Config{Root: t.TempDir(), Image: docker.BusyboxImage})
	if err != nil {
		t.Fatal(err)
	}
	if err := dc.Ping(context.Background()); err != nil {
		t.Fatalf("the Docker Engine does not answer (run scripts/setup.sh): %v", err)
	}
	if err := dc.BuildImage(context.Background(), docker.BuildOptions{Kind: docker.KindBusybox, Name: docker.BusyboxImage}); err != nil {
		t.Fatal(err)
	}
}

// spawnHostileWorker starts the worker process of TestHostileWorkspace,
// with tmp as its TMPDIR (where snapshots spool), and returns once it
// runs; the test's cleanup kills it if the test has not stopped it.
func spawnHostileWorker(t *testing.T, backend, modelURL, blobDir, queue, tmp string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envHostile+"="+backend, envAddr+"="+temporalAddr, envModel+"="+modelURL,
		envBlob+"="+blobDir, envQueue+"="+queue, "TMPDIR="+tmp)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if line != "worker ready\n" {
		t.Fatalf("the worker did not start: %q, %v", line, err)
	}
	go io.Copy(io.Discard, stdout)
	return cmd
}

// peakRSS is the peak resident set size of process pid (VmHWM), in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// snapshotOutcome is how a SandboxSnapshot activity ended.
type snapshotOutcome struct {
	key     string // its result, on success
	attempt int32  // the attempt that ended it
	failure string // why it failed or timed out, if it did
}

// snapshotsOf reads workflow id's history for its SandboxSnapshot
// activities and how each ended.
func snapshotsOf(t *testing.T, c client.Client, id string) []snapshotOutcome {
	t.Helper()
	scheduled := map[int64]int{} // event id → index in out
	var out []snapshotOutcome
	it := c.GetWorkflowHistory(context.Background(), id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", id, err)
		}
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == lease.SandboxSnapshotActivityName {
			scheduled[e.GetEventId()] = len(out)
			out = append(out, snapshotOutcome{failure: "not ended"})
		}
		if a := e.GetActivityTaskStartedEventAttributes(); a != nil {
			if i, ok := scheduled[a.GetScheduledEventId()]; ok {
				out[i].attempt = a.GetAttempt()
			}
		}
		if a := e.GetActivityTaskCompletedEventAttributes(); a != nil {
			if i, ok := scheduled[a.GetScheduledEventId()]; ok {
				out[i].failure = ""
				if err := converter.GetDefaultDataConverter().FromPayloads(a.GetResult(), &out[i].key); err != nil {
					out[i].failure = err.Error()
				}
			}
		}
		if a := e.GetActivityTaskFailedEventAttributes(); a != nil {
			if i, ok := scheduled[a.GetScheduledEventId()]; ok {
				out[i].failure = a.GetFailure().GetMessage()
			}
		}
		if a := e.GetActivityTaskTimedOutEventAttributes(); a != nil {
			if i, ok := scheduled[a.GetScheduledEventId()]; ok {
				out[i].failure = "timed out: " + a.GetFailure().GetMessage()
			}
		}
	}
	return out
}
