package bench

// This file holds the harness every benchmark shares: the embedded server,
// the workers (one set of options for Troupe and the baselines alike), the
// baseline workflows, the bench graph and its scenario, and the helpers that
// time a workflow and read the process's memory.

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/capabilities"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/devserver"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/model/scripted"
	"github.com/troupe-dev/troupe/workflows"
)

// The embedded server starts on first use, so `go test ./...` (which runs
// no benchmark) does not pay for it, and stops in TestMain.
var (
	serverOnce sync.Once
	server     *devserver.Server
	temporalC  client.Client
	serverErr  error
	// serverDir holds the server's SQLite file, so BenchmarkIdleSessions
	// can read its size.
	serverDir string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if temporalC != nil {
		temporalC.Close()
	}
	if server != nil {
		_ = server.Stop()
	}
	if serverDir != "" {
		_ = os.RemoveAll(serverDir)
	}
	os.Exit(code)
}

// temporalClient starts the embedded server if needed and returns a client
// of it.
func temporalClient(b *testing.B) client.Client {
	b.Helper()
	serverOnce.Do(func() {
		if serverDir, serverErr = os.MkdirTemp("", "troupe-bench-"); serverErr != nil {
			return
		}
		server, serverErr = devserver.Start(context.Background(), devserver.Config{Dir: serverDir, UIPort: -1})
		if serverErr != nil {
			return
		}
		temporalC, serverErr = client.Dial(client.Options{HostPort: server.FrontendAddress(), Logger: quiet()})
	})
	if serverErr != nil {
		b.Fatal(serverErr)
	}
	return temporalC
}

func quiet() log.Logger {
	return log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
}

// workerOptions are the options of every worker here, Troupe's and the
// baselines' alike: the SDK's defaults.
func workerOptions() worker.Options { return worker.Options{} }

var queues atomic.Int64

// startWorker starts a worker with workerOptions on a fresh task queue,
// like Runner.StartWorkers does for Troupe (whose second worker, on the host
// queue, serves only sandbox activities, which the bench graph has none of),
// registers everything regs register, and returns the queue. The worker
// stops when the benchmark ends.
func startWorker(b *testing.B, c client.Client, regs ...func(worker.Registry)) string {
	b.Helper()
	queue := fmt.Sprintf("bench-%d", queues.Add(1))
	w := worker.New(c, queue, workerOptions())
	for _, reg := range regs {
		reg(w)
	}
	if err := w.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(w.Stop)
	return queue
}

// troupe returns a registration func for a Runner serving the bench graph
// with its model at baseURL; tweak, when set, adjusts its Config.
func troupeWorker(b *testing.B, baseURL string, tweak func(*workflows.Config)) func(worker.Registry) {
	b.Helper()
	m, err := model.New(model.Config{APIKey: "bench", BaseURL: baseURL, API: model.APIResponses})
	if err != nil {
		b.Fatal(err)
	}
	store, err := blob.Open(context.Background(), b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	cfg := workflows.Config{Graphs: []*agents.Graph{benchGraph()}, Model: m, Store: store}
	if tweak != nil {
		tweak(&cfg)
	}
	r, err := workflows.NewRunner(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return r.Register
}

// The baseline: plain Temporal workflows doing what a Troupe run does,
// minus Troupe.
const (
	baselineActivitiesName = "bench.SequentialActivities"
	baselineChildrenName   = "bench.ParallelChildren"
	baselineChildName      = "bench.NoopChild"
	baselineCappedName     = "bench.CappedChildren"
	baselineActivityName   = "bench.Noop"
)

func registerBaseline(w worker.Registry) {
	w.RegisterWorkflowWithOptions(sequentialActivities, workflow.RegisterOptions{Name: baselineActivitiesName})
	w.RegisterWorkflowWithOptions(parallelChildren, workflow.RegisterOptions{Name: baselineChildrenName})
	w.RegisterWorkflowWithOptions(noopChild, workflow.RegisterOptions{Name: baselineChildName})
	w.RegisterWorkflowWithOptions(cappedChildren, workflow.RegisterOptions{Name: baselineCappedName})
	w.RegisterActivityWithOptions(noopActivity, activity.RegisterOptions{Name: baselineActivityName})
}

// sequentialActivities runs n no-op activities one after the other, with
// the options Troupe gives its model activity.
func sequentialActivities(ctx workflow.Context, n int) (int, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 5 * time.Minute,
		HeartbeatTimeout:    30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: 10},
	})
	for i := 0; i < n; i++ {
		if err := workflow.ExecuteActivity(ctx, baselineActivityName, i).Get(ctx, nil); err != nil {
			return i, err
		}
	}
	return n, nil
}

