// Package e2e runs Troupe end to end: a real Temporal server embedded in
// the test process, workers in process or as separate processes, and the
// scripted model server reached over real HTTP through openai-go, on both
// the Responses and the Chat Completions APIs.
//
// All tests that link the Temporal server live in this one package, so the
// server is linked once.
//
// The tests mostly wait (on scripted model delays, timers, other
// processes), so they run in parallel (parallel, parallelLong) unless they
// touch state of the whole process. Those that do (t.Setenv, for the CLI
// run in process; killing every sandbox process of a kind) stay
// sequential, say why, and run first, before the parallel ones. A test
// that runs in parallel keeps what it makes to itself: its own task queue,
// model server, store, sandbox roots, TROUPE_HOME and ports, and ids that
// no other test uses.
package e2e

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/examples/codereview"
	"github.com/troupe-dev/troupe/examples/dealdesk"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/devserver"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/model/scripted"
	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/local"
	"github.com/troupe-dev/troupe/workflows"
)

var temporalAddr string

// fullScale runs the scale tests at the scale they are named for (make
// scale): TestMarathon's agent 5,000 turns, TestSessionScale's session
// 2,000, TestSessionsCreatedConcurrently's 10,000 sessions (1,000
// without). Without it (make test) they take 1,000 and 200 (the session on
// a bound of 100 events rather than 1,000), which runs the same
// continue-as-new and bounded histories several times over in a fraction
// of the time.
var fullScale = flag.Bool("scale", false, "run TestMarathon, TestSessionScale and TestSessionsCreatedConcurrently at full scale (5,000 and 2,000 turns, 10,000 sessions)")

// parallelTests is how many tests marked with parallel run at once,
// beside the two long ones: they mostly wait (on scripted model delays,
// timers, other processes), so four keep two cores busy. Tests count
// the model calls a run made by request (see requests), and wait on
// conditions rather than time their steps, so a loaded machine slows
// them but does not fail them.
const parallelTests = 4

// shortSlots holds a token for each test that parallel let run.
var shortSlots = make(chan struct{}, parallelTests)

// parallel runs t in parallel with the other parallel tests, parallelTests
// of them at a time (and no more than -test.parallel when given).
// It logs when the test got its slot, so that a run with -json (or -v)
// tells each test's own time from its wait.
func parallel(t *testing.T) {
	t.Helper()
	t.Parallel()
	asked := time.Now()
	shortSlots <- struct{}{}
	t.Logf("parallel: a slot after %s", time.Since(asked).Round(time.Millisecond))
	t.Cleanup(func() { <-shortSlots })
}

// parallelLong runs t, one of the two scale tests (the longest, minutes
// with -scale), in parallel from the start of the parallel tests, beside
// parallel's: the package takes as long as its longest test, if that one
// starts first.
// (The order in which Go starts the parallel tests is not theirs in the
// source.)
func parallelLong(t *testing.T) {
	t.Helper()
	t.Parallel()
}

func TestMain(m *testing.M) {
	if os.Getenv(envWorker) != "" {
		os.Exit(workerProcess())
	}
	if os.Getenv(envCLI) != "" {
		os.Exit(cliProcess())
	}
	if os.Getenv(envHostile) != "" {
		os.Exit(hostileWorkerProcess())
	}
	// parallel and parallelLong decide how many tests run at once, unless
	// -test.parallel is given.
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", "1000"); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: -test.parallel:", err)
			os.Exit(2)
		}
	}
	srv, err := devserver.Start(context.Background(), devserver.Config{InMemory: true, UIPort: -1})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: start Temporal:", err)
		os.Exit(1)
	}
	temporalAddr = srv.FrontendAddress()
	code := m.Run()
	srv.Stop()
	os.Exit(code)
}

func quiet() log.Logger {
	return log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
}

func allGraphs() []*agents.Graph {
	return append(testGraphs(), dealdesk.Graph(), codereview.Graph())
}

