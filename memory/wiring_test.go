package memory_test

import (
	"context"
	"encoding/json"
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

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/memory"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/workflowstest"
)

// wiredMemory is a test environment whose graph "mem" has one agent, c,
// with memory in scope "team" when on; c looks a key up, then answers.
// The scope's workflow is not started: the test environment runs one
// workflow and has no Temporal client for SignalWithStart, so the signal
// activity is the one stand-in (it records what it was asked to send);
// everything else (appends to a blob store in a temporary directory) is
// real.
type wiredMemory struct {
	env     *testsuite.TestWorkflowEnvironment
	store   *blob.Store
	mu      sync.Mutex
	signals []memory.MemorySignalInput
	// started lists the activities started, by type.
	started []string
	// instructions are those of the model's calls.
	instructions []string
}

func newWiredMemory(t *testing.T, on bool) *wiredMemory {
	t.Helper()
	if on {
		return newWiredMemoryWith(t, &agents.MemoryConfig{Scope: "team"})
	}
	return newWiredMemoryWith(t, nil)
}

func newWiredMemoryWith(t *testing.T, mem *agents.MemoryConfig, tweak ...func(*workflows.Config)) *wiredMemory {
	t.Helper()
	store, err := blob.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	lookup := agents.MustFunctionTool("lookup", "Looks a key up.", func(_ context.Context, a struct {
		Key string `json:"key"`
	}) (string, error) {
		return "value of " + a.Key, nil
	})
	c := &agents.Agent{Name: "c", Instructions: "c: remembers", Tools: []agents.Tool{lookup}, Memory: mem}
	w := &wiredMemory{env: workflowstest.NewEnv(), store: store}
	m := &workflowstest.FuncModel{Func: func(req model.Request) []agents.Item {
		w.mu.Lock()
		w.instructions = append(w.instructions, req.Instructions)
		w.mu.Unlock()
		last := req.Input[len(req.Input)-1]
		if last.Type == agents.ItemMessage {
			return []agents.Item{workflowstest.Call("l1", "lookup", `{"key":"style"}`)}
		}
		return []agents.Item{agents.AssistantMessage("noted: " + last.Output)}
	}}
	cfg := workflows.Config{Graphs: []*agents.Graph{agents.MustGraph("mem", "c", c)}, Model: m, Store: store}
	for _, f := range tweak {
		f(&cfg)
	}
	r, err := workflows.NewRunner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.Register(w.env)
	w.env.RegisterActivityWithOptions(func(_ context.Context, in memory.MemorySignalInput) error {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.signals = append(w.signals, in)
		return nil
	}, activity.RegisterOptions{Name: memory.MemorySignalActivityName})
	w.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.started = append(w.started, info.ActivityType.Name)
	})
	w.env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, _ []any) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.started = append(w.started, info.ActivityType.Name)
	})
	return w
}

// rollout reads the rollout id's lines.
func (w *wiredMemory) rollout(t *testing.T, id string) []memory.Line {
	t.Helper()
	data, err := w.store.Get(context.Background(), memory.Key("team", memory.RolloutPath(id)))
	if err != nil {
		t.Fatal(err)
	}
	lines, err := memory.ParseLines(data)
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

func (w *wiredMemory) memoryActivities() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, a := range w.started {
		if strings.HasPrefix(a, "troupe.Memory") {
			out = append(out, a)
		}
	}
	return out
}

