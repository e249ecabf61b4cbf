package memory_test

// Memory skills offered by the Skills capability, in runs against a real
// blob store and local sandboxes: the index lists them (per model call),
// load_skill copies one into the workspace, read_skill reads one, a
// bundled skill of the same name wins, and an invalid one is left out
// without breaking the turn.

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/capabilities"
	"github.com/troupe-dev/troupe/capabilities/skills"
	"github.com/troupe-dev/troupe/memory"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/workflows/workflowstest"
)

// reviewSkills is an inline skill source with one skill and its script.
var reviewSkills = skills.Inline{{
	Name: "review-go", Description: "Reviews Go code for common mistakes.",
	Instructions: "Run scripts/vet.sh from the skill's folder and report what it prints.\n",
	Files:        []skills.File{{Path: "scripts/vet.sh", Content: "echo vet: all clear\n", Executable: true}},
}}

// deployCheckSkill is a memory skill with a script, as the store holds it.
var deployCheckSkill = map[string]string{
	memory.SkillPath("deploy-check"):                           "---\nname: deploy-check\ndescription: Checks a deploy before it goes out.\n---\nRun scripts/check.sh and report what it prints.\n",
	memory.SkillsDir + "deploy-check/scripts/check.sh":         "#!/bin/sh\necho deploy ok\n",
	memory.SkillsDir + "deploy-check/references/checklist.txt": "migrations, flags, rollback\n",
}

const deployCheckLine = "- deploy-check: Checks a deploy before it goes out. (learnt from earlier work"

