package lease_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"go.temporal.io/sdk/activity"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/local"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/lease"
	"github.com/troupe-dev/troupe/workflows/workflowstest"
)

// guidanceRunner is a runner of a graph of agent alone, with a local
// sandbox client.
func guidanceRunner(t *testing.T, fn workflowstest.TurnFunc, agent *agents.Agent) *workflows.Runner {
	t.Helper()
	lc, err := local.New(local.Config{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	store, _ := blob.Open(context.Background(), "mem://")
	r, err := workflows.NewRunner(workflows.Config{Graphs: []*agents.Graph{agents.MustGraph("sk", agent.Name, agent)},
		Model: &workflowstest.FuncModel{Func: fn}, Store: store, Sandboxes: map[string]sandbox.Client{"local": lc}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

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
			r := guidanceRunner(t, fn, &agents.Agent{
				Name: "helper", Instructions: "helper",
				Sandbox: &agents.Sandbox{Manifest: sandbox.Manifest{Entries: tc.entries}},
				Tools:   []agents.Tool{lookup},
			})
			env := workflowstest.NewEnv()
			r.Register(env)
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