// Each turn of a session with memory appends its line to the session's
// rollout (input, generated items, output, outcome) and signals the scope,
// after the turn's answer; stopping the session asks for a final phase 2.
// Without memory, no memory activity runs.
func TestMemorySessionRollouts(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(map[bool]string{true: "on", false: "off"}[on], func(t *testing.T) {
			w := newWiredMemory(t, on)
			var first *workflowstest.Update
			answeredFirst := false
			w.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
				w.mu.Lock()
				defer w.mu.Unlock()
				w.started = append(w.started, info.ActivityType.Name)
				if info.ActivityType.Name == memory.MemoryAppendActivityName && len(w.started) > 0 && !answeredFirst {
					answeredFirst = first.Done()
				}
			})
			w.env.RegisterDelayedCallback(func() {
				first = workflowstest.SendUpdate(w.env, troupe.SendUpdate, troupe.SendInput{Message: "I prefer tabs", Wait: true})
			}, time.Second)
			w.env.RegisterDelayedCallback(func() {
				workflowstest.SendUpdate(w.env, troupe.SendUpdate, troupe.SendInput{Message: "and short names", Wait: true})
			}, time.Minute)
			w.env.RegisterDelayedCallback(func() {
				workflowstest.SendUpdate(w.env, troupe.CommandUpdate, troupe.SessionCommand{Op: troupe.CommandStop})
			}, 2*time.Minute)
			w.env.ExecuteWorkflow(troupe.SessionWorkflowName, troupe.SessionInput{Graph: "mem"})
			if err := w.env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			if !on {
				if acts := w.memoryActivities(); len(acts) != 0 {
					t.Errorf("memory activities ran without memory: %v", acts)
				}
				return
			}
			if !answeredFirst {
				t.Error("the first turn's rollout was appended before the turn was answered")
			}
			id := "default-test-workflow-id"
			lines := w.rollout(t, id)
			if len(lines) != 2 {
				t.Fatalf("%d lines, want 2", len(lines))
			}
			l := lines[0]
			if l.Seq != 1 || l.Input != "I prefer tabs" || l.Outcome != memory.OutcomeAnswered || l.Agent != "c" || l.Workflow != id+"/t1" {
				t.Errorf("line 1: %+v", l)
			}
			var output string
			_ = json.Unmarshal(l.Output, &output)
			if output != "noted: value of style" {
				t.Errorf("line 1 output %q", l.Output)
			}
			var kinds []string
			for _, it := range l.Items {
				kinds = append(kinds, string(it.Type))
			}
			if got := strings.Join(kinds, " "); got != "message function_call function_call_output message" {
				t.Errorf("line 1 items %s, want the turn's own: its message, call, output, answer", got)
			}
			if lines[1].Seq != 2 || lines[1].Input != "and short names" || len(lines[1].Items) != 4 {
				t.Errorf("line 2: %+v", lines[1])
			}
			var sent []string
			for _, s := range w.signals {
				switch {
				case s.Rollout != nil:
					sent = append(sent, s.Scope+":"+s.Rollout.ID+"@"+string(rune('0'+s.Rollout.Lines)))
				case s.Final != nil:
					sent = append(sent, s.Scope+":final:"+s.Final.Rollout)
				}
			}
			if want := []string{"team:" + id + "@1", "team:" + id + "@2", "team:final:" + id}; !slices.Equal(sent, want) {
				t.Errorf("signals %v, want %v", sent, want)
			}
		})
	}
}

// A run with memory appends its one line (how it ended included) and
// signals the scope; without memory, no memory activity runs.
func TestMemoryRunRollout(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(map[bool]string{true: "on", false: "off"}[on], func(t *testing.T) {
			w := newWiredMemory(t, on)
			w.env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "mem", Input: "use tabs"})
			if err := w.env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			acts := w.memoryActivities()
			if !on {
				if len(acts) != 0 {
					t.Errorf("memory activities ran without memory: %v", acts)
				}
				return
			}
			if want := []string{memory.MemoryAppendActivityName, memory.MemorySignalActivityName}; !slices.Equal(acts, want) {
				t.Errorf("memory activities %v, want %v", acts, want)
			}
			lines := w.rollout(t, "default-test-workflow-id")
			if len(lines) != 1 || lines[0].Input != "use tabs" || lines[0].Outcome != memory.OutcomeAnswered || len(lines[0].Items) != 4 {
				t.Fatalf("lines %+v", lines)
			}
			if len(w.signals) != 1 || w.signals[0].Rollout == nil || w.signals[0].Rollout.Lines != 1 {
				t.Errorf("signals %+v", w.signals)
			}
		})
	}
}

