package bench

// This file holds the sandbox benchmarks: a session's life on each backend
// against the bare command it wraps, and a code-review fan-out of sandboxed
// reviewers against the same fan-out of plain agents. BenchmarkSnapshot is
// in snapshot_test.go.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/model/scripted"
	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/bwrap"
	"github.com/troupe-dev/troupe/runtime/sandbox/docker"
	"github.com/troupe-dev/troupe/runtime/sandbox/local"
	"github.com/troupe-dev/troupe/workflows"
)

// lifecycleRounds is how many provision + first command + stop rounds,
// and how many commands in one session, each backend and its bare
// equivalent are timed over.
const lifecycleRounds = 10

// BenchmarkSandboxLifecycle measures, per backend (a sub-benchmark each), a
// session's whole short life: Create with a small manifest (three entries
// and an environment variable), a first Exec of `true`, and Stop, averaged
// over lifecycleRounds rounds. The baseline, timed in the same rounds
// (bare, then Troupe, after one untimed warm-up of each), is the bare
// equivalent run through os/exec:
//
//   - local: `mkdir DIR`, `sh -c true` in DIR, `rm -rf DIR`;
//   - bwrap: `bwrap --ro-bind /usr /usr --ro-bind /lib /lib --ro-bind /lib64
//     /lib64 --ro-bind /bin /bin --unshare-all --die-with-parent --proc /proc
//     --dev /dev true`;
//   - docker: `docker run --rm --network none troupe-sandbox:busybox true`
//     (the image is built with Client.BuildImage when missing).
//
// It then measures the exec round trip: lifecycleRounds Execs of `true` in
// one live session against the bare command (local: `sh -c true`; bwrap:
// the bare bwrap above, since the backend starts a namespace per command;
// docker: `docker exec CONTAINER true` into the session's own container).
//
// Reported: bare-ms, troupe-ms and ratio for the whole life, create-ms,
// exec1-ms and stop-ms for its parts, and bare-exec-ms, exec-ms and
// exec-ratio for the round trip. A backend this machine lacks (no bwrap, no
// Docker Engine) is skipped with a note saying how to install it.
func BenchmarkSandboxLifecycle(b *testing.B) {
	for _, bk := range lifecycleBackends() {
		b.Run(bk.name, func(b *testing.B) { benchLifecycle(b, bk) })
	}
}

// lifecycleBackend is one backend of BenchmarkSandboxLifecycle and its
// bare equivalents.
type lifecycleBackend struct {
	name string
	// open returns a client whose workspaces live under root, or skips.
	open func(b *testing.B, root string) sandbox.Client
	// bare runs the bare equivalent of one life; scratch is a directory it
	// may use.
	bare func(scratch string) error
	// bareExec returns the bare equivalent of one Exec in s.
	bareExec func(s sandbox.Session) func() error
}

// bareBwrapArgs is a bare bubblewrap sandbox running `true`.
var bareBwrapArgs = []string{"--ro-bind", "/usr", "/usr", "--ro-bind", "/lib", "/lib", "--ro-bind", "/lib64", "/lib64",
	"--ro-bind", "/bin", "/bin", "--unshare-all", "--die-with-parent", "--proc", "/proc", "--dev", "/dev", "true"}

