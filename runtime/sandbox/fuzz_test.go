package sandbox_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// FuzzCleanPath checks CleanPath's contract: a path it accepts is
// relative, has no ".." element, is already clean, and, joined to a
// directory, stays inside it (os.Root agrees); a path it rejects is
// rejected with ErrPathEscape.
func FuzzCleanPath(f *testing.F) {
	for _, seed := range []string{
		"", ".", "./", "a", "a/b", "./a//b/", "..", "../a", "a/..", "a/../b", "/", "/etc/passwd",
		"a/./b/../c", "...", "a..b", "a/\x00", "//a", `a\..\b`, "a/b/", "ü/ñ", ". /..", "a/.../b",
	} {
		f.Add(seed)
	}
	dir := f.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { root.Close() })
	f.Fuzz(func(t *testing.T, p string) {
		got, err := sandbox.CleanPath(p)
		if err != nil {
			if !errors.Is(err, sandbox.ErrPathEscape) {
				t.Fatalf("CleanPath(%q): %v does not wrap ErrPathEscape", p, err)
			}
			return
		}
		if got == "" || filepath.IsAbs(got) || strings.HasPrefix(got, "/") {
			t.Fatalf("CleanPath(%q) = %q: empty or absolute", p, got)
		}
		for _, elem := range strings.Split(got, "/") {
			if elem == ".." {
				t.Fatalf("CleanPath(%q) = %q: has a \"..\" element", p, got)
			}
		}
		if strings.IndexByte(got, 0) >= 0 {
			t.Fatalf("CleanPath(%q) = %q: has a NUL byte", p, got)
		}
		if again, err := sandbox.CleanPath(got); err != nil || again != got {
			t.Fatalf("CleanPath(CleanPath(%q)) = %q, %v; want %q", p, again, err, got)
		}
		joined := filepath.Join(dir, got)
		if joined != dir && !strings.HasPrefix(joined, dir+string(filepath.Separator)) {
			t.Fatalf("CleanPath(%q) = %q: joined to %s it leaves: %s", p, got, dir, joined)
		}
		if _, err := root.Lstat(got); err != nil && strings.Contains(err.Error(), "escapes") {
			t.Fatalf("CleanPath(%q) = %q: os.Root says it escapes: %v", p, got, err)
		}
	})
}
