package gitbundle_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/sandbox/gitbundle"
)

// testRepo makes a repository of two commits on main, a branch "feature"
// one commit ahead, and an annotated tag v1 on the first commit; it
// returns its directory and the commits (first, second, feature).
func testRepo(t *testing.T) (string, []string) {
	t.Helper()
	dir := t.TempDir()
	r, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")}})
	if err != nil {
		t.Fatal(err)
	}
	wt, err := r.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	sig := &object.Signature{Name: "t", Email: "t@example.com", When: time.Unix(1700000000, 0)}
	commit := func(file, content string) string {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := wt.Add(file); err != nil {
			t.Fatal(err)
		}
		h, err := wt.Commit("add "+file, &git.CommitOptions{Author: sig})
		if err != nil {
			t.Fatal(err)
		}
		return h.String()
	}
	first := commit("a.go", "package a\n")
	if _, err := r.CreateTag("v1", plumbing.NewHash(first), &git.CreateTagOptions{Tagger: sig, Message: "v1"}); err != nil {
		t.Fatal(err)
	}
	second := commit("b.go", strings.Repeat("package a // more\n", 100))
	if err := wt.Checkout(&git.CheckoutOptions{Branch: plumbing.NewBranchReferenceName("feature"), Create: true}); err != nil {
		t.Fatal(err)
	}
	feature := commit("c.go", "package a\nfunc C() {}\n")
	if err := wt.Checkout(&git.CheckoutOptions{Branch: plumbing.NewBranchReferenceName("main")}); err != nil {
		t.Fatal(err)
	}
	return dir, []string{first, second, feature}
}

