package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"
)

// historiesDir, when set, makes TestDealDesk and TestMCPToolsEndToEnd/stdio
// save the histories of their runs' workflows there, for the replay tests
// of package workflows:
//
//	go test ./e2e -run 'TestDealDesk/responses|TestMCPToolsEndToEnd/stdio' -histories ../workflows/testdata/histories/NAME (a new set; keep the old ones)
var historiesDir = flag.String("histories", "", "save the deal-desk and MCP runs' workflow histories to this directory")

// saveHistories writes the histories of the workflows ids to dir, named
// prefix plus each workflow's place in its run, and adds them to dir's
// index.json.
func saveHistories(t *testing.T, c client.Client, ids map[string]bool, dir, prefix string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	index := map[string]string{}
	if data, err := os.ReadFile(filepath.Join(dir, "index.json")); err == nil {
		if err := json.Unmarshal(data, &index); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		data, _ := json.MarshalIndent(index, "", "  ")
		if err := os.WriteFile(filepath.Join(dir, "index.json"), data, 0o644); err != nil {
			t.Error(err)
		}
	}()
	for id := range ids {
		h := &historypb.History{}
		it := c.GetWorkflowHistory(context.Background(), id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
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
		// Name by the workflow's place in the run, not its random id.
		name := prefix
		if _, rest, ok := strings.Cut(id, "/"); ok {
			name += "-" + strings.NewReplacer("/", "_", ".", "_").Replace(rest)
		}
		index[name+".json"] = id
		if err := os.WriteFile(filepath.Join(dir, name+".json"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
