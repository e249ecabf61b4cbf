// This file applies a parsed patch to a workspace: hunks are located with
// the same fuzzy matching as the OpenAI Agents SDK's V4A applier (exact,
// then ignoring trailing whitespace, then ignoring surrounding
// whitespace), every edit is computed before anything is written, and the
// summary has the SDK's shape.

package capabilities

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// FS is the file access ApplyPatch needs. sandbox.Session satisfies it;
// paths are workspace-relative.
type FS interface {
	// ReadFile reads a file; a missing file gives an error wrapping
	// fs.ErrNotExist.
	ReadFile(ctx context.Context, path string) ([]byte, error)
	// WriteFile writes a file, creating parent directories.
	WriteFile(ctx context.Context, path string, data []byte, mode fs.FileMode) error
	// Remove removes a file.
	Remove(ctx context.Context, path string) error
}

// lister is the optional part of an FS that lets ApplyPatch keep an
// updated file's permission bits (an executable script stays executable).
type lister interface {
	List(ctx context.Context, path string) ([]sandbox.FileInfo, error)
}

// defaultFileMode is the mode of files a patch creates.
const defaultFileMode fs.FileMode = 0o644

// ApplyPatch applies p to fsys and returns a summary with one line per
// operation, as the OpenAI Agents SDK reports it:
//
//	Created docs/new.md
//	Updated src/app.py
//	Moved src/app.py to src/main.py
//	Deleted old.txt
//
// ("Moved" follows the "Updated" line of an update with a rename.)
//
// Every path is checked first (workspace-relative; no absolute path but
// under /workspace, no ".."), then every edit is computed against the
// files as they are (reading each path to be written, so that the FS can
// refuse one, such as a symlink out of the workspace, early), and only
// then are files written and removed. So a bad path, a missing file or a
// hunk whose context is not found fails the whole patch with a
// *PatchError and writes nothing; should a write itself fail, the files
// already changed are restored (directories created for them stay).
func ApplyPatch(ctx context.Context, fsys FS, p *Patch) (summary string, err error) {
	if p == nil || len(p.Files) == 0 {
		return "", &PatchError{Msg: "the patch has no file operations"}
	}
	// Check every path before touching anything.
	type op struct {
		FilePatch
		path, moveTo string
	}
	ops := make([]op, len(p.Files))
	for i, f := range p.Files {
		o := op{FilePatch: f}
		if o.path, err = workspaceFile(f.Path); err != nil {
			return "", &PatchError{Line: f.Line, Msg: err.Error(), Err: err}
		}
		if f.Op == OpUpdate && f.MoveTo != "" {
			if o.moveTo, err = workspaceFile(f.MoveTo); err != nil {
				return "", &PatchError{Line: f.Line + 1, Msg: err.Error(), Err: err}
			}
		}
		ops[i] = o
	}

	st := &stage{ctx: ctx, fsys: fsys, files: map[string]*staged{}, orig: map[string]original{}}
	var lines []string
	for _, o := range ops {
		switch o.Op {
		case OpAdd:
			if err := st.write(o.path, []byte(o.Content), defaultFileMode); err != nil {
				return "", fileErr(o.FilePatch, o.path, err)
			}
			lines = append(lines, "Created "+o.path)

		case OpDelete:
			if _, _, err := st.read(o.path); err != nil {
				return "", fileErr(o.FilePatch, o.path, err)
			}
			st.remove(o.path)
			lines = append(lines, "Deleted "+o.path)

		case OpUpdate:
			data, mode, err := st.read(o.path)
			if err != nil {
				return "", fileErr(o.FilePatch, o.path, err)
			}
			if !utf8.Valid(data) {
				return "", &PatchError{Line: o.Line, Path: o.path, Msg: "not a UTF-8 text file; apply_patch edits text files only"}
			}
			updated, err := applyHunks(string(data), o.FilePatch, o.path)
			if err != nil {
				return "", err
			}
			lines = append(lines, "Updated "+o.path)
			if o.moveTo == "" || o.moveTo == o.path {
				if err := st.write(o.path, []byte(updated), mode); err != nil {
					return "", fileErr(o.FilePatch, o.path, err)
				}
				continue
			}
			if err := st.write(o.moveTo, []byte(updated), mode); err != nil {
				f := o.FilePatch
				f.Line++
				return "", fileErr(f, o.moveTo, err)
			}
			st.remove(o.path)
			lines = append(lines, "Moved "+o.path+" to "+o.moveTo)

		default:
			return "", &PatchError{Line: o.Line, Path: o.path, Msg: fmt.Sprintf("unknown operation %q", o.Op)}
		}
	}
	if err := st.commit(); err != nil {
		return "", err
	}
	return strings.Join(lines, "\n"), nil
}

