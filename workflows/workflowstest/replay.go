package workflowstest

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
)

// ReadIndex reads the index.json of a set of checked-in histories in dir:
// history file → workflow id.
func ReadIndex(t testing.TB, dir string) map[string]string {
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

// Replay replays the history in file, of the workflow id, on a worker
// serving graphs with today's workflow code (the workflows a
// workflows.Runner registers, the memory workflow among them), and
// returns the replayer's verdict: nil, or what it could not replay. It
// fails t when the history cannot be read.
func Replay(t testing.TB, file, id string, graphs ...*agents.Graph) error {
	t.Helper()
	store, _ := blob.Open(context.Background(), "mem://")
	r, err := workflows.NewRunner(workflows.Config{Graphs: graphs, Model: &FuncModel{}, Store: store})
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
