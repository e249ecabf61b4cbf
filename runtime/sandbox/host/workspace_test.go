package host_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/host"
)

func TestProvisionAndOpen(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	spec := sandbox.Spec{ID: "wf/1", Manifest: sandbox.Manifest{Entries: []sandbox.Entry{
		{Kind: sandbox.EntryFile, Path: "a", Content: "a"},
		{Kind: sandbox.EntryDir, Path: "cache", Ephemeral: true},
	}}}
	w, err := host.Provision(ctx, root, spec, sandbox.Policy{})
	must(t, err)
	if filepath.Dir(w.Dir) != root || filepath.Base(w.Dir) != host.DirName("wf/1") || len(w.Ephemeral) != 1 || w.Ephemeral[0] != "cache" {
		t.Errorf("Provision = %+v", w)
	}
	// A second Provision of the session (a retried Create) replaces the
	// workspace with a fresh one.
	must(t, os.WriteFile(filepath.Join(w.Dir, "left"), nil, 0o644))
	again, err := host.Provision(ctx, root, spec, sandbox.Policy{})
	must(t, err)
	if _, err := os.Stat(filepath.Join(again.Dir, "left")); again.Dir != w.Dir || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Provision of an existing session kept its files: %+v, %v", again, err)
	}
	// A failed manifest leaves nothing.
	bad := sandbox.Spec{ID: "bad", Manifest: sandbox.Manifest{Entries: []sandbox.Entry{{Kind: sandbox.EntryFile, Path: "x"}, {Kind: sandbox.EntryLocalFile, Path: "y", Source: "/etc/passwd"}}}}
	if _, err := host.Provision(ctx, root, bad, sandbox.Policy{}); !errors.Is(err, sandbox.ErrSourceNotAllowed) {
		t.Errorf("Provision: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "bad")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a rejected session left its directory")
	}

	st := sandbox.State{ID: "wf/1", Workspace: w.Dir, Ephemeral: w.Ephemeral}
	if got, err := host.OpenWorkspace(root, st); err != nil || got.Dir != w.Dir {
		t.Errorf("OpenWorkspace = %+v, %v", got, err)
	}
	for _, forged := range []sandbox.State{
		{ID: "wf/1", Workspace: root},
		{ID: "wf/1", Workspace: "/"},
		{ID: "other", Workspace: w.Dir},
		{ID: "", Workspace: w.Dir},
	} {
		if _, err := host.OpenWorkspace(root, forged); !errors.Is(err, sandbox.ErrGone) {
			t.Errorf("OpenWorkspace(%+v) = %v, want ErrGone", forged, err)
		}
	}
	must(t, w.Destroy())
	must(t, w.Destroy())
	if left, _ := os.ReadDir(root); len(left) != 0 {
		t.Errorf("left after Destroy: %v (the sidecar goes with the workspace)", left)
	}
	if _, err := host.OpenWorkspace(root, st); !errors.Is(err, sandbox.ErrGone) {
		t.Errorf("OpenWorkspace after Destroy: %v, want ErrGone", err)
	}
	if _, err := w.ReadFile(ctx, "a"); !errors.Is(err, sandbox.ErrGone) {
		t.Errorf("ReadFile after Destroy: %v, want ErrGone", err)
	}
}

func TestWorkspaceFiles(t *testing.T) {
	ctx := context.Background()
	w := host.Workspace{Dir: t.TempDir()}
	outside := t.TempDir()
	must(t, os.Symlink(outside, filepath.Join(w.Dir, "out")))
	must(t, os.Symlink("/etc/passwd", filepath.Join(w.Dir, "passwd")))
	for _, p := range []string{"out/x", "passwd", "../x", "/etc/passwd", "out"} {
		if err := w.WriteFile(ctx, p, []byte("x"), 0); !errors.Is(err, sandbox.ErrPathEscape) {
			t.Errorf("WriteFile(%q) = %v, want ErrPathEscape", p, err)
		}
	}
	if _, err := w.ReadFile(ctx, "passwd"); !errors.Is(err, sandbox.ErrPathEscape) {
		t.Errorf("ReadFile through an absolute symlink: %v", err)
	}
	if _, err := w.List(ctx, "out"); !errors.Is(err, sandbox.ErrPathEscape) {
		t.Errorf("List through a symlink out: %v", err)
	}
	if _, err := w.ResolveWorkdir(ctx, "out"); !errors.Is(err, sandbox.ErrPathEscape) {
		t.Errorf("ResolveWorkdir through a symlink out: %v", err)
	}
	if err := w.WriteFile(ctx, "x", nil, fs.ModeSetuid|0o755); err == nil {
		t.Errorf("WriteFile with setuid succeeded")
	}
	if err := w.WriteFile(ctx, ".", nil, 0); err == nil {
		t.Errorf("WriteFile(.) succeeded")
	}
	must(t, w.WriteFile(ctx, "d/f", []byte("f"), 0o640))
	if wd, err := w.ResolveWorkdir(ctx, "./d/"); err != nil || wd != "d" {
		t.Errorf("ResolveWorkdir(./d/) = %q, %v", wd, err)
	}
	if _, err := w.ResolveWorkdir(ctx, "d/f"); err == nil {
		t.Errorf("ResolveWorkdir of a file succeeded")
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("something was written outside")
	}
}