func lifecycleBackends() []lifecycleBackend {
	return []lifecycleBackend{
		{
			name: local.Backend,
			open: func(b *testing.B, root string) sandbox.Client {
				c, err := local.New(local.Config{Root: root})
				if err != nil {
					b.Fatal(err)
				}
				return c
			},
			bare: func(scratch string) error {
				dir := filepath.Join(scratch, "bare")
				if err := run("", "mkdir", dir); err != nil {
					return err
				}
				if err := run(dir, "sh", "-c", "true"); err != nil {
					return err
				}
				return run("", "rm", "-rf", dir)
			},
			bareExec: func(s sandbox.Session) func() error {
				dir := s.State().Workspace
				return func() error { return run(dir, "sh", "-c", "true") }
			},
		},
		{
			name: bwrap.Backend,
			open: func(b *testing.B, root string) sandbox.Client {
				c, err := bwrap.New(bwrap.Config{Root: root})
				if err != nil {
					b.Skipf("no bwrap backend on this machine (scripts/setup.sh installs bubblewrap): %v", err)
				}
				b.Cleanup(func() { c.Close() }) // Before root goes: it holds workspace file systems.
				return c
			},
			bare: func(string) error { return run("", "bwrap", bareBwrapArgs...) },
			bareExec: func(sandbox.Session) func() error {
				return func() error { return run("", "bwrap", bareBwrapArgs...) }
			},
		},
		{
			name: docker.Backend,
			open: func(b *testing.B, root string) sandbox.Client {
				c, err := docker.New(docker.Config{Image: docker.BusyboxImage, Root: root})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { c.Close() })
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				if err := c.Ping(ctx); err != nil {
					b.Skipf("no docker backend on this machine: %v", err)
				}
				if _, err := exec.LookPath("docker"); err != nil {
					b.Skipf("no docker CLI for the baseline (scripts/setup.sh installs docker.io): %v", err)
				}
				if err := c.BuildImage(ctx, docker.BuildOptions{Kind: docker.KindBusybox, Name: docker.BusyboxImage}); err != nil {
					b.Fatal(err)
				}
				return c
			},
			bare: func(string) error {
				return run("", "docker", "run", "--rm", "--network", "none", docker.BusyboxImage, "true")
			},
			bareExec: func(s sandbox.Session) func() error {
				id := s.State().Data["container"]
				return func() error { return run("", "docker", "exec", id, "true") }
			},
		},
	}
}

// run runs a command in dir (the current directory when empty) and fails
// with its output when it fails.
func run(dir, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// lifecycleManifest is the small manifest of every benchmarked session.
var lifecycleManifest = sandbox.Manifest{
	Entries: []sandbox.Entry{
		{Kind: sandbox.EntryFile, Path: "README.md", Content: "# bench\n\nA small workspace.\n"},
		{Kind: sandbox.EntryDir, Path: "src"},
		{Kind: sandbox.EntryFile, Path: "src/main.go", Content: "package main\n\nfunc main() {}\n"},
	},
	Env: map[string]string{"BENCH": "lifecycle"},
}

var sessionIDs atomic.Int64

// lifeTimes sums the parts of Troupe's rounds.
type lifeTimes struct {
	create, exec, stop time.Duration
}

func (l lifeTimes) total() time.Duration { return l.create + l.exec + l.stop }

func benchLifecycle(b *testing.B, bk lifecycleBackend) {
	ctx := context.Background()
	root := b.TempDir()
	c := bk.open(b, root)
	scratch := b.TempDir()

	// life runs one Troupe round and returns its times.
	life := func() lifeTimes {
		spec := sandbox.Spec{
			ID:       fmt.Sprintf("bench-%s-%d-%d", bk.name, os.Getpid(), sessionIDs.Add(1)),
			Manifest: lifecycleManifest,
			Labels:   map[string]string{"troupe.bench": "lifecycle"},
		}
		t0 := time.Now()
		s, err := c.Create(ctx, spec)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		stopped := false
		defer func() {
			if !stopped { // A failure below.
				s.Stop(context.WithoutCancel(ctx))
			}
		}()
		res, err := s.Exec(ctx, sandbox.ExecRequest{Cmd: "true"})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("exec true: %+v, %v", res, err)
		}
		t2 := time.Now()
		stopped = true
		if err := s.Stop(ctx); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		return lifeTimes{create: t1.Sub(t0), exec: t2.Sub(t1), stop: t3.Sub(t2)}
	}
	bare := func() time.Duration {
		t0 := time.Now()
		if err := bk.bare(scratch); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}

	bare()
	life()
	var troupe lifeTimes
	var base time.Duration
	b.ResetTimer()
	for i := 0; i < b.N*lifecycleRounds; i++ {
		base += bare()
		l := life()
		troupe.create, troupe.exec, troupe.stop = troupe.create+l.create, troupe.exec+l.exec, troupe.stop+l.stop
	}

	// The exec round trip, in one live session.
	s, err := c.Create(ctx, sandbox.Spec{ID: fmt.Sprintf("bench-%s-%d-%d", bk.name, os.Getpid(), sessionIDs.Add(1)), Manifest: lifecycleManifest})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Stop(context.WithoutCancel(ctx))
	bareExec := bk.bareExec(s)
	execOnce := func() time.Duration {
		t0 := time.Now()
		res, err := s.Exec(ctx, sandbox.ExecRequest{Cmd: "true"})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("exec true: %+v, %v", res, err)
		}
		return time.Since(t0)
	}
	bareOnce := func() time.Duration {
		t0 := time.Now()
		if err := bareExec(); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	execOnce()
	bareOnce()
	var execs, bareExecs time.Duration
	for i := 0; i < b.N*lifecycleRounds; i++ {
		bareExecs += bareOnce()
		execs += execOnce()
	}
	b.StopTimer()
	if err := s.Stop(ctx); err != nil {
		b.Fatal(err)
	}

	n := float64(b.N * lifecycleRounds)
	baseMS, troupeMS := ms(base)/n, ms(troupe.total())/n
	bareExecMS, execMS := ms(bareExecs)/n, ms(execs)/n
	b.ReportMetric(baseMS, "bare-ms")
	b.ReportMetric(troupeMS, "troupe-ms")
	b.ReportMetric(troupeMS/baseMS, "ratio")
	b.ReportMetric(ms(troupe.create)/n, "create-ms")
	b.ReportMetric(ms(troupe.exec)/n, "exec1-ms")
	b.ReportMetric(ms(troupe.stop)/n, "stop-ms")
	b.ReportMetric(bareExecMS, "bare-exec-ms")
	b.ReportMetric(execMS, "exec-ms")
	b.ReportMetric(execMS/bareExecMS, "exec-ratio")
	b.Logf("%s: create + exec true + stop %.1f ms (create %.1f, first exec %.1f, stop %.1f) against %.1f ms bare (ratio %.2f); exec round trip %.1f ms against %.1f ms bare (ratio %.2f); %d rounds each",
		bk.name, troupeMS, ms(troupe.create)/n, ms(troupe.exec)/n, ms(troupe.stop)/n, baseMS, troupeMS/baseMS, execMS, bareExecMS, execMS/bareExecMS, int(n))
}

