package skills_test

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
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

// learntFiles is a skills.Learnt over files held in memory, by path from
// the folder of the skills. A worker's lists the memories/skills/ of the
// agent's memory scope in the blob store, and logs what is skipped.
type learntFiles map[string]string

func (l learntFiles) List(context.Context) ([]skills.LearntFile, error) {
	var out []skills.LearntFile
	for _, p := range slices.Sorted(maps.Keys(l)) {
		content := l[p]
		out = append(out, skills.LearntFile{Path: p, Open: func(context.Context) (io.ReadCloser, error) {
			return io.NopCloser(strings.NewReader(content)), nil
		}})
	}
	return out, nil
}

func (learntFiles) Skipped(_ context.Context, err error) { fmt.Println("skipped:", err) }

// The skills an agent learnt from earlier work (those memory
// consolidation wrote) join the index of its skills capability, after
// the bundled ones, read again at each model call; load_skill and
// read_skill serve them too. A bundled skill wins over a learnt one of
// its name. The worker binds every agent that reads memory to its memory
// scope this way.
func ExampleWithLearnt() {
	c, err := skills.New(context.Background(), skills.Config{
		Sources: []skills.Source{skills.Inline{{Name: "release-notes", Description: "Writes release notes from the git log.", Instructions: "Group the changes by kind.\n"}}},
	})
	if err != nil {
		panic(err)
	}
	learnt := learntFiles{
		"deploy-check/SKILL.md":         "---\nname: deploy-check\ndescription: Checks a deploy before it goes out.\n---\nRun scripts/smoke.sh.\n",
		"deploy-check/scripts/smoke.sh": "#!/bin/sh\ncurl -fsS localhost:8080/healthz\n",
		"release-notes/SKILL.md":        "---\nname: release-notes\ndescription: Lists every commit.\n---\nList them all.\n",
	}
	caps, ok := skills.WithLearnt([]agents.Capability{c}, learnt)
	fmt.Println("bound:", ok)
	index, err := caps[0].(*skills.Capability).DynamicInstructions(context.Background(), agents.RunContext{Agent: "writer", MemoryScope: "team"})
	if err != nil {
		panic(err)
	}
	index, _, _ = strings.Cut(index, "\n\n")
	fmt.Println(index)
	// Output:
	// bound: true
	// skipped: skills: learnt: skill release-notes: skills: duplicate skill name: a bundled skill is named "release-notes", and wins over the learnt one
	// ## Skills
	// A skill is a set of instructions, with scripts and resources, for one kind of task. These skills are available:
	// - release-notes: Writes release notes from the git log. (file: .agents/skills/release-notes/SKILL.md)
	// - deploy-check: Checks a deploy before it goes out. (learnt from earlier work; file: .agents/skills/deploy-check/SKILL.md)
}
