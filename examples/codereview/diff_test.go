package codereview

import (
	"context"
	"errors"
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
		{"main", Range{To: "main"}, false},
		{"HEAD~1", Range{To: "HEAD~1"}, false},
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

func TestDiff(t *testing.T) {
	repo := newTestRepo(t)
	tests := []struct {
		name, ref  string
		from, to   plumbing.Hash
		contains   []string
		notContain []string
	}{
		{"single ref against its first parent", "HEAD~1", repo.root, repo.second,
			[]string{"+++ b/auth/login.go", "+\tpassword := \"hunter2\"", "@@ -0,0 +1,6 @@"}, []string{"shop.go"}},
		{"range", "HEAD~2..HEAD~1", repo.root, repo.second, []string{"+++ b/auth/login.go"}, []string{"shop.go"}},
		{"range of two commits", repo.root.String() + ".." + repo.third.String(), repo.root, repo.third,
			[]string{"+++ b/auth/login.go", "+++ b/shop.go", "-func Hello() string { return \"hi\" }"}, nil},
		{"merge-base range", "HEAD~1...HEAD", repo.second, repo.third, []string{"+++ b/shop.go"}, []string{"login.go"}},
		{"root commit adds everything", repo.root.String(), plumbing.ZeroHash, repo.root,
			[]string{"--- /dev/null", "+++ b/shop.go"}, nil},
		{"default is HEAD", "", repo.second, repo.third, []string{"+++ b/shop.go"}, []string{"login.go"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ch, err := Diff(context.Background(), repo.dir, tc.ref)
			if err != nil {
				t.Fatal(err)
			}
			wantFrom := ""
			if !tc.from.IsZero() {
				wantFrom = tc.from.String()
			}
			if ch.From != wantFrom || ch.To != tc.to.String() || ch.Truncated {
				t.Errorf("change %s..%s (truncated %v), want %s..%s", ch.From, ch.To, ch.Truncated, wantFrom, tc.to)
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
		for _, ref := range []string{"nope", "HEAD..nope", "HEAD~9"} {
			if _, err := Diff(context.Background(), repo.dir, ref); !errors.Is(err, ErrBadRange) {
				t.Errorf("Diff(%q) error = %v, want ErrBadRange", ref, err)
			}
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
