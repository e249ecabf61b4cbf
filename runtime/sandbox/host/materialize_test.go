package host_test

import (
	"context"
	"errors"
	"io/fs"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/host"
)

// testRepo is a repository made with go-git: on main, commit 1 (tagged
// v1, annotated tag v1-annotated) then commit 2; branch feature from
// commit 1 with commit 3.
type testRepo struct {
	dir                  string
	first, second, third string
}

func makeRepo(t *testing.T, dir string) testRepo {
	t.Helper()
	repo, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")},
	})
	must(t, err)
	wt, err := repo.Worktree()
	must(t, err)
	sig := &object.Signature{Name: "t", Email: "t@example.com", When: time.Unix(1700000000, 0)}
	commit := func(content string, extra ...string) plumbing.Hash {
		must(t, os.WriteFile(filepath.Join(dir, "version.txt"), []byte(content), 0o644))
		for _, f := range append(extra, "version.txt") {
			_, err := wt.Add(f)
			must(t, err)
		}
		h, err := wt.Commit(content, &git.CommitOptions{Author: sig, Committer: sig})
		must(t, err)
		return h
	}
	must(t, os.MkdirAll(filepath.Join(dir, "bin"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "bin/tool"), []byte("#!/bin/sh\n"), 0o755))
	must(t, os.Symlink("../version.txt", filepath.Join(dir, "bin/version")))
	first := commit("1", "bin/tool", "bin/version")
	_, err = repo.CreateTag("v1", first, nil)
	must(t, err)
	_, err = repo.CreateTag("v1-annotated", first, &git.CreateTagOptions{Tagger: sig, Message: "v1"})
	must(t, err)
	second := commit("2")
	must(t, wt.Checkout(&git.CheckoutOptions{Hash: first, Branch: plumbing.NewBranchReferenceName("feature"), Create: true}))
	third := commit("3")
	must(t, wt.Checkout(&git.CheckoutOptions{Branch: plumbing.NewBranchReferenceName("main")}))
	return testRepo{dir: dir, first: first.String(), second: second.String(), third: third.String()}
}

func readWS(t *testing.T, dir, p string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, p))
	if err != nil {
		t.Fatalf("read %s: %v", p, err)
	}
	return string(b)
}

func TestMaterializeGitLocal(t *testing.T) {
	src := t.TempDir()
	r := makeRepo(t, filepath.Join(src, "repo"))
	p := sandbox.Policy{AllowedRoots: []string{src}}
	for ref, want := range map[string]string{
		"":             "2",
		"main":         "2",
		"v1":           "1",
		"v1-annotated": "1",
		"feature":      "3",
		r.first:        "1",
		r.third[:8]:    "3",
		"main~1":       "1",
	} {
		dir := t.TempDir()
		m := sandbox.Manifest{Entries: []sandbox.Entry{{Kind: sandbox.EntryGitRepo, Path: "r", Source: r.dir, Ref: ref}}}
		if err := host.Materialize(context.Background(), m, dir, p); err != nil {
			t.Errorf("ref %q: %v", ref, err)
			continue
		}
		if got := readWS(t, dir, "r/version.txt"); got != want {
			t.Errorf("ref %q: version %q, want %q", ref, got, want)
		}
		if fi, err := os.Stat(filepath.Join(dir, "r/bin/tool")); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("ref %q: bin/tool: %v, %v; want mode 0755", ref, fi, err)
		}
		if target, err := os.Readlink(filepath.Join(dir, "r/bin/version")); err != nil || target != "../version.txt" {
			t.Errorf("ref %q: symlink bin/version -> %q, %v", ref, target, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "r/.git")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("ref %q: .git was copied", ref)
		}
	}
	m := sandbox.Manifest{Entries: []sandbox.Entry{{Kind: sandbox.EntryGitRepo, Path: "r", Source: r.dir, Ref: "no-such-ref"}}}
	if err := host.Materialize(context.Background(), m, t.TempDir(), p); err == nil {
		t.Errorf("a missing ref materialised")
	}
}

func TestMaterializeGitSymlinkOut(t *testing.T) {
	src := t.TempDir()
	dir := filepath.Join(src, "repo")
	repo, err := git.PlainInit(dir, false)
	must(t, err)
	wt, err := repo.Worktree()
	must(t, err)
	must(t, os.Symlink("/etc/passwd", filepath.Join(dir, "passwd")))
	_, err = wt.Add("passwd")
	must(t, err)
	sig := &object.Signature{Name: "t", Email: "t@example.com", When: time.Now()}
	_, err = wt.Commit("evil", &git.CommitOptions{Author: sig, Committer: sig})
	must(t, err)

	ws := t.TempDir()
	m := sandbox.Manifest{Entries: []sandbox.Entry{
		{Kind: sandbox.EntryFile, Path: "first.txt", Content: "written only if all is well"},
		{Kind: sandbox.EntryGitRepo, Path: "r", Source: dir},
	}}
	err = host.Materialize(context.Background(), m, ws, sandbox.Policy{AllowedRoots: []string{src}})
	if !errors.Is(err, sandbox.ErrPathEscape) {
		t.Fatalf("Materialize: %v, want ErrPathEscape", err)
	}
	t.Log(err)
	if entries, _ := os.ReadDir(ws); len(entries) != 0 {
		t.Errorf("the workspace holds %d entries after a rejected manifest", len(entries))
	}
}