func fileErr(f FilePatch, path string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		what := "update"
		if f.Op == OpDelete {
			what = "delete"
		}
		return &PatchError{Line: f.Line, Path: path, Msg: "no such file to " + what, Err: err}
	}
	switch {
	case errors.Is(err, sandbox.ErrTooLarge):
		return &PatchError{Line: f.Line, Path: path, Err: err,
			Msg: fmt.Sprintf("the file is larger than apply_patch edits (%d MiB at most); change it with a command instead", sandbox.MaxReadBytes>>20)}
	case errors.Is(err, sandbox.ErrNotRegular):
		return &PatchError{Line: f.Line, Path: path, Err: err,
			Msg: "not a regular file (a directory, FIFO, socket or device); apply_patch edits regular files only"}
	}
	return &PatchError{Line: f.Line, Path: path, Msg: err.Error(), Err: err}
}

// stage holds a patch's writes and removals until every operation has
// been computed, so that later operations see earlier ones and a failure
// writes nothing. It reads every path it will write first, which both
// records what to restore should a write fail and lets the session refuse
// a path (a symlink out of the workspace, a directory) before anything is
// written.
type stage struct {
	ctx   context.Context
	fsys  FS
	files map[string]*staged  // the state each touched path ends in
	orig  map[string]original // the state each touched path started in
	order []string            // paths in the order they were first staged
}

type staged struct {
	data    []byte
	mode    fs.FileMode
	removed bool
}

type original struct {
	exists bool
	data   []byte
	mode   fs.FileMode
}

// original returns the state p had before the patch.
func (s *stage) original(p string) (original, error) {
	if o, ok := s.orig[p]; ok {
		return o, nil
	}
	var o original
	data, err := s.fsys.ReadFile(s.ctx, p)
	switch {
	case err == nil:
		o = original{exists: true, data: data, mode: s.mode(p)}
	case errors.Is(err, fs.ErrNotExist):
	default:
		return o, err
	}
	s.orig[p] = o
	return o, nil
}

// read returns p's content as the operations so far left it.
func (s *stage) read(p string) ([]byte, fs.FileMode, error) {
	if f, ok := s.files[p]; ok {
		if f.removed {
			return nil, 0, fmt.Errorf("%s was removed earlier in this patch: %w", p, fs.ErrNotExist)
		}
		return f.data, f.mode, nil
	}
	o, err := s.original(p)
	if err != nil {
		return nil, 0, err
	}
	if !o.exists {
		return nil, 0, &fs.PathError{Op: "read", Path: p, Err: fs.ErrNotExist}
	}
	return o.data, o.mode, nil
}

// mode is the permission bits of an existing file, when the FS can list.
func (s *stage) mode(p string) fs.FileMode {
	l, ok := s.fsys.(lister)
	if !ok {
		return defaultFileMode
	}
	dir := path.Dir(p)
	if dir == "." {
		dir = ""
	}
	infos, err := l.List(s.ctx, dir)
	if err != nil {
		return defaultFileMode
	}
	for _, fi := range infos {
		if fi.Name == path.Base(p) && !fi.IsDir && fi.Mode.Perm() != 0 {
			return fi.Mode.Perm()
		}
	}
	return defaultFileMode
}

