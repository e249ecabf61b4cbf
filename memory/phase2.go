package memory

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Selection is phase 2's record of the raw memories it consolidated
// (phase_two_selection.json): the next phase 2 diffs against it.
type Selection struct {
	// Version is the file's format, 1.
	Version int `json:"version"`
	// Updated is when the phase 2 that wrote it ran.
	Updated time.Time `json:"updated"`
	// Selected are the raw memories it used, newest first.
	Selected []Selected `json:"selected"`
}

// Selected names one raw memory of a selection, as it was then.
type Selected struct {
	RolloutID string    `json:"rollout_id"`
	Lines     int       `json:"rollout_lines"`
	Updated   time.Time `json:"updated"`
}

// ParseSelection parses a selection file; no file (nil data) is an empty
// selection.
func ParseSelection(data []byte) (Selection, error) {
	if len(data) == 0 {
		return Selection{Version: 1}, nil
	}
	var s Selection
	if err := json.Unmarshal(data, &s); err != nil {
		return Selection{}, fmt.Errorf("%w: selection: %v", ErrBadFile, err)
	}
	if s.Version != 1 {
		return Selection{}, fmt.Errorf("%w: selection version %d", ErrBadFile, s.Version)
	}
	for _, sel := range s.Selected {
		if err := CheckRolloutID(sel.RolloutID); err != nil {
			return Selection{}, fmt.Errorf("%w: selection: %v", ErrBadFile, err)
		}
	}
	return s, nil
}

// Encode renders the selection file.
func (s Selection) Encode() []byte {
	data, _ := json.MarshalIndent(s, "", "  ")
	return append(data, '\n')
}

// Newest returns the n newest raw memories (by Updated, then rollout id),
// newest first; n <= 0 means all.
func Newest(raws []RawMemory, n int) []RawMemory {
	out := slices.Clone(raws)
	slices.SortFunc(out, func(a, b RawMemory) int {
		if c := b.Updated.Compare(a.Updated); c != 0 {
			return c
		}
		return cmp.Compare(a.RolloutID, b.RolloutID)
	})
	if n > 0 && len(out) > n {
		out = out[:n]
	}
	return out
}

// Changes is a selection's diff against the last: raw memories added
// (new, or rewritten since), kept as they were, and removed (left out of
// the newest, or gone). Removal is how memory forgets.
type Changes struct {
	Added   []RawMemory `json:"-"`
	Kept    []RawMemory `json:"-"`
	Removed []Selected  `json:"-"`
}

// Empty reports whether nothing changed.
func (c Changes) Empty() bool { return len(c.Added) == 0 && len(c.Removed) == 0 }

// Diff compares the selected raw memories (newest first) with the last
// selection.
func Diff(last Selection, selected []RawMemory) Changes {
	var c Changes
	was := map[string]Selected{}
	for _, s := range last.Selected {
		was[s.RolloutID] = s
	}
	now := map[string]bool{}
	for _, m := range selected {
		now[m.RolloutID] = true
		if s, ok := was[m.RolloutID]; ok && s.Lines == m.Lines && s.Updated.Equal(m.Updated) {
			c.Kept = append(c.Kept, m)
		} else {
			c.Added = append(c.Added, m)
		}
	}
	for _, s := range last.Selected {
		if !now[s.RolloutID] {
			c.Removed = append(c.Removed, s)
		}
	}
	return c
}

// SelectionOf is the selection that records selected, at time at.
func SelectionOf(selected []RawMemory, at time.Time) Selection {
	s := Selection{Version: 1, Updated: at.UTC(), Selected: []Selected{}}
	for _, m := range selected {
		s.Selected = append(s.Selected, Selected{RolloutID: m.RolloutID, Lines: m.Lines, Updated: m.Updated.UTC()})
	}
	return s
}

