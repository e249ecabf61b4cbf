package devserver_test

// End-to-end tests against real embedded servers: an SDK worker runs workflows on them, a
// workflow outlives a restart, and the Web UI serves pages. Set DEVSERVER_LOG=1 to see the
// servers' warnings and errors on stderr.

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	sdkclient "go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe/runtime/devserver"
)

const taskQueue = "devserver-test"

func Greet(_ context.Context, name string) (string, error) { return "hello, " + name, nil }

// GreetWorkflow runs one activity.
func GreetWorkflow(ctx workflow.Context, name string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	var out string
	err := workflow.ExecuteActivity(ctx, Greet, name).Get(ctx, &out)
	return out, err
}

// SignalledGreetWorkflow waits for a name on the "name" signal, then greets it.
func SignalledGreetWorkflow(ctx workflow.Context) (string, error) {
	var name string
	workflow.GetSignalChannel(ctx, "name").Receive(ctx, &name)
	return GreetWorkflow(ctx, name)
}

// HeldUpdatesWorkflow takes "hold" updates, each of which stays in flight until the
// "release" signal, and ends once every one it took is done.
func HeldUpdatesWorkflow(ctx workflow.Context) error {
	released, held := false, 0
	if err := workflow.SetUpdateHandler(ctx, "hold", func(ctx workflow.Context) error {
		held++
		return workflow.Await(ctx, func() bool { return released })
	}); err != nil {
		return err
	}
	workflow.GetSignalChannel(ctx, "release").Receive(ctx, nil)
	released = true
	return workflow.Await(ctx, func() bool { return held > 0 && workflow.AllHandlersFinished(ctx) })
}

func testLogger() *slog.Logger {
	if os.Getenv("DEVSERVER_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// start starts a server, stops it when the test ends, and logs how long the start took.
func start(t *testing.T, cfg devserver.Config) *devserver.Server {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	began := time.Now()
	s, err := devserver.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Logf("Start took %v (frontend %s, UI %q)", time.Since(began).Round(time.Millisecond), s.FrontendAddress(), s.UIAddress())
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return s
}

// connect dials s and runs a worker for the test workflows until the test ends or stop is
// called.
func connect(t *testing.T, s *devserver.Server) (c sdkclient.Client, stop func()) {
	t.Helper()
	c, err := sdkclient.Dial(sdkclient.Options{
		HostPort:  s.FrontendAddress(),
		Namespace: s.Namespace(),
		Logger:    sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)),
	})
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	w := worker.New(c, taskQueue, worker.Options{})
	w.RegisterWorkflow(GreetWorkflow)
	w.RegisterWorkflow(SignalledGreetWorkflow)
	w.RegisterWorkflow(HeldUpdatesWorkflow)
	w.RegisterActivity(Greet)
	if err := w.Start(); err != nil {
		t.Fatalf("worker Start: %v", err)
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			w.Stop()
			c.Close()
		}
	}
	t.Cleanup(stop)
	return c, stop
}

func runGreet(t *testing.T, c sdkclient.Client, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{TaskQueue: taskQueue}, GreetWorkflow, name)
	if err != nil {
		t.Fatalf("ExecuteWorkflow: %v", err)
	}
	var got string
	if err := run.Get(ctx, &got); err != nil {
		t.Fatalf("workflow: %v", err)
	}
	if want := "hello, " + name; got != want {
		t.Errorf("workflow returned %q, want %q", got, want)
	}
}

func TestWorkflowRunsToCompletion(t *testing.T) {
	tests := []struct {
		name string
		cfg  devserver.Config
	}{
		{"file", devserver.Config{Dir: t.TempDir(), UIPort: -1}},
		{"in memory, own namespace", devserver.Config{InMemory: true, Namespace: "troupe-test", UIPort: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := start(t, tt.cfg)
			wantNS := tt.cfg.Namespace
			if wantNS == "" {
				wantNS = "default"
			}
			if s.Namespace() != wantNS {
				t.Errorf("Namespace() = %q, want %q", s.Namespace(), wantNS)
			}
			if s.UIAddress() != "" {
				t.Errorf("UIAddress() = %q with UIPort -1, want empty", s.UIAddress())
			}
			if !strings.HasPrefix(s.FrontendAddress(), "127.0.0.1:") {
				t.Errorf("FrontendAddress() = %q, want 127.0.0.1:port", s.FrontendAddress())
			}
			c, _ := connect(t, s)
			runGreet(t, c, "troupe")
			if !tt.cfg.InMemory {
				// A -wal file shows that the journal_mode pragma took effect.
				for _, name := range []string{devserver.DBFile, devserver.DBFile + "-wal"} {
					if _, err := os.Stat(filepath.Join(tt.cfg.Dir, name)); err != nil {
						t.Errorf("database file: %v", err)
					}
				}
			}
		})
	}
}

