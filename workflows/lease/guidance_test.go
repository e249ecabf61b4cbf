package lease_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"go.temporal.io/sdk/activity"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/workflows/lease"
	"github.com/troupe-dev/troupe/workflows/workflowstest"
)

// The guidance of a workspace not yet made is read from the manifest once
// per lease: a sandbox agent that never needs its sandbox sees it on each
// turn, and asks for it once; one whose manifest has none sees none.
func TestGuidanceFromManifestOnce(t *testing.T) {
	lookup := agents.MustFunctionTool("lookup", "Looks a key up.", func(_ context.Context, a struct {
		Key string `json:"key"`
	}) (string, error) {
		return "value of " + a.Key, nil
	})
	for _, tc := range []struct {
		name    string
		entries []sandbox.Entry
		want    bool
	}{
		{name: "with", entries: []sandbox.Entry{{Kind: sandbox.EntryFile, Path: "AGENTS.md", Content: "Answer in French.\n"}}, want: true},
		{name: "elsewhere", entries: []sandbox.Entry{{Kind: sandbox.EntryFile, Path: "docs/AGENTS.md", Content: "Answer in French.\n"}}},
		{name: "without"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var instructions []string
			fn := func(req model.Request) []agents.Item {
				instructions = append(instructions, req.Instructions)
				if len(instructions) < 3 {
					return []agents.Item{workflowstest.Call(fmt.Sprint("c", len(instructions)), "lookup", `{"key":"k"}`)}
				}
				return []agents.Item{agents.AssistantMessage("done")}
			}
			helper := &agents.Agent{
				Name: "helper", Instructions: "helper",
				Sandbox: &agents.Sandbox{Manifest: sandbox.Manifest{Entries: tc.entries}},
				Tools:   []agents.Tool{lookup},
			}
			env, _ := workflowstest.LocalEnv(t, agents.MustGraph("sk", "helper", helper), &workflowstest.FuncModel{Func: fn}, nil)
			reads := 0
			env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, _ []any) {
				if info.ActivityType.Name == lease.WorkspaceGuidanceActivityName {
					reads++
				}
			})
			env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "sk", Input: "look k up"})
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			if reads != 1 || len(instructions) != 3 {
				t.Fatalf("the guidance was read %d times in %d turns; want once in 3", reads, len(instructions))
			}
			for i, in := range instructions {
				if got := strings.Contains(in, "Answer in French."); got != tc.want {
					t.Errorf("turn %d: guidance in the instructions = %v, want %v", i+1, got, tc.want)
				}
			}
		})
	}
}