// Phase2Instructions are the instructions of a phase-2 model call; the
// scope's state and its changes go in its input ([Phase2Input]).
const Phase2Instructions = `You are the memory phase 2 consolidator of an agent system.
You maintain a memory folder that future agents read: MEMORY.md, a grep-friendly handbook (Markdown, one "## topic" section per subject,
short bullet points, each self-contained and with the keywords someone would grep for), and memory_summary.md, a compact summary
of the most useful lessons that goes into every agent's instructions (at most 8 KB).
You get the current MEMORY.md, the raw memories selected now (ADDED ones are new or rewritten, KEPT ones you consolidated before),
and the raw memories REMOVED from the selection: forget whatever only removed memories support.
Where a lesson is a reusable procedure of several steps, you may also write it as a skill.

Answer with exactly one JSON object and nothing else (no code fence, no prose):
{"memory_md": "...", "memory_summary": "...", "skills": [{"name": "...", "skill_md": "..."}]}
- memory_md: the whole new MEMORY.md.
- memory_summary: the whole new memory_summary.md.
- skills: possibly empty; name is lower-case words joined by hyphens; skill_md is a SKILL.md that starts with
  front matter ("---", "name: <name>", "description: <when to use it>", "---") followed by the instructions.`

// Phase2Input is the input of a phase-2 model call: the current handbook,
// then each raw memory of the changes, bounded to maxEach bytes (head and
// tail kept), removed ones given by the text they had when it can still be
// read (removedText, by rollout id).
func Phase2Input(handbook string, c Changes, removedText map[string]string, maxEach int) string {
	var b strings.Builder
	b.WriteString("# Current MEMORY.md\n\n")
	if strings.TrimSpace(handbook) == "" {
		b.WriteString("(none yet)\n")
	} else {
		b.WriteString(Bound(handbook, MaxHandbookBytes))
		b.WriteString("\n")
	}
	section := func(title string, ms []RawMemory) {
		fmt.Fprintf(&b, "\n# %s raw memories (%d)\n", title, len(ms))
		for _, m := range ms {
			fmt.Fprintf(&b, "\n## %s rollout %s (%s)\n%s\n", title, m.RolloutID, m.Slug, Bound(m.Text, maxEach))
		}
	}
	section("ADDED", c.Added)
	section("KEPT", c.Kept)
	fmt.Fprintf(&b, "\n# REMOVED raw memories (%d)\n", len(c.Removed))
	for _, s := range c.Removed {
		text := removedText[s.RolloutID]
		if text == "" {
			text = "(its text is gone: drop what only it supported)"
		}
		fmt.Fprintf(&b, "\n## REMOVED rollout %s\n%s\n", s.RolloutID, Bound(text, maxEach))
	}
	return b.String()
}

// Skill is a skill phase 2 found: its name and its SKILL.md.
type Skill struct {
	Name    string `json:"name"`
	SkillMD string `json:"skill_md"`
}

// Phase2Result is phase 2's answer.
type Phase2Result struct {
	Handbook string  `json:"memory_md"`
	Summary  string  `json:"memory_summary"`
	Skills   []Skill `json:"skills"`
}

var (
	phase2Required = []string{"memory_md", "memory_summary"}
	phase2Allowed  = []string{"memory_md", "memory_summary", "skills"}
)

// ParsePhase2 parses a phase-2 answer strictly: exactly one JSON object
// with the string fields memory_md and memory_summary, both set and within
// their bounds (the summary within MaxSummaryBytes), and optionally skills,
// each with exactly a valid name and a SKILL.md whose front matter names it
// and describes it, no name twice, at most MaxSkills. It fails with an
// *OutputError.
func ParsePhase2(answer string) (Phase2Result, error) {
	fields, err := strictObject(2, answer, phase2Required, phase2Allowed)
	if err != nil {
		return Phase2Result{}, err
	}
	var r Phase2Result
	if r.Handbook, err = stringField(2, fields, "memory_md"); err != nil {
		return Phase2Result{}, err
	}
	if r.Summary, err = stringField(2, fields, "memory_summary"); err != nil {
		return Phase2Result{}, err
	}
	r.Handbook, r.Summary = strings.TrimSpace(r.Handbook), strings.TrimSpace(r.Summary)
	if r.Handbook == "" {
		return Phase2Result{}, &OutputError{Phase: 2, Field: "memory_md", Err: ErrEmpty}
	}
	if r.Summary == "" {
		return Phase2Result{}, &OutputError{Phase: 2, Field: "memory_summary", Err: ErrEmpty}
	}
	if err := bounded(2, "memory_md", r.Handbook, MaxHandbookBytes); err != nil {
		return Phase2Result{}, err
	}
	if err := bounded(2, "memory_summary", r.Summary, MaxSummaryBytes); err != nil {
		return Phase2Result{}, err
	}
	if raw, ok := fields["skills"]; ok && string(raw) != "null" {
		var items []map[string]json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return Phase2Result{}, &OutputError{Phase: 2, Field: "skills", Err: ErrFields, Detail: "must be an array of {name, skill_md} objects"}
		}
		if len(items) > MaxSkills {
			return Phase2Result{}, &OutputError{Phase: 2, Field: "skills", Err: ErrTooLarge, Detail: fmt.Sprintf("%d skills, at most %d", len(items), MaxSkills)}
		}
		for i, it := range items {
			s, err := parseSkill(i, it)
			if err != nil {
				return Phase2Result{}, err
			}
			if slices.ContainsFunc(r.Skills, func(o Skill) bool { return o.Name == s.Name }) {
				return Phase2Result{}, &OutputError{Phase: 2, Field: fmt.Sprintf("skills[%d].name", i), Err: ErrBadSkill, Detail: "name " + s.Name + " given twice"}
			}
			r.Skills = append(r.Skills, s)
		}
	}
	return r, nil
}

