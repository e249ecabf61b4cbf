// Package skillstest is the conformance suite of skills.Source for
// sources that read a tree of folders (skills.Dir, skills.FS, skills.Git
// and yours). A source's test calls Run with a func that makes a source
// holding a given tree:
//
//	skillstest.Run(t, func(t *testing.T, tree skillstest.Tree) (skills.Source, sandbox.Policy) {
//		root := t.TempDir()
//		// write tree under root
//		return skills.Dir(root), sandbox.Policy{AllowedRoots: []string{root}}
//	})
//
// The suite checks what every such source must do: find each top folder
// that holds a SKILL.md and leave the rest alone; read every file of a
// skill with its executable bit; and refuse, with an *skills.Error that
// wraps the right sentinel, the skills that break the rules.
//
// RunLearnt is the conformance suite of skills.Learnt, the lister of an
// agent's learnt skills (the worker's lists its memory scope).
package skillstest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/capabilities/skills"
	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// Tree is a tree of files by slash path from its root. A File's Path is
// ignored (the key is its path); Executable marks a script.
type Tree map[string]skills.File

// Maker makes a source that holds exactly tree, and the policy under
// which it may be loaded.
type Maker func(t *testing.T, tree Tree) (skills.Source, sandbox.Policy)

// SkillFile renders a SKILL.md with name, description and body.
func SkillFile(name, description, body string) string {
	return "---\nname: " + name + "\ndescription: " + description + "\n---\n" + body
}

func md(name, description, body string) skills.File {
	return skills.File{Content: SkillFile(name, description, body)}
}

// Run runs the suite against the sources that make makes.
func Run(t *testing.T, make Maker) {
	t.Run("finds skills", func(t *testing.T) {
		src, policy := make(t, Tree{
			"README.md":                 {Content: "not a skill\n"},
			"notes/todo.txt":            {Content: "not a skill either\n"},
			"review-go/SKILL.md":        md("review-go", "Reviews Go code.", "Run scripts/vet.sh.\n"),
			"review-go/scripts/vet.sh":  {Content: "go vet ./...\n", Executable: true},
			"review-go/ref/checks.md":   {Content: "# Checks\n"},
			"release-notes/SKILL.md":    md("release-notes", "Writes release notes.", "List the changes.\n"),
			"release-notes/template.md": {Content: "## Changes\n"},
		})
		got, err := src.Load(context.Background(), skills.LoadOptions{Policy: policy})
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		slices.SortFunc(got, func(a, b skills.Skill) int { return strings.Compare(a.Name, b.Name) })
		if len(got) != 2 || got[0].Name != "release-notes" || got[1].Name != "review-go" {
			t.Fatalf("Load found %d skills (%v), want release-notes and review-go", len(got), names(got))
		}
		rg := got[1]
		if rg.Description != "Reviews Go code." || rg.Instructions != "Run scripts/vet.sh.\n" {
			t.Errorf("review-go: description %q, instructions %q", rg.Description, rg.Instructions)
		}
		var files []string
		for _, f := range rg.Files {
			files = append(files, f.Path)
			if exec := f.Path == "scripts/vet.sh"; f.Executable != exec {
				t.Errorf("review-go's %s: executable %v, want %v", f.Path, f.Executable, exec)
			}
		}
		if strings.Join(files, " ") != "SKILL.md ref/checks.md scripts/vet.sh" {
			t.Errorf("review-go's files = %v, want SKILL.md ref/checks.md scripts/vet.sh, sorted", files)
		}
		for _, s := range got {
			if err := s.Validate(skills.Limits{}); err != nil {
				t.Errorf("a loaded skill does not validate: %v", err)
			}
		}
	})
	t.Run("no skills", func(t *testing.T) {
		src, policy := make(t, Tree{"docs/README.md": {Content: "hi\n"}})
		got, err := src.Load(context.Background(), skills.LoadOptions{Policy: policy})
		if err != nil || len(got) != 0 {
			t.Fatalf("Load = %v, %v; want no skills and no error", names(got), err)
		}
	})
	bad := []struct {
		name  string
		tree  Tree
		lim   skills.Limits
		want  error
		skill string
	}{
		{name: "invalid name", tree: Tree{"Bad_Name/SKILL.md": md("Bad_Name", "d", "")}, want: skills.ErrInvalidName, skill: "Bad_Name"},
		{name: "name not its folder", tree: Tree{"one/SKILL.md": md("two", "d", "")}, want: skills.ErrInvalidName, skill: "one"},
		{name: "no frontmatter", tree: Tree{"x/SKILL.md": {Content: "# x\n"}}, want: skills.ErrFrontmatter, skill: "x"},
		{name: "no description", tree: Tree{"x/SKILL.md": {Content: "---\nname: x\n---\n"}}, want: skills.ErrDescription, skill: "x"},
		{name: "file too large", tree: Tree{"x/SKILL.md": md("x", "d", ""), "x/big": {Content: strings.Repeat("b", 64)}},
			lim: skills.Limits{MaxFileBytes: 63}, want: skills.ErrTooLarge, skill: "x"},
		{name: "too many files", tree: Tree{"x/SKILL.md": md("x", "d", ""), "x/a": {Content: "a"}, "x/b": {Content: "b"}},
			lim: skills.Limits{MaxFiles: 2}, want: skills.ErrTooLarge, skill: "x"},
		{name: "too many skills", tree: Tree{"x/SKILL.md": md("x", "d", ""), "y/SKILL.md": md("y", "d", "")},
			lim: skills.Limits{MaxSkills: 1}, want: skills.ErrTooLarge},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			src, policy := make(t, tc.tree)
			got, err := src.Load(context.Background(), skills.LoadOptions{Policy: policy, Limits: tc.lim})
			if !errors.Is(err, tc.want) {
				t.Fatalf("Load = %v, %v; want an error wrapping %v", names(got), err, tc.want)
			}
			var se *skills.Error
			if !errors.As(err, &se) || se.Source == "" || se.Skill != tc.skill {
				t.Errorf("Load's error %v is not an *skills.Error naming the source and skill %q", err, tc.skill)
			}
		})
	}
}

func names(all []skills.Skill) []string {
	var out []string
	for _, s := range all {
		out = append(out, s.Name)
	}
	return out
}