// scenario is the test scenario plus the examples' offline ones.
func scenario(t testing.TB) *scripted.Scenario {
	t.Helper()
	sc, err := scripted.LoadScenario("testdata/scenario.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, example := range [][]byte{dealdesk.Scenario, codereview.Scenario} {
		ex, err := scripted.ParseScenario(example)
		if err != nil {
			t.Fatal(err)
		}
		sc.Rules = append(sc.Rules, ex.Rules...)
	}
	return sc
}

// modelServer starts a scripted model server for one test.
func modelServer(t testing.TB) (*scripted.Server, string) {
	t.Helper()
	return serveScenario(t, scenario(t))
}

// scenarioServer starts a scripted model server for one test on the
// scenario in yaml alone.
func scenarioServer(t testing.TB, yaml string) (*scripted.Server, string) {
	t.Helper()
	sc, err := scripted.ParseScenario([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return serveScenario(t, sc)
}

// serveScenario starts a scripted model server on sc, closed when the
// test ends, and returns it and its base URL.
func serveScenario(t testing.TB, sc *scripted.Scenario) (*scripted.Server, string) {
	t.Helper()
	s := scripted.New(sc)
	url, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, url
}

// requests counts the different requests among calls that keep accepts
// (all with a nil keep): the model calls a run made, once each. A model
// call runs at least once: a worker runs a local activity again when the
// workflow task it ran in timed out meanwhile (as on a loaded machine),
// and the call made again sends the same request (scripted.Call.Digest).
// Count the calls themselves (len(calls), Server.Count) to test that a
// turn is not taken again.
func requests(calls []scripted.Call, keep func(scripted.Call) bool) int {
	seen := map[string]bool{}
	for _, c := range calls {
		if !c.Canceled && (keep == nil || keep(c)) {
			seen[c.Digest] = true
		}
	}
	return len(seen)
}

func dial(t testing.TB) client.Client {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: temporalAddr, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

var queues atomic.Int64

// startWorker runs an in-process worker for all test graphs on a fresh
// task queue, with its model at baseURL over api, and returns the queue.
func startWorker(t testing.TB, c client.Client, baseURL string, api model.API, tweak func(*workflows.Config)) string {
	t.Helper()
	queue := fmt.Sprintf("e2e-%d-%d", os.Getpid(), queues.Add(1))
	startWorkerOn(t, c, baseURL, api, queue, tweak)
	return queue
}

// startWorkerOn runs an in-process worker as startWorker does, on queue
// and with queue as its host: a second one on a queue is a second worker
// process of the same host.
func startWorkerOn(t testing.TB, c client.Client, baseURL string, api model.API, queue string, tweak func(*workflows.Config)) {
	t.Helper()
	r := newRunner(t, baseURL, api, queue, tweak)
	stop, err := r.StartWorkers(c, queue, worker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
}

// newRunner returns a Runner of all test graphs, with its model at baseURL
// over api, a store and a local sandbox backend of the test's own, and
// host as its host.
func newRunner(t testing.TB, baseURL string, api model.API, host string, tweak func(*workflows.Config)) *workflows.Runner {
	t.Helper()
	m, err := model.New(model.Config{APIKey: "test", BaseURL: baseURL, API: api})
	if err != nil {
		t.Fatal(err)
	}
	store, err := blob.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	lc, err := local.New(local.Config{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	// Each test worker is its own "host", so sandbox activities come back
	// to the worker that holds the sandbox.
	cfg := workflows.Config{Graphs: allGraphs(), Model: m, Store: store, Host: host,
		Sandboxes: map[string]sandbox.Client{"local": lc}}
	if tweak != nil {
		tweak(&cfg)
	}
	r, err := workflows.NewRunner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return r
}

func runGraph(t testing.TB, c client.Client, queue string, in troupe.RunInput) (*troupe.RunResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return troupeclient.Execute(ctx, c, queue, in)
}

var apis = []model.API{model.APIResponses, model.APIChat}