func noopActivity(_ context.Context, i int) (int, error) { return i, nil }

// parallelChildren starts n no-op child workflows at once and waits for
// them all.
func parallelChildren(ctx workflow.Context, n int) (int, error) {
	id := workflow.GetInfo(ctx).WorkflowExecution.ID
	futures := make([]workflow.ChildWorkflowFuture, n)
	for i := range futures {
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: fmt.Sprintf("%s/%d", id, i)})
		futures[i] = workflow.ExecuteChildWorkflow(cctx, baselineChildName, i)
	}
	for _, f := range futures {
		if err := f.Get(ctx, nil); err != nil {
			return 0, err
		}
	}
	return n, nil
}

func noopChild(_ workflow.Context, i int) (int, error) { return i, nil }

// cappedChildren starts n no-op child workflows, at most
// agents.DefaultMaxConcurrentCalls at once, each as one ends, and waits
// for them all: the baseline of a wide turn under Troupe's default bound.
func cappedChildren(ctx workflow.Context, n int) (int, error) {
	id := workflow.GetInfo(ctx).WorkflowExecution.ID
	running, done := 0, 0
	var failed error
	for i := 0; i < n; i++ {
		if err := workflow.Await(ctx, func() bool { return running < agents.DefaultMaxConcurrentCalls }); err != nil {
			return done, err
		}
		running++
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: fmt.Sprintf("%s/%d", id, i)})
		f := workflow.ExecuteChildWorkflow(cctx, baselineChildName, i)
		workflow.Go(ctx, func(gctx workflow.Context) {
			if err := f.Get(gctx, nil); err != nil && failed == nil {
				failed = err
			}
			running--
			done++
		})
	}
	if err := workflow.Await(ctx, func() bool { return running == 0 }); err != nil {
		return done, err
	}
	return done, failed
}

// sample is one timed workflow: its duration on the server (start to
// close, as DescribeWorkflowExecution reports them) and the CPU time this
// process (server, worker and scripted model together) spent meanwhile.
//
// The server's times leave out the client's start call and its wait for the
// result. That wait can miss the wake-up for the close event and last until
// the history long poll expires (devserver caps it at 1 s; at the server's
// default of 20 s it swamped whole runs here), which is no cost of what is
// measured.
type sample struct {
	wall, cpu time.Duration
}

func (s sample) add(o sample) sample { return sample{s.wall + o.wall, s.cpu + o.cpu} }

// timeRun starts a workflow with start, waits for its result into out, and
// returns its sample.
func timeRun(b *testing.B, c client.Client, start func(context.Context) (client.WorkflowRun, error), out any) sample {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute) // a hang detector: a wide turn takes minutes
	defer cancel()
	cpu0, began := cpuTime(), time.Now()
	run, err := start(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if err := run.Get(ctx, out); err != nil {
		b.Fatal(err)
	}
	observed, cpu := time.Since(began), cpuTime()-cpu0
	desc, err := c.DescribeWorkflowExecution(ctx, run.GetID(), run.GetRunID())
	if err != nil {
		b.Fatal(err)
	}
	info := desc.GetWorkflowExecutionInfo()
	wall := info.GetCloseTime().AsTime().Sub(info.GetStartTime().AsTime())
	if observed-wall > time.Second {
		b.Logf("note: %s took %s on the server but %s as the client saw it", run.GetID(), wall, observed)
	}
	return sample{wall: wall, cpu: cpu}
}

// runBaseline runs a baseline workflow to its end.
func runBaseline(b *testing.B, c client.Client, queue, name string, n int) sample {
	b.Helper()
	opts := client.StartWorkflowOptions{ID: fmt.Sprintf("%s-%s-%d", name, queue, queues.Add(1)), TaskQueue: queue}
	var done int
	s := timeRun(b, c, func(ctx context.Context) (client.WorkflowRun, error) {
		return c.ExecuteWorkflow(ctx, opts, name, n)
	}, &done)
	if done != n {
		b.Fatalf("%s did %d of %d", name, done, n)
	}
	return s
}

