package skillstest

import (
	"context"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/capabilities/skills"
)

// LearntMaker makes a skills.Learnt for the calls of rc, and a func that
// makes it list exactly tree from then on (what it listed before is gone).
// Executable bits of the tree are ignored: a Learnt lists no modes.
type LearntMaker func(t *testing.T, rc agents.RunContext) (learnt skills.Learnt, write func(tree Tree))

// RunLearnt is the conformance suite of skills.Learnt: every
// implementation lists each file of the learnt skills by its path from
// the folder of the skills, reads it as it is, for the call's
// agents.RunContext (rc.MemoryScope names the scope the tree is written
// to), and lists them again at each call, with a Version (if any) that
// changes when the file's content does, even to as many bytes, so that
// the capability's cache of what it read never serves a file as it was.
//
//	skillstest.RunLearnt(t, func(t *testing.T, rc agents.RunContext) (skills.Learnt, func(skillstest.Tree)) {
//		l := newMyLearnt(t)
//		return l, func(tree skillstest.Tree) { l.replace(rc.MemoryScope, tree) }
//	})
func RunLearnt(t *testing.T, make LearntMaker) {
	rc := agents.RunContext{WorkflowID: "wf-1", RunID: "run-1", Agent: "coder", MemoryScope: "team"}
	ctx := agents.WithRunContext(context.Background(), rc)
	bind := func(t *testing.T) (*skills.Capability, *agents.FunctionTool, func(Tree), skills.Learnt) {
		t.Helper()
		learnt, write := make(t, rc)
		c, err := skills.New(context.Background(), skills.Config{Mode: skills.Text})
		if err != nil {
			t.Fatal(err)
		}
		caps, ok := skills.WithLearnt([]agents.Capability{c}, learnt)
		if !ok {
			t.Fatal("WithLearnt did not bind a Text capability")
		}
		bound := caps[0].(*skills.Capability)
		return bound, bound.Tools()[0].(*agents.FunctionTool), write, learnt
	}
	index := func(t *testing.T, c *skills.Capability) string {
		t.Helper()
		in, err := c.DynamicInstructions(context.Background(), rc)
		if err != nil {
			t.Fatalf("DynamicInstructions: %v", err)
		}
		return in
	}
	t.Run("lists and reads", func(t *testing.T) {
		c, read, write, _ := bind(t)
		tree := Tree{
			"README.md":                 {Content: "not a skill\n"},
			"review-go/SKILL.md":        md("review-go", "Reviews Go code.", "Run scripts/vet.sh.\n"),
			"review-go/scripts/vet.sh":  {Content: "#!/bin/sh\ngo vet ./...\n"},
			"review-go/ref/checks.md":   {Content: "# Checks\n"},
			"release-notes/SKILL.md":    md("release-notes", "Writes release notes.", "List the changes.\n"),
			"release-notes/template.md": {Content: "## Changes\n"},
		}
		write(tree)
		in := index(t, c)
		for _, want := range []string{"- release-notes: Writes release notes. (learnt from earlier work)", "- review-go: Reviews Go code. (learnt from earlier work)"} {
			if !strings.Contains(in, want) {
				t.Errorf("the index lacks %q:\n%s", want, in)
			}
		}
		for p, f := range tree {
			name, file, _ := strings.Cut(p, "/")
			if name == "README.md" {
				continue
			}
			want := f.Content
			if file == skills.SkillFile {
				_, _, want, _ = skills.ParseSkillFile(f.Content)
			}
			out, err := read.Call(ctx, `{"name":"`+name+`","path":"`+file+`"}`)
			if err != nil || out != want {
				t.Errorf("read_skill %s %s = %q, %v; want %q", name, file, out, err, want)
			}
		}
	})
	t.Run("lists again at each call", func(t *testing.T) {
		c, _, write, _ := bind(t)
		write(Tree{"triage/SKILL.md": md("triage", "Triages bugs.", "Reproduce first.\n")})
		if in := index(t, c); !strings.Contains(in, "- triage: Triages bugs.") {
			t.Fatalf("the index lacks triage:\n%s", in)
		}
		write(Tree{"deploy-check/SKILL.md": md("deploy-check", "Checks deploys.", "Smoke-test.\n")})
		if in := index(t, c); strings.Contains(in, "triage") || !strings.Contains(in, "- deploy-check: Checks deploys.") {
			t.Fatalf("after the tree changed, the index is:\n%s", in)
		}
		write(Tree{})
		if in := index(t, c); in != "" {
			t.Fatalf("with no learnt skills, the index is:\n%s", in)
		}
	})
	t.Run("versions follow the content", func(t *testing.T) {
		c, read, write, learnt := bind(t)
		versions := func(t *testing.T, tree Tree) map[string]string {
			t.Helper()
			write(tree)
			files, err := learnt.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			out := map[string]string{}
			for _, f := range files {
				out[f.Path] = f.Version
			}
			return out
		}
		first := versions(t, Tree{"triage/SKILL.md": md("triage", "Triages bugs.", "Reproduce first.\n"), "triage/notes.md": {Content: "first\n"}})
		if in := index(t, c); !strings.Contains(in, "- triage: Triages bugs.") {
			t.Fatalf("the index lacks triage:\n%s", in)
		}
		if v := first["triage/notes.md"]; v != "" && v == first["triage/SKILL.md"] {
			t.Errorf("two files of other content list with one version %q", v)
		}
		// Rewritten with as many bytes: SKILL.md's description, the notes.
		second := versions(t, Tree{"triage/SKILL.md": md("triage", "Triages logs.", "Reproduce first.\n"), "triage/notes.md": {Content: "other\n"}})
		for p, v := range second {
			if v != "" && v == first[p] {
				t.Errorf("%s, rewritten, lists with the version it had, %q", p, v)
			}
		}
		if in := index(t, c); !strings.Contains(in, "- triage: Triages logs.") {
			t.Errorf("after SKILL.md changed, the index is:\n%s", in)
		}
		if out, err := read.Call(ctx, `{"name":"triage","path":"notes.md"}`); err != nil || out != "other\n" {
			t.Errorf("read_skill triage notes.md = %q, %v; want the file as it is now", out, err)
		}
	})
}
