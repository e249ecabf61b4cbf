package capabilities

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// memFS is an in-memory FS for the applier's unit tests; the tools are
// tested against a real sandbox session in tools_test.go.
type memFS struct {
	files  map[string]string
	modes  map[string]fs.FileMode
	writes int
}

func newMemFS(files map[string]string) *memFS {
	return &memFS{files: maps.Clone(files), modes: map[string]fs.FileMode{}}
}

func (m *memFS) ReadFile(_ context.Context, p string) ([]byte, error) {
	s, ok := m.files[p]
	if !ok {
		return nil, &fs.PathError{Op: "read", Path: p, Err: fs.ErrNotExist}
	}
	return []byte(s), nil
}

func (m *memFS) WriteFile(_ context.Context, p string, data []byte, mode fs.FileMode) error {
	m.writes++
	m.files[p] = string(data)
	m.modes[p] = mode
	return nil
}

func (m *memFS) Remove(_ context.Context, p string) error {
	if _, ok := m.files[p]; !ok {
		return &fs.PathError{Op: "remove", Path: p, Err: fs.ErrNotExist}
	}
	m.writes++
	delete(m.files, p)
	return nil
}

// listFS is a memFS that can list, so that ApplyPatch keeps file modes.
type listFS struct{ *memFS }

func (l listFS) List(_ context.Context, dir string) ([]sandbox.FileInfo, error) {
	var out []sandbox.FileInfo
	for p, s := range l.files {
		d := path.Dir(p)
		if d == "." {
			d = ""
		}
		if d == dir {
			mode := l.modes[p]
			if mode == 0 {
				mode = 0o644
			}
			out = append(out, sandbox.FileInfo{Name: path.Base(p), Size: int64(len(s)), Mode: mode})
		}
	}
	return out, nil
}