// runTroupe runs agent of the bench graph to its final output.
func runTroupe(b *testing.B, c client.Client, queue, agent string) (*troupe.RunResult, sample) {
	b.Helper()
	var res troupe.RunResult
	s := timeRun(b, c, func(ctx context.Context) (client.WorkflowRun, error) {
		return troupeclient.StartRun(ctx, c, queue, troupe.RunInput{Graph: graphName, Agent: agent, Input: "go"})
	}, &res)
	return &res, s
}

// The bench graph: a looper that calls a no-op tool turn after turn, a boss
// that calls many agents-as-tools at once, the worker agent behind them,
// and a one-turn agent for warm-ups.
const (
	graphName = "bench"
	loopTurns = 200 // turns that call the tool; one more answers
	// marathonTurns are the marathoner's turns that call the tool.
	marathonTurns = 5000
	// marathonWindow is the most items the compacted marathoner's model
	// is shown: its context grows from half of it to all of it, then is
	// trimmed again, so late turns show about as many items (15 to 30)
	// as turn 10 does (20), and the benchmark compares the runtime's cost
	// of a turn, not the size of the model's request.
	marathonWindow = 30
	fanOutCalls    = 50
	// wideCalls are the agent-tool calls of the wide boss's one turn:
	// past the 2,000 child workflows Temporal lets one workflow have
	// pending (TROUPE_BENCH_WIDE sets another count).
	wideCalls = 2500
)

// wideCallCount is the wide boss's calls: wideCalls, or
// TROUPE_BENCH_WIDE.
func wideCallCount() int {
	if n, err := strconv.Atoi(os.Getenv("TROUPE_BENCH_WIDE")); err == nil && n > 0 {
		return n
	}
	return wideCalls
}

type noopArgs struct {
	Turn string `json:"turn"`
}

func benchGraph() *agents.Graph {
	noop := agents.MustFunctionTool("noop", "Does nothing.", func(_ context.Context, a noopArgs) (string, error) {
		return "ok " + a.Turn, nil
	})
	tools := make([]agents.Tool, fanOutCalls)
	for i := range tools {
		tools[i] = agents.AsTool("fan_worker", fanToolName(i), "Works on a part.")
	}
	return agents.MustGraph(graphName, "warm",
		&agents.Agent{Name: "warm", Instructions: "bench warm"},
		&agents.Agent{Name: "looper", Instructions: "bench looper", Tools: []agents.Tool{noop}, MaxTurns: loopTurns + 1},
		&agents.Agent{Name: "marathoner", Instructions: "bench marathoner", Tools: []agents.Tool{noop}, MaxTurns: marathonTurns + 1},
		&agents.Agent{Name: "compacted_marathoner", Instructions: "bench compacted marathoner", Tools: []agents.Tool{noop}, MaxTurns: marathonTurns + 1,
			Capabilities: []agents.Capability{capabilities.Compaction(capabilities.CompactionConfig{MaxItems: marathonWindow, KeepLast: marathonWindow / 2})}},
		&agents.Agent{Name: "boss", Instructions: "bench fan boss", Tools: tools},
		&agents.Agent{Name: "fan_worker", Instructions: "bench fan worker"},
		&agents.Agent{Name: "wide_boss", Instructions: "bench wide boss", Tools: []agents.Tool{agents.AsTool("fan_worker", "part", "Works on a part.")}},
		&agents.Agent{Name: "streamer", Instructions: "bench streamer"},
	)
}

func fanToolName(i int) string { return fmt.Sprintf("part_%02d", i) }

