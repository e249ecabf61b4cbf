package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/examples/dealdesk"
)

// inspectorOutput is what `inspector --cli --format json` prints on
// stdout: the method's result and, with --strict, the schema portability
// findings.
type inspectorOutput struct {
	Result struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		IsError           bool            `json:"isError"`
	} `json:"result"`
	SchemaFindings []struct {
		ToolName string `json:"toolName"`
		Findings []struct {
			Rule     string `json:"rule"`
			Severity string `json:"severity"`
			Schema   string `json:"schema"`
			Path     string `json:"path"`
		} `json:"findings"`
	} `json:"schemaFindings"`
}

// TestMCPInspector drives `troupe mcp serve` with the MCP Inspector's
// CLI, a third-party client, over stdio (the Inspector starts the server:
// the test binary acting as the troupe command) and over streamable HTTP:
// tools/list passes the Inspector's --strict schema portability lint, and
// tools/call of dealdesk_coordinator runs the deal-desk graph offline and
// returns its Recommendation as structuredContent.
func TestMCPInspector(t *testing.T) {
	parallel(t)
	takeMCPServeQueue(t)
	tests := []struct {
		name string
		// target returns the Inspector's arguments naming the server.
		target func(t *testing.T) []string
	}{
		{"stdio", func(t *testing.T) []string {
			_, env := troupeCommand(t, "mcp", "serve", "--stdio")
			// The Inspector gives a stdio server a minimal environment
			// (PATH, HOME, ...) plus its -e variables; an empty
			// OPENAI_API_KEY is simply left out.
			args := []string{"-e", env}
			for _, kv := range mcpServeEnv(t) {
				if !strings.HasSuffix(kv, "=") {
					args = append(args, "-e", kv)
				}
			}
			return append(args, "--transport", "stdio", "--", os.Args[0])
		}},
		{"http", func(t *testing.T) []string {
			return []string{"--transport", "http", "--server-url", serveMCPHTTP(t)}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			target := tc.target(t)

			list := inspect(t, target, "--method", "tools/list", "--strict")
			var names []string
			for _, tool := range list.Result.Tools {
				names = append(names, tool.Name)
			}
			for _, want := range []string{"dealdesk_coordinator", "codereview_coordinator", "troupe_run_status", "troupe_run_result"} {
				if !slices.Contains(names, want) {
					t.Errorf("tools/list lacks %s: %v", want, names)
				}
			}
			for _, tool := range list.SchemaFindings {
				for _, f := range tool.Findings {
					msg := fmt.Sprintf("schema portability %s (%s): tool %s, %s.%s", f.Severity, f.Rule, tool.ToolName, f.Schema, f.Path)
					// Errors exit 6; warnings (a type union, say) are
					// held to zero too, so the tools stay portable.
					t.Error(msg)
				}
			}

			call := inspect(t, target, "--method", "tools/call", "--tool-name", "dealdesk_coordinator",
				"--tool-arg", "input=Review the Acme Corp deal: a 3-year, 5000-seat renewal at 35% off list, net-90, go-live in 3 weeks.")
			var rec dealdesk.Recommendation
			if err := json.Unmarshal(call.Result.StructuredContent, &rec); err != nil {
				t.Fatalf("structuredContent is no Recommendation: %v: %s", err, call.Result.StructuredContent)
			}
			if call.Result.IsError || rec.Decision != "approve_with_conditions" || rec.PricingRisk != "high" ||
				rec.RolloutRisk != "medium" || len(rec.Conditions) != 2 || !strings.Contains(rec.Conditions[0], "CFO approval") || rec.Summary == "" {
				t.Errorf("tools/call dealdesk_coordinator = %s (isError %v)", call.Result.StructuredContent, call.Result.IsError)
			}
		})
	}
}

// inspect runs the Inspector's CLI on the server that target names, with
// args, and returns its JSON output. A non-zero exit fails the test: with
// --strict, exit 6 means a tool schema has a portability error.
func inspect(t *testing.T, target []string, args ...string) inspectorOutput {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	all := append([]string{"--cli", "--format", "json", "--connect-timeout", "60000"}, args...)
	cmd := peerCommand(ctx, t, "inspector", append(all, target...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	began := time.Now()
	err := cmd.Run()
	t.Logf("inspector %s: %v in %s", strings.Join(args, " "), cmd.ProcessState, time.Since(began).Round(time.Millisecond))
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ExitCode() == 6 {
			t.Fatalf("inspector --strict found tool schema portability errors:\n%s", stderr.String())
		}
		t.Fatalf("inspector %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	var out inspectorOutput
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("inspector printed no JSON result: %v\n%s", err, stdout.String())
	}
	return out
}