func TestMemorySkillsOffered(t *testing.T) {
	lazy := func(t *testing.T) agents.Capability {
		c, err := skills.New(context.Background(), skills.Config{Sources: []skills.Source{reviewSkills}})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	text := func(t *testing.T) agents.Capability {
		c, err := skills.New(context.Background(), skills.Config{Sources: []skills.Source{reviewSkills}, Mode: skills.Text})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	sandboxAgent := func(t *testing.T) *agents.Agent {
		return &agents.Agent{Name: "coder", Instructions: "coder: deploys", Sandbox: &agents.Sandbox{},
			Capabilities: append(capabilities.Default(), lazy(t)), Memory: &agents.MemoryConfig{Scope: "team"}}
	}
	for _, tc := range []struct {
		name  string
		agent func(t *testing.T) *agents.Agent
		// more are memory files besides deploy-check's.
		more map[string]string
		// calls are the model's tool calls, one a turn, before its answer.
		calls []agents.Item
		// index holds what the first turn's instructions must hold, and
		// notIndex what they must not.
		index, notIndex []string
		// outputs holds what each call's output must hold, in order.
		outputs []string
	}{
		{
			name:  "a sandbox agent loads one and runs its script",
			agent: sandboxAgent,
			calls: []agents.Item{workflowstest.Call("c1", "load_skill", `{"name":"deploy-check"}`),
				workflowstest.Shell("c2", ".agents/skills/deploy-check/scripts/check.sh && cat .agents/skills/deploy-check/references/checklist.txt")},
			index:    []string{deployCheckLine + "; file: .agents/skills/deploy-check/SKILL.md)", "- review-go: Reviews Go code for common mistakes. (file: .agents/skills/review-go/SKILL.md)", "`load_skill`"},
			notIndex: []string{"### Memory skills"},
			outputs: []string{"Skill deploy-check is loaded in .agents/skills/deploy-check/ (files: SKILL.md, references/checklist.txt, scripts/check.sh). Its instructions (SKILL.md):\n\nRun scripts/check.sh and report what it prints.\n",
				"deploy ok\nmigrations, flags, rollback"},
		},
		{
			name: "a plain agent reads one",
			agent: func(t *testing.T) *agents.Agent {
				return &agents.Agent{Name: "helper", Instructions: "helper: answers", Capabilities: []agents.Capability{text(t)},
					Memory: &agents.MemoryConfig{Scope: "team", Mode: agents.MemoryReadOnly}}
			},
			calls:    []agents.Item{workflowstest.Call("c1", "read_skill", `{"name":"$deploy-check"}`), workflowstest.Call("c2", "read_skill", `{"name":"deploy-check","path":"scripts/check.sh"}`)},
			index:    []string{deployCheckLine + ")", "- review-go: Reviews Go code for common mistakes.\n", "`read_skill`"},
			notIndex: []string{"### Memory skills", "memory_read memories/skills/"},
			outputs:  []string{"Run scripts/check.sh and report what it prints.\n", "#!/bin/sh\necho deploy ok\n"},
		},
		{
			name:     "a bundled skill of the same name wins",
			agent:    sandboxAgent,
			more:     map[string]string{memory.SkillPath("review-go"): "---\nname: review-go\ndescription: A learnt way to review.\n---\nSkim it.\n"},
			calls:    []agents.Item{workflowstest.Call("c1", "load_skill", `{"name":"review-go"}`)},
			index:    []string{"- review-go: Reviews Go code for common mistakes. (file: .agents/skills/review-go/SKILL.md)", deployCheckLine},
			notIndex: []string{"A learnt way to review", "### Memory skills"},
			outputs:  []string{"Run scripts/vet.sh from the skill's folder"},
		},
		{
			name:  "an invalid one is left out and the turn goes on",
			agent: sandboxAgent,
			more: map[string]string{
				// Passes phase 2's check, but its YAML does not parse.
				memory.SkillPath("rollback"): "---\nname: rollback\ndescription: Use when: a deploy fails\n---\nRoll back.\n",
				// Names another skill than its folder.
				memory.SkillPath("misnamed"): "---\nname: other-name\ndescription: Misnamed.\n---\nDo it.\n",
				// No frontmatter at all.
				memory.SkillPath("notes"): "Just some notes.\n",
			},
			calls:    []agents.Item{workflowstest.Call("c1", "load_skill", `{"name":"rollback"}`), workflowstest.Shell("c2", "echo still going")},
			index:    []string{deployCheckLine},
			notIndex: []string{"rollback", "misnamed", "other-name", "- notes"},
			outputs:  []string{"unknown skill \"rollback\"; the skills are: review-go, deploy-check", "still going"},
		},
		{
			name: "an eager capability leaves them to the memory section",
			agent: func(t *testing.T) *agents.Agent {
				eager, err := skills.New(context.Background(), skills.Config{Sources: []skills.Source{reviewSkills}, Mode: skills.Eager})
				if err != nil {
					t.Fatal(err)
				}
				return &agents.Agent{Name: "coder", Instructions: "coder: deploys", Sandbox: &agents.Sandbox{},
					Capabilities: append(capabilities.Default(), eager), Memory: &agents.MemoryConfig{Scope: "team"}}
			},
			index:    []string{"### Memory skills", "- deploy-check (memories/skills/deploy-check/SKILL.md): Checks a deploy before it goes out.", "- review-go: Reviews Go code for common mistakes. (file: .agents/skills/review-go/SKILL.md)"},
			notIndex: []string{deployCheckLine},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			agent := tc.agent(t)
			var outputs []string
			c := newCapEnv(t, agents.MustGraph("ms", agent.Name, agent), func(c *capEnv, req model.Request) []agents.Item {
				if last := workflowstest.LastItem(req); last.Type == agents.ItemFunctionCallOutput {
					outputs = append(outputs, last.Output)
				}
				if n := len(outputs); n < len(tc.calls) {
					return []agents.Item{tc.calls[n]}
				}
				return []agents.Item{agents.AssistantMessage("done")}
			})
			for p, data := range deployCheckSkill {
				c.put(t, "team", p, data)
			}
			for p, data := range tc.more {
				c.put(t, "team", p, data)
			}
			c.run(t, "ms", "check the deploy with $deploy-check")
			ins := c.instructions[agent.Name]
			if len(ins) != len(tc.calls)+1 {
				t.Fatalf("%d model calls, want %d", len(ins), len(tc.calls)+1)
			}
			for _, want := range tc.index {
				if !strings.Contains(ins[0], want) {
					t.Errorf("instructions lack %q:\n%s", want, ins[0])
				}
			}
			for _, not := range tc.notIndex {
				if strings.Contains(ins[0], not) {
					t.Errorf("instructions hold %q:\n%s", not, ins[0])
				}
			}
			if n := strings.Count(ins[0], "- review-go:"); n != 1 {
				t.Errorf("review-go is listed %d times, want once:\n%s", n, ins[0])
			}
			if len(outputs) != len(tc.outputs) {
				t.Fatalf("outputs %q, want %d", outputs, len(tc.outputs))
			}
			for i, want := range tc.outputs {
				if !strings.Contains(outputs[i], want) {
					t.Errorf("output %d = %q, want %q", i+1, outputs[i], want)
				}
			}
		})
	}
}

// A skill that phase 2 writes between two model turns is in the second
// turn's index, and loads: the index is read at each model call, not
// fixed at the worker's start.
func TestMemorySkillFromPhase2BetweenTurns(t *testing.T) {
	lazy, err := skills.New(context.Background(), skills.Config{Sources: []skills.Source{reviewSkills}})
	if err != nil {
		t.Fatal(err)
	}
	agent := &agents.Agent{Name: "coder", Instructions: "coder: deploys", Sandbox: &agents.Sandbox{},
		Capabilities: append(capabilities.Default(), lazy), Memory: &agents.MemoryConfig{Scope: "team"}}
	phase2, _ := json.Marshal(memory.Phase2Result{Handbook: "## deploys\n- check before you ship", Summary: "- check deploys",
		Skills: []memory.Skill{{Name: "deploy-check", SkillMD: deployCheckSkill[memory.SkillPath("deploy-check")]}}})
	var phase2Out *memory.MemoryPhase2Output
	var outputs []string
	c := newCapEnv(t, agents.MustGraph("ms", "coder", agent), func(c *capEnv, req model.Request) []agents.Item {
		if req.Instructions == memory.Phase2Instructions {
			return []agents.Item{agents.AssistantMessage(string(phase2))}
		}
		if last := workflowstest.LastItem(req); last.Type == agents.ItemFunctionCallOutput {
			outputs = append(outputs, last.Output)
		}
		switch len(outputs) {
		case 0:
			// Consolidation runs in the background while the agent works.
			out, err := c.runner.Memory().MemoryPhase2(context.Background(), memory.MemoryPhase2Input{Scope: "team",
				Settings: memory.MemorySettings{Phase2Model: "m", Newest: 8, Phase2Turns: 1}})
			if err != nil {
				t.Errorf("phase 2: %v", err)
			}
			phase2Out = out
			return []agents.Item{workflowstest.Shell("c1", "echo working")}
		case 1:
			return []agents.Item{workflowstest.Call("c2", "load_skill", `{"name":"deploy-check"}`)}
		}
		return []agents.Item{agents.AssistantMessage("done")}
	})
	rm := memory.RawMemory{RolloutID: "r1", Lines: 1, Slug: "deploys", Updated: time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC), Text: "- check deploys"}
	c.put(t, "team", memory.RawMemoryPath("r1"), string(rm.Encode()))
	c.run(t, "ms", "ship it")
	if phase2Out == nil || strings.Join(phase2Out.Skills, ",") != "deploy-check" {
		t.Fatalf("phase 2 wrote %+v, want the skill deploy-check", phase2Out)
	}
	ins := c.instructions["coder"]
	if len(ins) != 3 || len(outputs) != 2 {
		t.Fatalf("%d model calls, %d outputs; want 3 and 2", len(ins), len(outputs))
	}
	if strings.Contains(ins[0], "deploy-check") {
		t.Errorf("the first turn's index lists a skill not yet written:\n%s", ins[0])
	}
	if !strings.Contains(ins[1], deployCheckLine) {
		t.Errorf("the second turn's index lacks the skill phase 2 wrote:\n%s", ins[1])
	}
	if !strings.Contains(outputs[1], "Skill deploy-check is loaded in .agents/skills/deploy-check/") {
		t.Errorf("load_skill = %q", outputs[1])
	}
}