func TestApplyPatch(t *testing.T) {
	const goFile = `package a

func A() int {
	return 1
}

func B() int {
	return 2
}

func C() int {
	return 3
}
`
	tests := []struct {
		name    string
		files   map[string]string
		patch   string
		want    map[string]string
		summary string
	}{
		{
			name:    "add a file, in a new directory",
			files:   map[string]string{},
			patch:   "*** Begin Patch\n*** Add File: docs/new.md\n+# New\n+\n+text\n*** End Patch",
			want:    map[string]string{"docs/new.md": "# New\n\ntext\n"},
			summary: "Created docs/new.md",
		},
		{
			name:    "add over an existing file replaces it",
			files:   map[string]string{"a": "old\n"},
			patch:   "*** Begin Patch\n*** Add File: a\n+new\n*** End Patch",
			want:    map[string]string{"a": "new\n"},
			summary: "Created a",
		},
		{
			name:    "delete",
			files:   map[string]string{"a": "x", "b": "y"},
			patch:   "*** Begin Patch\n*** Delete File: a\n*** End Patch",
			want:    map[string]string{"b": "y"},
			summary: "Deleted a",
		},
		{
			name:  "update with several hunks",
			files: map[string]string{"a.go": goFile},
			patch: `*** Begin Patch
*** Update File: a.go
@@ func A() int {
-	return 1
+	return 10
 }
@@ func C() int {
-	return 3
+	return 30
 }
*** End Patch`,
			want:    map[string]string{"a.go": strings.NewReplacer("return 1\n", "return 10\n", "return 3\n", "return 30\n").Replace(goFile)},
			summary: "Updated a.go",
		},
		{
			name:  "context disambiguates without anchors",
			files: map[string]string{"a.go": goFile},
			patch: `*** Begin Patch
*** Update File: a.go
 func B() int {
-	return 2
+	return 20
 }
*** End Patch`,
			want:    map[string]string{"a.go": strings.Replace(goFile, "return 2\n", "return 20\n", 1)},
			summary: "Updated a.go",
		},
		{
			name:  "stacked anchors find the right repeated block",
			files: map[string]string{"r.py": "class A:\n    def f(self):\n        return 0\nclass B:\n    def f(self):\n        return 0\n"},
			patch: `*** Begin Patch
*** Update File: r.py
@@ class B:
@@     def f(self):
-        return 0
+        return 1
*** End Patch`,
			want:    map[string]string{"r.py": "class A:\n    def f(self):\n        return 0\nclass B:\n    def f(self):\n        return 1\n"},
			summary: "Updated r.py",
		},
		{
			name:  "a single anchor that is not found is ignored",
			files: map[string]string{"f": "a\nb\nc\n"},
			patch: "*** Begin Patch\n*** Update File: f\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n*** End Patch",
			want:  map[string]string{"f": "a\nB\nc\n"}, summary: "Updated f",
		},
		{
			name:    "update and move",
			files:   map[string]string{"src/app.py": "def greet():\n    print(\"Hi\")\n", "other": "o"},
			patch:   "*** Begin Patch\n*** Update File: src/app.py\n*** Move to: src/main.py\n@@ def greet():\n-    print(\"Hi\")\n+    print(\"Hello, world!\")\n*** End Patch",
			want:    map[string]string{"src/main.py": "def greet():\n    print(\"Hello, world!\")\n", "other": "o"},
			summary: "Updated src/app.py\nMoved src/app.py to src/main.py",
		},
		{
			name:  "fuzzy: trailing whitespace in the file",
			files: map[string]string{"f": "one  \ntwo\t\nthree\n"},
			patch: "*** Begin Patch\n*** Update File: f\n one\n-two\n+2\n three\n*** End Patch",
			// The context line keeps the file's version, trailing blanks included.
			want: map[string]string{"f": "one  \n2\nthree\n"}, summary: "Updated f",
		},
		{
			name:  "fuzzy: indentation differs",
			files: map[string]string{"f": "if x:\n\tdo()\n\tdone()\n"},
			patch: "*** Begin Patch\n*** Update File: f\n if x:\n-    do()\n+\tdo_it()\n     done()\n*** End Patch",
			want:  map[string]string{"f": "if x:\n\tdo_it()\n\tdone()\n"}, summary: "Updated f",
		},
		{
			name:  "exact matches win over fuzzy ones earlier in the file",
			files: map[string]string{"f": "x \ny\nx\ny\n"},
			patch: "*** Begin Patch\n*** Update File: f\n x\n-y\n+Y\n*** End Patch",
			want:  map[string]string{"f": "x \ny\nx\nY\n"}, summary: "Updated f",
		},
		{
			name:  "end of file: the last occurrence",
			files: map[string]string{"f": "end\nmid\nend\n"},
			patch: "*** Begin Patch\n*** Update File: f\n@@\n-end\n+END\n+more\n*** End of File\n*** End Patch",
			want:  map[string]string{"f": "end\nmid\nEND\nmore\n"}, summary: "Updated f",
		},
		{
			name:  "end of file: append without context",
			files: map[string]string{"f": "a\nb\n"},
			patch: "*** Begin Patch\n*** Update File: f\n@@\n+c\n*** End of File\n*** End Patch",
			want:  map[string]string{"f": "a\nb\nc\n"}, summary: "Updated f",
		},
		{
			name:  "insert at the top without context",
			files: map[string]string{"f": "a\n"},
			patch: "*** Begin Patch\n*** Update File: f\n+first\n*** End Patch",
			want:  map[string]string{"f": "first\na\n"}, summary: "Updated f",
		},
		{
			name:  "a file without a final newline keeps it that way",
			files: map[string]string{"f": "a\nb"},
			patch: "*** Begin Patch\n*** Update File: f\n a\n-b\n+B\n*** End Patch",
			want:  map[string]string{"f": "a\nB"}, summary: "Updated f",
		},
		{
			name:  "CRLF files stay CRLF",
			files: map[string]string{"w.txt": "one\r\ntwo\r\n"},
			patch: "*** Begin Patch\n*** Update File: w.txt\n-two\n+TWO\n+three\n*** End Patch",
			want:  map[string]string{"w.txt": "one\r\nTWO\r\nthree\r\n"}, summary: "Updated w.txt",
		},
		{
			name:  "an empty file can be filled",
			files: map[string]string{"e": ""},
			patch: "*** Begin Patch\n*** Update File: e\n+x\n*** End Patch",
			want:  map[string]string{"e": "x\n"}, summary: "Updated e",
		},
		{
			name:  "several operations see each other",
			files: map[string]string{"a": "1\n"},
			patch: "*** Begin Patch\n*** Add File: b\n+b1\n*** Update File: b\n-b1\n+b2\n*** Update File: a\n*** Move to: c\n-1\n+2\n*** Update File: c\n-2\n+3\n*** Add File: tmp\n+t\n*** Delete File: tmp\n*** End Patch",
			want:  map[string]string{"b": "b2\n", "c": "3\n"},
			summary: strings.Join([]string{
				"Created b", "Updated b", "Updated a", "Moved a to c", "Updated c", "Created tmp", "Deleted tmp",
			}, "\n"),
		},
		{
			name:    "the /workspace alias",
			files:   map[string]string{"a": "x\n"},
			patch:   "*** Begin Patch\n*** Update File: /workspace/a\n-x\n+y\n*** Add File: ./d/../e\n+no\n*** End Patch",
			want:    nil, // the second path has "..": nothing is written
			summary: "",
		},
		{
			name:    "the /workspace alias and ./ are cleaned",
			files:   map[string]string{"a": "x\n"},
			patch:   "*** Begin Patch\n*** Update File: /workspace/a\n-x\n+y\n*** Add File: ./d//e\n+e\n*** End Patch",
			want:    map[string]string{"a": "y\n", "d/e": "e\n"},
			summary: "Updated a\nCreated d/e",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMemFS(tt.files)
			p, err := ParsePatch(tt.patch)
			if err != nil {
				t.Fatal(err)
			}
			summary, err := ApplyPatch(context.Background(), m, p)
			if tt.want == nil {
				if err == nil || m.writes != 0 {
					t.Fatalf("err = %v, writes = %d; want an error and no writes", err, m.writes)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if summary != tt.summary {
				t.Errorf("summary = %q; want %q", summary, tt.summary)
			}
			if !maps.Equal(m.files, tt.want) {
				t.Errorf("files:\n got %q\nwant %q", m.files, tt.want)
			}
		})
	}
}

// TestApplyPatchFailures checks that a patch that cannot be applied says
// why, where, and writes nothing.
func TestApplyPatchFailures(t *testing.T) {
	files := map[string]string{"a.txt": "alpha\nbeta\ngamma\n", "b.txt": "b\n"}
	tests := []struct {
		name   string
		patch  string
		line   int
		msg    string
		escape bool
	}{
		{"parent escape", "*** Begin Patch\n*** Add File: ../x\n+pwned\n*** End Patch", 2, `"../x" has a ".." element`, true},
		{"absolute path", "*** Begin Patch\n*** Update File: /etc/passwd\n-root\n+me\n*** End Patch", 2, `"/etc/passwd" is absolute`, true},
		{"escape through the alias", "*** Begin Patch\n*** Delete File: /workspace/../etc/passwd\n*** End Patch", 2, `path "/workspace/../etc/passwd"`, true},
		{"escape after a good operation", "*** Begin Patch\n*** Add File: ok.txt\n+fine\n*** Update File: a.txt\n*** Move to: ../../outside\n-alpha\n*** End Patch", 5, `"../../outside" has a ".." element`, true},
		{"the workspace root", "*** Begin Patch\n*** Delete File: /workspace\n*** End Patch", 2, `is the workspace root, not a file`, false},
		{"update of a missing file", "*** Begin Patch\n*** Update File: nope.txt\n-x\n*** End Patch", 2, "nope.txt: no such file to update", false},
		{"delete of a missing file", "*** Begin Patch\n*** Delete File: nope.txt\n*** End Patch", 2, "nope.txt: no such file to delete", false},
		{"update after delete", "*** Begin Patch\n*** Delete File: b.txt\n*** Update File: b.txt\n-b\n*** End Patch", 3, "b.txt: no such file to update", false},
		{"context not found", "*** Begin Patch\n*** Add File: new.txt\n+n\n*** Update File: a.txt\n@@\n alpha\n-BETA\n+delta\n*** End Patch", 5,
			"a.txt: hunk 1: could not find these lines after line 0 of the file (context and '-' lines must match the file):\n    alpha\n    BETA", false},
		{"second hunk not after the first", "*** Begin Patch\n*** Update File: a.txt\n@@\n-gamma\n+G\n@@\n-alpha\n+A\n*** End Patch", 6,
			"hunk 2: could not find these lines after line 3", false},
		{"stacked anchor not found", "*** Begin Patch\n*** Update File: a.txt\n@@ alpha\n@@ zeta\n-gamma\n*** End Patch", 4, `hunk 1: anchor "@@ zeta" not found`, false},
		{"end of file context elsewhere", "*** Begin Patch\n*** Update File: a.txt\n@@\n-delta\n*** End of File\n*** End Patch", 3, "could not find these lines at the end of the file", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMemFS(files)
			p, err := ParsePatch(tt.patch)
			if err != nil {
				t.Fatal(err)
			}
			_, err = ApplyPatch(context.Background(), m, p)
			var pe *PatchError
			if !errors.As(err, &pe) {
				t.Fatalf("error = %v; want a *PatchError", err)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error = %q; want it to contain %q", err, tt.msg)
			}
			if pe.Line != tt.line {
				t.Errorf("Line = %d; want %d", pe.Line, tt.line)
			}
			if got := errors.Is(err, sandbox.ErrPathEscape); got != tt.escape {
				t.Errorf("errors.Is(err, ErrPathEscape) = %v; want %v", got, tt.escape)
			}
			if m.writes != 0 || !maps.Equal(m.files, files) {
				t.Errorf("the failed patch wrote %d times: %q", m.writes, m.files)
			}
		})
	}
}