// reviewAreas are the code-review fan-out's reviewers, one tool each.
var reviewAreas = []string{"security", "tests", "api", "docs", "errors", "concurrency", "performance", "style"}

// BenchmarkCodeReviewFanOut measures a code review shaped like
// examples/codereview: one coordinator turn that calls 8 reviewers as
// agents-as-tools, each a sandbox agent on the bwrap backend with a small
// manifest (one source file), whose first turn reads the file with
// exec_command (`cat src/change.go`) and whose second answers a typed
// finding; then the coordinator's second turn answers. Every reviewer's
// child workflow provisions its sandbox, runs the command on the host
// queue, snapshots the workspace after the turn and stops the sandbox when
// it ends. The baseline is the same fan-out, on the same workers, with
// plain reviewers that read the same file through an ordinary function
// tool (a local activity): the same turns and tool calls, no sandbox. Each
// is measured twice per iteration, in the order plain, sandboxed,
// sandboxed, plain, after one untimed warm-up run of each.
//
// After each sandboxed run it counts the sandboxes still alive: the
// workspace directories under the bwrap client's root, and the bwrap
// processes this process started (or that name that root); the run fails
// unless there are none.
//
// Reported: plain-ms, sandboxed-ms (wall time on the server) and ratio,
// cpu-ratio (the same for this process's CPU time: worker, Temporal server
// and model server; the bwrap and shell processes are children and do not
// count), sandbox-op-ms (the time the sandbox operations themselves took per run,
// summed over the 8 reviewers: create, exec, snapshot and stop, which run
// in parallel), and alive-sandboxes (the most seen after a run; 0).
func BenchmarkCodeReviewFanOut(b *testing.B) {
	c := temporalClient(b)
	root := b.TempDir()
	bc, err := bwrap.New(bwrap.Config{Root: root})
	if err != nil {
		b.Skipf("no bwrap backend on this machine (scripts/setup.sh installs bubblewrap): %v", err)
	}
	b.Cleanup(func() { bc.Close() })
	timed := &timedClient{Client: bc}
	srv := scripted.New(reviewScenario(b))
	url, err := srv.Start("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	queue := startReviewWorkers(b, c, url, timed)

	runReview(b, c, queue, "plain_coordinator")
	runReview(b, c, queue, "sandboxed_coordinator")
	timed.reset()

	var plain, sandboxed sample
	alive := 0
	sandboxedRun := func() sample {
		s := runReview(b, c, queue, "sandboxed_coordinator")
		dirs, procs := aliveSandboxes(b, root)
		if dirs+procs > alive {
			alive = dirs + procs
		}
		if dirs+procs > 0 {
			b.Errorf("after a sandboxed review: %d workspace directories and %d bwrap processes alive, want none", dirs, procs)
		}
		return s
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		plain = plain.add(runReview(b, c, queue, "plain_coordinator"))
		sandboxed = sandboxed.add(sandboxedRun())
		sandboxed = sandboxed.add(sandboxedRun())
		plain = plain.add(runReview(b, c, queue, "plain_coordinator"))
	}
	b.StopTimer()

	runs := float64(2 * b.N)
	plainMS, sbMS := ms(plain.wall)/runs, ms(sandboxed.wall)/runs
	ops := timed.snapshot()
	var opSum time.Duration
	for _, o := range ops {
		opSum += o.total
	}
	b.ReportMetric(plainMS, "plain-ms")
	b.ReportMetric(sbMS, "sandboxed-ms")
	b.ReportMetric(sbMS/plainMS, "ratio")
	b.ReportMetric(ms(sandboxed.cpu)/ms(plain.cpu), "cpu-ratio")
	b.ReportMetric(ms(opSum)/runs, "sandbox-op-ms")
	b.ReportMetric(float64(alive), "alive-sandboxes")
	b.Logf("plain reviewers: %.0f ms (CPU %.0f ms) for one turn calling %d agents-as-tools that each read a file with a function tool",
		plainMS, ms(plain.cpu)/runs, len(reviewAreas))
	b.Logf("sandboxed reviewers (bwrap): %.0f ms (CPU %.0f ms; ratio %.2f, CPU ratio %.2f); sandboxes alive after each run: %d",
		sbMS, ms(sandboxed.cpu)/runs, sbMS/plainMS, ms(sandboxed.cpu)/ms(plain.cpu), alive)
	var parts []string
	for _, name := range []string{"create", "exec", "snapshot", "stop"} {
		o := ops[name]
		if o.n == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %d× %.1f ms", name, o.n/int(runs), ms(o.total)/float64(o.n)))
	}
	b.Logf("sandbox operations per sandboxed run (count × mean; the reviewers run them in parallel): %s; %.0f ms summed",
		strings.Join(parts, ", "), ms(opSum)/runs)
}

// finding is a reviewer's typed answer, as the codereview example's.
type finding struct {
	// File is the workspace path the finding is about.
	File string `json:"file"`
	// Line is the 1-based line.
	Line int `json:"line"`
	// Severity is info, low, medium or high.
	Severity string `json:"severity" jsonschema:"enum=info,enum=low,enum=medium,enum=high"`
	// Message says what is wrong.
	Message string `json:"message"`
}

type readArgs struct {
	Path string `json:"path"`
}

// reviewSource is the file under review in a reviewer's workspace; its
// first line names the area, so the coordinator's answer shows that every
// reviewer read its own file.
func reviewSource(area string) string {
	return "// area: " + area + "\npackage change\n\nfunc Apply(x int) int { return x + 1 }\n"
}

// reviewGraph holds both coordinators and their reviewers: sandboxed ones
// (bwrap) and plain ones (a function tool reads the same file).
func reviewGraph() *agents.Graph {
	all := []*agents.Agent{}
	var sbTools, plainTools []agents.Tool
	for _, area := range reviewAreas {
		src := reviewSource(area)
		read := agents.MustFunctionTool("read_file", "Reads a file of the change.", func(_ context.Context, a readArgs) (string, error) {
			if a.Path != "src/change.go" {
				return "", fmt.Errorf("no file %q", a.Path)
			}
			return src, nil
		})
		sbTools = append(sbTools, agents.AsTool("sandboxed_"+area, "review_"+area, "Reviews the change for "+area+"."))
		plainTools = append(plainTools, agents.AsTool("plain_"+area, "review_"+area, "Reviews the change for "+area+"."))
		all = append(all,
			&agents.Agent{
				Name:         "sandboxed_" + area,
				Instructions: "bench sandboxed reviewer (" + area + "): read src/change.go with exec_command, then answer one finding.",
				Sandbox: &agents.Sandbox{Backend: bwrap.Backend, Manifest: sandbox.Manifest{
					Entries: []sandbox.Entry{{Kind: sandbox.EntryFile, Path: "src/change.go", Content: src}},
				}},
				Output: agents.MustOutput[finding](),
			},
			&agents.Agent{
				Name:         "plain_" + area,
				Instructions: "bench plain reviewer (" + area + "): read src/change.go with read_file, then answer one finding.",
				Tools:        []agents.Tool{read},
				Output:       agents.MustOutput[finding](),
			})
	}
	all = append(all,
		&agents.Agent{Name: "sandboxed_coordinator", Instructions: "bench review coordinator (sandboxed)", Tools: sbTools},
		&agents.Agent{Name: "plain_coordinator", Instructions: "bench review coordinator (plain)", Tools: plainTools})
	return agents.MustGraph(reviewGraphName, "plain_coordinator", all...)
}

const reviewGraphName = "bench-review"

// reviewScenario answers the review graph: the coordinators call every
// reviewer, then list their findings; reviewers read their file, then
// answer a finding that quotes it.
func reviewScenario(b *testing.B) *scripted.Scenario {
	b.Helper()
	calls := make([]scripted.ToolCall, len(reviewAreas))
	for i, area := range reviewAreas {
		calls[i] = scripted.ToolCall{Name: "review_" + area, Arguments: map[string]any{"input": "Review src/change.go for " + area + "."}}
	}
	answer := scripted.Respond{JSON: map[string]any{
		"file": "src/change.go", "line": 1, "severity": "low",
		"message": `reviewed {{after .LastOutput "Output:\n"}}`,
	}}
	sc := &scripted.Scenario{Rules: []scripted.Rule{
		{Name: "coordinator-calls", Match: scripted.Match{Instructions: "bench review coordinator", Turn: 1}, Respond: scripted.Respond{Calls: calls}},
		{Name: "coordinator-reports", Match: scripted.Match{Instructions: "bench review coordinator", Turn: 2},
			Respond: scripted.Respond{Text: "{{len .Outputs}} findings\n{{join .Outputs \"\\n\"}}"}},
		{Name: "sandboxed-reads", Match: scripted.Match{Instructions: "bench sandboxed reviewer", Turn: 1},
			Respond: scripted.Respond{Calls: []scripted.ToolCall{{Name: "exec_command", Arguments: map[string]any{"cmd": "cat src/change.go"}}}}},
		{Name: "plain-reads", Match: scripted.Match{Instructions: "bench plain reviewer", Turn: 1},
			Respond: scripted.Respond{Calls: []scripted.ToolCall{{Name: "read_file", Arguments: map[string]any{"path": "src/change.go"}}}}},
		{Name: "reviewer-answers", Match: scripted.Match{Instructions: "reviewer", Turn: 2}, Respond: answer},
	}}
	if err := sc.Validate(); err != nil {
		b.Fatal(err)
	}
	return sc
}

var reviewHosts atomic.Int64

// startReviewWorkers starts a Runner serving the review graph with the
// bwrap client sc, as Runner.StartWorkers does: a worker on a fresh shared
// queue and one on the Runner's own host queue (a host name of its own, so
// no other worker takes its sandbox activities). It returns the shared
// queue.
func startReviewWorkers(b *testing.B, c client.Client, baseURL string, sc sandbox.Client) string {
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
	r, err := workflows.NewRunner(workflows.Config{
		Graphs: []*agents.Graph{reviewGraph()}, Model: m, Store: store,
		Sandboxes: map[string]sandbox.Client{bwrap.Backend: sc},
		Host:      fmt.Sprintf("bench-%d-%d", os.Getpid(), reviewHosts.Add(1)),
	})
	if err != nil {
		b.Fatal(err)
	}
	queue := startWorker(b, c, r.Register)
	host := worker.New(c, r.SandboxQueue(), workerOptions())
	r.RegisterActivities(host)
	if err := host.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(host.Stop)
	return queue
}

// runReview runs a coordinator once and checks that every reviewer read
// its own file.
func runReview(b *testing.B, c client.Client, queue, coordinator string) sample {
	b.Helper()
	var res troupe.RunResult
	s := timeRun(b, c, func(ctx context.Context) (client.WorkflowRun, error) {
		return troupeclient.StartRun(ctx, c, queue, troupe.RunInput{Graph: reviewGraphName, Agent: coordinator, Input: "review the change"})
	}, &res)
	var out string
	if err := json.Unmarshal(res.Output, &out); err != nil {
		b.Fatalf("%s answered %s", coordinator, res.Output)
	}
	if !strings.HasPrefix(out, strconv.Itoa(len(reviewAreas))+" findings\n") || strings.Contains(out, "Error") {
		b.Fatalf("%s answered %q", coordinator, out)
	}
	for _, area := range reviewAreas {
		if !strings.Contains(out, "area: "+area) {
			b.Fatalf("%s's answer lacks the %s reviewer's file: %q", coordinator, area, out)
		}
	}
	if res.ToolCalls != len(reviewAreas) {
		b.Fatalf("%s made %d tool calls, want %d", coordinator, res.ToolCalls, len(reviewAreas))
	}
	return s
}

// aliveSandboxes counts the workspace directories under a bwrap client's
// root (all but the client's own .bwrap-etc and .disks) and the running bwrap
// processes that this process started or whose command line names root.
func aliveSandboxes(b *testing.B, root string) (dirs, procs int) {
	b.Helper()
	entries, err := os.ReadDir(root)
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != ".bwrap-etc" && e.Name() != ".disks" {
			dirs++
		}
	}
	self := strconv.Itoa(os.Getpid())
	pids, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range pids {
		comm, err := os.ReadFile(filepath.Join(p, "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != "bwrap" {
			continue
		}
		status, _ := os.ReadFile(filepath.Join(p, "status"))
		cmdline, _ := os.ReadFile(filepath.Join(p, "cmdline"))
		if strings.Contains(string(status), "\nPPid:\t"+self+"\n") || strings.Contains(string(cmdline), root) {
			procs++
		}
	}
	return dirs, procs
}

// timedClient wraps a sandbox client and times its sessions' operations.
type timedClient struct {
	sandbox.Client
	mu  sync.Mutex
	ops map[string]opStat
}

type opStat struct {
	n     int
	total time.Duration
}

func (c *timedClient) record(op string, since time.Time) {
	d := time.Since(since)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ops == nil {
		c.ops = map[string]opStat{}
	}
	o := c.ops[op]
	o.n++
	o.total += d
	c.ops[op] = o
}

func (c *timedClient) reset() {
	c.mu.Lock()
	c.ops = nil
	c.mu.Unlock()
}

func (c *timedClient) snapshot() map[string]opStat {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]opStat{}
	for k, v := range c.ops {
		out[k] = v
	}
	return out
}

func (c *timedClient) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Session, error) {
	defer c.record("create", time.Now())
	s, err := c.Client.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	return &timedSession{Session: s, c: c}, nil
}

func (c *timedClient) Resume(ctx context.Context, st sandbox.State) (sandbox.Session, error) {
	defer c.record("resume", time.Now())
	s, err := c.Client.Resume(ctx, st)
	if err != nil {
		return nil, err
	}
	return &timedSession{Session: s, c: c}, nil
}

type timedSession struct {
	sandbox.Session
	c *timedClient
}

func (s *timedSession) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	defer s.c.record("exec", time.Now())
	return s.Session.Exec(ctx, req)
}

func (s *timedSession) Snapshot(ctx context.Context, w io.Writer) error {
	defer s.c.record("snapshot", time.Now())
	return s.Session.Snapshot(ctx, w)
}

func (s *timedSession) Stop(ctx context.Context) error {
	defer s.c.record("stop", time.Now())
	return s.Session.Stop(ctx)
}
