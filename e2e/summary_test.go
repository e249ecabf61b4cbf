package e2e

import (
	"context"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/runtime/model"
)

// TestWebUISummaries: the Web UI reads like the run. The run shows the
// user's message, each agent workflow its agent, and each step what it
// does: the command a sandbox tool runs, the model turn, the snapshot.
func TestWebUISummaries(t *testing.T) {
	parallel(t)
	c := dial(t)
	_, url := modelServer(t)
	queue := startWorker(t, c, url, model.APIResponses, nil)
	ctx := context.Background()
	run, err := client.StartRun(ctx, c, queue, troupe.RunInput{Graph: "dealdesk", Input: "Review the Acme Corp deal"})
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	summary := func(p *commonpb.Payload) string {
		var s string
		if p != nil {
			if err := converter.GetDefaultDataConverter().FromPayload(p, &s); err != nil {
				t.Fatal(err)
			}
		}
		return s
	}
	for id, want := range map[string]string{
		run.GetID():                    "dealdesk: Review the Acme Corp deal",
		run.GetID() + "/1-coordinator": "agent coordinator",
		run.GetID() + "/1-coordinator/t1.0/0-pricing_reviewer": "agent pricing_reviewer",
	} {
		d, err := c.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			t.Fatal(err)
		}
		if got := summary(d.GetExecutionConfig().GetUserMetadata().GetSummary()); got != want {
			t.Errorf("%s: summary %q, want %q", id, got, want)
		}
	}
	steps := map[string]bool{}
	it := c.GetWorkflowHistory(ctx, run.GetID()+"/1-coordinator/t1.0/0-pricing_reviewer", "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if s := summary(e.GetUserMetadata().GetSummary()); s != "" {
			steps[s] = true
		}
	}
	for _, want := range []string{"create the sandbox", "model turn 1 of pricing_reviewer", "exec_command: cat deal/pricing.json", "snapshot the sandbox", "stop the sandbox"} {
		if !steps[want] {
			t.Errorf("no step with the summary %q; the steps': %v", want, steps)
		}
	}
}
