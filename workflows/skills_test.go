package workflows_test

// Skills and workspace guidance in a run: the model sees the index, loads
// a skill with load_skill (a sandbox activity) and runs its script; the
// workspace's AGENTS.md reaches the instructions from the first turn,
// before the workspace is made; a plain agent reads a skill with read_skill.

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.temporal.io/sdk/testsuite"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/capabilities"
	"github.com/troupe-dev/troupe/capabilities/skills"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/workflowstest"
)

var reviewSkills = skills.Inline{{
	Name: "review-go", Description: "Reviews Go code for common mistakes.",
	Instructions: "Run scripts/vet.sh from the skill's folder and report what it prints.\n",
	Files:        []skills.File{{Path: "scripts/vet.sh", Content: "echo vet: all clear\n", Executable: true}},
}}

// skillsEnv is a test environment serving a graph of agent alone (named
// sk), with the local sandbox backend.
func skillsEnv(t *testing.T, fn workflowstest.TurnFunc, agent *agents.Agent) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	env, _ := workflowstest.LocalEnv(t, agents.MustGraph("sk", agent.Name, agent), &workflowstest.FuncModel{Func: fn}, nil)
	return env
}

func TestSkillsLazyLoadAndGuidance(t *testing.T) {
	lazy, err := skills.New(context.Background(), skills.Config{Sources: []skills.Source{reviewSkills}})
	if err != nil {
		t.Fatal(err)
	}
	var instructions, outputs []string
	fn := func(req model.Request) []agents.Item {
		instructions = append(instructions, req.Instructions)
		last := workflowstest.LastItem(req)
		switch len(instructions) {
		case 1:
			return []agents.Item{workflowstest.Call("c1", "load_skill", `{"name":"review-go"}`)}
		case 2:
			outputs = append(outputs, last.Output)
			return []agents.Item{workflowstest.Call("c2", "exec_command", `{"cmd":".agents/skills/review-go/scripts/vet.sh","workdir":null,"yield_time_ms":null,"max_output_tokens":null}`)}
		}
		outputs = append(outputs, last.Output)
		return []agents.Item{agents.AssistantMessage("reviewed")}
	}
	env := skillsEnv(t, fn, &agents.Agent{
		Name: "reviewer", Instructions: "reviewer: reviews code",
		Sandbox: &agents.Sandbox{Manifest: sandbox.Manifest{Entries: []sandbox.Entry{
			{Kind: sandbox.EntryFile, Path: "AGENTS.md", Content: "Always run the linters before you answer.\n"},
		}}},
		Capabilities: append(capabilities.Default(), lazy),
	})
	env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "sk", Input: "$review-go this repository"})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(instructions) != 3 || len(outputs) != 2 {
		t.Fatalf("%d turns, %d outputs; want 3 and 2", len(instructions), len(outputs))
	}
	for _, want := range []string{"- review-go: Reviews Go code for common mistakes. (file: .agents/skills/review-go/SKILL.md)", "`$name`", "`load_skill`"} {
		if !strings.Contains(instructions[0], want) {
			t.Errorf("first turn's instructions lack %q:\n%s", want, instructions[0])
		}
	}
	if !strings.Contains(outputs[0], "Skill review-go is loaded in .agents/skills/review-go/") || !strings.Contains(outputs[0], "Run scripts/vet.sh from the skill's folder") {
		t.Errorf("load_skill output = %q", outputs[0])
	}
	if !strings.Contains(outputs[1], "vet: all clear") {
		t.Errorf("the loaded skill's script did not run: %q", outputs[1])
	}
	// From the first turn, before the workspace is made (read from the
	// manifest), and after.
	for i, in := range instructions {
		if !strings.Contains(in, "## Repository guidance (AGENTS.md)") || !strings.Contains(in, "Always run the linters before you answer.") {
			t.Errorf("turn %d's instructions lack the workspace's AGENTS.md:\n%s", i+1, in)
		}
	}
}