func (s *stage) entry(p string) *staged {
	f, ok := s.files[p]
	if !ok {
		f = &staged{}
		s.files[p] = f
		s.order = append(s.order, p)
	}
	return f
}

// write stages p's new content, after checking that p can be read (or
// does not exist yet).
func (s *stage) write(p string, data []byte, mode fs.FileMode) error {
	if _, err := s.original(p); err != nil {
		return err
	}
	*s.entry(p) = staged{data: data, mode: mode}
	return nil
}

// remove stages p's removal; p has been read.
func (s *stage) remove(p string) {
	*s.entry(p) = staged{removed: true}
}

// commit writes first and removes last, so that a rename never loses the
// file. A removal of a file that never existed (added, then deleted, in
// the same patch) is not an error. When a write or removal fails, the
// paths already changed are put back as they were.
func (s *stage) commit() error {
	var done []string
	fail := func(p, op string, err error) error {
		msg := op + ": " + err.Error()
		if rerr := s.rollback(done); rerr != nil {
			msg += "; restoring the files changed before failed too: " + rerr.Error()
		} else if len(done) > 0 {
			msg += fmt.Sprintf("; the %d files changed before were restored", len(done))
		}
		return &PatchError{Path: p, Msg: msg, Err: err}
	}
	for _, p := range s.order {
		if f := s.files[p]; !f.removed {
			if err := s.fsys.WriteFile(s.ctx, p, f.data, f.mode); err != nil {
				return fail(p, "write", err)
			}
			done = append(done, p)
		}
	}
	for _, p := range s.order {
		if f := s.files[p]; f.removed {
			if err := s.fsys.Remove(s.ctx, p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fail(p, "remove", err)
			}
			done = append(done, p)
		}
	}
	return nil
}

