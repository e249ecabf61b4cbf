package host_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/host"
)

// TestManifestFile reads one path of manifests without making the
// workspace, and checks each answer against the workspace Materialize
// makes from the same manifest.
func TestManifestFile(t *testing.T) {
	src := t.TempDir()
	r := makeRepo(t, filepath.Join(src, "repo"))
	tree := filepath.Join(src, "tree")
	must(t, os.MkdirAll(filepath.Join(tree, "docs"), 0o755))
	must(t, os.WriteFile(filepath.Join(tree, "AGENTS.md"), []byte("from the tree"), 0o644))
	must(t, os.WriteFile(filepath.Join(tree, "docs/notes.md"), []byte("notes"), 0o644))
	bare := filepath.Join(src, "bare")
	must(t, os.MkdirAll(bare, 0o755))
	must(t, os.WriteFile(filepath.Join(bare, "other.md"), []byte("other"), 0o644))
	linked := filepath.Join(src, "linked")
	must(t, os.MkdirAll(linked, 0o755))
	must(t, os.Symlink("other.md", filepath.Join(linked, "AGENTS.md")))
	must(t, os.WriteFile(filepath.Join(linked, "other.md"), []byte("other"), 0o644))
	outside := t.TempDir()
	must(t, os.WriteFile(filepath.Join(outside, "AGENTS.md"), []byte("secret"), 0o644))
	p := sandbox.Policy{AllowedRoots: []string{src}}

	file := func(path, content string) sandbox.Entry {
		return sandbox.Entry{Kind: sandbox.EntryFile, Path: path, Content: content}
	}
	tests := []struct {
		name    string
		entries []sandbox.Entry
		path    string
		want    string
		wantErr error
		// localOnly reads with LocalSourcesOnly; noMaterialize skips the
		// comparison with a made workspace (whose remote source cannot be
		// fetched here).
		localOnly, noMaterialize bool
	}{
		{name: "inline", entries: []sandbox.Entry{file("AGENTS.md", "inline")}, path: "AGENTS.md", want: "inline"},
		{name: "later-wins", entries: []sandbox.Entry{file("AGENTS.md", "inline"), {Kind: sandbox.EntryLocalDir, Path: ".", Source: tree}}, path: "AGENTS.md", want: "from the tree"},
		{name: "later-lacks-it", entries: []sandbox.Entry{file("AGENTS.md", "inline"), {Kind: sandbox.EntryLocalDir, Path: ".", Source: bare}}, path: "AGENTS.md", want: "inline"},
		{name: "under-a-dir-entry", entries: []sandbox.Entry{{Kind: sandbox.EntryLocalDir, Path: "ws", Source: tree}}, path: "ws/docs/notes.md", want: "notes"},
		{name: "elsewhere", entries: []sandbox.Entry{{Kind: sandbox.EntryLocalDir, Path: "sub", Source: tree}}, path: "AGENTS.md", wantErr: fs.ErrNotExist},
		{name: "local-file", entries: []sandbox.Entry{{Kind: sandbox.EntryLocalFile, Path: "AGENTS.md", Source: filepath.Join(tree, "docs/notes.md")}}, path: "AGENTS.md", want: "notes"},
		{name: "git-at-ref", entries: []sandbox.Entry{{Kind: sandbox.EntryGitRepo, Path: ".", Source: r.dir, Ref: "v1"}}, path: "version.txt", want: "1"},
		{name: "git-head", entries: []sandbox.Entry{{Kind: sandbox.EntryGitRepo, Path: "r", Source: "file://" + r.dir}}, path: "r/version.txt", want: "2"},
		{name: "git-lacks-it", entries: []sandbox.Entry{file("AGENTS.md", "inline"), {Kind: sandbox.EntryGitRepo, Path: ".", Source: r.dir}}, path: "AGENTS.md", want: "inline"},
		{name: "git-symlink", entries: []sandbox.Entry{{Kind: sandbox.EntryGitRepo, Path: ".", Source: r.dir}}, path: "bin/version", wantErr: sandbox.ErrNotRegular},
		{name: "a-dir", entries: []sandbox.Entry{{Kind: sandbox.EntryDir, Path: "AGENTS.md"}}, path: "AGENTS.md", wantErr: sandbox.ErrNotRegular},
		{name: "host-symlink", entries: []sandbox.Entry{{Kind: sandbox.EntryLocalDir, Path: ".", Source: linked}}, path: "AGENTS.md", wantErr: sandbox.ErrNotRegular},
		{name: "too-large", entries: []sandbox.Entry{file("AGENTS.md", strings.Repeat("x", 65))}, path: "AGENTS.md", wantErr: sandbox.ErrTooLarge},
		{name: "outside-the-policy", entries: []sandbox.Entry{{Kind: sandbox.EntryLocalDir, Path: ".", Source: outside}}, path: "AGENTS.md", wantErr: sandbox.ErrSourceNotAllowed},
		{name: "escaping-path", entries: []sandbox.Entry{file("AGENTS.md", "inline")}, path: "../AGENTS.md", wantErr: sandbox.ErrPathEscape},
		{name: "empty", path: "AGENTS.md", wantErr: fs.ErrNotExist},
		{name: "remote-refused", entries: []sandbox.Entry{file("AGENTS.md", "inline"), {Kind: sandbox.EntryGitRepo, Path: ".", Source: "https://git.invalid/repo.git"}}, path: "AGENTS.md",
			localOnly: true, wantErr: host.ErrRemoteSource},
		{name: "remote-elsewhere", entries: []sandbox.Entry{file("AGENTS.md", "inline"), {Kind: sandbox.EntryGitRepo, Path: "vendor/x", Source: "https://git.invalid/repo.git"}}, path: "AGENTS.md",
			localOnly: true, want: "inline", noMaterialize: true},
		{name: "local-git-while-local-only", entries: []sandbox.Entry{{Kind: sandbox.EntryGitRepo, Path: ".", Source: r.dir, Ref: "v1"}}, path: "version.txt", localOnly: true, want: "1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := sandbox.Manifest{Entries: tc.entries}
			var opts []host.ManifestReadOption
			if tc.localOnly {
				opts = append(opts, host.LocalSourcesOnly())
			}
			got, err := host.ManifestFile(context.Background(), m, p, tc.path, 64, opts...)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("ManifestFile = %q, %v; want %v", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("ManifestFile = %q, %v; want %q", got, err, tc.want)
			}
			if tc.noMaterialize {
				return
			}
			// The workspace made from the manifest holds the same.
			dir := t.TempDir()
			if err := host.Materialize(context.Background(), m, dir, p); err != nil {
				t.Fatal(err)
			}
			if made := readWS(t, dir, tc.path); made != tc.want {
				t.Errorf("the workspace holds %q at %s, ManifestFile said %q", made, tc.path, tc.want)
			}
		})
	}
}
