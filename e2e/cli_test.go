package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/cli"
	"github.com/troupe-dev/troupe/examples/dealdesk"
	"github.com/troupe-dev/troupe/workflows"
)

// TestCLIRun runs `troupe run` as a user does, with no OPENAI_API_KEY (so
// the deal-desk offline scenario answers) and, in turn, against a running
// Temporal (TEMPORAL_ADDRESS) and on its own embedded server.
func TestCLIRun(t *testing.T) {
	tests := []struct {
		name    string
		address string
	}{
		{"TEMPORAL_ADDRESS", temporalAddr},
		{"embedded server", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("OPENAI_API_KEY", "")
			t.Setenv("TEMPORAL_ADDRESS", tc.address)
			t.Setenv("TROUPE_HOME", t.TempDir())
			var stdout, stderr bytes.Buffer
			cmd := cli.Command([]cli.Graph{{Graph: dealdesk.Graph(), Scenario: dealdesk.Scenario}}, &stdout, &stderr)
			cmd.SetArgs([]string{"run", "--graph", "dealdesk", "--json", "Review the Acme Corp deal"})
			if err := cmd.ExecuteContext(context.Background()); err != nil {
				t.Fatalf("troupe run: %v\nstderr:\n%s", err, stderr.String())
			}
			var res workflows.RunResult
			if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
				t.Fatalf("stdout is not a run result: %v\n%s", err, stdout.String())
			}
			rec, err := agents.Decode[dealdesk.Recommendation](res.Output)
			if err != nil || res.Agent != "coordinator" || rec.Decision != "approve_with_conditions" || res.WorkflowID == "" {
				t.Errorf("result = %+v, recommendation %+v (%v)", res, rec, err)
			}
			progress := stderr.String()
			for _, want := range []string{"OPENAI_API_KEY is not set", "handoff: triage → coordinator", "⇉ review_pricing", "⇉ review_rollout", "→ exec_command", "sandbox provisioned", "sandbox stopped", "[coordinator] final output"} {
				if !strings.Contains(progress, want) {
					t.Errorf("progress lacks %q:\n%s", want, progress)
				}
			}
		})
	}
}