func parseSkill(i int, it map[string]json.RawMessage) (Skill, error) {
	field := fmt.Sprintf("skills[%d]", i)
	for k := range it {
		if k != "name" && k != "skill_md" {
			return Skill{}, &OutputError{Phase: 2, Field: field + "." + k, Err: ErrFields, Detail: "unknown field; the fields are name, skill_md"}
		}
	}
	var s Skill
	var err error
	for _, f := range []struct {
		name string
		to   *string
	}{{"name", &s.Name}, {"skill_md", &s.SkillMD}} {
		if _, ok := it[f.name]; !ok {
			return Skill{}, &OutputError{Phase: 2, Field: field + "." + f.name, Err: ErrFields, Detail: "missing field"}
		}
		if *f.to, err = stringField(2, it, f.name); err != nil {
			return Skill{}, &OutputError{Phase: 2, Field: field + "." + f.name, Err: ErrFields, Detail: "must be a string"}
		}
	}
	if len(s.Name) > 64 || !SkillNamePattern.MatchString(s.Name) {
		return Skill{}, &OutputError{Phase: 2, Field: field + ".name", Err: ErrBadSkill, Detail: fmt.Sprintf("%q: lower-case words joined by hyphens, at most 64 bytes", s.Name)}
	}
	if err := bounded(2, field+".skill_md", s.SkillMD, MaxSkillBytes); err != nil {
		return Skill{}, err
	}
	if err := CheckSkillMD(s.Name, s.SkillMD); err != nil {
		return Skill{}, &OutputError{Phase: 2, Field: field + ".skill_md", Err: ErrBadSkill, Detail: err.Error()}
	}
	return s, nil
}

// CheckSkillMD checks that a SKILL.md starts with front matter naming the
// skill (name: <name>) and describing it (a non-empty description:), and
// has instructions after it.
func CheckSkillMD(name, md string) error {
	rest, ok := strings.CutPrefix(md, "---\n")
	front, body, ok2 := strings.Cut(rest, "\n---\n")
	if !ok || !ok2 {
		return fmt.Errorf("SKILL.md must start with front matter between --- lines")
	}
	var gotName, desc string
	for _, line := range strings.Split(front, "\n") {
		k, v, _ := strings.Cut(line, ":")
		switch strings.TrimSpace(k) {
		case "name":
			gotName = strings.Trim(strings.TrimSpace(v), `"'`)
		case "description":
			desc = strings.TrimSpace(v)
		}
	}
	if gotName != name {
		return fmt.Errorf("front matter name %q, want %q", gotName, name)
	}
	if desc == "" {
		return fmt.Errorf("front matter needs a description")
	}
	if strings.TrimSpace(body) == "" {
		return fmt.Errorf("SKILL.md has no instructions after its front matter")
	}
	return nil
}

// Phase2Files returns the files a successful phase 2 writes, path →
// content, but the selection (written last, apart): MEMORY.md,
// memory_summary.md and each skill's SKILL.md.
func Phase2Files(r Phase2Result) map[string][]byte {
	files := map[string][]byte{
		HandbookPath: []byte(r.Handbook + "\n"),
		SummaryPath:  []byte(r.Summary + "\n"),
	}
	for _, s := range r.Skills {
		files[SkillPath(s.Name)] = []byte(s.SkillMD)
	}
	return files
}
