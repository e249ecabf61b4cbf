package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	enums "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/memory"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/model/scripted"
	"github.com/troupe-dev/troupe/workflows"
)

// memoryScenario answers the agent at once and both memory phases after
// a delay, so that a run's end and its consolidation can be told apart.
const memoryScenario = `
rules:
  - name: agent-remembers
    match: {instructions: "Memory\nLessons from earlier work"}
    respond: {text: "Using tabs, as you prefer."}
  - name: agent
    match: {instructions: "memtest:"}
    respond: {text: "Noted: tabs."}
  - name: phase1
    match: {instructions: "memory phase 1"}
    respond: {delay_ms: 1000, json: {rollout_slug: "user-prefers-tabs", rollout_summary: "The user said they prefer tabs.", raw_memory: "- the user prefers tabs"}}
  - name: phase2
    match: {instructions: "memory phase 2"}
    respond: {delay_ms: 100, json: {memory_md: "## style\n- the user prefers tabs", memory_summary: "- the user prefers tabs"}}
`

// Two runs of an agent with memory, on a real Temporal server: each
// appends its rollout and starts-or-signals the scope's memory workflow
// (SignalWithStart from an activity); the runs answer before their
// consolidation starts; phase 1 runs once per run, phase 2 writes the
// handbook, the summary and the selection; the workflow ends when idle.
func TestMemoryConsolidationEndToEnd(t *testing.T) {
	parallel(t)
	srv, base := scenarioServer(t, memoryScenario)
	c := dial(t)
	scope := fmt.Sprintf("e2e-%d-%d", os.Getpid(), time.Now().UnixNano())
	g := agents.MustGraph("memtest", "m", &agents.Agent{Name: "m", Instructions: "memtest: remembers", Memory: &agents.MemoryConfig{Scope: scope}})
	var store *blob.Store
	queue := startWorker(t, c, base, model.APIResponses, func(cfg *workflows.Config) {
		cfg.Graphs = append(cfg.Graphs, g)
		cfg.Memory = memory.MemoryOptions{Phase1Model: "mini", Phase2Model: "big", IdleTimeout: 2 * time.Second}
		store = cfg.Store
	})
	var answered []time.Time
	for _, msg := range []string{"I prefer tabs.", "Really, tabs."} {
		res, err := runGraph(t, c, queue, troupe.RunInput{Graph: "memtest", Input: msg})
		if err != nil {
			t.Fatal(err)
		}
		answered = append(answered, time.Now())
		if string(res.Output) != `"Noted: tabs."` {
			t.Fatalf("output %s", res.Output)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The scope's workflow ends once idle (2 s): its result says what it
	// did.
	var st memory.MemoryStatus
	for {
		err := c.GetWorkflow(ctx, memory.MemoryWorkflowID(queue, scope), "").Get(ctx, &st)
		if err == nil && st.Batches > 0 {
			// A run that continued (none here) or a later start would
			// show as another run of the id.
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("memory workflow: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Phase 1 ran once per rollout, each after its run had answered.
	var p1 []scripted.Call
	for _, call := range srv.Calls() {
		if call.Rule == "phase1" {
			p1 = append(p1, call)
			if call.Model != "mini" {
				t.Errorf("phase 1 asked model %q, want mini", call.Model)
			}
		}
		if call.Rule == "phase2" && call.Model != "big" {
			t.Errorf("phase 2 asked model %q, want big", call.Model)
		}
	}
	if len(p1) != 2 {
		t.Fatalf("%d phase-1 calls, want 2 (one per run)", len(p1))
	}
	if !p1[0].End.After(answered[0]) {
		t.Errorf("the first run answered at %v, after its phase 1 ended (%v): it waited for consolidation", answered[0], p1[0].End)
	}
	if st.Phase2s < 1 || st.LastError != "" {
		t.Errorf("memory status %+v", st)
	}
	get := func(path string) string {
		data, err := store.Get(ctx, memory.Key(scope, path))
		if err != nil && !errors.Is(err, blob.ErrNotFound) {
			t.Fatal(err)
		}
		return string(data)
	}
	if got := get(memory.SummaryPath); got != "- the user prefers tabs\n" {
		t.Errorf("memory_summary.md = %q", got)
	}
	if got := get(memory.HandbookPath); got != "## style\n- the user prefers tabs\n" {
		t.Errorf("MEMORY.md = %q", got)
	}
	sel, err := memory.ParseSelection([]byte(get(memory.SelectionPath)))
	if err != nil || len(sel.Selected) != 2 {
		t.Errorf("selection %+v %v", sel, err)
	}
	desc, err := c.DescribeWorkflowExecution(ctx, memory.MemoryWorkflowID(queue, scope), "")
	if err != nil {
		t.Fatal(err)
	}
	if s := desc.WorkflowExecutionInfo.GetStatus().String(); s != "Completed" {
		t.Errorf("memory workflow %s, want Completed once idle", s)
	}
	// A later run (which starts the scope's workflow again) reads what
	// the first two taught.
	res, err := runGraph(t, c, queue, troupe.RunInput{Graph: "memtest", Input: "Format this file."})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Output) != `"Using tabs, as you prefer."` {
		t.Errorf("a run after consolidation answered %s: its instructions lacked the memory summary", res.Output)
	}
}

// A session of an agent with memory, on a real Temporal server: each turn
// appends its line to the session's rollout, stopping the session asks
// for a final phase 2, and the histories of the session and of the
// scope's memory workflow replay on this code (the versioned commands of
// troupe.memory-rollouts, the memory workflow's coroutines and timers).
func TestMemorySessionEndToEnd(t *testing.T) {
	parallel(t)
	_, base := scenarioServer(t, memoryScenario)
	c := dial(t)
	scope := fmt.Sprintf("e2e-s-%d-%d", os.Getpid(), time.Now().UnixNano())
	g := agents.MustGraph("memsession", "m", &agents.Agent{Name: "m", Instructions: "memtest: remembers", Memory: &agents.MemoryConfig{Scope: scope}})
	var store *blob.Store
	queue := startWorker(t, c, base, model.APIResponses, func(cfg *workflows.Config) {
		cfg.Graphs = append(cfg.Graphs, g)
		cfg.Memory = memory.MemoryOptions{IdleTimeout: 2 * time.Second}
		store = cfg.Store
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := troupeclient.New(troupeclient.Config{Temporal: c, TaskQueue: queue})
	if err != nil {
		t.Fatal(err)
	}
	s, _, err := cl.CreateSession(ctx, troupeclient.SessionInput{Graph: "memsession", Name: "tabs"})
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range []string{"I prefer tabs.", "Really, tabs."} {
		if _, err := s.Ask(ctx, msg, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Command(ctx, troupeclient.SessionCommand{Op: troupe.CommandStop}); err != nil {
		t.Fatal(err)
	}
	var session troupe.SessionInfo
	if err := c.GetWorkflow(ctx, s.ID(), "").Get(ctx, &session); err != nil {
		t.Fatal(err)
	}
	st := memoryDone(ctx, t, c, memory.MemoryWorkflowID(queue, scope))
	// The turns' rollouts and the final signal make one to three batches
	// (as they arrive during a phase or not), each with its phase 2.
	if st.Phase2s < 1 || st.Batches < 1 || st.Batches > 3 || st.LastError != "" {
		t.Errorf("memory status %+v, want one to three batches and a phase 2", st)
	}
	data, err := store.Get(ctx, memory.Key(scope, memory.RolloutPath(memory.RolloutID(s.ID()))))
	if err != nil {
		t.Fatal(err)
	}
	lines, err := memory.ParseLines(data)
	if err != nil || len(lines) != 2 || lines[1].Input != "Really, tabs." || lines[1].Outcome != memory.OutcomeAnswered {
		t.Fatalf("rollout %+v %v", lines, err)
	}
	if rm, err := store.Get(ctx, memory.Key(scope, memory.RawMemoryPath(memory.RolloutID(s.ID())))); err != nil || !strings.Contains(string(rm), "- the user prefers tabs") {
		t.Errorf("raw memory %q %v", rm, err)
	}
	if *historiesDir != "" {
		// For the replay tests of package memory (its set):
		// go test ./e2e -run TestMemorySessionEndToEnd -histories ../memory/testdata/memory-histories/NAME
		saveHistories(t, c, map[string]bool{s.ID(): true}, *historiesDir, "session")
		saveHistories(t, c, map[string]bool{memory.MemoryWorkflowID(queue, scope): true}, *historiesDir, "memory")
	}
	r := newRunner(t, base, model.APIResponses, "replayer", func(cfg *workflows.Config) { cfg.Graphs = append(cfg.Graphs, g) })
	for _, id := range []string{s.ID(), memory.MemoryWorkflowID(queue, scope)} {
		replayer := worker.NewWorkflowReplayer()
		r.RegisterWorkflows(replayer)
		err := replayer.ReplayWorkflowHistoryWithOptions(quiet(), history(t, c, id), worker.ReplayWorkflowHistoryOptions{
			OriginalExecution: workflow.Execution{ID: id, RunID: "replay"},
		})
		if err != nil {
			t.Errorf("replay %s: %v", id, err)
		}
	}
}

// memoryDone waits, until ctx ends, for the memory workflow id to end
// (idle, its work done) and returns its last status.
func memoryDone(ctx context.Context, t *testing.T, c client.Client, id string) memory.MemoryStatus {
	t.Helper()
	var st memory.MemoryStatus
	for {
		err := c.GetWorkflow(ctx, id, "").Get(ctx, &st)
		if err == nil {
			return st
		}
		if ctx.Err() != nil {
			t.Fatalf("memory workflow %s: %v", id, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// history is the history of workflow id's latest run.
func history(t *testing.T, c client.Client, id string) *historypb.History {
	t.Helper()
	h := &historypb.History{}
	it := c.GetWorkflowHistory(context.Background(), id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		h.Events = append(h.Events, e)
	}
	return h
}

// envMemoryScope has a worker process serve graph memcrash, whose agent
// has memory in the scope named.
const envMemoryScope = "TROUPE_E2E_MEMORY_SCOPE"

// memoryGraph is a graph of one agent with memory in scope.
func memoryGraph(name, scope string) *agents.Graph {
	return agents.MustGraph(name, "m", &agents.Agent{Name: "m", Instructions: "memtest: remembers", Memory: &agents.MemoryConfig{Scope: scope}})
}

// crashScenario is memoryScenario with phases slow enough to kill a
// worker in the middle of one.
const crashScenario = `
rules:
  - name: agent
    match: {instructions: "memtest:"}
    respond: {text: "Noted."}
  - name: phase1
    match: {instructions: "memory phase 1"}
    respond: {delay_ms: 3000, json: {rollout_slug: "a-lesson", rollout_summary: "A lesson was taught.", raw_memory: "- a lesson"}}
  - name: phase2
    match: {instructions: "memory phase 2"}
    respond: {delay_ms: 3000, json: {memory_md: "## lessons\n- a lesson", memory_summary: "- a lesson"}}
`

// The worker is killed (SIGKILL) during phase 1, then during phase 2;
// each phase completes after a new worker starts, once: one answered
// model call per rollout and per phase 2, one raw memory and one summary
// per rollout, and the selection written once phase 2 is done.
func TestMemoryWorkerKilledInPhases(t *testing.T) {
	parallel(t) // mostly waiting, on a server or worker of its own
	srv, url := scenarioServer(t, crashScenario)
	c := dial(t)
	scope := fmt.Sprintf("crash-%d", os.Getpid())
	blobDir, queue := t.TempDir(), fmt.Sprintf("memcrash-%d", os.Getpid())
	store, err := blob.Open(context.Background(), blobDir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	env := envMemoryScope + "=" + scope
	kill := func(cmd interface{ Wait() error }, p *os.Process) {
		t.Helper()
		if err := p.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
	}
	waitFile := func(path string, want func(string) bool) string {
		t.Helper()
		for {
			data, err := readFresh(ctx, store, memory.Key(scope, path))
			if err == nil && want(string(data)) {
				return string(data)
			}
			if ctx.Err() != nil {
				var st memory.MemoryStatus
				if v, err := c.QueryWorkflow(context.Background(), memory.MemoryWorkflowID(queue, scope), "", memory.MemoryQuery); err == nil {
					_ = v.Get(&st)
				}
				for _, call := range srv.Calls() {
					t.Logf("call %s canceled=%v %v-%v", call.Rule, call.Canceled, call.Start.Format("15:04:05.000"), call.End.Format("15:04:05.000"))
				}
				t.Fatalf("%s never came (%q, %v); memory workflow %+v", path, data, err, st)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	// Phase 1.
	first := spawnWorker(t, url, blobDir, queue, env)
	if _, err := runGraph(t, c, queue, troupe.RunInput{Graph: "memcrash", Input: "lesson one"}); err != nil {
		t.Fatal(err)
	}
	waitInFlight(ctx, t, srv, "phase1")
	kill(first, first.Process)
	if n := srv.Count("phase1"); n != 0 {
		t.Fatalf("%d phase-1 calls answered before the kill, want 0", n)
	}
	second := spawnWorker(t, url, blobDir, queue, env)
	waitFile(memory.SelectionPath, func(s string) bool { return strings.Contains(s, "rollout_id") })

	// Phase 2, on a second rollout.
	if _, err := runGraph(t, c, queue, troupe.RunInput{Graph: "memcrash", Input: "lesson two"}); err != nil {
		t.Fatal(err)
	}
	waitInFlight(ctx, t, srv, "phase2")
	kill(second, second.Process)
	if n := srv.Count("phase2"); n != 1 {
		t.Fatalf("%d phase-2 calls answered before the kill, want 1 (the first rollout's)", n)
	}
	sel, _ := readFresh(ctx, store, memory.Key(scope, memory.SelectionPath))
	if before, _ := memory.ParseSelection(sel); len(before.Selected) != 1 {
		t.Fatalf("selection %s during the killed phase 2, want the first one's", sel)
	}
	spawnWorker(t, url, blobDir, queue, env)
	data := waitFile(memory.SelectionPath, func(s string) bool {
		sel, err := memory.ParseSelection([]byte(s))
		return err == nil && len(sel.Selected) == 2
	})

	if p1, p2 := srv.Count("phase1"), srv.Count("phase2"); p1 != 2 || p2 != 2 {
		t.Errorf("answered model calls: %d of phase 1, %d of phase 2; want 2 and 2 (one per rollout, one per phase 2)", p1, p2)
	}
	keys, _, err := store.List(ctx, memory.Prefix(scope)+memory.MemoryDir, 0)
	if err != nil {
		t.Fatal(err)
	}
	var raws, summaries int
	for _, k := range keys {
		switch {
		case strings.Contains(k, memory.RawMemoriesDir):
			raws++
		case strings.Contains(k, memory.RolloutSummariesDir):
			summaries++
		}
	}
	if raws != 2 || summaries != 2 {
		t.Errorf("%d raw memories and %d summaries, want 2 and 2: %v\nselection: %s", raws, summaries, keys, data)
	}
}

// readFresh reads a blob from the store, not from its read cache (the
// worker processes rewrite memory files).
func readFresh(ctx context.Context, store *blob.Store, key string) ([]byte, error) {
	rc, err := store.Open(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// Two sessions of one scope stop at once: their rollouts and final
// signals reach the scope's single memory workflow, whose phase 2s never
// overlap, and whose last selection holds both sessions.
func TestMemoryTwoSessionsStopTogether(t *testing.T) {
	parallel(t)
	srv, base := scenarioServer(t, memoryScenario)
	c := dial(t)
	scope := fmt.Sprintf("e2e-two-%d-%d", os.Getpid(), time.Now().UnixNano())
	g := memoryGraph("memtwo", scope)
	var store *blob.Store
	queue := startWorker(t, c, base, model.APIResponses, func(cfg *workflows.Config) {
		cfg.Graphs = append(cfg.Graphs, g)
		cfg.Memory = memory.MemoryOptions{IdleTimeout: 2 * time.Second}
		store = cfg.Store
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := troupeclient.New(troupeclient.Config{Temporal: c, TaskQueue: queue})
	if err != nil {
		t.Fatal(err)
	}
	var sessions []*troupeclient.Session
	for _, name := range []string{"one", "two"} {
		s, _, err := cl.CreateSession(ctx, troupeclient.SessionInput{Graph: "memtwo", Name: name})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Ask(ctx, "I prefer tabs, says "+name, nil); err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, s)
	}
	errs := make(chan error, 2)
	for _, s := range sessions {
		go func() {
			_, err := s.Command(ctx, troupeclient.SessionCommand{Op: troupe.CommandStop})
			errs <- err
		}()
	}
	for range sessions {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	var st memory.MemoryStatus
	for {
		// The workflow ends once idle; a later start would be another run.
		if err := c.GetWorkflow(ctx, memory.MemoryWorkflowID(queue, scope), "").Get(ctx, &st); err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the memory workflow did not end")
		}
		time.Sleep(200 * time.Millisecond)
	}
	var p2 []scripted.Call
	for _, call := range srv.Calls() {
		if call.Rule == "phase2" {
			p2 = append(p2, call)
		}
	}
	for i := 1; i < len(p2); i++ {
		if p2[i].Start.Before(p2[i-1].End) {
			t.Errorf("phase 2s overlapped: %v-%v and %v-%v", p2[i-1].Start, p2[i-1].End, p2[i].Start, p2[i].End)
		}
	}
	if len(p2) == 0 || st.LastError != "" {
		t.Fatalf("status %+v, %d phase 2s", st, len(p2))
	}
	data, err := readFresh(ctx, store, memory.Key(scope, memory.SelectionPath))
	if err != nil {
		t.Fatal(err)
	}
	sel, err := memory.ParseSelection(data)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range sel.Selected {
		ids = append(ids, s.RolloutID)
	}
	for _, s := range sessions {
		if !slices.Contains(ids, memory.RolloutID(s.ID())) {
			t.Errorf("selection %v lacks session %s", ids, s.ID())
		}
	}
}
