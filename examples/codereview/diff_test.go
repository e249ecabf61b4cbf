package codereview

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// testRepo is a repository of three commits on a line: root adds shop.go,
// second adds auth/login.go with a hard-coded password, third edits
// shop.go.
type testRepo struct {
	dir                 string
	root, second, third plumbing.Hash
}

func newTestRepo(t *testing.T) testRepo {
	t.Helper()
	dir := t.TempDir()
	r, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	wt, err := r.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	commit := func(msg string, files map[string]string) plumbing.Hash {
		t.Helper()
		for name, content := range files {
			p := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := wt.Add(name); err != nil {
				t.Fatal(err)
			}
		}
		h, err := wt.Commit(msg, &git.CommitOptions{Author: &object.Signature{Name: "t", Email: "t@example.com", When: time.Unix(1700000000, 0)}})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	return testRepo{
		dir:  dir,
		root: commit("shop", map[string]string{"shop.go": "package shop\n\n// Hello greets.\nfunc Hello() string { return \"hi\" }\n"}),
		second: commit("login", map[string]string{"auth/login.go": "package auth\n\nfunc Login(user string) bool {\n" +
			"\tpassword := \"hunter2\"\n\treturn user == \"admin\" && password != \"\"\n}\n"}),
		third: commit("bye", map[string]string{"shop.go": "package shop\n\n// Hello greets.\nfunc Hello() string { return \"hello\" }\n"}),
	}
}

func TestParseRange(t *testing.T) {
	tests := []struct {
		ref     string
		want    Range
		wantErr bool
	}{
		{"", Range{To: "HEAD"}, false},
		{"HEAD", Range{To: "HEAD"}, false},
		{"main", Range{From: "main", To: "HEAD"}, false},
		{"HEAD~1", Range{From: "HEAD~1", To: "HEAD"}, false},
		{"a..b", Range{From: "a", To: "b", IsRange: true}, false},
		{"a..", Range{From: "a", To: "HEAD", IsRange: true}, false},
		{"..b", Range{From: "HEAD", To: "b", IsRange: true}, false},
		{"a...b", Range{From: "a", To: "b", IsRange: true, MergeBase: true}, false},
		{"a..b..c", Range{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.ref, func(t *testing.T) {
			got, err := ParseRange(tc.ref)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("ParseRange(%q) = %+v, %v; want %+v (error %v)", tc.ref, got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// TestDiff resolves refs as a user means them, in a real repository of
// three commits: a single revision is the change from it to HEAD, HEAD
// the last commit, a range what git means by it; and says how many
// commits the change holds.
func TestDiff(t *testing.T) {
	repo := newTestRepo(t)
	tests := []struct {
		name, ref  string
		from, to   plumbing.Hash
		commits    int
		contains   []string
		notContain []string
	}{
		{"default is the last commit", "", repo.second, repo.third, 1, []string{"+++ b/shop.go"}, []string{"login.go"}},
		{"HEAD is the last commit", "HEAD", repo.second, repo.third, 1, []string{"+++ b/shop.go"}, []string{"login.go"}},
		{"HEAD~1 is the change from it to HEAD: the last commit's", "HEAD~1", repo.second, repo.third, 1,
			[]string{"+++ b/shop.go", "+func Hello() string { return \"hello\" }"}, []string{"login.go"}},
		{"HEAD~2 is the last two commits' change", "HEAD~2", repo.root, repo.third, 2,
			[]string{"+++ b/auth/login.go", "+\tpassword := \"hunter2\"", "+++ b/shop.go"}, nil},
		{"a commit by hash is the change from it to HEAD", repo.root.String(), repo.root, repo.third, 2,
			[]string{"+++ b/auth/login.go", "+++ b/shop.go"}, nil},
		{"HEAD's own commit by hash is the last commit", repo.third.String(), repo.second, repo.third, 1, []string{"+++ b/shop.go"}, []string{"login.go"}},
		{"range", "HEAD~2..HEAD~1", repo.root, repo.second, 1, []string{"+++ b/auth/login.go", "@@ -0,0 +1,6 @@"}, []string{"shop.go"}},
		{"range of two commits", repo.root.String() + ".." + repo.third.String(), repo.root, repo.third, 2,
			[]string{"+++ b/auth/login.go", "+++ b/shop.go", "-func Hello() string { return \"hi\" }"}, nil},
		{"range to HEAD", "HEAD~2..", repo.root, repo.third, 2, []string{"+++ b/auth/login.go", "+++ b/shop.go"}, nil},
		{"merge-base range", "HEAD~1...HEAD", repo.second, repo.third, 1, []string{"+++ b/shop.go"}, []string{"login.go"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ch, err := Diff(context.Background(), repo.dir, tc.ref)
			if err != nil {
				t.Fatal(err)
			}
			if ch.From != tc.from.String() || ch.To != tc.to.String() || ch.Commits != tc.commits || ch.Truncated {
				t.Errorf("change %s..%s, %d commits (truncated %v); want %s..%s, %d commits", ch.From, ch.To, ch.Commits, ch.Truncated, tc.from, tc.to, tc.commits)
			}
			want := fmt.Sprintf("%s..%s (%d commit", tc.from.String()[:7], tc.to.String()[:7], tc.commits)
			if !strings.HasPrefix(ch.Reviewed(), want) {
				t.Errorf("Reviewed() = %q, want %q...", ch.Reviewed(), want)
			}
			for _, s := range tc.contains {
				if !strings.Contains(ch.Patch, s) {
					t.Errorf("patch lacks %q:\n%s", s, ch.Patch)
				}
			}
			for _, s := range tc.notContain {
				if strings.Contains(ch.Patch, s) {
					t.Errorf("patch has %q:\n%s", s, ch.Patch)
				}
			}
		})
	}
	t.Run("bad refs", func(t *testing.T) {
		for _, ref := range []string{"nope", "HEAD..nope", "HEAD~9", "HEAD~1..HEAD..x"} {
			_, err := Diff(context.Background(), repo.dir, ref)
			if !errors.Is(err, ErrBadRange) {
				t.Errorf("Diff(%q) error = %v, want ErrBadRange", ref, err)
			}
		}
		_, err := Diff(context.Background(), repo.dir, "HEAD~9")
		if err == nil || !strings.Contains(err.Error(), `codereview: bad ref: "HEAD~9"`) {
			t.Errorf("Diff(HEAD~9) error = %v, want it to name the ref", err)
		}
	})
	t.Run("not a repository", func(t *testing.T) {
		if _, err := Diff(context.Background(), t.TempDir(), "HEAD"); err == nil {
			t.Error("Diff of a plain directory succeeded")
		}
	})
	t.Run("file URL", func(t *testing.T) {
		ch, err := Diff(context.Background(), "file://"+repo.dir, "HEAD")
		if err != nil || ch.To != repo.third.String() {
			t.Errorf("Diff(file URL) = %+v, %v", ch, err)
		}
	})

	// With HEAD moved back (detached at an older commit), a revision that
	// is not behind HEAD is reviewed from where it left HEAD's history;
	// with HEAD at the root commit, HEAD is that commit, from the start.
	moved := func(t *testing.T, at plumbing.Hash) string {
		t.Helper()
		r := newTestRepo(t)
		g, err := git.PlainOpen(r.dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Storer.SetReference(plumbing.NewHashReference(plumbing.HEAD, at)); err != nil {
			t.Fatal(err)
		}
		return r.dir
	}
	t.Run("a revision ahead of HEAD", func(t *testing.T) {
		ch, err := Diff(context.Background(), moved(t, repo.second), repo.third.String())
		if err != nil || ch.From != repo.second.String() || ch.To != repo.third.String() || ch.Commits != 1 ||
			!strings.Contains(ch.Patch, "+++ b/shop.go") {
			t.Errorf("Diff(a commit ahead of HEAD) = %+v, %v; want %s..%s", ch, err, repo.second, repo.third)
		}
	})
	t.Run("the root commit", func(t *testing.T) {
		ch, err := Diff(context.Background(), moved(t, repo.root), "HEAD")
		if err != nil || ch.From != "" || ch.To != repo.root.String() || ch.Commits != 1 ||
			!strings.Contains(ch.Patch, "--- /dev/null") {
			t.Fatalf("Diff(HEAD at the root) = %+v, %v", ch, err)
		}
		if want := repo.root.String()[:7] + " (1 commit, from the start of the history)"; ch.Reviewed() != want {
			t.Errorf("Reviewed() = %q, want %q", ch.Reviewed(), want)
		}
	})
}

func TestTruncatePatch(t *testing.T) {
	patch := "line one\nline two\nline three\n"
	got, cut := truncatePatch(patch, 15)
	if !cut || !strings.HasPrefix(got, "line one\n[troupe: diff truncated: 9 of 29 bytes shown]") {
		t.Errorf("truncatePatch = %q, %v", got, cut)
	}
	if got, cut := truncatePatch(patch, len(patch)); cut || got != patch {
		t.Errorf("a patch within the bound changed: %q, %v", got, cut)
	}
}

func TestSource(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ in, want string }{
		{"/srv/repo/", "/srv/repo"},
		{"file:///srv/repo", "/srv/repo"},
		{"https://github.com/troupe-dev/troupe", "https://github.com/troupe-dev/troupe"},
		{"git@github.com:troupe-dev/troupe.git", "git@github.com:troupe-dev/troupe.git"},
		{".", wd},
		{"sub/dir", filepath.Join(wd, "sub/dir")},
	}
	for _, tc := range tests {
		if got, err := Source(tc.in); err != nil || got != tc.want {
			t.Errorf("Source(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if _, err := Source(""); err == nil {
		t.Error("Source of nothing succeeded")
	}
}

func TestReviewerWorkspace(t *testing.T) {
	repo := newTestRepo(t)
	rc := agents.RunContext{RunID: "run-" + t.Name(), Vars: map[string]string{VarRepo: repo.dir, VarRef: "HEAD~2..HEAD~1"}}
	m, err := ReviewerWorkspace(context.Background(), rc)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Entries) != 2 {
		t.Fatalf("entries = %+v", m.Entries)
	}
	git, diff := m.Entries[0], m.Entries[1]
	if git.Kind != sandbox.EntryGitRepo || git.Path != RepoDir || git.Source != repo.dir || git.Ref != repo.second.String() {
		t.Errorf("git entry = %+v, want the repository at the end of the range", git)
	}
	if diff.Kind != sandbox.EntryFile || diff.Path != DiffFile || !strings.Contains(diff.Content, "+++ b/auth/login.go") {
		t.Errorf("diff entry = %+v", diff)
	}
	if err := m.Validate(sandbox.Policy{AllowedRoots: []string{repo.dir}}); err != nil {
		t.Errorf("manifest is invalid where the repository is allowed: %v", err)
	}
	if err := m.Validate(sandbox.Policy{}); !errors.Is(err, sandbox.ErrSourceNotAllowed) {
		t.Errorf("manifest validates with no allowed roots: %v", err)
	}
	// The reviewers of one run share one diff.
	again, err := ReviewerWorkspace(context.Background(), rc)
	if err != nil || again.Entries[1].Content != diff.Content {
		t.Errorf("second call: %v", err)
	}
	if _, err := ReviewerWorkspace(context.Background(), agents.RunContext{}); err == nil || !strings.Contains(err.Error(), `"repo" is not set`) {
		t.Errorf("no repo variable: err = %v", err)
	}
	bad := agents.RunContext{RunID: "run-bad", Vars: map[string]string{VarRepo: repo.dir, VarRef: "nope"}}
	if _, err := ReviewerWorkspace(context.Background(), bad); !errors.Is(err, ErrBadRange) {
		t.Errorf("bad ref: err = %v", err)
	}
}

func TestChangeCacheKeepsNoFailure(t *testing.T) {
	c := &changeCache{m: map[string]*cachedChange{}}
	calls := 0
	fail := func() (*Change, error) { calls++; return nil, errors.New("boom") }
	ok := func() (*Change, error) { calls++; return &Change{To: "x"}, nil }
	if _, err := c.get("k", fail); err == nil {
		t.Fatal("want the failure")
	}
	if ch, err := c.get("k", ok); err != nil || ch.To != "x" {
		t.Fatalf("after a failure: %+v, %v", ch, err)
	}
	if ch, _ := c.get("k", fail); ch.To != "x" || calls != 2 {
		t.Errorf("success not kept: %+v after %d calls", ch, calls)
	}
}

func TestCoordinatorInstructions(t *testing.T) {
	repo := newTestRepo(t)
	tests := []struct {
		name    string
		vars    map[string]string
		wantErr string
	}{
		{"local repository", map[string]string{VarRepo: repo.dir, VarRef: "HEAD~1..HEAD"}, ""},
		{"URL is not cloned", map[string]string{VarRepo: "https://example.invalid/repo.git", VarRef: "main"}, ""},
		{"no repo", map[string]string{VarRef: "HEAD"}, `"repo" is not set`},
		{"not a repository", map[string]string{VarRepo: t.TempDir()}, "open repository"},
		{"bad ref", map[string]string{VarRepo: repo.dir, VarRef: "HEAD..nope"}, `"nope"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := coordinatorInstructions(context.Background(), agents.RunContext{Vars: tc.vars})
			if tc.wantErr == "" {
				if err != nil || !strings.Contains(got, "code-review coordinator") || !strings.Contains(got, tc.vars[VarRepo]) {
					t.Errorf("instructions %q, %v", got, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("err = %v, want one mentioning %s", err, tc.wantErr)
			}
		})
	}
}