func TestSkillsReadSkillPlainAgent(t *testing.T) {
	text, err := skills.New(context.Background(), skills.Config{Sources: []skills.Source{reviewSkills}, Mode: skills.Text})
	if err != nil {
		t.Fatal(err)
	}
	var outputs []string
	var first string
	fn := func(req model.Request) []agents.Item {
		last := workflowstest.LastItem(req)
		if last.Type != agents.ItemFunctionCallOutput {
			first = req.Instructions
			return []agents.Item{workflowstest.Call("c1", "read_skill", `{"name":"review-go","path":null}`), workflowstest.Call("c2", "read_skill", `{"name":"review-go","path":"scripts/vet.sh"}`)}
		}
		for _, it := range req.Input {
			if it.Type == agents.ItemFunctionCallOutput {
				outputs = append(outputs, it.Output)
			}
		}
		return []agents.Item{agents.AssistantMessage("done")}
	}
	env := skillsEnv(t, fn, &agents.Agent{Name: "helper", Instructions: "helper", Capabilities: []agents.Capability{text}})
	env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "sk", Input: "use $review-go"})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(first, "- review-go: Reviews Go code for common mistakes.") || !strings.Contains(first, "`read_skill`") {
		t.Errorf("instructions lack the index:\n%s", first)
	}
	if len(outputs) != 2 || outputs[0] != "Run scripts/vet.sh from the skill's folder and report what it prints.\n" || outputs[1] != "echo vet: all clear\n" {
		t.Errorf("read_skill outputs = %q", outputs)
	}
}

// Two skills capabilities of one agent with a skill of one name are
// refused when the worker takes the graph.
func TestSkillsDuplicateAcrossCapabilities(t *testing.T) {
	a, err := skills.New(context.Background(), skills.Config{Sources: []skills.Source{reviewSkills}, Mode: skills.Text})
	if err != nil {
		t.Fatal(err)
	}
	b, err := skills.New(context.Background(), skills.Config{Sources: []skills.Source{reviewSkills}, Mode: skills.Eager})
	if err != nil {
		t.Fatal(err)
	}
	g := agents.MustGraph("sk", "w", &agents.Agent{Name: "w", Sandbox: &agents.Sandbox{}, Capabilities: []agents.Capability{a, b}})
	store, _ := blob.Open(context.Background(), "mem://")
	_, err = workflows.NewRunner(workflows.Config{Graphs: []*agents.Graph{g}, Model: &workflowstest.FuncModel{}, Store: store})
	if !errors.Is(err, skills.ErrDuplicate) {
		t.Fatalf("NewRunner = %v, want ErrDuplicate", err)
	}
}

// Eager skills are in the workspace before the first command: the
// sandbox-create activity materialises them with the manifest.
func TestSkillsEager(t *testing.T) {
	eager, err := skills.New(context.Background(), skills.Config{Sources: []skills.Source{reviewSkills}, Mode: skills.Eager})
	if err != nil {
		t.Fatal(err)
	}
	var out string
	fn := func(req model.Request) []agents.Item {
		if last := workflowstest.LastItem(req); last.Type == agents.ItemFunctionCallOutput {
			out = last.Output
			return []agents.Item{agents.AssistantMessage("done")}
		}
		return []agents.Item{workflowstest.Call("c1", "exec_command", `{"cmd":"head -2 .agents/skills/review-go/SKILL.md && .agents/skills/review-go/scripts/vet.sh","workdir":null,"yield_time_ms":null,"max_output_tokens":null}`)}
	}
	env := skillsEnv(t, fn, &agents.Agent{Name: "reviewer", Instructions: "reviewer", Sandbox: &agents.Sandbox{},
		Capabilities: append(capabilities.Default(), eager)})
	env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "sk", Input: "review"})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "Process exited with code 0") || !strings.Contains(out, "---\nname: review-go\n") || !strings.Contains(out, "vet: all clear") {
		t.Errorf("exec_command output = %q", out)
	}
}
