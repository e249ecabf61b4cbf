package capabilities

import (
	"reflect"
	"strings"
	"testing"
)

func TestParsePatch(t *testing.T) {
	tests := []struct {
		name  string
		patch string
		want  []FilePatch
	}{
		{
			name: "add, update with move, delete",
			patch: `*** Begin Patch
*** Add File: hello.txt
+Hello world
+
+bye
*** Update File: src/app.py
*** Move to: src/main.py
@@ def greet():
-print("Hi")
+print("Hello, world!")
*** Delete File: obsolete.txt
*** End Patch
`,
			want: []FilePatch{
				{Op: OpAdd, Path: "hello.txt", Content: "Hello world\n\nbye\n", Line: 2},
				{Op: OpUpdate, Path: "src/app.py", MoveTo: "src/main.py", Line: 6, Hunks: []Hunk{{
					Anchors: []string{"def greet():"}, Line: 8,
					Lines: []HunkLine{{'-', `print("Hi")`}, {'+', `print("Hello, world!")`}},
				}}},
				{Op: OpDelete, Path: "obsolete.txt", Line: 11},
			},
		},
		{
			name: "first hunk without @@, stacked anchors, empty context line, end of file",
			patch: `*** Begin Patch
*** Update File: a.go
 package a
-var x = 1
+var x = 2
@@ type T struct{}
@@ func (T) M() {
 	a := 1

-	return
+	return a
 }
*** End of File
*** End Patch`,
			want: []FilePatch{{Op: OpUpdate, Path: "a.go", Line: 2, Hunks: []Hunk{
				{Line: 3, Lines: []HunkLine{{' ', "package a"}, {'-', "var x = 1"}, {'+', "var x = 2"}}},
				{Line: 6, Anchors: []string{"type T struct{}", "func (T) M() {"}, EOF: true, Lines: []HunkLine{
					{' ', "\ta := 1"}, {' ', ""}, {'-', "\treturn"}, {'+', "\treturn a"}, {' ', "}"},
				}},
			}}},
		},
		{
			name:  "an empty added file",
			patch: "*** Begin Patch\n*** Add File: empty\n*** End Patch",
			want:  []FilePatch{{Op: OpAdd, Path: "empty", Line: 2}},
		},
		{
			name:  "CRLF line ends, surrounding blank lines and path spaces",
			patch: "\r\n\r\n*** Begin Patch\r\n*** Add File:   dir/x.txt  \r\n+a\r\n*** End Patch\r\n\r\n",
			want:  []FilePatch{{Op: OpAdd, Path: "dir/x.txt", Content: "a\n", Line: 4}},
		},
		{
			name:  "a heredoc wrapper is ignored",
			patch: "apply_patch <<'EOF'\n*** Begin Patch\n*** Delete File: x\n*** End Patch\nEOF\n",
			want:  []FilePatch{{Op: OpDelete, Path: "x", Line: 3}},
		},
		{
			name:  "bare @@ between hunks and a unified-diff header as an anchor",
			patch: "*** Begin Patch\n*** Update File: f\n@@\n-a\n+b\n@@ -10,2 +10,2 @@\n c\n-d\n*** End Patch",
			want: []FilePatch{{Op: OpUpdate, Path: "f", Line: 2, Hunks: []Hunk{
				{Line: 3, Lines: []HunkLine{{'-', "a"}, {'+', "b"}}},
				{Line: 6, Anchors: []string{"-10,2 +10,2 @@"}, Lines: []HunkLine{{' ', "c"}, {'-', "d"}}},
			}}},
		},
		{
			name:  "an indented End Patch inside a hunk is a context line",
			patch: "*** Begin Patch\n*** Update File: f\n@@\n *** End Patch\n+x\n*** End Patch",
			want: []FilePatch{{Op: OpUpdate, Path: "f", Line: 2, Hunks: []Hunk{
				{Line: 3, Lines: []HunkLine{{' ', "*** End Patch"}, {'+', "x"}}},
			}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParsePatch(tt.patch)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(p.Files, tt.want) {
				t.Errorf("ParsePatch:\n got %+v\nwant %+v", p.Files, tt.want)
			}
			// The rendering reads back to the same patch.
			again, err := ParsePatch(p.String())
			if err != nil {
				t.Fatalf("ParsePatch(String()): %v\n%s", err, p)
			}
			if got, want := again.String(), p.String(); got != want {
				t.Errorf("round trip:\n got %s\nwant %s", got, want)
			}
		})
	}
}

func TestParsePatchErrors(t *testing.T) {
	tests := []struct {
		name  string
		patch string
		line  int
		msg   string // a part of the error message
	}{
		{"empty", "  \n\n", 0, `the patch is empty; expected "*** Begin Patch"`},
		{"no begin", "*** Update File: a\n@@\n-a\n*** End Patch", 1, `expected "*** Begin Patch", got "*** Update File: a"`},
		{"no end", "*** Begin Patch\n*** Add File: a\n+x", 4, `missing "*** End Patch"`},
		{"nothing in it", "*** Begin Patch\n*** End Patch", 2, "the patch has no file operations"},
		{"text after end", "*** Begin Patch\n*** Delete File: a\n*** End Patch\nmore", 4, `unexpected text after "*** End Patch": "more"`},
		{"unknown operation", "*** Begin Patch\n*** Rename File: a\n*** End Patch", 2, `expected a file operation`},
		{"stray text", "*** Begin Patch\nhello\n*** End Patch", 2, `got "hello"`},
		{"missing path", "*** Begin Patch\n*** Add File: \n+x\n*** End Patch", 2, `missing path after "*** Add File:"`},
		{"add line without +", "*** Begin Patch\n*** Add File: a\n+x\ny\n*** End Patch", 4, `in Add File a: every line of a new file must start with "+", got "y"`},
		{"delete with a body", "*** Begin Patch\n*** Delete File: a\n-x\n*** End Patch", 3, `Delete File a takes no lines`},
		{"update without hunks", "*** Begin Patch\n*** Update File: a\n*** End Patch", 2, `Update File a has no hunks`},
		{"move without hunks", "*** Begin Patch\n*** Update File: a\n*** Move to: b\n*** End Patch", 2, `Update File a has no hunks`},
		{"empty hunk", "*** Begin Patch\n*** Update File: a\n@@ x\n*** End Patch", 3, `the hunk has no lines`},
		{"bad hunk line", "*** Begin Patch\n*** Update File: a\n@@\n-x\nx\n*** End Patch", 5, `expected a hunk line starting with " " (context), "-" (delete) or "+" (add), or "@@"; got "x"`},
		{"bad @@ header", "*** Begin Patch\n*** Update File: a\n@@x\n-x\n*** End Patch", 3, `expected "@@" or "@@ <context line>", got "@@x"`},
		{"unknown marker", "*** Begin Patch\n*** Update File: a\n@@\n-x\n*** End of Hunk\n*** End Patch", 5, `unknown marker "*** End of Hunk"`},
		{"end of file first", "*** Begin Patch\n*** Update File: a\n*** End of File\n*** End Patch", 3, `"*** End of File" must end a hunk that has lines`},
		{"lines after end of file", "*** Begin Patch\n*** Update File: a\n@@\n-x\n*** End of File\n+y\n*** End Patch", 6, `a hunk after "*** End of File" must start with "@@"`},
		{"missing move path", "*** Begin Patch\n*** Update File: a\n*** Move to:\n@@\n-x\n*** End Patch", 3, `missing path after "*** Move to:"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParsePatch(tt.patch)
			pe, ok := err.(*PatchError)
			if !ok {
				t.Fatalf("error = %v (%T); want a *PatchError", err, err)
			}
			if pe.Line != tt.line {
				t.Errorf("Line = %d; want %d (%v)", pe.Line, tt.line, err)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error = %q; want it to contain %q", err, tt.msg)
			}
		})
	}
}

// FuzzParsePatch checks that the parser never panics, and that a patch it
// accepts renders to text it reads back to the same patch.
func FuzzParsePatch(f *testing.F) {
	for _, s := range []string{
		"*** Begin Patch\n*** Add File: a\n+x\n*** End Patch",
		"*** Begin Patch\n*** Update File: a\n*** Move to: b\n@@ f\n a\n-b\n+c\n*** End of File\n*** End Patch\n",
		"*** Begin Patch\n*** Delete File: a\n*** Update File: b\n x\n\n+y\n@@\n@@ z\n-q\n*** End Patch",
		"<<EOF\n*** Begin Patch\n*** Delete File: ../x\n*** End Patch\nEOF",
		"*** Begin Patch\r\n*** Add File: a\r\n+\r\r\n*** End Patch",
		"*** Begin Patch\n*** Update File: a\n@@\n *** End Patch\n*** End Patch",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		p, err := ParsePatch(text)
		if err != nil {
			if _, ok := err.(*PatchError); !ok {
				t.Fatalf("error %v is a %T, not a *PatchError", err, err)
			}
			return
		}
		rendered := p.String()
		again, err := ParsePatch(rendered)
		if err != nil {
			t.Fatalf("the rendering of an accepted patch does not parse: %v\n%s", err, rendered)
		}
		if len(again.Files) != len(p.Files) {
			t.Fatalf("round trip changed the file count: %d, then %d", len(p.Files), len(again.Files))
		}
		for i := range p.Files {
			a, b := p.Files[i], again.Files[i]
			a.Line, b.Line = 0, 0
			a.Hunks, b.Hunks = withoutLines(a.Hunks), withoutLines(b.Hunks)
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("round trip changed file %d:\n got %+v\nwant %+v", i, b, a)
			}
		}
	})
}

func withoutLines(hs []Hunk) []Hunk {
	out := make([]Hunk, len(hs))
	for i, h := range hs {
		h.Line = 0
		out[i] = h
	}
	return out
}
