package memory_test

// The memory writers' compare-and-swap (memory_generations.go) on each
// store backend: a write-back racing a phase 2 either way, a claim that
// went stale, writers that crash after their claim, writers that stall
// past their window while others go on, and a fork copy racing a phase
// 2. The interleavings are driven by the writers' hook (SetMemoryHook),
// which holds a writer at a step until the test lets it go, and by their
// clock (SetMemoryClock), which the test moves past a window: no timing.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/internal/s3test"
	"github.com/troupe-dev/troupe/memory"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/local"
	"github.com/troupe-dev/troupe/workflows/workflowstest"
)

// casBackends are the store backends, each giving a new empty store per
// call: mem://, file:// and S3 (versitygw, one bucket per store).
func casBackends(t *testing.T) []struct {
	name string
	open func(t *testing.T) *blob.Store
} {
	buckets := []string{"cas-1", "cas-2", "cas-3", "cas-4", "cas-5", "cas-6"}
	srv := s3test.Start(t, buckets...)
	srv.SetEnv(t)
	next := 0
	open := func(t *testing.T, url string) *blob.Store {
		store, err := blob.Open(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		return store
	}
	return []struct {
		name string
		open func(t *testing.T) *blob.Store
	}{
		{"mem", func(t *testing.T) *blob.Store { return open(t, "mem://") }},
		{"file", func(t *testing.T) *blob.Store { return open(t, t.TempDir()) }},
		{"s3", func(t *testing.T) *blob.Store {
			if next == len(buckets) {
				t.Fatal("out of buckets")
			}
			next++
			return open(t, srv.URL(buckets[next-1]))
		}},
	}
}

// casWorld is scope "team" on a store, and a worker whose agent updates
// it live from a local sandbox and whose phase 2 answers label's
// handbook.
type casWorld struct {
	store *blob.Store
	c     *memory.Consolidation
	agent *agents.Agent
	lc    *local.Client
	logs  lockedBuffer

	mu     sync.Mutex
	label  string
	asked  []string // phase 2's inputs
	rawSeq int
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

const (
	casHandbook = "# Handbook\n- discount: escalate above 30%\n"
	casSummary  = "- escalate discounts above 30%\n"
	casEdit     = casHandbook + "- discount: escalate above 25% (the user, today)\n"
)

func newCASWorld(t *testing.T, store *blob.Store) *casWorld {
	t.Helper()
	lc, err := local.New(local.Config{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	w := &casWorld{store: store, lc: lc}
	w.agent = &agents.Agent{Name: "coder", Instructions: "coder: fixes memory", Sandbox: &agents.Sandbox{},
		Memory: &agents.MemoryConfig{Scope: "team", Mode: agents.MemoryReadWrite}}
	m := &workflowstest.FuncModel{Func: func(req model.Request) []agents.Item {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.asked = append(w.asked, workflowstest.LastUser(req))
		answer, _ := json.Marshal(map[string]string{"memory_md": "# Handbook\n- " + w.label, "memory_summary": "- " + w.label})
		return []agents.Item{agents.AssistantMessage(string(answer))}
	}}
	w.c = &memory.Consolidation{Store: store, Model: m}
	w.put(t, memory.HandbookPath, casHandbook)
	w.put(t, memory.SummaryPath, casSummary)
	return w
}

func (w *casWorld) put(t *testing.T, path, data string) {
	t.Helper()
	if err := w.store.Put(context.Background(), memory.Key("team", path), []byte(data)); err != nil {
		t.Fatal(err)
	}
}

// get is a file of the scope, "" when missing.
func (w *casWorld) get(t *testing.T, scope, path string) string {
	t.Helper()
	return scopeFile(t, w.store, scope, path)
}

// questions are phase 2's inputs so far.
func (w *casWorld) questions() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.asked...)
}

// hook holds or fails the worker's memory writers (nil: none).
func (w *casWorld) hook(h func(step string) error) {
	memory.SetMemoryHook(w.c, func(_ context.Context, step, _ string) error { return h(step) })
}

// activity runs a memory activity of the worker, logging to w.logs.
func (w *casWorld) activity(name string, fn, in, out any) error {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(&w.logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	v, err := env.ExecuteActivity(name, in)
	if err != nil || out == nil {
		return err
	}
	return v.Get(out)
}

// phase2 runs phase 2 on a new raw memory, its model answering label.
func (w *casWorld) phase2(t *testing.T, label string) (memory.MemoryPhase2Output, error) {
	w.mu.Lock()
	w.label = label
	w.rawSeq++
	id := fmt.Sprintf("r%d", w.rawSeq)
	w.mu.Unlock()
	rm := memory.RawMemory{RolloutID: id, Lines: 1, Slug: "lesson", Updated: time.Now(), Text: "- " + label}
	w.put(t, memory.RawMemoryPath(id), string(rm.Encode()))
	var out memory.MemoryPhase2Output
	err := w.activity(memory.MemoryPhase2ActivityName, w.c.MemoryPhase2,
		memory.MemoryPhase2Input{Scope: "team", Settings: memory.MemorySettings{Phase2Model: "big", Newest: 64, Phase2Turns: 1}}, &out)
	return out, err
}

// retryPhase2 runs phase 2 again with no new raw memory, as Temporal's
// retry of an attempt.
func (w *casWorld) retryPhase2() (memory.MemoryPhase2Output, error) {
	var out memory.MemoryPhase2Output
	err := w.activity(memory.MemoryPhase2ActivityName, w.c.MemoryPhase2,
		memory.MemoryPhase2Input{Scope: "team", Settings: memory.MemorySettings{Phase2Model: "big", Newest: 64, Phase2Turns: 1}}, &out)
	return out, err
}

// testClock is a worker's clock that a test moves on, by skip: the
// windows of the memory writers pass without waiting.
type testClock struct{ ahead atomic.Int64 }

func (c *testClock) now() time.Time { return time.Now().Add(time.Duration(c.ahead.Load())) }

// skip moves the clock on by more than a writer's window and the
// takeover margin after it.
func (c *testClock) skip() { c.ahead.Add(int64(2 * time.Minute)) }

// clock gives w's worker a clock the test moves on.
func (w *casWorld) clock() *testClock {
	c := &testClock{}
	memory.SetMemoryClock(w.c, c.now)
	return c
}

// phase2Handbook is what phase 2 answering label writes.
func phase2Handbook(label string) string { return "# Handbook\n- " + label + "\n" }

// sandbox provisions a sandbox of the agent and materialises its memory,
// as SandboxCreate does, and writes the agent's edit of MEMORY.md into
// its workspace.
func (w *casWorld) sandbox(t *testing.T, id string) sandbox.State {
	t.Helper()
	ctx := context.Background()
	s, err := w.lc.Create(ctx, sandbox.Spec{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.c.Materialise(ctx, s, w.agent, agents.RunContext{}); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteFile(ctx, memory.HandbookPath, []byte(casEdit), 0o644); err != nil {
		t.Fatal(err)
	}
	return s.State()
}

// snapshot writes the agent's edits back in an activity, as
// SandboxSnapshot does first.
func (w *casWorld) snapshot(st sandbox.State) error {
	return w.activity("write-back", func(ctx context.Context, st sandbox.State) error {
		s, err := w.lc.Resume(ctx, st)
		if err != nil {
			return err
		}
		_, _, err = w.c.WriteBack(ctx, s)
		return err
	}, st, nil)
}

// gate holds a writer at a step: reached is closed when it gets there,
// and it goes on when release is closed.
type gate struct {
	once             sync.Once
	reached, release chan struct{}
}

func newGate() *gate { return &gate{reached: make(chan struct{}), release: make(chan struct{})} }

// hold holds the first writer that calls it.
func (g *gate) hold() {
	first := false
	g.once.Do(func() { first = true })
	if first {
		close(g.reached)
		<-g.release
	}
}

// A write-back and a phase 2 of one scope race, on each store: whichever
// loses the race to claim the scope's next generation learns it, and
// neither clobbers the other unseen. Phase 2 that claims first stands:
// the edit is skipped and logged. A write-back that claims first is
// replaced by phase 2 (phase 2 wins), which reports the file it
// replaced.
func TestMemoryWriteBackRacesPhase2(t *testing.T) {
	for _, b := range casBackends(t) {
		t.Run(b.name+"/phase 2 between the write-back's check and its write", func(t *testing.T) {
			w := newCASWorld(t, b.open(t))
			st := w.sandbox(t, "wb-1")
			g := newGate()
			w.hook(func(step string) error {
				if step == "write-back: checked" {
					g.hold()
				}
				return nil
			})
			done := make(chan error, 1)
			go func() { done <- w.snapshot(st) }()
			<-g.reached
			// The write-back found the handbook as its workspace got it;
			// phase 2 now rewrites it.
			if _, err := w.phase2(t, "consolidated meanwhile"); err != nil {
				t.Fatal(err)
			}
			close(g.release)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if got := w.get(t, "team", memory.HandbookPath); got != phase2Handbook("consolidated meanwhile") {
				t.Errorf("the handbook phase 2 wrote was clobbered by the write-back:\n%s", got)
			}
			if logs := w.logs.String(); !strings.Contains(logs, "memory edit not written back") {
				t.Errorf("the skipped edit was not logged:\n%s", logs)
			}
		})
		t.Run(b.name+"/write-back between phase 2's read and its write", func(t *testing.T) {
			w := newCASWorld(t, b.open(t))
			st := w.sandbox(t, "wb-2")
			g := newGate()
			w.hook(func(step string) error {
				if step == "phase 2: answered" {
					g.hold()
				}
				return nil
			})
			type result struct {
				out memory.MemoryPhase2Output
				err error
			}
			done := make(chan result, 1)
			go func() {
				out, err := w.phase2(t, "consolidated")
				done <- result{out, err}
			}()
			<-g.reached
			// Phase 2 read the handbook and has its answer; the agent's edit
			// is written back now.
			if err := w.snapshot(st); err != nil {
				t.Fatal(err)
			}
			if got := w.get(t, "team", memory.HandbookPath); got != casEdit {
				t.Fatalf("the edit was not written back: %q", got)
			}
			close(g.release)
			res := <-done
			if res.err != nil {
				t.Fatal(res.err)
			}
			if got := w.get(t, "team", memory.HandbookPath); got != phase2Handbook("consolidated") {
				t.Errorf("handbook %q, want phase 2's (phase 2 wins)", got)
			}
			if got := strings.Join(res.out.Replaced, ","); got != memory.HandbookPath {
				t.Errorf("phase 2 replaced %q unseen; want it to report %s", got, memory.HandbookPath)
			}
			if logs := w.logs.String(); !strings.Contains(logs, "memory phase 2 replaced live edits") {
				t.Errorf("the replaced edit was not logged:\n%s", logs)
			}
		})
	}
}

// A scope keeps its newest generations only (memory.KeepGenerations);
// a write-back held while the scope moved on that far finds the number
// it claims free again (deleted as old), and its claim is void: it does
// not overwrite the phase 2s it never saw.
func TestMemoryStaleClaimIsVoid(t *testing.T) {
	for _, b := range casBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			w := newCASWorld(t, b.open(t))
			st := w.sandbox(t, "wb-5")
			g := newGate()
			w.hook(func(step string) error {
				if step == "write-back: checked" {
					g.hold()
				}
				return nil
			})
			done := make(chan error, 1)
			go func() { done <- w.snapshot(st) }()
			<-g.reached
			n := memory.KeepGenerations + 1
			for i := 1; i <= n; i++ {
				if _, err := w.phase2(t, fmt.Sprintf("consolidation %d", i)); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := w.store.Get(context.Background(), memory.Key("team", memory.GenerationPath(1))); !errors.Is(err, blob.ErrNotFound) {
				t.Fatalf("generation 1 was kept (%v): the test needs it deleted", err)
			}
			close(g.release)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			want := phase2Handbook(fmt.Sprintf("consolidation %d", n))
			if got := w.get(t, "team", memory.HandbookPath); got != want {
				t.Errorf("handbook %q, want the last phase 2's %q", got, want)
			}
			var seqs []int64
			keys, _, err := w.store.List(context.Background(), memory.Key("team", memory.GenerationsDir), 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				if seq, applied, ok := memory.ParseGenerationPath(strings.TrimPrefix(k, memory.Prefix("team"))); ok && !applied {
					seqs = append(seqs, seq)
				}
			}
			if len(seqs) == 0 || seqs[len(seqs)-1] != int64(n) || len(seqs) > memory.KeepGenerations+1 {
				t.Errorf("generations %v, want at most the newest %d (and the void claim), up to %d", seqs, memory.KeepGenerations, n)
			}
		})
	}
}

// A writer that crashes after claiming a generation, before writing its
// files, leaves it unapplied; that blocks no one. Once its writer's
// window is over, a retried phase 2 applies its own and does not ask its
// model again; another writer applies it, and then decides on what it
// wrote.
func TestMemoryCrashedWriterLeftovers(t *testing.T) {
	crash := errors.New("the worker died")
	later := func() time.Time { return time.Now().Add(2 * time.Minute) }
	for _, b := range casBackends(t) {
		t.Run(b.name+"/phase 2 retried", func(t *testing.T) {
			w := newCASWorld(t, b.open(t))
			crashes := 0
			w.hook(func(step string) error {
				if step == "claimed phase2" && crashes == 0 {
					crashes++
					return crash
				}
				return nil
			})
			if _, err := w.phase2(t, "consolidated"); err == nil || !strings.Contains(err.Error(), crash.Error()) {
				t.Fatalf("phase 2 = %v, want the crash", err)
			}
			if got := w.get(t, "team", memory.HandbookPath); got != casHandbook {
				t.Fatalf("the crashed phase 2 wrote its handbook: %q", got)
			}
			memory.SetMemoryClock(w.c, later) // Past the crashed attempt's window.
			out, err := w.retryPhase2()
			if err != nil {
				t.Fatal(err)
			}
			if asked := w.questions(); len(asked) != 1 || !out.Unchanged {
				t.Errorf("the retry asked the model %d times in all (want 1) and returned %+v (want unchanged)", len(asked), out)
			}
			if got := w.get(t, "team", memory.HandbookPath); got != phase2Handbook("consolidated") {
				t.Errorf("handbook %q, want the crashed attempt's", got)
			}
			if sel, err := memory.ParseSelection([]byte(w.get(t, "team", memory.SelectionPath))); err != nil || len(sel.Selected) != 1 {
				t.Errorf("selection %+v %v, want the crashed attempt's", sel, err)
			}
		})
		t.Run(b.name+"/phase 2 crashed, a write-back next", func(t *testing.T) {
			w := newCASWorld(t, b.open(t))
			st := w.sandbox(t, "wb-3")
			w.hook(func(step string) error {
				if step == "claimed phase2" {
					return crash
				}
				return nil
			})
			if _, err := w.phase2(t, "consolidated"); err == nil {
				t.Fatal("phase 2 did not crash")
			}
			w.hook(func(string) error { return nil })
			memory.SetMemoryClock(w.c, later) // Past the crashed writer's window.
			if err := w.snapshot(st); err != nil {
				t.Fatal(err)
			}
			if got := w.get(t, "team", memory.HandbookPath); got != phase2Handbook("consolidated") {
				t.Errorf("handbook %q, want the crashed phase 2's (applied by the write-back, whose edit then conflicts)", got)
			}
			if w.get(t, "team", memory.SelectionPath) == "" {
				t.Error("the crashed phase 2's selection was never written")
			}
		})
		t.Run(b.name+"/write-back crashed, phase 2 next", func(t *testing.T) {
			w := newCASWorld(t, b.open(t))
			st := w.sandbox(t, "wb-4")
			w.hook(func(step string) error {
				if step == "claimed write-back" {
					return crash
				}
				return nil
			})
			if err := w.snapshot(st); err == nil {
				t.Fatal("the write-back did not crash")
			}
			w.hook(func(string) error { return nil })
			memory.SetMemoryClock(w.c, later)
			if _, err := w.phase2(t, "consolidated"); err != nil {
				t.Fatal(err)
			}
			if asked := w.questions(); len(asked) != 1 || !strings.Contains(asked[0], "escalate above 25% (the user, today)") {
				t.Errorf("phase 2 did not consolidate the crashed write-back's edit: %q", asked)
			}
			if got := w.get(t, "team", memory.HandbookPath); got != phase2Handbook("consolidated") {
				t.Errorf("handbook %q, want phase 2's", got)
			}
		})
	}
}

// A writer that stalls while it applies a generation (a stalled store
// write, a worker cut off from Temporal, whose activity Temporal then
// retries) writes no file of it once others went on: a retry or another
// writer waits out its window before taking the generation over, a
// writer past its window writes nothing more, and one that finds a newer
// generation claimed stops, whatever its clock says.
func TestMemoryStalledWriters(t *testing.T) {
	for _, b := range casBackends(t) {
		t.Run(b.name+"/phase 2 retried while its first attempt writes", func(t *testing.T) {
			w := newCASWorld(t, b.open(t))
			clock := w.clock()
			first := newGate()
			var waited atomic.Bool
			w.hook(func(step string) error {
				switch step {
				case "claimed phase2":
					first.hold()
				case "wait":
					// The retry waits for the first attempt's window: end it.
					if !waited.Swap(true) {
						clock.skip()
					}
				}
				return nil
			})
			done := make(chan error, 1)
			go func() {
				_, err := w.phase2(t, "consolidated")
				done <- err
			}()
			<-first.reached
			// Attempt 1 timed out on heartbeats, but lives; its retry:
			out, err := w.retryPhase2()
			if err != nil {
				t.Fatal(err)
			}
			if !waited.Load() {
				t.Error("the retry applied the generation of its first attempt, still in its window, without waiting")
			}
			if asked := w.questions(); len(asked) != 1 || !out.Unchanged {
				t.Errorf("the retry asked the model %d times in all (want 1) and returned %+v (want unchanged)", len(asked), out)
			}
			// An agent's sandbox made now gets generation 1, whose handbook
			// its edit then replaces as generation 2.
			if err := w.snapshot(w.sandbox(t, "wb-retry")); err != nil {
				t.Fatal(err)
			}
			if got := w.get(t, "team", memory.HandbookPath); got != casEdit {
				t.Fatalf("the edit was not written back: %q", got)
			}
			close(first.release)
			if err := <-done; err != nil {
				t.Errorf("the first attempt, whose generation the retry applied: %v", err)
			}
			if got := w.get(t, "team", memory.HandbookPath); got != casEdit {
				t.Errorf("generation 2 (the edit) was overwritten by the first attempt of generation 1: handbook %q", got)
			}
		})
		t.Run(b.name+"/write-back retried while its first attempt writes", func(t *testing.T) {
			w := newCASWorld(t, b.open(t))
			clock := w.clock()
			st := w.sandbox(t, "wb-retried")
			first := newGate()
			var waited atomic.Bool
			w.hook(func(step string) error {
				switch step {
				case "claimed write-back":
					first.hold()
				case "wait":
					if !waited.Swap(true) {
						clock.skip()
					}
				}
				return nil
			})
			done := make(chan error, 1)
			go func() { done <- w.snapshot(st) }()
			<-first.reached
			// The retry of the same sandbox's snapshot.
			if err := w.snapshot(st); err != nil {
				t.Fatal(err)
			}
			if !waited.Load() {
				t.Error("the retry applied the generation of its first attempt, still in its window, without waiting")
			}
			if got := w.get(t, "team", memory.HandbookPath); got != casEdit {
				t.Fatalf("the retry did not apply the edit: %q", got)
			}
			if _, err := w.phase2(t, "consolidated"); err != nil {
				t.Fatal(err)
			}
			close(first.release)
			if err := <-done; err != nil {
				t.Errorf("the first attempt, whose generation the retry applied: %v", err)
			}
			if got := w.get(t, "team", memory.HandbookPath); got != phase2Handbook("consolidated") {
				t.Errorf("generation 2 (phase 2's) was overwritten by the first attempt of generation 1 (the edit): handbook %q", got)
			}
		})
		t.Run(b.name+"/a slow taker of a crashed generation", func(t *testing.T) {
			w := newCASWorld(t, b.open(t))
			clock := w.clock()
			st := w.sandbox(t, "wb-slow")
			slow := newGate()
			var crashed atomic.Bool
			w.hook(func(step string) error {
				switch {
				case step == "claimed phase2" && !crashed.Swap(true):
					return errors.New("the worker died")
				case step == "wrote "+memory.HandbookPath:
					slow.hold()
				}
				return nil
			})
			if _, err := w.phase2(t, "consolidated"); err == nil {
				t.Fatal("phase 2 did not crash")
			}
			clock.skip() // Past the crashed writer's window.
			done := make(chan error, 1)
			go func() { done <- w.snapshot(st) }()
			<-slow.reached
			// The write-back took generation 1 over and wrote its handbook;
			// it stalls past its own window, and a phase 2 takes over from it
			// and goes on to generation 2.
			clock.skip()
			if _, err := w.phase2(t, "second"); err != nil {
				t.Fatal(err)
			}
			close(slow.release)
			if err := <-done; err != nil {
				t.Errorf("the slow taker, whose generation was applied: %v", err)
			}
			if got := w.get(t, "team", memory.SummaryPath); got != "- second\n" {
				t.Errorf("generation 2's summary was overwritten by the slow taker of generation 1: %q", got)
			}
			if sel, err := memory.ParseSelection([]byte(w.get(t, "team", memory.SelectionPath))); err != nil || len(sel.Selected) != 2 {
				t.Errorf("selection %+v %v, want generation 2's (two raw memories)", sel, err)
			}
			if got := w.get(t, "team", memory.HandbookPath); got != phase2Handbook("second") {
				t.Errorf("handbook %q, want generation 2's", got)
			}
		})
		t.Run(b.name+"/a writer past its window writes nothing", func(t *testing.T) {
			w := newCASWorld(t, b.open(t))
			clock := w.clock()
			stalled := newGate()
			w.hook(func(step string) error {
				if step == "claimed phase2" {
					stalled.hold()
				}
				return nil
			})
			done := make(chan error, 1)
			go func() {
				_, err := w.phase2(t, "consolidated")
				done <- err
			}()
			<-stalled.reached
			clock.skip()
			close(stalled.release)
			if err := <-done; !isMemoryLate(err) {
				t.Fatalf("phase 2 past its window = %v, want %s", err, memory.ErrMemoryLate)
			}
			if got := w.get(t, "team", memory.HandbookPath); got != casHandbook {
				t.Fatalf("phase 2 wrote its handbook past its window: %q", got)
			}
			// Its retry takes the generation over, and asks nothing.
			out, err := w.retryPhase2()
			if err != nil {
				t.Fatal(err)
			}
			if asked := w.questions(); len(asked) != 1 || !out.Unchanged {
				t.Errorf("the retry asked the model %d times in all (want 1) and returned %+v (want unchanged)", len(asked), out)
			}
			if got := w.get(t, "team", memory.HandbookPath); got != phase2Handbook("consolidated") {
				t.Errorf("handbook %q, want the stalled attempt's", got)
			}
		})
		t.Run(b.name+"/a writer whose clock is behind stops at a newer generation", func(t *testing.T) {
			store := b.open(t)
			w := newCASWorld(t, store)
			// A second worker on the store, whose clock is ahead: by it,
			// the first worker's window is over.
			ahead := newCASWorld(t, store)
			ahead.clock().skip()
			stalled := newGate()
			w.hook(func(step string) error {
				if step == "claimed phase2" {
					stalled.hold()
				}
				return nil
			})
			done := make(chan error, 1)
			go func() {
				_, err := w.phase2(t, "consolidated")
				done <- err
			}()
			<-stalled.reached
			// The second worker's fork copy takes generation 1 over; an
			// agent's sandbox of that worker edits its handbook as
			// generation 2.
			if err := ahead.activity(memory.MemoryForkActivityName, ahead.c.MemoryFork,
				memory.MemoryForkInput{From: "team", To: memory.ForkScope("team", "skew")}, nil); err != nil {
				t.Fatal(err)
			}
			if err := ahead.snapshot(ahead.sandbox(t, "wb-ahead")); err != nil {
				t.Fatal(err)
			}
			if got := w.get(t, "team", memory.HandbookPath); got != casEdit {
				t.Fatalf("the edit was not written back: %q", got)
			}
			close(stalled.release)
			if err := <-done; err != nil {
				t.Errorf("the first worker's phase 2, whose generation was applied: %v", err)
			}
			if got := w.get(t, "team", memory.HandbookPath); got != casEdit {
				t.Errorf("generation 2 (the edit) was overwritten by generation 1's writer: handbook %q", got)
			}
		})
		t.Run(b.name+"/a writer whose clock is behind stops at a takeover", func(t *testing.T) {
			store := b.open(t)
			w := newCASWorld(t, store)
			ahead := newCASWorld(t, store)
			ahead.clock().skip()
			stalled, taking := newGate(), newGate()
			w.hook(func(step string) error {
				if step == "claimed phase2" {
					stalled.hold()
				}
				return nil
			})
			ahead.hook(func(step string) error {
				if step == "took over phase2" {
					taking.hold()
				}
				return nil
			})
			done := make(chan error, 1)
			go func() {
				_, err := w.phase2(t, "consolidated")
				done <- err
			}()
			<-stalled.reached
			// The second worker's fork copy takes generation 1 over, and is
			// held before it writes; the first worker's phase 2 goes on.
			forked := make(chan error, 1)
			go func() {
				forked <- ahead.activity(memory.MemoryForkActivityName, ahead.c.MemoryFork,
					memory.MemoryForkInput{From: "team", To: memory.ForkScope("team", "skew")}, nil)
			}()
			select {
			case <-taking.reached:
			case err := <-forked:
				close(stalled.release)
				t.Fatalf("the fork copy applied generation 1 without taking it over (%v)", err)
			}
			close(stalled.release)
			if err := <-done; !isMemoryLate(err) {
				t.Errorf("phase 2 whose generation was taken over = %v, want %s", err, memory.ErrMemoryLate)
			}
			if got := w.get(t, "team", memory.HandbookPath); got != casHandbook {
				t.Errorf("phase 2 wrote its handbook after it was taken over: %q", got)
			}
			close(taking.release)
			if err := <-forked; err != nil {
				t.Fatal(err)
			}
			if got := w.get(t, "team", memory.HandbookPath); got != phase2Handbook("consolidated") {
				t.Errorf("handbook %q, want the generation the taker applied", got)
			}
		})
	}
}

// isMemoryLate reports an error of type ErrMemoryLate.
func isMemoryLate(err error) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.Type() == memory.ErrMemoryLate
}

// A fork copies one generation of its source's memory, even while a
// phase 2 of the source writes: a copy that a phase 2 overtook reads
// again, and one that finds a phase 2 writing waits for it.
func TestMemoryForkCopyRacesPhase2(t *testing.T) {
	fork := memory.ForkScope("team", "branch")
	consistent := func(t *testing.T, w *casWorld, label string) {
		t.Helper()
		want := map[string]string{memory.HandbookPath: phase2Handbook(label), memory.SummaryPath: "- " + label + "\n",
			memory.SelectionPath: w.get(t, "team", memory.SelectionPath)}
		for p, data := range want {
			if got := w.get(t, fork, p); got != data || data == "" {
				t.Errorf("the fork's %s = %q, want %q (one generation: phase 2's)", p, got, data)
			}
		}
	}
	for _, b := range casBackends(t) {
		t.Run(b.name+"/phase 2 while the copy reads", func(t *testing.T) {
			w := newCASWorld(t, b.open(t))
			g := newGate()
			w.hook(func(step string) error {
				if step == "fork: read "+memory.HandbookPath {
					g.hold()
				}
				return nil
			})
			done := make(chan error, 1)
			go func() {
				done <- w.activity(memory.MemoryForkActivityName, w.c.MemoryFork, memory.MemoryForkInput{From: "team", To: fork}, nil)
			}()
			<-g.reached
			// The copy has the old handbook; phase 2 rewrites everything.
			if _, err := w.phase2(t, "consolidated"); err != nil {
				t.Fatal(err)
			}
			close(g.release)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			consistent(t, w, "consolidated")
		})
		t.Run(b.name+"/the copy while phase 2 writes", func(t *testing.T) {
			w := newCASWorld(t, b.open(t))
			writing := newGate()
			var waited atomic.Bool
			var release sync.Once
			w.hook(func(step string) error {
				switch step {
				case "wrote " + memory.HandbookPath:
					writing.hold()
				case "wait":
					waited.Store(true)
					release.Do(func() { close(writing.release) })
				}
				return nil
			})
			done := make(chan error, 1)
			go func() {
				_, err := w.phase2(t, "consolidated")
				done <- err
			}()
			<-writing.reached
			// Phase 2 wrote its handbook, not yet its summary or selection.
			err := w.activity(memory.MemoryForkActivityName, w.c.MemoryFork, memory.MemoryForkInput{From: "team", To: fork}, nil)
			release.Do(func() { close(writing.release) }) // Had the copy not waited.
			if err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if !waited.Load() {
				t.Error("the copy did not wait for the phase 2 that was writing")
			}
			consistent(t, w, "consolidated")
		})
	}
}
