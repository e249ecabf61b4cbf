// This file holds the V4A patch format that apply_patch takes: its types,
// ParsePatch, and Patch.String, which renders a patch back to text.
//
//	*** Begin Patch
//	*** Add File: hello.txt
//	+Hello world
//	*** Update File: src/app.py
//	*** Move to: src/main.py
//	@@ def greet():
//	-print("Hi")
//	+print("Hello, world!")
//	*** Delete File: obsolete.txt
//	*** End Patch

package capabilities

import (
	"fmt"
	"strings"
)

// The markers of the V4A format.
const (
	beginPatch = "*** Begin Patch"
	endPatch   = "*** End Patch"
	addFile    = "*** Add File: "
	deleteFile = "*** Delete File: "
	updateFile = "*** Update File: "
	moveTo     = "*** Move to: "
	endOfFile  = "*** End of File"
)

// FileOp says what a FilePatch does to its file.
type FileOp string

// The three file operations of a patch.
const (
	// OpAdd creates a file (overwriting one that exists) with Content.
	OpAdd FileOp = "add"
	// OpUpdate edits a file in place with Hunks, and renames it when
	// MoveTo is set.
	OpUpdate FileOp = "update"
	// OpDelete removes a file.
	OpDelete FileOp = "delete"
)

// Patch is a parsed V4A patch: file operations applied in order.
type Patch struct {
	// Files are the file sections, in patch order.
	Files []FilePatch
}

// FilePatch is one file section of a patch.
type FilePatch struct {
	// Op is the operation.
	Op FileOp
	// Path is the file, as written in the patch (workspace-relative).
	Path string
	// MoveTo is the new path of an updated file; empty means no rename.
	MoveTo string
	// Content is the whole content of an added file: each "+" line
	// followed by a newline.
	Content string
	// Hunks are the edits of an updated file, in file order.
	Hunks []Hunk
	// Line is the 1-based line of the section's header in the patch text.
	Line int
}

// Hunk is one edit of an updated file: a run of context, deleted and
// added lines, located by its context and deleted lines (its "old" lines)
// and optionally by anchors.
type Hunk struct {
	// Anchors are the texts of the hunk's "@@ text" headers: lines (such as
	// a function signature) to find, in order, before the hunk's context.
	// A bare "@@" adds no anchor.
	Anchors []string
	// Lines are the hunk's body.
	Lines []HunkLine
	// EOF reports a "*** End of File" marker: the hunk's old lines end
	// the file.
	EOF bool
	// Line is the 1-based line in the patch text where the hunk starts.
	Line int
}

// HunkLine is one line of a hunk's body.
type HunkLine struct {
	// Kind is ' ' for context, '-' for a deleted line, '+' for an added
	// one.
	Kind byte
	// Text is the line without its prefix and newline.
	Text string
}

// PatchError reports a patch that cannot be parsed or applied. A patch
// that fails to parse, or whose paths or hunks do not fit the workspace,
// writes nothing; see ApplyPatch for a write that fails midway.
type PatchError struct {
	// Line is the 1-based line of the patch text the error concerns; 0
	// when it concerns no particular line.
	Line int
	// Path is the file the error concerns, when there is one.
	Path string
	// Msg says what went wrong and, for syntax errors, what was expected.
	Msg string
	// Err is the underlying cause, if any (sandbox.ErrPathEscape,
	// fs.ErrNotExist, ...).
	Err error
}

