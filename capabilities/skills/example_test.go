package skills_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/capabilities"
	"github.com/troupe-dev/troupe/capabilities/skills"
)

// A sandbox agent with skills loaded on demand: the instructions index
// them, and load_skill copies one into the workspace when the model asks.
func ExampleNew() {
	c, err := skills.New(context.Background(), skills.Config{
		Sources: []skills.Source{skills.Inline{{
			Name:         "release-notes",
			Description:  "Writes release notes from the git log.",
			Instructions: "Run scripts/changes.sh and group the changes by kind.\n",
			Files:        []skills.File{{Path: "scripts/changes.sh", Content: "git log --oneline\n", Executable: true}},
		}}},
		// Mode: skills.Lazy is the default; skills.Eager copies every
		// skill in as the workspace is provisioned.
	})
	if err != nil {
		panic(err)
	}
	agent := &agents.Agent{
		Name:         "writer",
		Sandbox:      &agents.Sandbox{},
		Capabilities: append(capabilities.Default(), c),
	}
	if _, err := agents.NewGraph("docs", "writer", agent); err != nil {
		panic(err)
	}
	index, _, _ := strings.Cut(c.Instructions(), "\n\n")
	fmt.Println(index)
	fmt.Println("tools:", c.Tools()[0].Spec().Name)
	// Output:
	// ## Skills
	// A skill is a set of instructions, with scripts and resources, for one kind of task. These skills are available:
	// - release-notes: Writes release notes from the git log. (file: .agents/skills/release-notes/SKILL.md)
	// tools: load_skill
}

// An agent without a sandbox reads its skills as text with read_skill.
func ExampleText() {
	c, err := skills.New(context.Background(), skills.Config{
		Sources: []skills.Source{skills.Inline{{Name: "tone", Description: "House style for customer emails.", Instructions: "Be brief. Sign as the Deal Desk.\n"}}},
		Mode:    skills.Text,
	})
	if err != nil {
		panic(err)
	}
	read := c.Tools()[0].(*agents.FunctionTool)
	out, err := read.Call(context.Background(), `{"name":"tone"}`)
	fmt.Printf("%s: %q, %v\n", read.Spec().Name, out, err)
	_, err = read.Call(context.Background(), `{"name":"legal"}`)
	fmt.Println(err)
	// Output:
	// read_skill: "Be brief. Sign as the Deal Desk.\n", <nil>
	// skills: unknown skill "legal"; the skills are: tone
}