// archive builds a snapshot-format archive from headers (and contents).
func archive(t *testing.T, entries ...any) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, err := zstd.NewWriter(&buf)
	must(t, err)
	tw := tar.NewWriter(zw)
	for i := 0; i < len(entries); i++ {
		hdr := entries[i].(*tar.Header)
		var body []byte
		if i+1 < len(entries) {
			if b, ok := entries[i+1].([]byte); ok {
				body = b
				hdr.Size = int64(len(b))
				i++
			}
		}
		must(t, tw.WriteHeader(hdr))
		_, err := tw.Write(body)
		must(t, err)
	}
	must(t, tw.Close())
	must(t, zw.Close())
	return buf.Bytes()
}

// sparse is the header of a sparse file entry with the given map and
// real size.
func sparse(name, dataMap, size string) *tar.Header {
	return &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, ModTime: time.Unix(1, 0), Format: tar.FormatPAX,
		PAXRecords: map[string]string{"TROUPE.sparse.map": dataMap, "TROUPE.sparse.size": size}}
}

func TestRestoreRefusesEscapes(t *testing.T) {
	ctx := context.Background()
	reg := func(name string) *tar.Header {
		return &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, ModTime: time.Unix(1, 0)}
	}
	for _, tc := range []struct {
		name    string
		archive []any
		want    error
	}{
		{"dotdot", []any{reg("ok"), []byte("ok"), reg("../evil"), []byte("x")}, sandbox.ErrPathEscape},
		{"absolute", []any{reg("/tmp/evil"), []byte("x")}, sandbox.ErrPathEscape},
		{"inner-dotdot", []any{reg("a/../../evil"), []byte("x")}, sandbox.ErrPathEscape},
		{"under-symlink", []any{&tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/tmp"}, reg("l/evil"), []byte("x")}, sandbox.ErrPathEscape},
		{"hardlink", []any{&tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "/etc/passwd"}}, nil},
		{"device", []any{&tar.Header{Name: "dev", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}}, nil},
		{"duplicate", []any{reg("a"), []byte("1"), reg("a"), []byte("2")}, nil},
		{"sparse-overlap", []any{sparse("s", "0,2,1,2", "10"), []byte("abcd")}, nil},
		{"sparse-past-size", []any{sparse("s", "8,4", "10"), []byte("abcd")}, nil},
		{"sparse-short-map", []any{sparse("s", "0,2", "10"), []byte("abcd")}, nil},
		{"sparse-odd-map", []any{sparse("s", "0,2,4", "10"), []byte("ab")}, nil},
		{"sparse-huge", []any{sparse("s", "0,2", "99999999999999999"), []byte("ab")}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outside := t.TempDir()
			w := host.Workspace{Dir: filepath.Join(outside, "ws")}
			must(t, os.Mkdir(w.Dir, 0o755))
			must(t, os.WriteFile(filepath.Join(w.Dir, "before"), []byte("before"), 0o644))
			err := w.Restore(ctx, bytes.NewReader(archive(t, tc.archive...)))
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("Restore: %v, want %v", err, tc.want)
			}
			t.Log(err)
			if b, err := os.ReadFile(filepath.Join(w.Dir, "before")); err != nil || string(b) != "before" {
				t.Errorf("a refused archive changed the workspace")
			}
			if entries, _ := os.ReadDir(outside); len(entries) != 1 {
				t.Errorf("something was written outside the workspace")
			}
		})
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	ctx := context.Background()
	a := host.Workspace{Dir: t.TempDir(), Ephemeral: []string{"tmp", "cache/x"}}
	mtime := time.Date(2020, 1, 2, 3, 4, 5, 600_000_000, time.UTC)
	files := map[string]string{"a.txt": "a", "d/b.txt": "b", "tmp/skip": "s", "cache/x": "s", "cache/y": "kept"}
	for p, c := range files {
		must(t, a.WriteFile(ctx, p, []byte(c), 0o640))
		must(t, os.Chtimes(filepath.Join(a.Dir, p), mtime, mtime))
	}
	must(t, os.Symlink("/usr/bin/python3", filepath.Join(a.Dir, "python")))
	must(t, os.Symlink("../a.txt", filepath.Join(a.Dir, "d/up")))
	must(t, os.Chmod(filepath.Join(a.Dir, "d"), 0o750))
	must(t, os.Chtimes(filepath.Join(a.Dir, "d"), mtime, mtime))

	var snap bytes.Buffer
	must(t, a.Snapshot(ctx, &snap))
	// The archive lists entries in order, without the ephemeral ones.
	var names []string
	zr, err := zstd.NewReader(bytes.NewReader(snap.Bytes()))
	must(t, err)
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		must(t, err)
		names = append(names, hdr.Name)
		if hdr.Uid != 0 || hdr.Uname != "" {
			t.Errorf("%s: owner %d %q recorded", hdr.Name, hdr.Uid, hdr.Uname)
		}
	}
	zr.Close()
	if got := strings.Join(names, " "); got != "a.txt cache/ cache/y d/ d/b.txt d/up python" {
		t.Errorf("archive entries: %s", got)
	}

	b := host.Workspace{Dir: t.TempDir(), Ephemeral: []string{"tmp"}}
	must(t, b.WriteFile(ctx, "tmp/mine", []byte("mine"), 0))
	must(t, b.WriteFile(ctx, "stale", []byte("stale"), 0))
	// Through a plain io.Reader, so Restore spools it.
	must(t, b.Restore(ctx, io.MultiReader(bytes.NewReader(snap.Bytes()))))
	for p, want := range map[string]string{"a.txt": "a", "d/b.txt": "b", "cache/y": "kept", "tmp/mine": "mine", "d/up": "a"} {
		if got, err := b.ReadFile(ctx, p); err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", p, got, err, want)
		}
	}
	for _, p := range []string{"stale", "tmp/skip", "cache/x"} {
		if _, err := os.Lstat(filepath.Join(b.Dir, p)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s exists after restore", p)
		}
	}
	if target, _ := os.Readlink(filepath.Join(b.Dir, "python")); target != "/usr/bin/python3" {
		t.Errorf("absolute symlink restored as %q", target)
	}
	for p, want := range map[string]fs.FileMode{"a.txt": 0o640, "d": 0o750 | fs.ModeDir} {
		fi, err := os.Stat(filepath.Join(b.Dir, p))
		must(t, err)
		if fi.Mode() != want || !fi.ModTime().Equal(mtime) {
			t.Errorf("%s: mode %v, mtime %v; want %v, %v", p, fi.Mode(), fi.ModTime(), want, mtime)
		}
	}
}

