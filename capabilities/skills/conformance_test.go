package skills_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/capabilities/skills"
	"github.com/troupe-dev/troupe/capabilities/skills/skillstest"
	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// writeFiles writes tree under dir, with the executable bits it says.
func writeFiles(t *testing.T, dir string, tree skillstest.Tree) {
	t.Helper()
	for p, f := range tree {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if f.Executable {
			mode = 0o755
		}
		if err := os.WriteFile(full, []byte(f.Content), mode); err != nil {
			t.Fatal(err)
		}
	}
}

func TestConformanceDir(t *testing.T) {
	skillstest.Run(t, func(t *testing.T, tree skillstest.Tree) (skills.Source, sandbox.Policy) {
		root := t.TempDir()
		writeFiles(t, filepath.Join(root, "bundle"), tree)
		return skills.Dir(filepath.Join(root, "bundle")), sandbox.Policy{AllowedRoots: []string{root}}
	})
}

func TestConformanceFS(t *testing.T) {
	skillstest.Run(t, func(t *testing.T, tree skillstest.Tree) (skills.Source, sandbox.Policy) {
		m := fstest.MapFS{}
		for p, f := range tree {
			mode := fs.FileMode(0o644)
			if f.Executable {
				mode = 0o755
			}
			m["skills/"+p] = &fstest.MapFile{Data: []byte(f.Content), Mode: mode}
		}
		if len(m) == 0 {
			m["skills"] = &fstest.MapFile{Mode: fs.ModeDir | 0o755}
		}
		return skills.FS{FS: m, Dir: "skills"}, sandbox.Policy{}
	})
}

func TestConformanceGit(t *testing.T) {
	skillstest.Run(t, func(t *testing.T, tree skillstest.Tree) (skills.Source, sandbox.Policy) {
		root := t.TempDir()
		writeFiles(t, filepath.Join(root, "skills"), tree)
		writeFiles(t, root, skillstest.Tree{"README.md": {Content: "a repository\n"}})
		repo, err := git.PlainInit(root, false)
		if err != nil {
			t.Fatal(err)
		}
		wt, err := repo.Worktree()
		if err != nil {
			t.Fatal(err)
		}
		if err := wt.AddGlob("."); err != nil {
			t.Fatal(err)
		}
		if _, err := wt.Commit("skills", &git.CommitOptions{Author: &object.Signature{Name: "t", Email: "t@example.com", When: time.Unix(1_700_000_000, 0)}}); err != nil {
			t.Fatal(err)
		}
		return skills.Git{URL: root, Subpath: "skills"}, sandbox.Policy{AllowedRoots: []string{root}}
	})
}

func TestConformanceLearnt(t *testing.T) {
	skillstest.RunLearnt(t, func(t *testing.T, _ agents.RunContext) (skills.Learnt, func(skillstest.Tree)) {
		l := &learntTree{}
		return l, func(tree skillstest.Tree) {
			files := map[string]string{}
			for p, f := range tree {
				files[p] = f.Content
			}
			l.set(files)
		}
	})
}