// benchScenario answers the bench graph's agents. It is built in Go, as the
// boss's 50 calls would make a long YAML file, and validated like a parsed
// one.
func benchScenario(b *testing.B) *scripted.Scenario {
	b.Helper()
	calls := make([]scripted.ToolCall, fanOutCalls)
	for i := range calls {
		calls[i] = scripted.ToolCall{Name: fanToolName(i), Arguments: map[string]any{"input": "part " + strconv.Itoa(i)}}
	}
	wide := make([]scripted.ToolCall, wideCallCount())
	for i := range wide {
		wide[i] = scripted.ToolCall{Name: "part", Arguments: map[string]any{"input": "part " + strconv.Itoa(i)}}
	}
	sc := &scripted.Scenario{Rules: []scripted.Rule{
		{Name: "warm", Match: scripted.Match{Instructions: "bench warm"}, Respond: scripted.Respond{Text: "warm"}},
		{Name: "loop-done", Match: scripted.Match{Instructions: "bench looper", Turn: loopTurns + 1},
			Respond: scripted.Respond{Text: "done after {{.Turn}} turns"}},
		{Name: "loop-call", Match: scripted.Match{Instructions: "bench looper", MaxTurn: loopTurns},
			Respond: scripted.Respond{Calls: []scripted.ToolCall{{Name: "noop", Arguments: map[string]any{"turn": "{{.Turn}}"}}}}},
		{Name: "marathon-done", Match: scripted.Match{Instructions: "bench marathoner", Turn: marathonTurns + 1},
			Respond: scripted.Respond{Text: "done after {{.Turn}} turns"}},
		{Name: "marathon-call", Match: scripted.Match{Instructions: "bench marathoner", MaxTurn: marathonTurns},
			Respond: scripted.Respond{Calls: []scripted.ToolCall{{Name: "noop", Arguments: map[string]any{"turn": "{{.Turn}}"}}}}},
		// The compacted marathoner counts its turns from the tool's output,
		// as its trimmed context does not show them all.
		{Name: "marathon-compacted-done", Match: scripted.Match{Instructions: "bench compacted marathoner", LastInput: "^ok " + strconv.Itoa(marathonTurns) + "$"},
			Respond: scripted.Respond{Text: "done after {{add (match .LastInput `^ok (\\d+)$`) 1}} turns"}},
		{Name: "marathon-compacted-call", Match: scripted.Match{Instructions: "bench compacted marathoner"},
			Respond: scripted.Respond{Calls: []scripted.ToolCall{{Name: "noop", Arguments: map[string]any{"turn": "{{add (match .LastInput `^ok (\\d+)$`) 1}}"}}}}},
		{Name: "fan-calls", Match: scripted.Match{Instructions: "bench fan boss", Turn: 1}, Respond: scripted.Respond{Calls: calls}},
		{Name: "fan-joins", Match: scripted.Match{Instructions: "bench fan boss", Turn: 2},
			Respond: scripted.Respond{Text: "{{len .Outputs}} parts done"}},
		{Name: "wide-calls", Match: scripted.Match{Instructions: "bench wide boss", Turn: 1}, Respond: scripted.Respond{Calls: wide}},
		{Name: "wide-joins", Match: scripted.Match{Instructions: "bench wide boss", Turn: 2},
			Respond: scripted.Respond{Text: "{{len .Outputs}} parts done"}},
		{Name: "fan-worker", Match: scripted.Match{Instructions: "bench fan worker"}, Respond: scripted.Respond{Text: "{{.User}} done"}},
		{Name: "stream", Match: scripted.Match{Instructions: "bench streamer"}, Respond: scripted.Respond{Text: streamAnswer, DelayMS: streamThinkMS}},
	}}
	if err := sc.Validate(); err != nil {
		b.Fatal(err)
	}
	return sc
}

// modelServer starts a scripted model server for one benchmark.
func modelServer(b *testing.B) (*scripted.Server, string) {
	b.Helper()
	s := scripted.New(benchScenario(b))
	url, err := s.Start("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s, url
}

// modelTime sums the time the scripted server spent on the calls it
// answered after the first skip, from request arrival to answer sent.
func modelTime(s *scripted.Server, skip int) (time.Duration, int) {
	calls := s.Calls()[skip:]
	var sum time.Duration
	for _, c := range calls {
		sum += c.End.Sub(c.Start)
	}
	return sum, len(calls)
}

// warmUp runs one short Troupe run and, with baseline, a one-activity
// baseline on a new worker, so that connections, pollers and caches are set
// up before anything is timed.
func warmUp(b *testing.B, c client.Client, queue string, baseline bool) {
	b.Helper()
	runTroupe(b, c, queue, "warm")
	if baseline {
		runBaseline(b, c, queue, baselineActivitiesName, 1)
	}
}

// memory reports the process's resident set (VmRSS of /proc/self/status)
// and, after a GC, the Go heap in use, both in MB.
func memory() (rssMB, heapMB float64) {
	if data, err := os.ReadFile("/proc/self/status"); err == nil {
		for line := range strings.Lines(string(data)) {
			if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
				rssMB = kb / 1024
			}
		}
	}
	goruntime.GC()
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return rssMB, float64(ms.HeapInuse) / (1 << 20)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
