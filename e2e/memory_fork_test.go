package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/memory"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/workflows"
)

// forkScenario answers with the rule its instructions' memory names, and
// keeps nothing in phase 1, so only the test changes the scopes' files.
const forkScenario = `
rules:
  - name: v3
    match: {instructions: "fork rule v3"}
    respond: {text: "rule v3"}
  - name: v2
    match: {instructions: "source rule v2"}
    respond: {text: "rule v2"}
  - name: v1
    match: {instructions: "source rule v1"}
    respond: {text: "rule v1"}
  - name: agent
    match: {instructions: "memtest:"}
    respond: {text: "no memory"}
  - name: phase1
    match: {instructions: "memory phase 1"}
    respond: {json: {rollout_slug: "", rollout_summary: "", raw_memory: ""}}
`

// A fork's memory is independent of its source's after the fork, on a
// real Temporal server: the fork starts with the source's memory as it
// stood; a consolidation of the source after the fork reaches the source
// only, one of the fork the fork only; each side's rollouts go to its own
// scope; and both sessions' histories (troupe.memory-fork) replay.
func TestMemoryForkEndToEnd(t *testing.T) {
	parallel(t)
	_, base := scenarioServer(t, forkScenario)
	c := dial(t)
	scope := fmt.Sprintf("e2e-f-%d-%d", os.Getpid(), time.Now().UnixNano())
	g := agents.MustGraph("memsession", "m", &agents.Agent{Name: "m", Instructions: "memtest: remembers", Memory: &agents.MemoryConfig{Scope: scope}})
	var store *blob.Store
	queue := startWorker(t, c, base, model.APIResponses, func(cfg *workflows.Config) {
		cfg.Graphs = append(cfg.Graphs, g)
		cfg.Memory = memory.MemoryOptions{IdleTimeout: 2 * time.Second}
		store = cfg.Store
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	put := func(scope, text string) {
		t.Helper()
		if err := store.Put(ctx, memory.Key(scope, memory.SummaryPath), []byte(text)); err != nil {
			t.Fatal(err)
		}
	}
	put(scope, "- source rule v1\n")
	cl, err := troupeclient.New(troupeclient.Config{Temporal: c, TaskQueue: queue})
	if err != nil {
		t.Fatal(err)
	}
	src, _, err := cl.CreateSession(ctx, troupeclient.SessionInput{Graph: "memsession", Name: "source"})
	if err != nil {
		t.Fatal(err)
	}
	ask := func(s *troupeclient.Session, want string) {
		t.Helper()
		rec, err := s.Ask(ctx, "which rule?", nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(rec.Output); got != `"`+want+`"` {
			t.Errorf("session %s answered %s, want %q", s.ID(), got, want)
		}
	}
	ask(src, "rule v1")
	fork, _, err := src.Fork(ctx, "branch")
	if err != nil {
		t.Fatal(err)
	}
	forkScope := memory.ForkScope(scope, fork.ID())
	ask(fork, "rule v1") // The source's memory as it stood.
	put(scope, "- source rule v2\n")
	ask(src, "rule v2")
	ask(fork, "rule v1") // The source's change is not the fork's.
	put(forkScope, "- fork rule v3\n")
	ask(fork, "rule v3")
	ask(src, "rule v2") // Nor the fork's the source's.
	for _, tc := range []struct {
		scope, rollout string
		want           bool
	}{{forkScope, fork.ID(), true}, {scope, fork.ID(), false}, {scope, src.ID(), true}, {forkScope, src.ID(), false}} {
		_, err := store.Get(ctx, memory.Key(tc.scope, memory.RolloutPath(memory.RolloutID(tc.rollout))))
		if (err == nil) != tc.want {
			t.Errorf("rollout of %s in scope %s: %v, want present %v", tc.rollout, tc.scope, err, tc.want)
		}
	}
	for _, s := range []*troupeclient.Session{src, fork} {
		if _, err := s.Command(ctx, troupeclient.SessionCommand{Op: troupe.CommandStop}); err != nil {
			t.Fatal(err)
		}
		var info troupe.SessionInfo
		if err := c.GetWorkflow(ctx, s.ID(), "").Get(ctx, &info); err != nil {
			t.Fatal(err)
		}
	}
	if *historiesDir != "" {
		// For the replay tests of package memory (its set):
		// go test ./e2e -run TestMemoryForkEndToEnd -histories ../memory/testdata/memory-histories/fork
		saveHistories(t, c, map[string]bool{src.ID(): true}, *historiesDir, "source")
		saveHistories(t, c, map[string]bool{fork.ID(): true}, *historiesDir, "fork")
	}
	r := newRunner(t, base, model.APIResponses, "replayer", func(cfg *workflows.Config) { cfg.Graphs = append(cfg.Graphs, g) })
	for _, id := range []string{src.ID(), fork.ID()} {
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
