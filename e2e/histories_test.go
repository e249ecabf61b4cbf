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

// historiesDir, when set, makes TestDealDesk save the histories of its
// run's workflows there, for the replay tests of package workflows:
//
//	go test ./e2e -run 'TestDealDesk/responses' -histories ../workflows/testdata/histories/NAME (a new set; keep the old ones)
var historiesDir = flag.String("histories", "", "save the deal-desk run's workflow histories to this directory")

func saveHistories(t *testing.T, c client.Client, ids map[string]bool, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	index := map[string]string{}
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
		name := "dealdesk"
		if _, rest, ok := strings.Cut(id, "/"); ok {
			name += "-" + strings.NewReplacer("/", "_", ".", "_").Replace(rest)
		}
		index[name+".json"] = id
		if err := os.WriteFile(filepath.Join(dir, name+".json"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