// rollback puts the paths back as they were before the patch.
func (s *stage) rollback(paths []string) error {
	var errs []error
	for i := len(paths) - 1; i >= 0; i-- {
		p, o := paths[i], s.orig[paths[i]]
		var err error
		if o.exists {
			err = s.fsys.WriteFile(s.ctx, p, o.data, o.mode)
		} else if err = s.fsys.Remove(s.ctx, p); errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// textFile is a file split into lines, with its line-ending style kept so
// the edited file is written back in it.
type textFile struct {
	lines        []string
	crlf         bool
	finalNewline bool
}

func splitText(s string) textFile {
	t := textFile{crlf: strings.Contains(s, "\r\n"), finalNewline: true}
	if t.crlf {
		s = strings.ReplaceAll(s, "\r\n", "\n")
	}
	if s == "" {
		return t
	}
	t.finalNewline = strings.HasSuffix(s, "\n")
	t.lines = strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	return t
}

func (t textFile) String() string {
	if len(t.lines) == 0 {
		return ""
	}
	nl := "\n"
	if t.crlf {
		nl = "\r\n"
	}
	s := strings.Join(t.lines, nl)
	if t.finalNewline {
		s += nl
	}
	return s
}

// edit replaces old lines [start, start+n) of a file with lines.
type edit struct {
	start, n int
	lines    []string
}

// applyHunks applies an update's hunks to a file's text. Hunks are found
// in order, each after the previous one: first the hunk's anchors ("@@"
// lines) narrow the search, then its old lines (context and deletions)
// are matched exactly, then ignoring trailing whitespace, then ignoring
// surrounding whitespace. Context lines keep the file's version of the
// text; only deleted lines are removed and added lines inserted.
func applyHunks(text string, f FilePatch, path string) (string, error) {
	file := splitText(text)
	lines := file.lines
	var edits []edit
	cursor := 0
	for hi, h := range f.Hunks {
		var anchors []string
		for _, a := range h.Anchors {
			if strings.TrimSpace(a) != "" {
				anchors = append(anchors, a)
			}
		}
		for ai, a := range anchors {
			at, found := findAnchor(lines, a, cursor, ai > 0)
			// A single anchor that is not found is ignored, as the SDK
			// does: the context still has to match. Stacked anchors are
			// there to disambiguate, so each must be found.
			if !found && len(anchors) > 1 {
				return "", &PatchError{Line: h.Line + ai, Path: path,
					Msg: fmt.Sprintf("hunk %d: anchor %s not found after line %d of the file", hi+1, quote("@@ "+a), cursor)}
			}
			cursor = at
		}

		var old []string
		for _, l := range h.Lines {
			if l.Kind != '+' {
				old = append(old, l.Text)
			}
		}
		at := findLines(lines, old, cursor, h.EOF)
		if at < 0 {
			where := "after line " + fmt.Sprint(cursor) + " of the file"
			if h.EOF {
				where = "at the end of the file"
			}
			return "", &PatchError{Line: h.Line, Path: path,
				Msg: fmt.Sprintf("hunk %d: could not find these lines %s (context and '-' lines must match the file):\n%s",
					hi+1, where, indent(old))}
		}

		var repl []string
		pos := at
		for _, l := range h.Lines {
			switch l.Kind {
			case ' ':
				repl = append(repl, lines[pos])
				pos++
			case '-':
				pos++
			case '+':
				repl = append(repl, l.Text)
			}
		}
		edits = append(edits, edit{start: at, n: len(old), lines: repl})
		cursor = at + len(old)
	}

	out := make([]string, 0, len(lines))
	prev := 0
	for _, e := range edits {
		out = append(out, lines[prev:e.start]...)
		out = append(out, e.lines...)
		prev = e.start + e.n
	}
	out = append(out, lines[prev:]...)
	file.lines = out
	return file.String(), nil
}

// findAnchor looks for an anchor line at or after cursor, exactly then
// ignoring surrounding whitespace, and returns the line after it. An
// anchor that only occurs before cursor counts as found without moving,
// unless forward is set (a stacked anchor must come after the previous
// one).
func findAnchor(lines []string, anchor string, cursor int, forward bool) (int, bool) {
	for _, eq := range []func(a, b string) bool{exactEq, trimEq} {
		for i := cursor; i < len(lines); i++ {
			if eq(lines[i], anchor) {
				return i + 1, true
			}
		}
		if !forward {
			for i := 0; i < cursor && i < len(lines); i++ {
				if eq(lines[i], anchor) {
					return cursor, true
				}
			}
		}
	}
	return cursor, false
}

var (
	exactEq      = func(a, b string) bool { return a == b }
	trimRightEq  = func(a, b string) bool { return strings.TrimRight(a, " \t") == strings.TrimRight(b, " \t") }
	trimEq       = func(a, b string) bool { return strings.TrimSpace(a) == strings.TrimSpace(b) }
	fuzzyMatches = []func(a, b string) bool{exactEq, trimRightEq, trimEq}
)

// findLines returns where old occurs in lines at or after start, or -1.
// Each matching rule is tried over the whole range before the next, looser
// one. An EOF hunk must end at the file's last line; when it does not,
// it may match anywhere after start, as in the SDK.
func findLines(lines, old []string, start int, eof bool) int {
	if len(old) == 0 {
		if eof {
			return len(lines)
		}
		return start
	}
	if eof {
		if end := len(lines) - len(old); end >= start {
			for _, eq := range fuzzyMatches {
				if linesEqual(lines[end:], old, eq) {
					return end
				}
			}
		}
	}
	for _, eq := range fuzzyMatches {
		for i := start; i+len(old) <= len(lines); i++ {
			if linesEqual(lines[i:i+len(old)], old, eq) {
				return i
			}
		}
	}
	return -1
}

func linesEqual(a, b []string, eq func(a, b string) bool) bool {
	for i := range b {
		if !eq(a[i], b[i]) {
			return false
		}
	}
	return true
}

// indent shows lines of a file in an error message, bounded.
func indent(lines []string) string {
	const limit = 20
	var b strings.Builder
	for i, l := range lines {
		if i == limit {
			fmt.Fprintf(&b, "    … (%d more lines)\n", len(lines)-limit)
			break
		}
		b.WriteString("    " + l + "\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}
