package sandbox_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/runtime/sandbox"
)

func TestValidate(t *testing.T) {
	allowed := t.TempDir()
	outside := t.TempDir()
	must(t, os.WriteFile(filepath.Join(allowed, "f.txt"), []byte("f"), 0o644))
	must(t, os.Mkdir(filepath.Join(allowed, "d"), 0o755))
	must(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644))
	must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(allowed, "to-outside")))
	must(t, os.Symlink("f.txt", filepath.Join(allowed, "to-inside")))
	// A tree with a symlink leading out of it.
	must(t, os.MkdirAll(filepath.Join(allowed, "badtree/sub"), 0o755))
	must(t, os.Symlink("../../f.txt", filepath.Join(allowed, "badtree/sub/up")))
	// A tree whose symlinks stay inside.
	must(t, os.MkdirAll(filepath.Join(allowed, "goodtree/sub"), 0o755))
	must(t, os.Symlink("../top", filepath.Join(allowed, "goodtree/sub/up")))
	// The allowed root reached through a symlink is still allowed.
	linkRoot := filepath.Join(t.TempDir(), "link-to-allowed")
	must(t, os.Symlink(allowed, linkRoot))
	p := sandbox.Policy{AllowedRoots: []string{linkRoot}}

	file := func(path string) sandbox.Entry { return sandbox.Entry{Kind: sandbox.EntryFile, Path: path} }
	for _, tc := range []struct {
		name  string
		entry sandbox.Entry
		env   map[string]string
		want  error  // nil: valid
		msg   string // a part of the message, when want is nil but an error is expected
	}{
		{name: "file", entry: sandbox.Entry{Kind: sandbox.EntryFile, Path: "a/b", Content: "x", Mode: 0o755}},
		{name: "empty-file", entry: file("empty")},
		{name: "dir-root", entry: sandbox.Entry{Kind: sandbox.EntryDir, Path: "."}},
		{name: "local-file", entry: sandbox.Entry{Kind: sandbox.EntryLocalFile, Path: "f", Source: filepath.Join(allowed, "f.txt")}},
		{name: "local-file-via-inside-link", entry: sandbox.Entry{Kind: sandbox.EntryLocalFile, Path: "f", Source: filepath.Join(allowed, "to-inside")}},
		{name: "local-dir", entry: sandbox.Entry{Kind: sandbox.EntryLocalDir, Path: ".", Source: filepath.Join(linkRoot, "goodtree")}},
		{name: "git-url", entry: sandbox.Entry{Kind: sandbox.EntryGitRepo, Path: "r", Source: "https://example.com/r.git", Ref: "main", Depth: 1}},
		{name: "git-scp", entry: sandbox.Entry{Kind: sandbox.EntryGitRepo, Path: "r", Source: "git@example.com:org/r.git"}},
		{name: "env", entry: file("x"), env: map[string]string{"A": "b", "EMPTY": ""}},

		{name: "unknown-kind", entry: sandbox.Entry{Kind: "symlink", Path: "x"}, msg: "unknown kind"},
		{name: "dotdot", entry: file("a/../../x"), want: sandbox.ErrPathEscape},
		{name: "absolute", entry: file("/etc/x"), want: sandbox.ErrPathEscape},
		{name: "empty-path", entry: file(""), want: sandbox.ErrPathEscape},
		{name: "nul", entry: file("a\x00b"), want: sandbox.ErrPathEscape},
		{name: "file-at-root", entry: file("."), want: sandbox.ErrPathEscape},
		{name: "setuid", entry: sandbox.Entry{Kind: sandbox.EntryFile, Path: "x", Mode: 0o4755}, msg: "permission bits"},
		{name: "content-on-dir", entry: sandbox.Entry{Kind: sandbox.EntryDir, Path: "x", Content: "c"}, msg: "content does not apply"},
		{name: "source-on-file", entry: sandbox.Entry{Kind: sandbox.EntryFile, Path: "x", Source: "/etc/passwd"}, msg: "source does not apply"},
		{name: "ref-on-local-dir", entry: sandbox.Entry{Kind: sandbox.EntryLocalDir, Path: "x", Source: allowed, Ref: "main"}, msg: "ref does not apply"},
		{name: "no-source", entry: sandbox.Entry{Kind: sandbox.EntryLocalFile, Path: "x"}, msg: "needs a source"},
		{name: "outside-roots", entry: sandbox.Entry{Kind: sandbox.EntryLocalFile, Path: "x", Source: filepath.Join(outside, "secret")}, want: sandbox.ErrSourceNotAllowed},
		{name: "via-outside-link", entry: sandbox.Entry{Kind: sandbox.EntryLocalFile, Path: "x", Source: filepath.Join(allowed, "to-outside")}, want: sandbox.ErrSourceNotAllowed},
		{name: "dotdot-source", entry: sandbox.Entry{Kind: sandbox.EntryLocalFile, Path: "x", Source: filepath.Join(allowed, "..", filepath.Base(outside), "secret")}, want: sandbox.ErrSourceNotAllowed},
		{name: "relative-source", entry: sandbox.Entry{Kind: sandbox.EntryLocalFile, Path: "x", Source: "f.txt"}, want: sandbox.ErrSourceNotAllowed},
		{name: "file-is-dir", entry: sandbox.Entry{Kind: sandbox.EntryLocalFile, Path: "x", Source: filepath.Join(allowed, "d")}, msg: "not a regular file"},
		{name: "dir-is-file", entry: sandbox.Entry{Kind: sandbox.EntryLocalDir, Path: "x", Source: filepath.Join(allowed, "f.txt")}, msg: "not a directory"},
		{name: "missing-source", entry: sandbox.Entry{Kind: sandbox.EntryLocalFile, Path: "x", Source: filepath.Join(allowed, "missing")}, msg: "no such file"},
		{name: "tree-link-out", entry: sandbox.Entry{Kind: sandbox.EntryLocalDir, Path: "x", Source: filepath.Join(allowed, "badtree")}, want: sandbox.ErrPathEscape},
		{name: "git-local-outside", entry: sandbox.Entry{Kind: sandbox.EntryGitRepo, Path: "r", Source: outside}, want: sandbox.ErrSourceNotAllowed},
		{name: "git-file-url-outside", entry: sandbox.Entry{Kind: sandbox.EntryGitRepo, Path: "r", Source: "file://" + outside}, want: sandbox.ErrSourceNotAllowed},
		{name: "git-relative", entry: sandbox.Entry{Kind: sandbox.EntryGitRepo, Path: "r", Source: "some/dir"}, want: sandbox.ErrSourceNotAllowed},
		{name: "git-ext-transport", entry: sandbox.Entry{Kind: sandbox.EntryGitRepo, Path: "r", Source: "ext::sh -c touch% /tmp/pwned"}, want: sandbox.ErrSourceNotAllowed},
		{name: "git-scheme", entry: sandbox.Entry{Kind: sandbox.EntryGitRepo, Path: "r", Source: "ftp://example.com/r.git"}, msg: "unsupported URL scheme"},
		{name: "git-negative-depth", entry: sandbox.Entry{Kind: sandbox.EntryGitRepo, Path: "r", Source: "https://example.com/r.git", Depth: -1}, msg: "negative"},
		{name: "env-name", entry: file("x"), env: map[string]string{"A=B": "c"}, msg: "invalid name"},
		{name: "env-nul", entry: file("x"), env: map[string]string{"A": "b\x00c"}, msg: "NUL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := sandbox.Manifest{Entries: []sandbox.Entry{tc.entry}, Env: tc.env}.Validate(p)
			switch {
			case tc.want == nil && tc.msg == "":
				if err != nil {
					t.Errorf("Validate: %v, want nil", err)
				}
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Errorf("Validate: %v, want %v", err, tc.want)
			case tc.msg != "" && (err == nil || !strings.Contains(err.Error(), tc.msg)):
				t.Errorf("Validate: %v, want an error with %q", err, tc.msg)
			}
		})
	}
}