func TestApplyPatchKeepsModes(t *testing.T) {
	m := newMemFS(map[string]string{"run.sh": "#!/bin/sh\necho hi\n"})
	m.modes["run.sh"] = 0o755
	p, err := ParsePatch("*** Begin Patch\n*** Update File: run.sh\n*** Move to: bin/run.sh\n-echo hi\n+echo hello\n*** Add File: new.sh\n+x\n*** End Patch")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ApplyPatch(context.Background(), listFS{m}, p); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]fs.FileMode{"bin/run.sh": 0o755, "new.sh": 0o644} {
		if got := m.modes[p]; got != want {
			t.Errorf("mode of %s = %v; want %v", p, got, want)
		}
	}
}

// failFS fails the writes of one path.
type failFS struct {
	*memFS
	path string
}

func (f *failFS) WriteFile(ctx context.Context, p string, data []byte, mode fs.FileMode) error {
	if p == f.path {
		return fmt.Errorf("disk full")
	}
	return f.memFS.WriteFile(ctx, p, data, mode)
}

// TestApplyPatchRenameWritesFirst checks that a rename whose write fails
// keeps the original file.
func TestApplyPatchRenameWritesFirst(t *testing.T) {
	f := &failFS{memFS: newMemFS(map[string]string{"a": "x\n"}), path: "b"}
	p, _ := ParsePatch("*** Begin Patch\n*** Update File: a\n*** Move to: b\n-x\n+y\n*** End Patch")
	_, err := ApplyPatch(context.Background(), f, p)
	if err == nil || !strings.Contains(err.Error(), "b: write: disk full") {
		t.Fatalf("error = %v; want the write failure", err)
	}
	if f.files["a"] != "x\n" {
		t.Errorf("a = %q; the source of a failed rename must stay", f.files["a"])
	}
}

// TestApplyPatchRollsBack checks that when a write fails midway, the
// files already written are restored: changed ones to their content,
// created ones removed.
func TestApplyPatchRollsBack(t *testing.T) {
	f := &failFS{memFS: newMemFS(map[string]string{"a": "1\n", "gone": "g\n"}), path: "c"}
	p, _ := ParsePatch("*** Begin Patch\n*** Update File: a\n-1\n+2\n*** Add File: new\n+n\n*** Delete File: gone\n*** Add File: c\n+c\n*** End Patch")
	_, err := ApplyPatch(context.Background(), f, p)
	if err == nil || !strings.Contains(err.Error(), "c: write: disk full; the 2 files changed before were restored") {
		t.Fatalf("error = %v; want the write failure and the restore", err)
	}
	if want := map[string]string{"a": "1\n", "gone": "g\n"}; !maps.Equal(f.files, want) {
		t.Errorf("files = %q; want %q", f.files, want)
	}
}
