package skills_test

// Tests of the skills capability against real parts: host directories in
// t.TempDir, git repositories made with go-git, and local sandboxes.

import (
	"context"
	"errors"
	"fmt"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/capabilities/skills"
	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/local"
)

// skillMD renders a SKILL.md.
func skillMD(name, description, body string) string {
	return "---\nname: " + name + "\ndescription: " + description + "\n---\n" + body
}

// writeTree writes files (slash paths) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(p, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(full, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
}

func TestValidation(t *testing.T) {
	long := strings.Repeat("a", 65)
	cases := []struct {
		name  string
		files map[string]string
		link  [2]string // a symlink to make: path, target
		lim   skills.Limits
		want  error
	}{
		{name: "valid", files: map[string]string{"review-go/SKILL.md": skillMD("review-go", "Reviews Go code.", "Run go vet.\n")}},
		{name: "upper-case name", files: map[string]string{"Review/SKILL.md": skillMD("Review", "d", "")}, want: skills.ErrInvalidName},
		{name: "leading dash", files: map[string]string{"-x/SKILL.md": skillMD("-x", "d", "")}, want: skills.ErrInvalidName},
		{name: "name too long", files: map[string]string{long + "/SKILL.md": skillMD(long, "d", "")}, want: skills.ErrInvalidName},
		{name: "name not its folder", files: map[string]string{"review/SKILL.md": skillMD("review-go", "d", "")}, want: skills.ErrInvalidName},
		{name: "no frontmatter", files: map[string]string{"x/SKILL.md": "# Review\nDo it.\n"}, want: skills.ErrFrontmatter},
		{name: "unclosed frontmatter", files: map[string]string{"x/SKILL.md": "---\nname: x\ndescription: d\n"}, want: skills.ErrFrontmatter},
		{name: "bad yaml", files: map[string]string{"x/SKILL.md": "---\nname: [x\n---\n"}, want: skills.ErrFrontmatter},
		{name: "no description", files: map[string]string{"x/SKILL.md": "---\nname: x\n---\nbody"}, want: skills.ErrDescription},
		{name: "description too long", files: map[string]string{"x/SKILL.md": skillMD("x", strings.Repeat("d", skills.MaxDescription+1), "")}, want: skills.ErrDescription},
		{name: "file too big", files: map[string]string{"x/SKILL.md": skillMD("x", "d", ""), "x/big.txt": strings.Repeat("b", 101)},
			lim: skills.Limits{MaxFileBytes: 100}, want: skills.ErrTooLarge},
		{name: "skill too big", files: map[string]string{"x/SKILL.md": skillMD("x", "d", ""), "x/a.txt": strings.Repeat("b", 80), "x/b.txt": strings.Repeat("b", 80)},
			lim: skills.Limits{MaxSkillBytes: 150}, want: skills.ErrTooLarge},
		{name: "too many files", files: map[string]string{"x/SKILL.md": skillMD("x", "d", ""), "x/a": "a", "x/b": "b"},
			lim: skills.Limits{MaxFiles: 2}, want: skills.ErrTooLarge},
		{name: "symlink out", files: map[string]string{"x/SKILL.md": skillMD("x", "d", "")}, link: [2]string{"x/passwd", "/etc/passwd"}, want: skills.ErrSymlink},
		{name: "symlink within", files: map[string]string{"x/SKILL.md": skillMD("x", "d", ""), "x/a": "a"}, link: [2]string{"x/b", "a"}, want: skills.ErrSymlink},
		{name: "a folder without SKILL.md is left alone", files: map[string]string{"x/SKILL.md": skillMD("x", "d", ""), "notes/README": "hi"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			writeTree(t, root, tc.files)
			if tc.link[0] != "" {
				if err := os.Symlink(tc.link[1], filepath.Join(root, tc.link[0])); err != nil {
					t.Fatal(err)
				}
			}
			_, err := skills.New(context.Background(), skills.Config{
				Sources: []skills.Source{skills.Dir(root)},
				Policy:  sandbox.Policy{AllowedRoots: []string{root}},
				Limits:  tc.lim,
			})
			if tc.want == nil {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("New = %v, want an error wrapping %v", err, tc.want)
			}
			var se *skills.Error
			if !errors.As(err, &se) || se.Source == "" {
				t.Errorf("error %v is not an *Error naming its source", err)
			}
		})
	}
}