// Restore takes an archive's entries in any order, not only Snapshot's:
// a directory may come after what it holds, and entries of one directory
// may be apart.
func TestRestoreInAnyOrder(t *testing.T) {
	ctx := context.Background()
	mtime := time.Unix(1_600_000_000, 0)
	reg := func(name string) *tar.Header {
		return &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o600, ModTime: mtime}
	}
	dir := func(name string, mode int64) *tar.Header {
		return &tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: mode, ModTime: mtime}
	}
	files := []string{"a/b/1", "c/2", "a/b/3", "a/4", "a/b/c/d/5", "6", "a/b/c/7"}
	var entries []any
	for _, f := range files {
		entries = append(entries, reg(f), []byte("content of "+f))
	}
	entries = append(entries, dir("a/b/", 0o750), &tar.Header{Name: "c/l", Typeflag: tar.TypeSymlink, Linkname: "../a/4", ModTime: mtime})
	w := host.Workspace{Dir: t.TempDir()}
	must(t, w.Restore(ctx, bytes.NewReader(archive(t, entries...))))
	for _, f := range append(files, "c/l") {
		want := "content of " + f
		if f == "c/l" {
			want = "content of a/4"
		}
		if got, err := w.ReadFile(ctx, f); err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", f, got, err, want)
		}
	}
	for p, want := range map[string]fs.FileMode{"a/b": 0o750 | fs.ModeDir, "a/b/3": 0o600, "a/b/c/d/5": 0o600} {
		fi, err := os.Lstat(filepath.Join(w.Dir, p))
		must(t, err)
		if fi.Mode() != want || !fi.ModTime().Equal(mtime) {
			t.Errorf("%s: mode %v, mtime %v; want %v, %v", p, fi.Mode(), fi.ModTime(), want, mtime)
		}
	}
}

// A snapshot written to a writer that fails ends with the writer's error.
func TestSnapshotWriterFails(t *testing.T) {
	ctx := context.Background()
	w := host.Workspace{Dir: t.TempDir()}
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<20) // Past the buffers between walk and compressor.
	rand.NewChaCha8([32]byte{}).Read(big[:8<<20])          // Incompressible, so the archive is large.
	must(t, w.WriteFile(ctx, "big", big, 0o644))
	for _, after := range []int64{0, 1 << 10, 4 << 20} {
		fw := &failWriter{after: after}
		err := w.Snapshot(ctx, fw)
		if !errors.Is(err, errDiskFull) {
			t.Errorf("failing after %d bytes: Snapshot = %v, want %v", after, err, errDiskFull)
		}
	}
}

var errDiskFull = errors.New("disk full")

// failWriter takes after bytes, then fails.
type failWriter struct{ after, n int64 }

func (f *failWriter) Write(p []byte) (int, error) {
	if f.n+int64(len(p)) > f.after {
		return 0, errDiskFull
	}
	f.n += int64(len(p))
	return len(p), nil
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
