package workflows_test

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/examples/dealdesk"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/workflows"
)

// TestReplayHistories replays checked-in histories of a real deal-desk run,
// and in newer sets of an agent using an MCP server's tools (recorded by
// the e2e package with -histories), against today's workflow code. A change of workflow code that alters what the workflows do in
// history fails here, and must be versioned (workflow.GetVersion). A change
// of the deal-desk graph itself (its agents and tools) changes the histories
// too: then record a new set with the command in e2e/histories_test.go.
func TestReplayHistories(t *testing.T) {
	sets, err := filepath.Glob("testdata/histories/*/index.json")
	if err != nil || len(sets) == 0 {
		t.Fatalf("no recorded histories: %v", err)
	}
	for _, set := range sets {
		t.Run(filepath.Base(filepath.Dir(set)), func(t *testing.T) { replaySet(t, filepath.Dir(set)) })
	}
}

func replaySet(t *testing.T, dir string) {
	data, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var index map[string]string // file → workflow id
	if err := json.Unmarshal(data, &index); err != nil {
		t.Fatal(err)
	}
	files := slices.Sorted(maps.Keys(index))
	if len(files) < 5 {
		t.Fatalf("%d histories, want at least the 5 workflows of a deal-desk run", len(files))
	}
	store, _ := blob.Open(context.Background(), "mem://")
	r, err := workflows.NewRunner(workflows.Config{Graphs: []*agents.Graph{dealdesk.Graph(), mcpReplayGraph()}, Model: &funcModel{}, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			h, err := client.HistoryFromJSON(mustOpen(t, filepath.Join(dir, f)), client.HistoryJSONOptions{})
			if err != nil {
				t.Fatal(err)
			}
			rp := worker.NewWorkflowReplayer()
			r.RegisterWorkflows(rp)
			err = rp.ReplayWorkflowHistoryWithOptions(nil, h, worker.ReplayWorkflowHistoryOptions{
				OriginalExecution: workflow.Execution{ID: index[f], RunID: "replay"},
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

func mustOpen(t *testing.T, path string) io.Reader {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// mcpReplayGraph has the shape of e2e's MCP test graph (TestMCPToolsEndToEnd
// over stdio): what its workflow code reads of the agent (the server's name
// and timeout, the turn limit) is the same; the command is never run.
func mcpReplayGraph() *agents.Graph {
	return agents.MustGraph("mcp_stdio", "user", &agents.Agent{Name: "user", Instructions: "mcp user", MaxTurns: 5,
		MCPServers: []*agents.MCPServer{{Name: "everything", Prefix: "ev_", Command: []string{"mcp-server-everything", "stdio"}}}})
}
