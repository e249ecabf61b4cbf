package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/workflows"
)

// TestSandboxRoutingByStore: two workers of one host on one task queue,
// each with its own sandbox root (two TROUPE_HOMEs): every sandbox command
// of a run reaches the worker that holds its workspace, so each run reads
// the file its manifest wrote, and no sandbox is ever taken as lost.
func TestSandboxRoutingByStore(t *testing.T) {
	parallel(t)
	c := dial(t)
	_, url := modelServer(t)
	queue := fmt.Sprintf("e2e-routing-%d", queues.Add(1))
	for range 2 {
		startWorkerOn(t, c, url, model.APIResponses, queue, func(cfg *workflows.Config) {
			cfg.Graphs = sandboxGraphs("local")
			cfg.Host = "one-host"
		})
	}
	for i := range 8 {
		res, err := runGraph(t, c, queue, troupe.RunInput{Graph: "recreate", Input: "go"})
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		var out string
		if err := json.Unmarshal(res.Output, &out); err != nil || !strings.HasPrefix(out, "risen") {
			t.Errorf("run %d read %q from its sandbox, want the manifest's \"risen\"", i, out)
		}
	}
}