// TestWorkflowSurvivesRestart starts a workflow that waits for a signal, stops the server,
// starts a new one on the same directory, and signals the workflow there.
func TestWorkflowSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := devserver.Config{Dir: dir, UIPort: -1}

	first := start(t, cfg)
	c, stopWorker := connect(t, first)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{TaskQueue: taskQueue}, SignalledGreetWorkflow)
	if err != nil {
		t.Fatalf("ExecuteWorkflow: %v", err)
	}
	// Let the worker run the first workflow task, so the restart happens mid-workflow rather
	// than before it began.
	waitForEvent(t, ctx, c, run.GetID(), enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)
	stopWorker()
	if err := first.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := first.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}

	second := start(t, cfg)
	c, _ = connect(t, second)
	if err := c.SignalWorkflow(ctx, run.GetID(), "", "name", "again"); err != nil {
		t.Fatalf("SignalWorkflow after restart: %v", err)
	}
	var got string
	if err := c.GetWorkflow(ctx, run.GetID(), "").Get(ctx, &got); err != nil {
		t.Fatalf("workflow after restart: %v", err)
	}
	if got != "hello, again" {
		t.Errorf("workflow returned %q, want %q", got, "hello, again")
	}
}

func waitForEvent(t *testing.T, ctx context.Context, c sdkclient.Client, workflowID string, want enumspb.EventType) {
	t.Helper()
	for {
		iter := c.GetWorkflowHistory(ctx, workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for iter.HasNext() {
			e, err := iter.Next()
			if err != nil {
				t.Fatalf("history: %v", err)
			}
			if e.GetEventType() == want {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no %v event in workflow %s: %v", want, workflowID, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func TestWebUI(t *testing.T) {
	s := start(t, devserver.Config{InMemory: true})
	if !strings.HasPrefix(s.UIAddress(), "http://127.0.0.1:") {
		t.Fatalf("UIAddress() = %q, want http://127.0.0.1:port", s.UIAddress())
	}
	tests := []struct {
		path string
		want string // a substring of the body
	}{
		{"/", "<html"},
		// Served by the UI server from the frontend over gRPC.
		{"/api/v1/namespaces/default", `"default"`},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			resp, err := http.Get(s.UIAddress() + tt.path)
			if err != nil {
				t.Fatalf("GET: %v", err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatalf("read body: %v", err)
			}
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET %s: %s\n%.500s", tt.path, resp.Status, body)
			}
			if !strings.Contains(string(body), tt.want) {
				t.Errorf("GET %s: body lacks %q:\n%.500s", tt.path, tt.want, body)
			}
		})
	}
}

func TestTwoServersInOneProcess(t *testing.T) {
	a := start(t, devserver.Config{Dir: t.TempDir(), UIPort: -1})
	b := start(t, devserver.Config{InMemory: true, UIPort: -1})
	if a.FrontendAddress() == b.FrontendAddress() {
		t.Fatalf("both servers on %s", a.FrontendAddress())
	}
	for _, s := range []*devserver.Server{a, b} {
		c, _ := connect(t, s)
		runGreet(t, c, s.FrontendAddress())
	}
}

func TestDatabaseInUse(t *testing.T) {
	dir := t.TempDir()
	start(t, devserver.Config{Dir: dir, UIPort: -1})
	s, err := devserver.Start(context.Background(), devserver.Config{Dir: dir, UIPort: -1})
	if err == nil {
		_ = s.Stop()
		t.Fatal("second Start on the same Dir succeeded")
	}
	if !errors.Is(err, devserver.ErrDatabaseInUse) {
		t.Errorf("error %v is not ErrDatabaseInUse", err)
	}
}

// TestRunning: a file-backed server records where it listens for other
// processes on its Dir, and the record goes with the server: a file left
// by a server that died does not count.
func TestRunning(t *testing.T) {
	dir := t.TempDir()
	if _, err := devserver.Running(dir); !errors.Is(err, devserver.ErrNotRunning) {
		t.Fatalf("Running on an empty Dir: %v, want ErrNotRunning", err)
	}
	s, err := devserver.Start(context.Background(), devserver.Config{Dir: dir, UIPort: -1, Namespace: "ns1"})
	if err != nil {
		t.Fatal(err)
	}
	info, err := devserver.Running(dir)
	if err != nil || info.Address != s.FrontendAddress() || info.Namespace != "ns1" || info.PID != os.Getpid() {
		t.Errorf("Running = %+v, %v; want %s in namespace ns1, pid %d", info, err, s.FrontendAddress(), os.Getpid())
	}
	stale, err := os.ReadFile(filepath.Join(dir, devserver.InfoFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := devserver.Running(dir); !errors.Is(err, devserver.ErrNotRunning) {
		t.Errorf("Running after Stop: %v, want ErrNotRunning", err)
	}
	// A dead server's record, with no server holding the database.
	if err := os.WriteFile(filepath.Join(dir, devserver.InfoFile), stale, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := devserver.Running(dir); !errors.Is(err, devserver.ErrNotRunning) {
		t.Errorf("Running with a dead server's record: %v, want ErrNotRunning", err)
	}
}

func TestDynamicConfigOverride(t *testing.T) {
	s := start(t, devserver.Config{
		InMemory:      true,
		UIPort:        -1,
		DynamicConfig: map[string]any{"limit.maxIDLength": 40},
	})
	c, _ := connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id := strings.Repeat("x", 41)
	_, err := c.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{ID: id, TaskQueue: taskQueue}, GreetWorkflow, "x")
	if err == nil || !strings.Contains(err.Error(), "length") {
		t.Errorf("starting a workflow with a 41-byte ID under limit.maxIDLength=40: err = %v, want a length error", err)
	}
	runGreet(t, c, "within limits")
}

// TestUpdatesInFlight: a workflow takes 64 updates in flight at once, as the session
// manager does from a burst of creates, one per caller. At the server's default limit (10)
// the 11th is refused, and the refusal clears the workflow's cached state, with the updates
// admitted and their workflow task: a burst of callers that send again kept the manager
// from taking any update (TestSessionsCreatedConcurrently stalled under CPU load).
func TestUpdatesInFlight(t *testing.T) {
	const updates = 64
	s := start(t, devserver.Config{InMemory: true, UIPort: -1})
	c, _ := connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{TaskQueue: taskQueue}, HeldUpdatesWorkflow)
	if err != nil {
		t.Fatalf("ExecuteWorkflow: %v", err)
	}
	errs := make(chan error, updates)
	for range updates {
		go func() {
			h, err := c.UpdateWorkflow(ctx, sdkclient.UpdateWorkflowOptions{WorkflowID: run.GetID(), RunID: run.GetRunID(),
				UpdateName: "hold", WaitForStage: sdkclient.WorkflowUpdateStageAccepted})
			if err == nil {
				err = h.Get(ctx, nil)
			}
			errs <- err
		}()
	}
	// Every update accepted, and held, before any is let go.
	for accepted := 0; accepted < updates; {
		select {
		case err := <-errs:
			t.Fatalf("an update ended before its release: %v", err)
		case <-ctx.Done():
			t.Fatalf("%d of %d updates accepted: %v", accepted, updates, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
		accepted = 0
		it := c.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				t.Fatalf("history: %v", err)
			}
			if e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED {
				accepted++
			}
		}
	}
	if err := c.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), "release", nil); err != nil {
		t.Fatalf("SignalWorkflow: %v", err)
	}
	for range updates {
		if err := <-errs; err != nil {
			t.Errorf("update: %v", err)
		}
	}
	if err := run.Get(ctx, nil); err != nil {
		t.Errorf("workflow: %v", err)
	}
}

func TestPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().(*net.TCPAddr).Port

	tests := []struct {
		name string
		cfg  devserver.Config
	}{
		{"frontend", devserver.Config{InMemory: true, Port: taken}},
		{"web UI", devserver.Config{InMemory: true, UIPort: taken}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := devserver.Start(context.Background(), tt.cfg)
			if err == nil {
				_ = s.Stop()
				t.Fatal("Start succeeded on a taken port")
			}
			if !errors.Is(err, devserver.ErrPortInUse) {
				t.Errorf("error %v is not ErrPortInUse", err)
			}
			if !strings.Contains(err.Error(), strconv.Itoa(taken)) {
				t.Errorf("error %q does not name port %d", err, taken)
			}
		})
	}
}

