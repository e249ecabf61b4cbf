package memory_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/memory"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/model/scripted"
	"github.com/troupe-dev/troupe/workflows/workflowstest"
)

// memoryScenario scripts both phases. Phase 1 answers per rollout (its id
// is in the input's first line): r1, r2 and r3 teach a lesson each (after
// 300 ms, so that calls at once overlap), r-empty teaches nothing. Phase 2
// answers a handbook of what it was given as added and kept, when the
// input is the one the test expects; "broken" phase 2s answer prose.
const memoryScenario = `
rules:
  - name: p1-empty
    match: {instructions: "memory phase 1", last_input: "^Rollout r-empty "}
    respond: {json: {rollout_slug: "", rollout_summary: "", raw_memory: ""}}
  - name: p1-r1
    match: {instructions: "memory phase 1", last_input: "^Rollout r1 "}
    respond: {delay_ms: 300, json: {rollout_slug: "lesson-one", rollout_summary: "The user taught lesson one.", raw_memory: "- lesson one"}}
  - name: p1-r2
    match: {instructions: "memory phase 1", last_input: "^Rollout r2 "}
    respond: {delay_ms: 300, json: {rollout_slug: "lesson-two", rollout_summary: "The user taught lesson two.", raw_memory: "- lesson two"}}
  - name: p1-r3
    match: {instructions: "memory phase 1", last_input: "^Rollout r3 "}
    respond: {delay_ms: 300, json: {rollout_slug: "lesson-three", rollout_summary: "The user taught lesson three.", raw_memory: "- lesson three"}}
  - name: p2-forget
    match: {instructions: "memory phase 2", last_input: "(?s)# Current MEMORY.md\n\n## lessons\n- lesson one\n- lesson two.*ADDED rollout r3 \\(lesson-three\\)\n- lesson three.*KEPT rollout r2 \\(lesson-two\\)\n- lesson two.*# REMOVED raw memories \\(1\\)\n\n## REMOVED rollout r1\n- lesson one"}
    respond:
      json:
        memory_md: "## lessons\n- lesson two\n- lesson three"
        memory_summary: "- lessons two and three"
        skills: [{name: "teach-lessons", skill_md: "---\nname: teach-lessons\ndescription: How lessons are taught.\n---\nTeach them one by one.\n"}]
  - name: p2-broken
    match: {instructions: "memory phase 2", input: "ADDED rollout broken"}
    respond: {text: "Here is your new MEMORY.md: lessons two and three."}
  - name: p2-any
    match: {instructions: "memory phase 2"}
    respond: {json: {memory_md: "## lessons\n{{.LastUser}}", memory_summary: "- lessons"}}
`

type memoryFixture struct {
	env   *testsuite.TestWorkflowEnvironment
	store *blob.Store
	srv   *scripted.Server
	base  string
}

