package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"
)

// historiesDir, when set, makes TestDealDesk, TestMCPToolsEndToEnd/stdio,
// TestRunContinuesAsNew, TestLongRunContinuesAsNew and TestDealDeskSession
// save the histories of their runs' (and sessions') workflows there, for
// the replay tests of package workflows:
//
//	go test ./e2e -run 'TestDealDesk/responses|TestMCPToolsEndToEnd/stdio|TestRunContinuesAsNew|TestLongRunContinuesAsNew|TestDealDeskSession' -histories ../workflows/testdata/histories/NAME (a new set; keep the old ones)
//
// (and so do the tests of other sets: TestBudgetEndToEnd's
// v11-budget-asks, TestGuardrailsEndToEnd's v10-guardrails and v17-prechecks, TestRemoveSession's and
// TestRemoveSessionWithoutWorker's v13-remove-session, TestSandboxRerouted's
// v15-sandbox-reroute, TestSessionHostComesBack's v16-host-back,
// TestModelRetryAfterHonoured's and TestModelLimitHeldAcrossWorkers'
// v16-rate-limits, ...).
var historiesDir = flag.String("histories", "", "save the deal-desk and MCP runs' workflow histories to this directory")

// saveHistories writes the histories of the workflows ids to dir, named
// prefix plus each workflow's place in its run, and adds them to dir's
// index.json.
func saveHistories(t *testing.T, c client.Client, ids map[string]bool, dir, prefix string) {
	t.Helper()
	index := openIndex(t, dir)
	defer index.save(t)
	for id := range ids {
		// Name by the workflow's place in the run, not its random id.
		name := prefix
		if _, rest, ok := strings.Cut(id, "/"); ok {
			name += "-" + strings.NewReplacer("/", "_", ".", "_").Replace(rest)
		}
		index.files[name+".json"] = id
		writeHistory(t, c, id, "", filepath.Join(dir, name+".json"))
	}
}

// historyIndex is a history set's index.json (file → workflow id), read
// to be added to.
type historyIndex struct {
	dir   string
	files map[string]string
}

// openIndex reads dir's index.json, creating dir when needed.
func openIndex(t *testing.T, dir string) *historyIndex {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	index := &historyIndex{dir: dir, files: map[string]string{}}
	if data, err := os.ReadFile(filepath.Join(dir, "index.json")); err == nil {
		if err := json.Unmarshal(data, &index.files); err != nil {
			t.Fatal(err)
		}
	}
	return index
}

// indexes serializes the saves of index.json files: tests run in
// parallel, and two that save histories to one set would otherwise lose
// each other's entries.
var indexes sync.Mutex

// save writes the index back, with what other tests added to it since it
// was read (entries are only ever added).
func (x *historyIndex) save(t *testing.T) {
	t.Helper()
	indexes.Lock()
	defer indexes.Unlock()
	path := filepath.Join(x.dir, "index.json")
	files := map[string]string{}
	if data, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(data, &files); err != nil {
			t.Error(err)
			return
		}
	}
	for name, id := range x.files {
		files[name] = id
	}
	data, _ := json.MarshalIndent(files, "", "  ")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Error(err)
	}
}

// writeHistory writes the history of run runID of workflow id (the latest
// when "") to path.
func writeHistory(t *testing.T, c client.Client, id, runID, path string) {
	t.Helper()
	h := &historypb.History{}
	it := c.GetWorkflowHistory(context.Background(), id, runID, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		h.Events = append(h.Events, e)
	}
	data, err := protojson.MarshalOptions{Indent: "  "}.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// saveRuns writes the histories of the runs of workflow id (each
// run's own, along its chain of continue-as-new, first run first) to
// dir as prefix-run<N>.json, and adds them to dir's index.json.
func saveRuns(t *testing.T, c client.Client, id string, runIDs []string, dir, prefix string) {
	t.Helper()
	index := openIndex(t, dir)
	defer index.save(t)
	for i, runID := range runIDs {
		name := fmt.Sprintf("%s-run%d.json", prefix, i+1)
		writeHistory(t, c, id, runID, filepath.Join(dir, name))
		index.files[name] = id
	}
}