func TestFixedPorts(t *testing.T) {
	ports := make([]int, 2)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
	}
	s := start(t, devserver.Config{InMemory: true, Port: ports[0], UIPort: ports[1]})
	if want := "127.0.0.1:" + strconv.Itoa(ports[0]); s.FrontendAddress() != want {
		t.Errorf("FrontendAddress() = %q, want %q", s.FrontendAddress(), want)
	}
	if want := "http://127.0.0.1:" + strconv.Itoa(ports[1]); s.UIAddress() != want {
		t.Errorf("UIAddress() = %q, want %q", s.UIAddress(), want)
	}
}

// BenchmarkSequentialWorkflows measures one workflow with one activity, started and awaited
// one at a time, on a file-backed server: the latency a developer feels per agent turn.
func BenchmarkSequentialWorkflows(b *testing.B) {
	for _, bc := range []struct {
		name string
		cfg  devserver.Config
	}{
		{"file", devserver.Config{Dir: b.TempDir(), UIPort: -1}},
		{"in memory", devserver.Config{InMemory: true, UIPort: -1}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s, err := devserver.Start(context.Background(), bc.cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Stop()
			c, err := sdkclient.Dial(sdkclient.Options{
				HostPort:  s.FrontendAddress(),
				Namespace: s.Namespace(),
				Logger:    sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)),
			})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			w := worker.New(c, taskQueue, worker.Options{})
			w.RegisterWorkflow(GreetWorkflow)
			w.RegisterActivity(Greet)
			if err := w.Start(); err != nil {
				b.Fatal(err)
			}
			defer w.Stop()
			ctx := context.Background()
			b.ResetTimer()
			for b.Loop() {
				run, err := c.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{TaskQueue: taskQueue}, GreetWorkflow, "b")
				if err != nil {
					b.Fatal(err)
				}
				if err := run.Get(ctx, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