// TestMaterializeGitRemote clones over HTTP, from git's own http-backend
// on a local test server, so the remote path (a bare clone into a
// temporary directory, with a depth) runs offline.
func TestMaterializeGitRemote(t *testing.T) {
	backend := "/usr/lib/git-core/git-http-backend"
	if _, err := os.Stat(backend); err != nil {
		t.Skip("no git-http-backend")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	src := t.TempDir()
	r := makeRepo(t, filepath.Join(src, "repo"))
	srv := httptest.NewServer(&cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + src, "GIT_HTTP_EXPORT_ALL=1"}})
	defer srv.Close()
	url := srv.URL + "/repo/.git"
	for _, tc := range []struct {
		ref   string
		depth int
		want  string
	}{
		{"", 0, "2"},
		{"", 1, "2"},
		{"feature", 1, "3"},
		{"v1", 0, "1"},
		{"v1-annotated", 0, "1"},
		{r.first, 0, "1"},
	} {
		dir := t.TempDir()
		m := sandbox.Manifest{Entries: []sandbox.Entry{{Kind: sandbox.EntryGitRepo, Path: "r", Source: url, Ref: tc.ref, Depth: tc.depth}}}
		if err := host.Materialize(context.Background(), m, dir, sandbox.Policy{}); err != nil {
			t.Errorf("ref %q depth %d: %v", tc.ref, tc.depth, err)
			continue
		}
		if got := readWS(t, dir, "r/version.txt"); got != tc.want {
			t.Errorf("ref %q depth %d: version %q, want %q", tc.ref, tc.depth, got, tc.want)
		}
		if _, err := os.Stat(filepath.Join(dir, "r/.git")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf(".git was copied")
		}
	}
}

func TestMaterializeEntries(t *testing.T) {
	src := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(src, "tree/ro"), 0o755))
	must(t, os.WriteFile(filepath.Join(src, "tree/ro/f"), []byte("f"), 0o600))
	must(t, os.Chmod(filepath.Join(src, "tree/ro"), 0o555))
	t.Cleanup(func() { os.Chmod(filepath.Join(src, "tree/ro"), 0o755) })
	must(t, os.WriteFile(filepath.Join(src, "tree/x.sh"), []byte("x"), 0o750))
	must(t, os.Symlink("ro/f", filepath.Join(src, "tree/link")))

	ws := t.TempDir()
	m := sandbox.Manifest{Entries: []sandbox.Entry{
		{Kind: sandbox.EntryFile, Path: "a.txt", Content: "first"},
		{Kind: sandbox.EntryFile, Path: "a.txt", Content: "second", Mode: 0o600}, // Later entries win.
		{Kind: sandbox.EntryDir, Path: "private", Mode: 0o700},
		{Kind: sandbox.EntryDir, Path: "deep/er/dir"},
		{Kind: sandbox.EntryLocalDir, Path: "copy", Source: filepath.Join(src, "tree")},
		{Kind: sandbox.EntryLocalDir, Path: "copy2", Source: filepath.Join(src, "tree"), Mode: 0o700},
		{Kind: sandbox.EntryLocalFile, Path: "single", Source: filepath.Join(src, "tree/x.sh"), Mode: 0o644},
	}}
	if err := host.Materialize(context.Background(), m, ws, sandbox.Policy{AllowedRoots: []string{src}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Workspace{Dir: ws}.Destroy() })
	if got := readWS(t, ws, "a.txt"); got != "second" {
		t.Errorf("a.txt = %q", got)
	}
	for p, want := range map[string]fs.FileMode{
		"a.txt": 0o600, "private": 0o700 | fs.ModeDir, "deep/er/dir": 0o755 | fs.ModeDir,
		"copy": 0o755 | fs.ModeDir, "copy/ro": 0o555 | fs.ModeDir, "copy/ro/f": 0o600, "copy/x.sh": 0o750,
		"copy/link": fs.ModeSymlink | 0o777, "copy2": 0o700 | fs.ModeDir, "single": 0o644,
	} {
		fi, err := os.Lstat(filepath.Join(ws, p))
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode(), want)
		}
	}
	if got := readWS(t, ws, "copy/link"); got != "f" {
		t.Errorf("copy/link reads %q", got)
	}
}

func TestMaterializeWritesNothingWhenInvalid(t *testing.T) {
	ws := t.TempDir()
	m := sandbox.Manifest{Entries: []sandbox.Entry{
		{Kind: sandbox.EntryFile, Path: "ok.txt", Content: "ok"},
		{Kind: sandbox.EntryDir, Path: "ok-dir"},
		{Kind: sandbox.EntryFile, Path: "../escape.txt", Content: "no"},
	}}
	if err := host.Materialize(context.Background(), m, ws, sandbox.Policy{}); !errors.Is(err, sandbox.ErrPathEscape) {
		t.Fatalf("Materialize: %v, want ErrPathEscape", err)
	}
	if entries, _ := os.ReadDir(ws); len(entries) != 0 {
		t.Errorf("%d entries were written before the invalid one was found", len(entries))
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(ws), "escape.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("escape.txt was written outside")
	}
}

// TestMaterializeThroughPlantedSymlink materialises into a directory where
// a symlink to the outside already exists (as after a restore): os.Root
// refuses to write through it.
func TestMaterializeThroughPlantedSymlink(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	must(t, os.Symlink(outside, filepath.Join(ws, "out")))
	m := sandbox.Manifest{Entries: []sandbox.Entry{{Kind: sandbox.EntryFile, Path: "out/pwned", Content: "x"}}}
	if err := host.Materialize(context.Background(), m, ws, sandbox.Policy{}); !errors.Is(err, sandbox.ErrPathEscape) {
		t.Errorf("Materialize through a symlink out: %v, want ErrPathEscape", err)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("something was written outside")
	}
}