// An agent's memory mode: reading puts the scope's summary in its
// instructions (none while there is no summary), generating feeds the
// scope rollouts.
func TestMemoryModes(t *testing.T) {
	cases := []struct {
		mode      agents.MemoryMode
		reads     bool
		generates bool
	}{
		{agents.MemoryReadWrite, true, true},
		{agents.MemoryReadOnly, true, false},
		{agents.MemoryGenerateOnly, false, true},
	}
	for _, c := range cases {
		t.Run(cmpOr(string(c.mode), "read-write"), func(t *testing.T) {
			for _, seeded := range []bool{false, true} {
				w := newWiredMemoryWith(t, &agents.MemoryConfig{Scope: "team", Mode: c.mode})
				if seeded {
					if err := w.store.Put(context.Background(), memory.Key("team", memory.SummaryPath), []byte("- the user prefers tabs\n")); err != nil {
						t.Fatal(err)
					}
				}
				w.env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "mem", Input: "format this"})
				if err := w.env.GetWorkflowError(); err != nil {
					t.Fatal(err)
				}
				for _, ins := range w.instructions {
					if got := strings.Contains(ins, "## Memory") && strings.Contains(ins, "- the user prefers tabs"); got != (c.reads && seeded) {
						t.Errorf("summary seeded=%v: in the instructions = %v:\n%s", seeded, got, ins)
					}
				}
				if got := len(w.memoryActivities()) > 0; got != c.generates {
					t.Errorf("memory activities ran = %v, want %v", got, c.generates)
				}
			}
		})
	}
	store, _ := blob.Open(context.Background(), "mem://")
	if _, err := workflows.NewRunner(workflows.Config{Graphs: []*agents.Graph{agents.MustGraph("bad", "c", &agents.Agent{Name: "c", Memory: &agents.MemoryConfig{Scope: "team", Mode: "write-only"}})},
		Model: &workflowstest.FuncModel{}, Store: store}); err == nil || !strings.Contains(err.Error(), "memory mode") {
		t.Errorf("unknown memory mode: err = %v", err)
	}
	for _, scope := range []string{"", "../x", "a/b"} {
		_, err := workflows.NewRunner(workflows.Config{Graphs: []*agents.Graph{agents.MustGraph("bad", "c", &agents.Agent{Name: "c", Memory: &agents.MemoryConfig{Scope: scope}})},
			Model: &workflowstest.FuncModel{}, Store: store})
		if err == nil || !strings.Contains(err.Error(), "scope") {
			t.Errorf("scope %q: err = %v", scope, err)
		}
	}
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// A session that continues as new right after a turn first feeds the
// turn's rollout: no line is lost to the new run. (The turn's agent is
// a stand-in that takes two seconds, so that the history reaches its
// bound during the turn.)
func TestMemorySessionContinuesAfterFeeding(t *testing.T) {
	w := newWiredMemoryWith(t, &agents.MemoryConfig{Scope: "team"}, func(cfg *workflows.Config) { cfg.ContinueAfterEvents = 1000 })
	var inputs []string
	workflowstest.SlowAgents(w.env, &inputs)
	w.env.RegisterDelayedCallback(func() {
		workflowstest.SendUpdate(w.env, troupe.SendUpdate, troupe.SendInput{Message: "I prefer tabs"})
	}, time.Second)
	w.env.RegisterDelayedCallback(func() { w.env.SetCurrentHistoryLength(1000) }, 2*time.Second)
	w.env.ExecuteWorkflow(troupe.SessionWorkflowName, troupe.SessionInput{Graph: "mem"})
	var cont *workflow.ContinueAsNewError
	if err := w.env.GetWorkflowError(); !errors.As(err, &cont) {
		t.Fatalf("session ended with %v, want continue-as-new", err)
	}
	if lines := w.rollout(t, "default-test-workflow-id"); len(lines) != 1 || lines[0].Seq != 1 || lines[0].Input != "I prefer tabs" {
		t.Errorf("rollout %+v, want turn 1's line", lines)
	}
	if len(w.signals) != 1 || w.signals[0].Rollout == nil || w.signals[0].Rollout.Lines != 1 {
		t.Errorf("signals %+v, want turn 1's", w.signals)
	}
}