func TestValidateZeroPolicyAllowsNoHostSource(t *testing.T) {
	src := t.TempDir()
	must(t, os.WriteFile(filepath.Join(src, "f"), nil, 0o644))
	for _, e := range []sandbox.Entry{
		{Kind: sandbox.EntryLocalFile, Path: "f", Source: filepath.Join(src, "f")},
		{Kind: sandbox.EntryLocalDir, Path: "d", Source: src},
		{Kind: sandbox.EntryGitRepo, Path: "g", Source: src},
	} {
		if err := (sandbox.Manifest{Entries: []sandbox.Entry{e}}).Validate(sandbox.Policy{}); !errors.Is(err, sandbox.ErrSourceNotAllowed) {
			t.Errorf("%s with the zero Policy: %v, want ErrSourceNotAllowed", e.Kind, err)
		}
	}
}

func TestValidateReportsEveryEntry(t *testing.T) {
	err := sandbox.Manifest{Entries: []sandbox.Entry{
		{Kind: sandbox.EntryFile, Path: "../a"},
		{Kind: sandbox.EntryFile, Path: "ok"},
		{Kind: sandbox.EntryFile, Path: "/b"},
	}}.Validate(sandbox.Policy{})
	if err == nil || !strings.Contains(err.Error(), "entry 0") || !strings.Contains(err.Error(), "entry 2") || strings.Contains(err.Error(), "entry 1") {
		t.Errorf("Validate: %v; want entries 0 and 2 reported", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
