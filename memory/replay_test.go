package memory_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/workflowstest"
)

// TestReplayMemoryHistories replays checked-in histories of a session of
// an agent with memory (its turns' rollouts and the final signal, under
// troupe.memory-rollouts) and of its scope's memory workflow (phases,
// batching, idle end), recorded by e2e's TestMemorySessionEndToEnd with
// -histories, and of a session forked with memory and of its fork
// (troupe.memory-fork: the copy of the scope), recorded by
// TestMemoryForkEndToEnd: a change of their commands fails here and must
// be versioned.
func TestReplayMemoryHistories(t *testing.T) {
	sets, err := filepath.Glob("testdata/memory-histories/*/index.json")
	if err != nil || len(sets) == 0 {
		t.Fatalf("no recorded memory histories: %v", err)
	}
	g := agents.MustGraph("memsession", "m", &agents.Agent{Name: "m", Instructions: "memtest: remembers", Memory: &agents.MemoryConfig{Scope: "replayed"}})
	for _, set := range sets {
		dir := filepath.Dir(set)
		for file, id := range readIndex(t, dir) {
			t.Run(filepath.Base(dir)+"/"+file, func(t *testing.T) {
				if err := replay(t, filepath.Join(dir, file), id, g); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// readIndex reads a history set's index.json: file → workflow id.
func readIndex(t *testing.T, dir string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var index map[string]string
	if err := json.Unmarshal(data, &index); err != nil {
		t.Fatal(err)
	}
	return index
}

// replay replays the history in file, of the workflow id, on a worker
// serving graphs: the workflows of a workflows.Runner, the memory
// workflow among them (a session's history needs the session's).
func replay(t *testing.T, file, id string, graphs ...*agents.Graph) error {
	t.Helper()
	store, _ := blob.Open(context.Background(), "mem://")
	r, err := workflows.NewRunner(workflows.Config{Graphs: graphs, Model: &workflowstest.FuncModel{}, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rp := worker.NewWorkflowReplayer()
	r.RegisterWorkflows(rp)
	return rp.ReplayWorkflowHistoryWithOptions(nil, h, worker.ReplayWorkflowHistoryOptions{
		OriginalExecution: workflow.Execution{ID: id, RunID: "replay"},
	})
}