func TestInline(t *testing.T) {
	cases := []struct {
		name  string
		skill skills.Skill
		want  error
	}{
		{name: "fields", skill: skills.Skill{Name: "greet", Description: "Greets people.", Instructions: "Say hello.\n",
			Files: []skills.File{{Path: "scripts/hi.sh", Content: "echo hi\n", Executable: true}}}},
		{name: "own SKILL.md", skill: skills.Skill{Files: []skills.File{{Path: "SKILL.md", Content: skillMD("greet", "Greets people.", "Say hello.\n")}}}},
		{name: "path escape", skill: skills.Skill{Name: "greet", Description: "d", Files: []skills.File{{Path: "../evil", Content: "x"}}}, want: sandbox.ErrPathEscape},
		{name: "absolute path", skill: skills.Skill{Name: "greet", Description: "d", Files: []skills.File{{Path: "/etc/x", Content: "x"}}}, want: sandbox.ErrPathEscape},
		{name: "unclean path", skill: skills.Skill{Name: "greet", Description: "d", Files: []skills.File{{Path: "a/./b", Content: "x"}}}, want: sandbox.ErrPathEscape},
		{name: "bad name", skill: skills.Skill{Name: "Greet!", Description: "d"}, want: skills.ErrInvalidName},
		{name: "no description", skill: skills.Skill{Name: "greet"}, want: skills.ErrDescription},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := skills.New(context.Background(), skills.Config{Sources: []skills.Source{skills.Inline{tc.skill}}})
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("New = %v, want an error wrapping %v", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := c.Skills()
			if len(got) != 1 || got[0].Name != "greet" || got[0].Description != "Greets people." || got[0].Instructions != "Say hello.\n" {
				t.Fatalf("skills = %+v", got)
			}
		})
	}
}

func TestDuplicates(t *testing.T) {
	a := skills.Inline{{Name: "greet", Description: "one"}}
	b := skills.Inline{{Name: "greet", Description: "two"}}
	if _, err := skills.New(context.Background(), skills.Config{Sources: []skills.Source{a, b}}); !errors.Is(err, skills.ErrDuplicate) {
		t.Fatalf("New with one name twice = %v, want ErrDuplicate", err)
	}
	c1, err := skills.New(context.Background(), skills.Config{Sources: []skills.Source{a}, Mode: skills.Text})
	if err != nil {
		t.Fatal(err)
	}
	c2, err := skills.New(context.Background(), skills.Config{Sources: []skills.Source{b}, Mode: skills.Eager})
	if err != nil {
		t.Fatal(err)
	}
	agent := &agents.Agent{Name: "a", Capabilities: []agents.Capability{c1, c2}}
	if err := skills.CheckAgent(agent); !errors.Is(err, skills.ErrDuplicate) {
		t.Fatalf("CheckAgent = %v, want ErrDuplicate", err)
	}
	agent.Capabilities = agent.Capabilities[:1]
	if err := skills.CheckAgent(agent); err != nil {
		t.Fatalf("CheckAgent with one capability = %v", err)
	}
}

