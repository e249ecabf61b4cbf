package memory

// Generations: how a scope's consolidated files change, one writer at a
// time. The protocol that writes them (claim, apply, take over) is in
// writers.go; this file holds their layout and format: the generations,
// their takeovers and their marks.

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// GenerationsDir holds a scope's generations, outside memories/ so that
// neither workspaces nor forks get them:
//
//	generations/<seq>.json               generation seq, created once (create-only)
//	generations/<seq>.takeover.<n>.json  its takeover n, created once
//	generations/<seq>.applied            its files are all written
//
// seq is 20 decimal digits, so that key order is generation order.
const GenerationsDir = "generations/"

// KeepGenerations is how many generations, the newest, a scope keeps;
// older ones are deleted once a newer one is applied.
const KeepGenerations = 8

// Writers of generations (Generation.By).
const (
	// ByPhase2 marks a generation of phase 2: MEMORY.md, the summary, the
	// skills it wrote and the selection.
	ByPhase2 = "phase2"
	// ByWriteBack marks a generation of an agent's live edit of MEMORY.md
	// or the summary, written back from its workspace.
	ByWriteBack = "write-back"
)

// Generation is one change of a scope's consolidated files: the files it
// writes, whole, in order (a phase 2's selection last). Generation seq is
// created once, by the writer that read generation seq-1 as the scope's
// newest and applied; whoever loses that race finds out, so no writer
// overwrites a change it did not see. The files are written (applied)
// after the generation is created, by its writer or, if that writer
// crashed, by the next one.
type Generation struct {
	// Version is the format, 1.
	Version int `json:"version"`
	// Seq numbers the scope's generations from 1.
	Seq int64 `json:"seq"`
	// By is ByPhase2 or ByWriteBack; Source names the writer (the memory
	// workflow, or the sandbox whose edit it is).
	By     string `json:"by"`
	Source string `json:"source,omitempty"`
	// Writer names the attempt that created it (its activity, attempt
	// and a random nonce): that attempt alone writes its files, until
	// ApplyBy. Another writer (a retry of the same activity too) that
	// finds it unapplied after that, and a margin, takes it over
	// ([Takeover]) before it writes a file of it.
	Writer string `json:"writer,omitempty"`
	// At is when it was created.
	At      time.Time `json:"at"`
	ApplyBy time.Time `json:"apply_by"`
	// Files are the files it writes, in order.
	Files []GenerationFile `json:"files"`
}

// Takeover is a writer's right to apply a generation whose writer's time
// ran out: takeover n of generation Seq is created once, by the one
// writer that then writes the generation's files, until ApplyBy. When
// that writer's time runs out in turn, another one creates takeover n+1.
type Takeover struct {
	// Version is the format, 1.
	Version int   `json:"version"`
	Seq     int64 `json:"seq"`
	// N numbers the generation's takeovers from 1.
	N int `json:"n"`
	// Writer names the attempt that took it over, as Generation.Writer.
	Writer  string    `json:"writer"`
	At      time.Time `json:"at"`
	ApplyBy time.Time `json:"apply_by"`
}

// check reports what makes t unfit.
func (t Takeover) check() error {
	if t.Version != 1 || t.Seq < 1 || t.N < 1 {
		return fmt.Errorf("%w: takeover version %d, seq %d, n %d", ErrBadGeneration, t.Version, t.Seq, t.N)
	}
	return nil
}

// Encode renders t's file.
func (t Takeover) Encode() ([]byte, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	return json.Marshal(t)
}

// ParseTakeover parses a takeover's file.
func ParseTakeover(data []byte) (Takeover, error) {
	var t Takeover
	if err := json.Unmarshal(data, &t); err != nil {
		return Takeover{}, fmt.Errorf("%w: %v", ErrBadGeneration, err)
	}
	return t, t.check()
}

// GenerationFile is a file a generation writes: its path in the scope
// and its content (UTF-8 text).
type GenerationFile struct {
	Path string `json:"path"`
	Data string `json:"data"`
}

// ErrBadGeneration reports a generation file that cannot be applied.
var ErrBadGeneration = errors.New("memory: bad generation")