// memoryEnv is a test environment whose memory runs on the scripted model
// over HTTP and a blob store in a temporary directory.
func memoryEnv(t *testing.T) *memoryFixture {
	t.Helper()
	sc, err := scripted.ParseScenario([]byte(memoryScenario))
	if err != nil {
		t.Fatal(err)
	}
	srv := scripted.New(sc)
	base, err := srv.Start("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	m, err := model.New(model.Config{APIKey: "test", BaseURL: base})
	if err != nil {
		t.Fatal(err)
	}
	store, err := blob.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	c := &memory.Consolidation{Store: store, Model: m}
	env := workflowstest.NewEnv()
	c.Register(env)
	c.RegisterWorkflows(env)
	return &memoryFixture{env: env, store: store, srv: srv, base: base}
}

// rollout writes a rollout of n turns to the scope.
func (f *memoryFixture) rollout(t *testing.T, id string, n int) memory.MemoryRollout {
	t.Helper()
	var data []byte
	for i := 1; i <= n; i++ {
		var err error
		data, _, _, err = memory.AppendLine(data, memory.Line{Seq: i, Workflow: id, Input: "teach me", Items: []agents.Item{agents.AssistantMessage("a lesson")},
			Outcome: memory.OutcomeAnswered, Ended: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
	}
	f.put(t, memory.RolloutPath(id), data)
	return memory.MemoryRollout{ID: id, Lines: n}
}

func (f *memoryFixture) put(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := f.store.Put(context.Background(), memory.Key("team", path), data); err != nil {
		t.Fatal(err)
	}
}

func (f *memoryFixture) get(t *testing.T, path string) string {
	t.Helper()
	return scopeFile(t, f.store, "team", path)
}

// scopeFile is the file at path of memory scope in store, "" when it does
// not exist.
func scopeFile(t *testing.T, store *blob.Store, scope, path string) string {
	t.Helper()
	data, err := store.Get(context.Background(), memory.Key(scope, path))
	if errors.Is(err, blob.ErrNotFound) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// files lists the scope's files under dir.
func (f *memoryFixture) files(t *testing.T, dir string) []string {
	t.Helper()
	keys, _, err := f.store.List(context.Background(), memory.Key("team", dir), 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		keys[i] = strings.TrimPrefix(k, memory.Prefix("team"))
	}
	return keys
}

// run runs the scope's workflow until it ends (idle) and returns its
// status.
func (f *memoryFixture) run(t *testing.T, in memory.MemoryInput) memory.MemoryStatus {
	t.Helper()
	in.Scope = "team"
	if in.Settings.IdleTimeout == 0 {
		in.Settings.IdleTimeout = time.Minute
	}
	f.env.ExecuteWorkflow(memory.MemoryWorkflowName, in)
	if err := f.env.GetWorkflowError(); err != nil {
		for e := err; e != nil; e = errors.Unwrap(e) {
			t.Logf("%T %v", e, e)
		}
		t.Fatal(err)
	}
	var st memory.MemoryStatus
	if err := f.env.GetWorkflowResult(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// seed writes raw memories r1, r2, r3 (newest last), a selection of r1 and
// r2, and the handbook made of them.
func (f *memoryFixture) seed(t *testing.T) []byte {
	t.Helper()
	t0 := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	var raws []memory.RawMemory
	for i, name := range []string{"one", "two", "three"} {
		id := "r" + string(rune('1'+i))
		rm := memory.RawMemory{RolloutID: id, Lines: 1, Slug: "lesson-" + name, Updated: t0.Add(time.Duration(i) * time.Minute), Text: "- lesson " + name}
		f.put(t, memory.RawMemoryPath(id), rm.Encode())
		raws = append(raws, rm)
	}
	sel := memory.SelectionOf([]memory.RawMemory{raws[1], raws[0]}, t0).Encode()
	f.put(t, memory.SelectionPath, sel)
	f.put(t, memory.HandbookPath, []byte("## lessons\n- lesson one\n- lesson two\n"))
	return sel
}

// Phase 1 runs on the rollouts of a batch at once, each writing its raw
// memory and summary; one that taught nothing writes nothing; phase 2
// then consolidates once.
func TestMemoryPhase1Parallel(t *testing.T) {
	f := memoryEnv(t)
	refs := []memory.MemoryRollout{f.rollout(t, "r1", 2), f.rollout(t, "r2", 1), f.rollout(t, "r-empty", 1)}
	st := f.run(t, memory.MemoryInput{Pending: refs})
	if st.Batches != 1 || st.Phase2s != 1 || st.LastError != "" {
		t.Errorf("status %+v, want one batch and one phase 2", st)
	}
	if got, want := f.files(t, memory.RawMemoriesDir), []string{"memories/raw_memories/r1.md", "memories/raw_memories/r2.md"}; !slices.Equal(got, want) {
		t.Errorf("raw memories %v, want %v", got, want)
	}
	if got, want := f.files(t, memory.RolloutSummariesDir), []string{"memories/rollout_summaries/r1_lesson-one.md", "memories/rollout_summaries/r2_lesson-two.md"}; !slices.Equal(got, want) {
		t.Errorf("summaries %v, want %v", got, want)
	}
	rm, err := memory.ParseRawMemory([]byte(f.get(t, memory.RawMemoryPath("r1"))))
	if err != nil || rm.Lines != 2 || rm.Text != "- lesson one" {
		t.Errorf("raw memory of r1: %+v %v", rm, err)
	}
	var r1, r2 scripted.Call
	for _, c := range f.srv.Calls() {
		switch c.Rule {
		case "p1-r1":
			r1 = c
		case "p1-r2":
			r2 = c
		}
	}
	if !r1.Start.Before(r2.End) || !r2.Start.Before(r1.End) {
		t.Errorf("phase 1 of r1 (%v-%v) and r2 (%v-%v) did not run at once", r1.Start, r1.End, r2.Start, r2.End)
	}
	if n := f.srv.Count("p2-any"); n != 1 {
		t.Errorf("%d phase 2s, want 1", n)
	}
	if hb := f.get(t, memory.HandbookPath); !strings.Contains(hb, "ADDED rollout r1 (lesson-one)") || !strings.Contains(hb, "ADDED rollout r2 (lesson-two)") {
		t.Errorf("MEMORY.md was not made of both raw memories:\n%s", hb)
	}
	sel, err := memory.ParseSelection([]byte(f.get(t, memory.SelectionPath)))
	if err != nil || len(sel.Selected) != 2 {
		t.Errorf("selection %+v %v", sel, err)
	}
}

// A batch whose rollouts taught nothing writes no file and runs no
// phase 2.
func TestMemoryPhase1NothingWorthKeeping(t *testing.T) {
	f := memoryEnv(t)
	st := f.run(t, memory.MemoryInput{Pending: []memory.MemoryRollout{f.rollout(t, "r-empty", 3)}})
	if got := f.files(t, memory.MemoryDir); len(got) != 0 {
		t.Errorf("files written: %v", got)
	}
	if st.Phase2s != 0 || f.srv.Count("p1-empty") != 1 || f.srv.Count("p2-any") != 0 {
		t.Errorf("status %+v, %d phase-1 calls, %d phase-2 calls", st, f.srv.Count("p1-empty"), f.srv.Count("p2-any"))
	}
}

// Phase 2 takes the newest raw memories: r3 is added, r2 kept, r1 falls
// out and is removed (the model is told, and MEMORY.md forgets it); the
// handbook, summary, skill and selection are written.
func TestMemoryPhase2Forgets(t *testing.T) {
	f := memoryEnv(t)
	f.seed(t)
	st := f.run(t, memory.MemoryInput{Final: true, Settings: memory.MemorySettings{Newest: 2}})
	if st.Phase2s != 1 || st.LastError != "" {
		t.Fatalf("status %+v", st)
	}
	if f.srv.Count("p2-forget") != 1 {
		t.Fatalf("phase 2 was not asked with r3 added, r2 kept and r1 removed: calls %+v", f.srv.Calls())
	}
	if hb := f.get(t, memory.HandbookPath); hb != "## lessons\n- lesson two\n- lesson three\n" {
		t.Errorf("MEMORY.md = %q", hb)
	}
	if s := f.get(t, memory.SummaryPath); s != "- lessons two and three\n" {
		t.Errorf("memory_summary.md = %q", s)
	}
	if s := f.get(t, memory.SkillPath("teach-lessons")); !strings.HasPrefix(s, "---\nname: teach-lessons\n") {
		t.Errorf("SKILL.md = %q", s)
	}
	sel, err := memory.ParseSelection([]byte(f.get(t, memory.SelectionPath)))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range sel.Selected {
		ids = append(ids, s.RolloutID)
	}
	if strings.Join(ids, " ") != "r3 r2" {
		t.Errorf("selection %v, want r3 r2", ids)
	}
}

// A phase 2 that never answers validly (within its turns) writes nothing:
// the selection and the handbook stay as they were, and a phase 2 is
// owed.
func TestMemoryPhase2FailureKeepsSelection(t *testing.T) {
	f := memoryEnv(t)
	before := f.seed(t)
	rm := memory.RawMemory{RolloutID: "broken", Lines: 1, Slug: "broken", Updated: time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC), Text: "- broken"}
	f.put(t, memory.RawMemoryPath("broken"), rm.Encode())
	st := f.run(t, memory.MemoryInput{Final: true, Settings: memory.MemorySettings{Newest: 2, Phase2Turns: 2}})
	if !st.Owed || st.Phase2Failures != 1 || !strings.Contains(st.LastError, "no valid answer in 2 turns") {
		t.Errorf("status %+v, want phase 2 owed after one failure", st)
	}
	if n := f.srv.Count("p2-broken"); n != 2 {
		t.Errorf("%d phase-2 turns, want 2 (an invalid answer is not retried as a new activity)", n)
	}
	if got := f.get(t, memory.SelectionPath); got != string(before) {
		t.Errorf("selection changed:\n%s", got)
	}
	if hb := f.get(t, memory.HandbookPath); hb != "## lessons\n- lesson one\n- lesson two\n" {
		t.Errorf("MEMORY.md changed: %q", hb)
	}
}

// A phase-1 activity retried after it wrote its files (a crash before it
// reported) asks the model nothing and writes nothing again; one retried
// after a crash between its two writes leaves one summary of the rollout.
func TestMemoryPhase1RetryWritesOnce(t *testing.T) {
	f := memoryEnv(t)
	ref := f.rollout(t, "r1", 1)
	// A crash between the summary and the raw memory left a summary under
	// another slug.
	f.put(t, memory.RolloutSummaryPath("r1", "half-written"), []byte("old"))
	var aenv testsuite.WorkflowTestSuite
	env := aenv.NewTestActivityEnvironment()
	store := f.store
	c := &memory.Consolidation{Store: store, Model: mustScriptedModel(t, f.base)}
	env.RegisterActivityWithOptions(c.MemoryPhase1, activity.RegisterOptions{Name: memory.MemoryPhase1ActivityName})
	in := memory.MemoryPhase1Input{Scope: "team", Rollout: ref, Settings: memory.MemorySettings{Phase1Model: "mini", MaxRolloutBytes: 4096}}
	var outs []memory.MemoryPhase1Output
	for range 2 {
		v, err := env.ExecuteActivity(memory.MemoryPhase1ActivityName, in)
		if err != nil {
			t.Fatal(err)
		}
		var out memory.MemoryPhase1Output
		if err := v.Get(&out); err != nil {
			t.Fatal(err)
		}
		outs = append(outs, out)
	}
	if outs[0].Slug != "lesson-one" || outs[0].Done || !outs[1].Done || outs[1].Slug != "lesson-one" {
		t.Errorf("attempts %+v, want the second to find the first's files", outs)
	}
	if n := f.srv.Count("p1-r1"); n != 1 {
		t.Errorf("%d model calls, want 1", n)
	}
	if got := f.files(t, memory.MemoryDir); !slices.Equal(got, []string{"memories/raw_memories/r1.md", "memories/rollout_summaries/r1_lesson-one.md"}) {
		t.Errorf("files %v", got)
	}
	// The rollout grew: phase 1 reads it again.
	f.rollout(t, "r1", 2)
	if _, err := env.ExecuteActivity(memory.MemoryPhase1ActivityName, in); err != nil {
		t.Fatal(err)
	}
	if n := f.srv.Count("p1-r1"); n != 2 {
		t.Errorf("%d model calls after the rollout grew, want 2", n)
	}
}

func mustScriptedModel(t *testing.T, base string) model.Model {
	t.Helper()
	m, err := model.New(model.Config{APIKey: "test", BaseURL: base})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Rollouts signalled while a phase runs wait for the next batch, taken
// whole; phase 2 never runs twice at once; the final signal runs one more.
func TestMemoryBatchesSignalsDuringPhases(t *testing.T) {
	f := memoryEnv(t)
	r1, r2, r3 := f.rollout(t, "r1", 1), f.rollout(t, "r2", 1), f.rollout(t, "r3", 1)
	var mu sync.Mutex
	var phase1 []string
	phase2Running, phase2Max, phase2Runs := 0, 0, 0
	signalled := false
	f.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
		mu.Lock()
		defer mu.Unlock()
		switch info.ActivityType.Name {
		case memory.MemoryPhase1ActivityName:
			var in memory.MemoryPhase1Input
			_ = args.Get(&in)
			phase1 = append(phase1, in.Rollout.ID)
			if !signalled {
				signalled = true
				f.env.SignalWorkflow(memory.MemoryRolloutSignal, r2)
				f.env.SignalWorkflow(memory.MemoryRolloutSignal, r3)
				f.env.SignalWorkflow(memory.MemoryRolloutSignal, r2)
			}
		case memory.MemoryPhase2ActivityName:
			phase2Running++
			phase2Runs++
			phase2Max = max(phase2Max, phase2Running)
			if phase2Runs == 2 {
				f.env.SignalWorkflow(memory.MemoryFinalSignal, memory.MemoryFinal{Rollout: "r1"})
			}
		}
	})
	f.env.SetOnActivityCompletedListener(func(info *activity.Info, _ converter.EncodedValue, _ error) {
		mu.Lock()
		defer mu.Unlock()
		if info.ActivityType.Name == memory.MemoryPhase2ActivityName {
			phase2Running--
		}
	})
	st := f.run(t, memory.MemoryInput{Pending: []memory.MemoryRollout{r1}})
	// r2 and r3 run at once: in either order.
	slices.Sort(phase1)
	if got := strings.Join(phase1, " "); got != "r1 r2 r3" {
		t.Errorf("phase 1 ran on %s, want r1 r2 r3 (r2 once)", got)
	}
	// Batch 1: r1, phase 2. Batch 2: r2 and r3 (signalled during phase
	// 1), phase 2. Batch 3: the final signal (during the second phase 2),
	// phase 2 with nothing changed.
	if st.Batches != 3 || phase2Runs != 3 || phase2Max != 1 || st.Phase2s != 2 {
		t.Errorf("status %+v, %d phase 2s (at most %d at once); want 3 batches, 3 phase 2s one at a time, 2 that changed memory", st, phase2Runs, phase2Max)
	}
}

// The final signal runs phase 2 on a scope with nothing else to do.
func TestMemoryFinalRunsPhase2(t *testing.T) {
	f := memoryEnv(t)
	f.seed(t)
	f.env.RegisterDelayedCallback(func() {
		if f.get(t, memory.SummaryPath) != "" {
			t.Error("phase 2 ran before the final signal")
		}
		f.env.SignalWorkflow(memory.MemoryFinalSignal, memory.MemoryFinal{Rollout: "s1"})
	}, 30*time.Second)
	st := f.run(t, memory.MemoryInput{Settings: memory.MemorySettings{Newest: 2}})
	if st.Phase2s != 1 || f.srv.Count("p2-forget") != 1 || f.get(t, memory.SummaryPath) == "" {
		t.Errorf("status %+v; the final signal did not run phase 2", st)
	}
}

// At its bound the workflow continues as new, carrying the rollouts not
// yet taken, its counts and its settings.
func TestMemoryContinueAsNew(t *testing.T) {
	f := memoryEnv(t)
	r1, r2 := f.rollout(t, "r1", 1), f.rollout(t, "r2", 4)
	sent := false
	f.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == memory.MemoryPhase1ActivityName && !sent {
			sent = true
			f.env.SignalWorkflow(memory.MemoryRolloutSignal, r2)
		}
	})
	settings := memory.MemorySettings{BatchesPerRun: 1, Newest: 7, IdleTimeout: time.Minute}
	f.env.ExecuteWorkflow(memory.MemoryWorkflowName, memory.MemoryInput{Scope: "team", Settings: settings, Pending: []memory.MemoryRollout{r1}})
	var cont *workflow.ContinueAsNewError
	if err := f.env.GetWorkflowError(); !errors.As(err, &cont) {
		t.Fatalf("workflow ended with %v, want continue-as-new", err)
	}
	var next memory.MemoryInput
	if err := converter.GetDefaultDataConverter().FromPayloads(cont.Input, &next); err != nil {
		t.Fatal(err)
	}
	if next.Scope != "team" || len(next.Pending) != 1 || next.Pending[0] != r2 || next.Batches != 1 || next.Phase2s != 1 || next.Settings.Newest != 7 || next.Settings.BatchesPerRun != 1 {
		t.Errorf("carried %+v", next)
	}
}

// Two workers (each its own store, over one directory) append to one
// rollout in turn: neither reads the file from a stale cache, so no line
// is lost; a retried append adds nothing.
func TestMemoryAppendAcrossWorkers(t *testing.T) {
	dir := t.TempDir()
	var acts []*testsuite.TestActivityEnvironment
	for range 2 {
		store, err := blob.Open(context.Background(), dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		c := &memory.Consolidation{Store: store, Model: &workflowstest.FuncModel{}}
		var suite testsuite.WorkflowTestSuite
		env := suite.NewTestActivityEnvironment()
		env.RegisterActivityWithOptions(c.MemoryAppendRollout, activity.RegisterOptions{Name: memory.MemoryAppendActivityName})
		acts = append(acts, env)
	}
	appendLine := func(worker, seq int) memory.MemoryRollout {
		v, err := acts[worker].ExecuteActivity(memory.MemoryAppendActivityName, memory.MemoryAppendInput{Scope: "team", Rollout: "s1",
			Line: memory.Line{Seq: seq, Workflow: "s1", Input: "turn", Outcome: memory.OutcomeAnswered}})
		if err != nil {
			t.Fatal(err)
		}
		var ref memory.MemoryRollout
		if err := v.Get(&ref); err != nil {
			t.Fatal(err)
		}
		return ref
	}
	steps := []struct{ worker, seq, lines int }{{1, 1, 1}, {1, 1, 1}, {0, 2, 2}, {1, 3, 3}, {0, 3, 3}}
	for _, s := range steps {
		if ref := appendLine(s.worker, s.seq); ref.Lines != s.lines || ref.ID != "s1" {
			t.Fatalf("worker %d appending seq %d: %+v, want %d lines", s.worker, s.seq, ref, s.lines)
		}
	}
}