func TestDirPolicy(t *testing.T) {
	allowed, other := t.TempDir(), t.TempDir()
	writeTree(t, other, map[string]string{"x/SKILL.md": skillMD("x", "d", "")})
	_, err := skills.New(context.Background(), skills.Config{
		Sources: []skills.Source{skills.Dir(other)},
		Policy:  sandbox.Policy{AllowedRoots: []string{allowed}},
	})
	if !errors.Is(err, sandbox.ErrSourceNotAllowed) {
		t.Fatalf("a directory outside the roots = %v, want ErrSourceNotAllowed", err)
	}
	// A symlink inside the roots that leads out does not widen them.
	if err := os.Symlink(other, filepath.Join(allowed, "link")); err != nil {
		t.Fatal(err)
	}
	_, err = skills.New(context.Background(), skills.Config{
		Sources: []skills.Source{skills.Dir(filepath.Join(allowed, "link"))},
		Policy:  sandbox.Policy{AllowedRoots: []string{allowed}},
	})
	if !errors.Is(err, sandbox.ErrSourceNotAllowed) {
		t.Fatalf("a link out of the roots = %v, want ErrSourceNotAllowed", err)
	}
	// A directory that is itself a skill.
	writeTree(t, allowed, map[string]string{"review-go/SKILL.md": skillMD("review-go", "Reviews Go.", "Run go vet.\n"), "review-go/scripts/vet.sh": "go vet ./...\n"})
	c, err := skills.New(context.Background(), skills.Config{
		Sources: []skills.Source{skills.Dir(filepath.Join(allowed, "review-go"))},
		Policy:  sandbox.Policy{AllowedRoots: []string{allowed}},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := c.Skills()
	if len(got) != 1 || len(got[0].Files) != 2 || got[0].Files[1].Path != "scripts/vet.sh" || !got[0].Files[1].Executable {
		t.Fatalf("skills = %+v", got)
	}
}

// gitRepo makes a repository at dir with go-git: commit 1, tagged v1,
// holds skills/review-go; commit 2 on the branch adds skills/review-sec
// and changes review-go's description.
func gitRepo(t *testing.T, dir string) {
	t.Helper()
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	sig := &object.Signature{Name: "t", Email: "t@example.com", When: time.Unix(1_700_000_000, 0)}
	commit := func(files map[string]string) {
		writeTree(t, dir, files)
		if err := wt.AddGlob("."); err != nil {
			t.Fatal(err)
		}
		if _, err := wt.Commit("c", &git.CommitOptions{Author: sig}); err != nil {
			t.Fatal(err)
		}
	}
	commit(map[string]string{
		"README.md":                       "not a skill\n",
		"skills/review-go/SKILL.md":       skillMD("review-go", "Reviews Go code (v1).", "Run go vet.\n"),
		"skills/review-go/scripts/vet.sh": "go vet ./...\n",
	})
	head, err := repo.Head()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := repo.CreateTag("v1", head.Hash(), nil); err != nil {
		t.Fatal(err)
	}
	commit(map[string]string{
		"skills/review-go/SKILL.md":  skillMD("review-go", "Reviews Go code (v2).", "Run go vet and staticcheck.\n"),
		"skills/review-sec/SKILL.md": skillMD("review-sec", "Reviews for security.", "Look for injections.\n"),
	})
}

func TestGit(t *testing.T) {
	root := t.TempDir()
	repo := filepath.Join(root, "repo")
	gitRepo(t, repo)
	policy := sandbox.Policy{AllowedRoots: []string{root}}
	cases := []struct {
		name  string
		src   skills.Git
		want  []string // name: description
		error error
	}{
		{name: "head", src: skills.Git{URL: repo, Subpath: "skills"}, want: []string{"review-go: Reviews Go code (v2).", "review-sec: Reviews for security."}},
		{name: "tag", src: skills.Git{URL: repo, Ref: "v1", Subpath: "skills"}, want: []string{"review-go: Reviews Go code (v1)."}},
		{name: "file URL and one skill", src: skills.Git{URL: "file://" + repo, Ref: "v1", Subpath: "skills/review-go"}, want: []string{"review-go: Reviews Go code (v1)."}},
		{name: "root has no skills", src: skills.Git{URL: repo}},
		{name: "unknown ref", src: skills.Git{URL: repo, Ref: "nope"}, error: errors.New("ref")},
		{name: "subpath escape", src: skills.Git{URL: repo, Subpath: "../x"}, error: sandbox.ErrPathEscape},
		{name: "outside the roots", src: skills.Git{URL: t.TempDir()}, error: sandbox.ErrSourceNotAllowed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := skills.New(context.Background(), skills.Config{Sources: []skills.Source{tc.src}, Policy: policy})
			if tc.error != nil {
				if err == nil || !errors.Is(err, tc.error) && !strings.Contains(err.Error(), tc.error.Error()) {
					t.Fatalf("New = %v, want %v", err, tc.error)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range c.Skills() {
				got = append(got, s.Name+": "+s.Description)
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("skills = %q, want %q", got, tc.want)
			}
		})
	}
}

// A symlink committed to a repository's skill is rejected.
func TestGitSymlink(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{"x/SKILL.md": skillMD("x", "d", "")})
	if err := os.Symlink("/etc/passwd", filepath.Join(root, "x", "passwd")); err != nil {
		t.Fatal(err)
	}
	repo, err := git.PlainInit(root, false)
	if err != nil {
		t.Fatal(err)
	}
	wt, _ := repo.Worktree()
	if err := wt.AddGlob("."); err != nil {
		t.Fatal(err)
	}
	if _, err := wt.Commit("c", &git.CommitOptions{Author: &object.Signature{Name: "t", Email: "t@e", When: time.Unix(1, 0)}}); err != nil {
		t.Fatal(err)
	}
	_, err = skills.New(context.Background(), skills.Config{Sources: []skills.Source{skills.Git{URL: root}}, Policy: sandbox.Policy{AllowedRoots: []string{root}}})
	if !errors.Is(err, skills.ErrSymlink) {
		t.Fatalf("New = %v, want ErrSymlink", err)
	}
}

var bundle = skills.Inline{
	{Name: "review-go", Description: "Reviews Go code.", Instructions: "Run scripts/vet.sh and report.\n",
		Files: []skills.File{{Path: "scripts/vet.sh", Content: "echo vetted\n", Executable: true}}},
	{Name: "release-notes", Description: "Writes release notes.", Instructions: "List the changes.\n"},
}

// newSession provisions a local sandbox from m, as the worker does, and
// returns a tool call's context.
func newSession(t *testing.T, m sandbox.Manifest) (context.Context, sandbox.Session) {
	t.Helper()
	c, err := local.New(local.Config{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Create(context.Background(), sandbox.Spec{ID: strings.ReplaceAll(t.Name(), "/", "-"), Manifest: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	return sandbox.WithSession(context.Background(), s), s
}

func tool(t *testing.T, c agents.Capability, name string) *agents.FunctionTool {
	t.Helper()
	for _, tl := range c.Tools() {
		if ft, ok := tl.(*agents.FunctionTool); ok && ft.Spec().Name == name {
			return ft
		}
	}
	t.Fatalf("no tool %s", name)
	return nil
}

func TestEager(t *testing.T) {
	c, err := skills.New(context.Background(), skills.Config{Sources: []skills.Source{bundle}, Mode: skills.Eager})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Tools()) != 0 {
		t.Fatalf("eager tools = %d, want none", len(c.Tools()))
	}
	ctx, s := newSession(t, c.Manifest())
	md, err := s.ReadFile(ctx, ".agents/skills/review-go/SKILL.md")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, body, err := skills.ParseSkillFile(string(md)); err != nil || body != "Run scripts/vet.sh and report.\n" {
		t.Fatalf("SKILL.md = %q (%v)", md, err)
	}
	res, err := s.Exec(ctx, sandbox.ExecRequest{Cmd: ".agents/skills/review-go/scripts/vet.sh && ls .agents/skills"})
	if err != nil || res.ExitCode != 0 || res.Output != "vetted\nrelease-notes\nreview-go\n" {
		t.Fatalf("exec = %+v, %v", res, err)
	}
	// An eager skills capability needs a sandbox agent.
	if _, err := agents.NewGraph("g", "a", &agents.Agent{Name: "a", Capabilities: []agents.Capability{c}}); err == nil {
		t.Fatal("a plain agent with eager skills was accepted")
	}
}

func TestLoadSkill(t *testing.T) {
	c, err := skills.New(context.Background(), skills.Config{Sources: []skills.Source{bundle}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Mode() != skills.Lazy || len(c.Manifest().Entries) != 0 {
		t.Fatalf("default mode %s with %d manifest entries, want lazy with none", c.Mode(), len(c.Manifest().Entries))
	}
	load := tool(t, c, "load_skill")
	if !load.NeedsSandbox() {
		t.Fatal("load_skill does not run in the sandbox")
	}
	ctx, s := newSession(t, sandbox.Manifest{})
	if _, err := s.ReadFile(ctx, ".agents/skills/review-go/SKILL.md"); err == nil {
		t.Fatal("a lazy skill is in the workspace before it is loaded")
	}
	cases := []struct {
		args, want string
		fails      bool
	}{
		{args: `{"name":"review-go"}`, want: "Skill review-go is loaded in .agents/skills/review-go/ (files: SKILL.md, scripts/vet.sh). Its instructions (SKILL.md):\n\nRun scripts/vet.sh and report.\n"},
		{args: `{"name":"$release-notes"}`, want: "List the changes."},
		{args: `{"name":"nope"}`, want: "unknown skill \"nope\"; the skills are: review-go, release-notes", fails: true},
	}
	for _, tc := range cases {
		out, err := load.Call(ctx, tc.args)
		if tc.fails {
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, skills.ErrUnknown) {
				t.Errorf("load_skill %s = %q, %v; want an error with %q", tc.args, out, err, tc.want)
			}
			continue
		}
		if err != nil || !strings.Contains(out, tc.want) {
			t.Errorf("load_skill %s = %q, %v; want %q", tc.args, out, err, tc.want)
		}
	}
	res, err := s.Exec(ctx, sandbox.ExecRequest{Cmd: ".agents/skills/review-go/scripts/vet.sh && cat .agents/skills/release-notes/SKILL.md"})
	if err != nil || res.ExitCode != 0 || !strings.HasPrefix(res.Output, "vetted\n---\nname: release-notes\n") {
		t.Fatalf("after load_skill: %+v, %v", res, err)
	}
	if _, err := load.Call(context.Background(), `{"name":"review-go"}`); err == nil {
		t.Fatal("load_skill without a session succeeded")
	}
}

func TestReadSkillPlainAgent(t *testing.T) {
	c, err := skills.New(context.Background(), skills.Config{Sources: []skills.Source{bundle}, Mode: skills.Text})
	if err != nil {
		t.Fatal(err)
	}
	read := tool(t, c, "read_skill")
	if read.NeedsSandbox() || !read.RunsAsActivity() {
		t.Fatal("read_skill must be a plain activity tool")
	}
	// A plain agent takes it.
	if _, err := agents.NewGraph("g", "a", &agents.Agent{Name: "a", Capabilities: []agents.Capability{c}}); err != nil {
		t.Fatalf("plain agent with text skills: %v", err)
	}
	cases := []struct {
		args, want string
		fails      bool
	}{
		{args: `{"name":"review-go"}`, want: "Run scripts/vet.sh and report.\n"},
		{args: `{"name":"review-go","path":null}`, want: "Run scripts/vet.sh and report.\n"},
		{args: `{"name":"review-go","path":"scripts/vet.sh"}`, want: "echo vetted\n"},
		{args: `{"name":"review-go","path":"missing"}`, want: "has no file \"missing\"; its files are: SKILL.md, scripts/vet.sh", fails: true},
		{args: `{"name":"review-go","path":"../release-notes/SKILL.md"}`, want: "path escapes", fails: true},
		{args: `{"name":"nope"}`, want: "unknown skill", fails: true},
	}
	for _, tc := range cases {
		out, err := read.Call(context.Background(), tc.args)
		if tc.fails {
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("read_skill %s = %q, %v; want an error with %q", tc.args, out, err, tc.want)
			}
			continue
		}
		if err != nil || out != tc.want {
			t.Errorf("read_skill %s = %q, %v; want %q", tc.args, out, err, tc.want)
		}
	}
}

func TestInstructions(t *testing.T) {
	for _, mode := range []skills.Mode{skills.Eager, skills.Lazy, skills.Text} {
		t.Run(string(mode), func(t *testing.T) {
			c, err := skills.New(context.Background(), skills.Config{Sources: []skills.Source{bundle}, Mode: mode})
			if err != nil {
				t.Fatal(err)
			}
			in := c.Instructions()
			want := []string{"- review-go: Reviews Go code.", "- release-notes: Writes release notes.", "`$name`", "`$review-go`"}
			switch mode {
			case skills.Lazy:
				want = append(want, "(file: .agents/skills/review-go/SKILL.md)", "`load_skill`")
			case skills.Eager:
				want = append(want, "(file: .agents/skills/review-go/SKILL.md)", "read its SKILL.md")
			case skills.Text:
				want = append(want, "`read_skill`")
			}
			for _, w := range want {
				if !strings.Contains(in, w) {
					t.Errorf("instructions lack %q:\n%s", w, in)
				}
			}
			if strings.Contains(in, "Run scripts/vet.sh") {
				t.Error("the instructions hold a skill's body, not only the index")
			}
		})
	}
	c, err := skills.New(context.Background(), skills.Config{})
	if err != nil || c.Instructions() != "" {
		t.Fatalf("no skills: %q, %v", c.Instructions(), err)
	}
	if _, err := skills.New(context.Background(), skills.Config{Mode: "sometimes"}); err == nil {
		t.Fatal("an unknown mode was accepted")
	}
}

// read_skill and load_skill bound what they return; a binary file is
// described, not shown.
func TestReadBounded(t *testing.T) {
	big := strings.Repeat("é", skills.MaxReadBytes) // two bytes a character
	c, err := skills.New(context.Background(), skills.Config{Mode: skills.Text, Sources: []skills.Source{skills.Inline{{
		Name: "big", Description: "d", Instructions: big,
		Files: []skills.File{{Path: "ref.txt", Content: big}, {Path: "logo.png", Content: "\x89PNG\r\n\x1a\n\x00\x00"}},
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	read := tool(t, c, "read_skill")
	for _, args := range []string{`{"name":"big"}`, `{"name":"big","path":"ref.txt"}`} {
		out, err := read.Call(context.Background(), args)
		if err != nil {
			t.Fatal(err)
		}
		body, note, ok := strings.Cut(out, "\n\n[cut: ")
		if !ok || len(body) > skills.MaxReadBytes || !utf8.ValidString(body) || !strings.HasPrefix(note, fmt.Sprintf("%d bytes in all", len(big))) {
			t.Errorf("read_skill %s: %d bytes, note %q", args, len(out), note)
		}
	}
	out, err := read.Call(context.Background(), `{"name":"big","path":"logo.png"}`)
	if err != nil || !strings.Contains(out, "is a binary file of 10 bytes") {
		t.Errorf("read_skill of a binary file = %q, %v", out, err)
	}
}

// TestGitRemote clones over HTTP from git's own http-backend on a local
// test server, so the remote path (a bare clone into a temporary
// directory) runs offline; a remote needs no allowed root.
func TestGitRemote(t *testing.T) {
	backend := "/usr/lib/git-core/git-http-backend"
	if _, err := os.Stat(backend); err != nil {
		t.Fatalf("%s: %v (make setup installs git)", backend, err)
	}
	src := t.TempDir()
	gitRepo(t, filepath.Join(src, "repo"))
	srv := httptest.NewServer(&cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + src, "GIT_HTTP_EXPORT_ALL=1"}})
	defer srv.Close()
	url := srv.URL + "/repo/.git"
	cases := []struct {
		src  skills.Git
		want string
	}{
		{skills.Git{URL: url, Subpath: "skills"}, "review-go: Reviews Go code (v2).|review-sec: Reviews for security."},
		{skills.Git{URL: url, Ref: "v1", Subpath: "skills/review-go"}, "review-go: Reviews Go code (v1)."},
		{skills.Git{URL: url, Ref: "master", Subpath: "skills", Depth: 1}, "review-go: Reviews Go code (v2).|review-sec: Reviews for security."},
	}
	for _, tc := range cases {
		c, err := skills.New(context.Background(), skills.Config{Sources: []skills.Source{tc.src}})
		if err != nil {
			t.Errorf("%+v: %v", tc.src, err)
			continue
		}
		var got []string
		for _, s := range c.Skills() {
			got = append(got, s.Name+": "+s.Description)
		}
		if strings.Join(got, "|") != tc.want {
			t.Errorf("%+v: skills %q, want %q", tc.src, got, tc.want)
		}
	}
}