// put packs dir into store under a key of its hash and returns its
// reference.
func put(t *testing.T, store *blob.Store, dir string) (string, gitbundle.Packed) {
	t.Helper()
	var buf bytes.Buffer
	p, err := gitbundle.Pack(context.Background(), dir, &buf, gitbundle.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	key := "inputs/run-1/" + p.SHA256
	if err := store.Put(context.Background(), key, buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	return gitbundle.Ref(key), p
}

func newStore(t *testing.T) *blob.Store {
	t.Helper()
	s, err := blob.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestRoundTrip packs a repository and opens it from a spool: every
// revision a review names resolves to the same commit, a second Open
// reuses the unpacked repository, and git itself reads the bundle.
func TestRoundTrip(t *testing.T) {
	dir, commits := testRepo(t)
	store := newStore(t)
	ref, packed := put(t, store, dir)
	if packed.Head != commits[1] || packed.Refs != 4 { // HEAD, main, feature, v1
		t.Errorf("packed %+v; want HEAD %s and 4 references", packed, commits[1])
	}
	spool := &gitbundle.Spool{Dir: t.TempDir(), Store: store}
	ctx := gitbundle.WithSpool(context.Background(), spool)
	path, err := gitbundle.Resolve(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(path) != spool.Dir || filepath.Base(path) != packed.SHA256 {
		t.Errorf("unpacked at %s; want %s/%s", path, spool.Dir, packed.SHA256)
	}
	r, err := git.PlainOpen(path)
	if err != nil {
		t.Fatal(err)
	}
	for rev, want := range map[string]string{"HEAD": commits[1], "HEAD~1": commits[0], "main": commits[1], "feature": commits[2], "v1": commits[0]} {
		h, err := r.ResolveRevision(plumbing.Revision(rev))
		if err != nil || h.String() != want {
			t.Errorf("%s resolves to %v (%v), want %s", rev, h, err, want)
		}
	}
	// A clone of it, as a git_repo entry makes, has the files.
	clone := t.TempDir()
	if _, err := git.PlainClone(clone, false, &git.CloneOptions{URL: path}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(clone, "b.go")); err != nil || !strings.HasPrefix(string(b), "package a") {
		t.Errorf("clone's b.go: %q, %v", b, err)
	}
	// Open again: the same directory, nothing fetched (the blob is gone).
	key, _ := gitbundle.KeyOf(ref)
	if err := store.Delete(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	if again, err := spool.Open(context.Background(), ref); err != nil || again != path {
		t.Errorf("second Open: %s, %v; want %s", again, err, path)
	}
	// A value that is no reference is left as it is.
	if v, err := gitbundle.Resolve(context.Background(), "/some/path"); err != nil || v != "/some/path" {
		t.Errorf("Resolve of a path: %q, %v", v, err)
	}
	if _, err := gitbundle.Resolve(context.Background(), ref); !errors.Is(err, gitbundle.ErrNoSpool) {
		t.Errorf("Resolve without a spool: %v; want ErrNoSpool", err)
	}
	if _, err := exec.LookPath("git"); err == nil {
		var buf bytes.Buffer
		if _, err := gitbundle.Pack(context.Background(), dir, &buf, gitbundle.Limits{}); err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(t.TempDir(), "r.bundle")
		if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("git", "bundle", "verify", file).CombinedOutput(); err != nil {
			t.Errorf("git bundle verify: %v\n%s", err, out)
		}
	}
}

// TestPackRefuses: a directory that is no repository, and a repository
// over the limit.
func TestPackRefuses(t *testing.T) {
	var buf bytes.Buffer
	if _, err := gitbundle.Pack(context.Background(), t.TempDir(), &buf, gitbundle.Limits{}); !errors.Is(err, gitbundle.ErrNotRepository) {
		t.Errorf("an empty directory: %v; want ErrNotRepository", err)
	}
	dir, _ := testRepo(t)
	if _, err := gitbundle.Pack(context.Background(), dir, &buf, gitbundle.Limits{MaxBytes: 200}); !errors.Is(err, gitbundle.ErrTooLarge) {
		t.Errorf("over 200 bytes: %v; want ErrTooLarge", err)
	}
}

// bundle is a v2 bundle of refs (lines "HASH NAME") and pack.
func bundle(refs []string, pack []byte) []byte {
	var b bytes.Buffer
	b.WriteString("# v2 git bundle\n")
	for _, r := range refs {
		b.WriteString(r + "\n")
	}
	b.WriteString("\n")
	b.Write(pack)
	return b.Bytes()
}

// packOf is the pack of a real bundle of dir.
func packOf(t *testing.T, dir string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := gitbundle.Pack(context.Background(), dir, &buf, gitbundle.Limits{}); err != nil {
		t.Fatal(err)
	}
	_, pack, _ := bytes.Cut(buf.Bytes(), []byte("\n\n"))
	return pack
}

// TestSpoolRefuses puts hostile and broken bundles in the store: each is
// refused with its error, and nothing of it stays in the spool nor
// anywhere outside it.
func TestSpoolRefuses(t *testing.T) {
	dir, commits := testRepo(t)
	pack := packOf(t, dir)
	head := commits[1]
	for _, tc := range []struct {
		name   string
		data   []byte
		key    func(sum string) string // default inputs/run-1/<sum>
		limits gitbundle.Limits
		want   error
	}{
		{name: "escaping-ref", data: bundle([]string{head + " HEAD", head + " refs/heads/../../../../escaped"}, pack), want: gitbundle.ErrRefused},
		{name: "config-ref", data: bundle([]string{head + " config"}, pack), want: gitbundle.ErrRefused},
		{name: "absolute-ref", data: bundle([]string{head + " /tmp/escaped"}, pack), want: gitbundle.ErrRefused},
		{name: "dotted-ref", data: bundle([]string{head + " refs/heads/.hidden/x"}, pack), want: gitbundle.ErrRefused},
		{name: "lock-ref", data: bundle([]string{head + " refs/heads/main.lock"}, pack), want: gitbundle.ErrRefused},
		{name: "prerequisite", data: bundle([]string{"-" + head, head + " HEAD"}, pack), want: gitbundle.ErrRefused},
		{name: "ref-to-nothing", data: bundle([]string{strings.Repeat("ab", 20) + " HEAD"}, pack), want: gitbundle.ErrRefused},
		{name: "not-a-bundle", data: []byte("PK\x03\x04 a zip file\n"), want: gitbundle.ErrRefused},
		{name: "truncated-pack", data: bundle([]string{head + " HEAD"}, pack[:len(pack)/2]), want: gitbundle.ErrRefused},
		{name: "garbage-pack", data: bundle([]string{head + " HEAD"}, []byte("PACK\x00\x00\x00\x02\x00\x00\x00\x09garbage")), want: gitbundle.ErrRefused},
		{name: "hash-mismatch", data: bundle([]string{head + " HEAD"}, pack), key: func(string) string { return "inputs/run-1/" + strings.Repeat("0", 64) }, want: gitbundle.ErrRefused},
		{name: "key-without-hash", data: bundle([]string{head + " HEAD"}, pack), key: func(string) string { return "inputs/run-1/repo" }, want: gitbundle.ErrRefused},
		{name: "over-max-bytes", data: bundle([]string{head + " HEAD"}, pack), limits: gitbundle.Limits{MaxBytes: 100}, want: gitbundle.ErrTooLarge},
		{name: "over-max-unpacked", data: bundle([]string{head + " HEAD"}, pack), limits: gitbundle.Limits{MaxUnpacked: 1000}, want: gitbundle.ErrTooLarge},
		{name: "over-max-refs", data: bundle([]string{head + " HEAD", head + " refs/heads/a", head + " refs/heads/b"}, pack), limits: gitbundle.Limits{MaxRefs: 2}, want: gitbundle.ErrTooLarge},
		{name: "missing", key: func(string) string { return "inputs/run-1/" + strings.Repeat("1", 64) }, want: blob.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := newStore(t)
			sum := sha256.Sum256(tc.data)
			key := "inputs/run-1/" + hex.EncodeToString(sum[:])
			if tc.key != nil {
				key = tc.key(key)
			}
			if tc.data != nil {
				if err := store.Put(context.Background(), key, tc.data); err != nil {
					t.Fatal(err)
				}
			}
			parent := t.TempDir()
			spool := &gitbundle.Spool{Dir: filepath.Join(parent, "spool"), Store: store, Limits: tc.limits}
			path, err := spool.Open(context.Background(), gitbundle.Ref(key))
			if !errors.Is(err, tc.want) {
				t.Fatalf("Open: %q, %v; want %v", path, err, tc.want)
			}
			var left []string
			filepath.Walk(parent, func(p string, info os.FileInfo, err error) error {
				if p != parent && p != spool.Dir {
					left = append(left, p)
				}
				return nil
			})
			if len(left) > 0 {
				t.Errorf("left behind: %v", left)
			}
		})
	}
}

// TestReap removes the repositories unused for the given time and the
// leftovers of unpacks cut short, and keeps the others.
func TestReap(t *testing.T) {
	dir, _ := testRepo(t)
	store := newStore(t)
	ref, _ := put(t, store, dir)
	spool := &gitbundle.Spool{Dir: t.TempDir(), Store: store}
	path, err := spool.Open(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(spool.Dir, ".unpack-123")
	other := filepath.Join(spool.Dir, "not-ours")
	for _, d := range []string{stale, other} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	if n, err := spool.Reap(24 * time.Hour); err != nil || n != 1 {
		t.Errorf("Reap: %d, %v; want the stale unpack only", n, err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("a repository used now was reaped: %v", err)
	}
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	if n, err := spool.Reap(time.Hour); err != nil || n != 1 {
		t.Errorf("Reap: %d, %v; want the repository unused for two hours", n, err)
	}
	for p, want := range map[string]bool{path: false, stale: false, other: true} {
		if _, err := os.Stat(p); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", p, err == nil, want)
		}
	}
}