// Error reads "apply_patch: line N: path: message".
func (e *PatchError) Error() string {
	var b strings.Builder
	b.WriteString("apply_patch: ")
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Path != "" {
		b.WriteString(e.Path + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns the cause, so that errors.Is(err, sandbox.ErrPathEscape)
// and errors.Is(err, fs.ErrNotExist) work.
func (e *PatchError) Unwrap() error { return e.Err }

// ParsePatch parses a V4A patch. Surrounding blank lines are ignored, and
// so is a shell heredoc wrapper ("apply_patch <<'EOF'" ... "EOF") that
// models trained on the shell form of apply_patch sometimes add. Errors
// are *PatchError with the line number and what was expected there.
//
// The grammar:
//
//	Patch      := "*** Begin Patch" { FileOp } "*** End Patch"
//	FileOp     := AddFile | DeleteFile | UpdateFile
//	AddFile    := "*** Add File: " path { "+" line }
//	DeleteFile := "*** Delete File: " path
//	UpdateFile := "*** Update File: " path [ "*** Move to: " path ] Hunk { Hunk }
//	Hunk       := { "@@" [ " " anchor ] } { (" " | "-" | "+") line } [ "*** End of File" ]
//
// A hunk starts at its "@@" lines; only a file's first hunk may leave them
// out, and body lines after a hunk extend it. An empty line inside a hunk
// is an empty context line.
func ParsePatch(text string) (*Patch, error) {
	lines := strings.Split(text, "\n")
	for i := range lines {
		lines[i] = strings.TrimRight(lines[i], "\r")
	}
	first, last := 0, len(lines)-1
	for first <= last && strings.TrimSpace(lines[first]) == "" {
		first++
	}
	for last >= first && strings.TrimSpace(lines[last]) == "" {
		last--
	}
	if first > last {
		return nil, &PatchError{Msg: "the patch is empty; expected " + quote(beginPatch)}
	}
	if term, ok := heredocStart(lines[first]); ok && first < last && strings.TrimSpace(lines[last]) == term {
		first++
		last--
		for first <= last && strings.TrimSpace(lines[first]) == "" {
			first++
		}
		for last >= first && strings.TrimSpace(lines[last]) == "" {
			last--
		}
	}
	p := &parser{lines: lines, i: first, end: last + 1}
	return p.patch()
}

// heredocStart recognises the first line of `apply_patch <<'EOF'` and
// returns the heredoc's terminator.
func heredocStart(line string) (string, bool) {
	s := strings.TrimSpace(line)
	s = strings.TrimSpace(strings.TrimPrefix(s, "apply_patch"))
	if !strings.HasPrefix(s, "<<") {
		return "", false
	}
	s = strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(s, "<<"), "-"))
	s = strings.Trim(s, `'"`)
	if s == "" || strings.ContainsAny(s, " \t") {
		return "", false
	}
	return s, true
}

type parser struct {
	lines  []string
	i, end int // current line and the end of the patch (exclusive), 0-based
}

func (p *parser) errf(line int, format string, args ...any) *PatchError {
	return &PatchError{Line: line, Msg: fmt.Sprintf(format, args...)}
}

// lineNo is the 1-based number of the current line.
func (p *parser) lineNo() int { return p.i + 1 }

func (p *parser) patch() (*Patch, error) {
	if strings.TrimSpace(p.lines[p.i]) != beginPatch {
		return nil, p.errf(p.lineNo(), "expected %s, got %s", quote(beginPatch), quote(p.lines[p.i]))
	}
	p.i++
	out := &Patch{}
	for {
		if p.i >= p.end {
			return nil, p.errf(p.lineNo(), "missing %s at the end of the patch", quote(endPatch))
		}
		line := p.lines[p.i]
		switch {
		case isMarker(line, endPatch):
			if p.i != p.end-1 {
				return nil, p.errf(p.lineNo()+1, "unexpected text after %s: %s", quote(endPatch), quote(p.lines[p.i+1]))
			}
			if len(out.Files) == 0 {
				return nil, p.errf(p.lineNo(), "the patch has no file operations; expected %s, %s or %s before %s",
					quote(addFile+"<path>"), quote(updateFile+"<path>"), quote(deleteFile+"<path>"), quote(endPatch))
			}
			return out, nil
		case isHeader(line, addFile):
			fp, err := p.addFile()
			if err != nil {
				return nil, err
			}
			out.Files = append(out.Files, fp)
		case isHeader(line, deleteFile):
			path, err := p.header(deleteFile)
			if err != nil {
				return nil, err
			}
			out.Files = append(out.Files, FilePatch{Op: OpDelete, Path: path, Line: p.lineNo()})
			p.i++
			if p.i < p.end && !sectionEnd(p.lines[p.i]) {
				return nil, p.errf(p.lineNo(), "Delete File %s takes no lines; expected the next file operation or %s, got %s",
					path, quote(endPatch), quote(p.lines[p.i]))
			}
		case isHeader(line, updateFile):
			fp, err := p.updateFile()
			if err != nil {
				return nil, err
			}
			out.Files = append(out.Files, fp)
		default:
			return nil, p.errf(p.lineNo(), "expected a file operation (%s, %s or %s) or %s, got %s",
				quote(addFile+"<path>"), quote(updateFile+"<path>"), quote(deleteFile+"<path>"), quote(endPatch), quote(line))
		}
	}
}

// header returns the path of the current header line.
func (p *parser) header(prefix string) (string, error) {
	path := strings.TrimSpace(strings.TrimPrefix(p.lines[p.i], strings.TrimSuffix(prefix, " ")))
	if path == "" {
		return "", p.errf(p.lineNo(), "missing path after %s", quote(strings.TrimSpace(prefix)))
	}
	return path, nil
}

// sectionEnd reports whether line starts the next file section or ends
// the patch.
func sectionEnd(line string) bool {
	return isHeader(line, addFile) || isHeader(line, deleteFile) ||
		isHeader(line, updateFile) || isMarker(line, endPatch)
}

// isHeader reports whether line is a header with the given prefix
// ("*** Add File: "), or that prefix with no path after it.
func isHeader(line, prefix string) bool {
	return strings.HasPrefix(line, prefix) || strings.TrimRight(line, " \t") == strings.TrimSuffix(prefix, " ")
}

// isMarker reports whether line is the marker, trailing blanks aside.
// Leading blanks are not ignored: " *** End Patch" is a context line.
func isMarker(line, marker string) bool {
	return strings.TrimRight(line, " \t") == marker
}

func (p *parser) addFile() (FilePatch, error) {
	path, err := p.header(addFile)
	if err != nil {
		return FilePatch{}, err
	}
	fp := FilePatch{Op: OpAdd, Path: path, Line: p.lineNo()}
	p.i++
	var b strings.Builder
	for p.i < p.end && !sectionEnd(p.lines[p.i]) {
		line := p.lines[p.i]
		if !strings.HasPrefix(line, "+") {
			return FilePatch{}, p.errf(p.lineNo(), "in Add File %s: every line of a new file must start with %s, got %s", path, quote("+"), quote(line))
		}
		b.WriteString(line[1:])
		b.WriteByte('\n')
		p.i++
	}
	fp.Content = b.String()
	return fp, nil
}

func (p *parser) updateFile() (FilePatch, error) {
	path, err := p.header(updateFile)
	if err != nil {
		return FilePatch{}, err
	}
	fp := FilePatch{Op: OpUpdate, Path: path, Line: p.lineNo()}
	p.i++
	if p.i < p.end && isHeader(p.lines[p.i], moveTo) {
		if fp.MoveTo, err = p.header(moveTo); err != nil {
			return FilePatch{}, err
		}
		p.i++
	}
	// h is the open hunk: the one lines are added to. It is nil before
	// the first hunk and after "*** End of File".
	var h *Hunk
	for p.i < p.end && !sectionEnd(p.lines[p.i]) {
		line := p.lines[p.i]
		switch {
		case line == "@@" || strings.HasPrefix(line, "@@ "):
			if h == nil || len(h.Lines) > 0 || h.EOF {
				fp.Hunks = append(fp.Hunks, Hunk{Line: p.lineNo()})
				h = &fp.Hunks[len(fp.Hunks)-1]
			}
			if anchor := strings.TrimPrefix(strings.TrimPrefix(line, "@@"), " "); strings.TrimSpace(anchor) != "" {
				h.Anchors = append(h.Anchors, anchor)
			}
		case strings.HasPrefix(line, "@@"):
			return FilePatch{}, p.errf(p.lineNo(), "in Update File %s: expected %s or %s, got %s", path, quote("@@"), quote("@@ <context line>"), quote(line))
		case isMarker(line, endOfFile):
			if h == nil || h.EOF || len(h.Lines) == 0 {
				return FilePatch{}, p.errf(p.lineNo(), "in Update File %s: %s must end a hunk that has lines", path, quote(endOfFile))
			}
			h.EOF = true
		case strings.HasPrefix(line, "***"):
			return FilePatch{}, p.errf(p.lineNo(), "in Update File %s: unknown marker %s; expected a hunk line, %s, %s, another file operation or %s",
				path, quote(line), quote("@@"), quote(endOfFile), quote(endPatch))
		case line == "" || line[0] == ' ' || line[0] == '-' || line[0] == '+':
			if h != nil && h.EOF {
				return FilePatch{}, p.errf(p.lineNo(), "in Update File %s: a hunk after %s must start with %s", path, quote(endOfFile), quote("@@"))
			}
			if h == nil { // the first hunk may leave out its "@@"
				fp.Hunks = append(fp.Hunks, Hunk{Line: p.lineNo()})
				h = &fp.Hunks[0]
			}
			hl := HunkLine{Kind: ' '}
			if line != "" {
				hl = HunkLine{Kind: line[0], Text: line[1:]}
			}
			h.Lines = append(h.Lines, hl)
		default:
			return FilePatch{}, p.errf(p.lineNo(), "in Update File %s: expected a hunk line starting with %s (context), %s (delete) or %s (add), or %s; got %s",
				path, quote(" "), quote("-"), quote("+"), quote("@@"), quote(line))
		}
		p.i++
	}
	if len(fp.Hunks) == 0 {
		return FilePatch{}, p.errf(fp.Line, "Update File %s has no hunks; expected %s followed by lines starting with %s, %s or %s",
			path, quote("@@"), quote(" "), quote("-"), quote("+"))
	}
	for _, h := range fp.Hunks {
		if len(h.Lines) == 0 {
			return FilePatch{}, p.errf(h.Line, "in Update File %s: the hunk has no lines", path)
		}
	}
	return fp, nil
}

// String renders the patch as V4A text that ParsePatch reads back to an
// equal patch (line numbers aside). An added file's Content that lacks a
// final newline gains one.
func (p *Patch) String() string {
	var b strings.Builder
	b.WriteString(beginPatch + "\n")
	for _, f := range p.Files {
		switch f.Op {
		case OpAdd:
			b.WriteString(addFile + f.Path + "\n")
			if f.Content != "" {
				for _, l := range strings.Split(strings.TrimSuffix(f.Content, "\n"), "\n") {
					b.WriteString("+" + l + "\n")
				}
			}
		case OpDelete:
			b.WriteString(deleteFile + f.Path + "\n")
		case OpUpdate:
			b.WriteString(updateFile + f.Path + "\n")
			if f.MoveTo != "" {
				b.WriteString(moveTo + f.MoveTo + "\n")
			}
			for _, h := range f.Hunks {
				if len(h.Anchors) == 0 {
					b.WriteString("@@\n")
				}
				for _, a := range h.Anchors {
					b.WriteString("@@ " + a + "\n")
				}
				for _, l := range h.Lines {
					b.WriteByte(l.Kind)
					b.WriteString(l.Text + "\n")
				}
				if h.EOF {
					b.WriteString(endOfFile + "\n")
				}
			}
		}
	}
	b.WriteString(endPatch + "\n")
	return b.String()
}

// quote shows a patch line or marker in an error message.
func quote(s string) string {
	const limit = 80
	if len(s) > limit {
		s = cutUTF8(s, limit) + "…"
	}
	return fmt.Sprintf("%q", s)
}
