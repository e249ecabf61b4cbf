package host_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/host"
)

// FuzzManifestValidate checks that sandbox.Manifest.Validate never lets
// through a manifest that escapes: when it accepts one, every path is clean
// and relative, every host source lies under the allowed root, and
// materialising it writes nothing outside the workspace.
func FuzzManifestValidate(f *testing.F) {
	base := f.TempDir()
	allowed := filepath.Join(base, "allowed")
	if err := os.MkdirAll(filepath.Join(allowed, "dir/sub"), 0o755); err != nil {
		f.Fatal(err)
	}
	for _, p := range []string{"file.txt", "dir/a", "dir/sub/b"} {
		if err := os.WriteFile(filepath.Join(allowed, p), []byte(p), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(allowed, "out")); err != nil {
		f.Fatal(err)
	}
	if err := os.Symlink("sub/b", filepath.Join(allowed, "dir/in")); err != nil {
		f.Fatal(err)
	}
	work := filepath.Join(base, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		f.Fatal(err)
	}
	policy := sandbox.Policy{AllowedRoots: []string{allowed}}

	f.Add("file", "a.txt", "content", "", "", 0, uint32(0), "K", "v")
	f.Add("file", "../a.txt", "", "", "", 0, uint32(0o644), "", "")
	f.Add("dir", ".", "", "", "", 0, uint32(0o700), "", "")
	f.Add("dir", "/abs", "", "", "", 0, uint32(0), "", "")
	f.Add("local_file", "copy", "", allowed+"/file.txt", "", 0, uint32(0), "", "")
	f.Add("local_file", "copy", "", allowed+"/out", "", 0, uint32(0), "", "")
	f.Add("local_file", "copy", "", allowed+"/../../etc/passwd", "", 0, uint32(0), "", "")
	f.Add("local_dir", "tree", "", allowed+"/dir", "", 0, uint32(0), "", "")
	f.Add("local_dir", ".", "", allowed, "", 0, uint32(0), "", "")
	f.Add("git_repo", "r", "", "https://example.com/r.git", "main", 1, uint32(0), "", "")
	f.Add("git_repo", "r", "", "file:///etc", "", -1, uint32(0), "", "")
	f.Add("symlink", "l", "", "/etc", "", 0, uint32(0), "", "")
	f.Add("file", "a", "", "", "", 0, uint32(0o4755), "A=B", "\x00")

	f.Fuzz(func(t *testing.T, kind, path, content, source, ref string, depth int, mode uint32, envK, envV string) {
		e := sandbox.Entry{Kind: sandbox.EntryKind(kind), Path: path, Content: content, Source: source, Ref: ref, Depth: depth, Mode: mode}
		m := sandbox.Manifest{Entries: []sandbox.Entry{e}}
		if envK != "" {
			m.Env = map[string]string{envK: envV}
		}
		if err := m.Validate(policy); err != nil {
			return
		}
		clean, err := sandbox.CleanPath(path)
		if err != nil {
			t.Fatalf("Validate accepted the path %q: %v", path, err)
		}
		if mode&^0o777 != 0 || depth < 0 {
			t.Fatalf("Validate accepted mode %#o, depth %d", mode, depth)
		}
		switch e.Kind {
		case sandbox.EntryFile, sandbox.EntryDir:
		case sandbox.EntryLocalFile, sandbox.EntryLocalDir:
			resolved, err := filepath.EvalSymlinks(source)
			if err != nil || !strings.HasPrefix(resolved+"/", allowed+"/") {
				t.Fatalf("Validate accepted the source %q (resolved %q, %v) outside %s", source, resolved, err, allowed)
			}
		case sandbox.EntryGitRepo:
			return // Cloning is not for a fuzzer.
		default:
			t.Fatalf("Validate accepted the kind %q", kind)
		}
		if strings.ContainsAny(envK, "=\x00") || strings.IndexByte(envV, 0) >= 0 {
			t.Fatalf("Validate accepted the variable %q=%q", envK, envV)
		}
		ws, err := os.MkdirTemp(work, "ws")
		if err != nil {
			t.Fatal(err)
		}
		defer host.Workspace{Dir: ws}.Destroy()
		if err := host.Materialize(context.Background(), m, ws, policy); err != nil {
			// Allowed (a file where a directory is, say), but never an
			// escape once Validate said yes.
			if errors.Is(err, sandbox.ErrPathEscape) {
				t.Fatalf("Materialize of a valid manifest escaped: %v", err)
			}
			return
		}
		if _, err := os.Lstat(filepath.Join(ws, filepath.FromSlash(clean))); err != nil {
			t.Fatalf("entry %q was not created at %q: %v", path, clean, err)
		}
		entries, err := os.ReadDir(work)
		if err != nil || len(entries) != 1 {
			t.Fatalf("something was written beside the workspace: %v %v", entries, err)
		}
	})
}
