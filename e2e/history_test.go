package e2e

import (
	"context"
	"testing"

	"go.temporal.io/api/enums/v1"
	"google.golang.org/protobuf/proto"

	"github.com/troupe-dev/troupe/workflows"
)

// TestHistoryStaysSmall runs 300 turns, each with a 10 KB tool output,
// and checks the real Temporal histories of the run stay under 4 MiB:
// transcripts and large outputs travel by reference, not in payloads.
func TestHistoryStaysSmall(t *testing.T) {
	c := dial(t)
	_, url := modelServer(t)
	queue := startWorker(t, c, url, "", nil)
	res, err := runGraph(t, c, queue, workflows.RunInput{Graph: "long", Input: "loop"})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Output) != `"done after 301 turns"` || res.Turns != 301 || res.ToolCalls != 300 {
		t.Fatalf("output %s after %d turns and %d tool calls", res.Output, res.Turns, res.ToolCalls)
	}
	total := 0
	for _, id := range []string{res.WorkflowID, res.WorkflowID + "/0-looper"} {
		n, events := 0, 0
		it := c.GetWorkflowHistory(context.Background(), id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			n += proto.Size(e)
			events++
		}
		if events == 0 {
			t.Fatalf("no history for %s", id)
		}
		t.Logf("%s: %d events, %d bytes", id, events, n)
		total += n
	}
	if total >= 4<<20 {
		t.Errorf("histories total %d bytes, want < 4 MiB", total)
	}
}