// GenerationPath is the path of generation seq.
func GenerationPath(seq int64) string { return fmt.Sprintf("%s%020d.json", GenerationsDir, seq) }

// AppliedPath is the path of the mark that generation seq is applied.
func AppliedPath(seq int64) string { return fmt.Sprintf("%s%020d.applied", GenerationsDir, seq) }

// TakeoverPath is the path of takeover n of generation seq.
func TakeoverPath(seq int64, n int) string {
	return fmt.Sprintf("%s%020d.takeover.%d.json", GenerationsDir, seq, n)
}

// ParseGenerationPath reads the seq of a path under GenerationsDir, and
// whether it is an applied mark; ok is false for any other name (a
// takeover, or a crashed create's temporary file).
func ParseGenerationPath(path string) (seq int64, applied, ok bool) {
	seq, ext, ok := parseGenerationName(path)
	if !ok || (ext != "json" && ext != "applied") {
		return 0, false, false
	}
	return seq, ext == "applied", true
}

// ParseTakeoverPath reads the seq and number of a takeover's path; ok is
// false for any other name.
func ParseTakeoverPath(path string) (seq int64, n int, ok bool) {
	seq, ext, ok := parseGenerationName(path)
	num, found := strings.CutPrefix(ext, "takeover.")
	num, json := strings.CutSuffix(num, ".json")
	if !ok || !found || !json {
		return 0, 0, false
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 1 || strconv.Itoa(n) != num {
		return 0, 0, false
	}
	return seq, n, true
}

// parseGenerationName splits a path under GenerationsDir into its seq
// and what follows the seq's dot.
func parseGenerationName(path string) (seq int64, ext string, ok bool) {
	name, found := strings.CutPrefix(path, GenerationsDir)
	if !found {
		return 0, "", false
	}
	num, ext, _ := strings.Cut(name, ".")
	if len(num) != 20 {
		return 0, "", false
	}
	seq, err := strconv.ParseInt(num, 10, 64)
	if err != nil || seq < 1 {
		return 0, "", false
	}
	return seq, ext, true
}

// Consolidated reports whether path is a file that generations write:
// MEMORY.md, the summary, the selection, or a skill's SKILL.md. Only
// those: a generation cannot write a rollout, a raw memory or anything
// else of the scope.
func Consolidated(path string) bool {
	switch path {
	case HandbookPath, SummaryPath, SelectionPath:
		return true
	}
	name, ok := strings.CutSuffix(strings.TrimPrefix(path, SkillsDir), "/SKILL.md")
	return ok && strings.HasPrefix(path, SkillsDir) && SkillNamePattern.MatchString(name)
}

// Paths are the paths of the files g writes.
func (g Generation) Paths() []string {
	out := make([]string, len(g.Files))
	for i, f := range g.Files {
		out[i] = f.Path
	}
	return out
}

// check reports what makes g unfit to be applied.
func (g Generation) check() error {
	if g.Version != 1 || g.Seq < 1 || (g.By != ByPhase2 && g.By != ByWriteBack) {
		return fmt.Errorf("%w: version %d, seq %d, by %q", ErrBadGeneration, g.Version, g.Seq, g.By)
	}
	for _, f := range g.Files {
		if !Consolidated(f.Path) {
			return fmt.Errorf("%w: %s is not a file generations write", ErrBadGeneration, f.Path)
		}
		if !utf8.ValidString(f.Data) {
			return fmt.Errorf("%w: %s is not UTF-8 text", ErrBadGeneration, f.Path)
		}
	}
	return nil
}

// Encode renders g's file; a generation that could not be applied (a
// path generations do not write, text that is not UTF-8) is an error.
func (g Generation) Encode() ([]byte, error) {
	if err := g.check(); err != nil {
		return nil, err
	}
	return json.Marshal(g)
}

// ParseGeneration parses a generation's file.
func ParseGeneration(data []byte) (Generation, error) {
	var g Generation
	if err := json.Unmarshal(data, &g); err != nil {
		return Generation{}, fmt.Errorf("%w: %v", ErrBadGeneration, err)
	}
	return g, g.check()
}
