package memory

import (
	"bufio"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Phase1Instructions are the instructions of a phase-1 model call; the
// rollout goes in its input ([Phase1Input]).
const Phase1Instructions = `You are the memory phase 1 extractor of an agent system.
You read one rollout: the conversations of a session (or one run) between a user and agents, with their tool calls.
Extract what a future agent working for the same user or on the same project should remember:
stated preferences, decisions and their reasons, facts about the environment, mistakes and how they were fixed,
procedures that worked, things the user dismissed or corrected. Skip what is obvious, transient, or secret (never keep credentials).

Answer with exactly one JSON object and nothing else (no code fence, no prose):
{"rollout_slug": "...", "rollout_summary": "...", "raw_memory": "..."}
- rollout_slug: 2 to 6 lower-case words joined by hyphens naming the rollout (e.g. "fix-flaky-go-tests").
- rollout_summary: a short Markdown summary of what happened in the rollout.
- raw_memory: Markdown bullet points, each a self-contained lesson, with enough context to be grepped later.
If the rollout holds nothing worth remembering, answer {"rollout_slug": "", "rollout_summary": "", "raw_memory": ""}.`

// Phase1Input is the input of a phase-1 model call for the rollout id:
// its rendered lines ([Render]) bounded to maxBytes ([Bound]).
func Phase1Input(id string, lines []Line, maxBytes int) string {
	return fmt.Sprintf("Rollout %s (%d turns):\n\n%s", id, len(lines), Bound(Render(lines), maxBytes))
}

// Phase1Result is phase 1's answer for one rollout.
type Phase1Result struct {
	Slug    string `json:"rollout_slug"`
	Summary string `json:"rollout_summary"`
	Raw     string `json:"raw_memory"`
}

// Empty reports whether the rollout taught nothing worth keeping.
func (r Phase1Result) Empty() bool { return r.Slug == "" && r.Summary == "" && r.Raw == "" }

var phase1Fields = []string{"rollout_slug", "rollout_summary", "raw_memory"}

// ParsePhase1 parses a phase-1 answer strictly: exactly one JSON object
// with exactly the string fields rollout_slug, rollout_summary and
// raw_memory, either all empty or all set, the slug matching SlugPattern,
// each text within its bound. It fails with an *OutputError.
func ParsePhase1(answer string) (Phase1Result, error) {
	fields, err := strictObject(1, answer, phase1Fields, phase1Fields)
	if err != nil {
		return Phase1Result{}, err
	}
	var r Phase1Result
	for _, f := range []struct {
		name string
		to   *string
	}{{"rollout_slug", &r.Slug}, {"rollout_summary", &r.Summary}, {"raw_memory", &r.Raw}} {
		if *f.to, err = stringField(1, fields, f.name); err != nil {
			return Phase1Result{}, err
		}
		*f.to = strings.TrimSpace(*f.to)
	}
	if r.Empty() {
		return r, nil
	}
	for _, f := range []struct{ name, v string }{{"rollout_slug", r.Slug}, {"rollout_summary", r.Summary}, {"raw_memory", r.Raw}} {
		if f.v == "" {
			return Phase1Result{}, &OutputError{Phase: 1, Field: f.name, Err: ErrEmpty, Detail: "either every field is empty (nothing worth keeping) or none is"}
		}
	}
	if len(r.Slug) > MaxSlugLen || !SlugPattern.MatchString(r.Slug) {
		return Phase1Result{}, &OutputError{Phase: 1, Field: "rollout_slug", Err: ErrBadSlug, Detail: fmt.Sprintf("%q: lower-case words joined by hyphens, at most %d bytes", r.Slug, MaxSlugLen)}
	}
	if err := bounded(1, "rollout_summary", r.Summary, MaxRolloutSummaryBytes); err != nil {
		return Phase1Result{}, err
	}
	if err := bounded(1, "raw_memory", r.Raw, MaxRawMemoryBytes); err != nil {
		return Phase1Result{}, err
	}
	return r, nil
}

// RawMemory is a raw memory as its file holds it: front matter naming the
// rollout, how many of its lines phase 1 read and when, then the text.
type RawMemory struct {
	// RolloutID is the rollout the memory comes from.
	RolloutID string
	// Lines is how many lines of the rollout phase 1 read: a rollout that
	// grew since is read again.
	Lines int
	// Slug is the rollout's slug (its summary's file name).
	Slug string
	// Updated is when phase 1 wrote it; phase 2 takes the newest.
	Updated time.Time
	// Text is the raw memory.
	Text string
}

// ErrBadFile reports a memory file that does not parse.
var ErrBadFile = errors.New("memory: bad file")

// Phase1Files returns the files phase 1 writes for a non-empty result on
// rollout id after reading lines lines at time at: path → content, the
// raw memory (written last: it is what says phase 1 is done) and the
// summary.
func Phase1Files(id string, lines int, at time.Time, r Phase1Result) (rawPath string, raw []byte, summaryPath string, summary []byte, err error) {
	if err := CheckRolloutID(id); err != nil {
		return "", nil, "", nil, err
	}
	if r.Empty() {
		return "", nil, "", nil, fmt.Errorf("%w: an empty phase-1 result writes no file", ErrBadFile)
	}
	rm := RawMemory{RolloutID: id, Lines: lines, Slug: r.Slug, Updated: at.UTC(), Text: r.Raw}
	summary = fmt.Appendf(nil, "# %s\n\nRollout %s, %d turns.\n\n%s\n", r.Slug, id, lines, r.Summary)
	return RawMemoryPath(id), rm.Encode(), RolloutSummaryPath(id, r.Slug), summary, nil
}

// Encode renders the raw memory's file.
func (m RawMemory) Encode() []byte {
	return fmt.Appendf(nil, "---\nrollout_id: %s\nrollout_lines: %d\nrollout_slug: %s\nupdated: %s\n---\n%s\n",
		m.RolloutID, m.Lines, m.Slug, m.Updated.UTC().Format(time.RFC3339Nano), strings.TrimSpace(m.Text))
}

// ParseRawMemory parses a raw memory's file.
func ParseRawMemory(data []byte) (RawMemory, error) {
	rest, ok := strings.CutPrefix(string(data), "---\n")
	front, text, ok2 := strings.Cut(rest, "\n---\n")
	if !ok || !ok2 {
		return RawMemory{}, fmt.Errorf("%w: raw memory without front matter", ErrBadFile)
	}
	var m RawMemory
	sc := bufio.NewScanner(strings.NewReader(front))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ": ")
		if !ok {
			return RawMemory{}, fmt.Errorf("%w: raw memory front matter line %q", ErrBadFile, sc.Text())
		}
		var err error
		switch k {
		case "rollout_id":
			m.RolloutID = v
		case "rollout_lines":
			m.Lines, err = strconv.Atoi(v)
		case "rollout_slug":
			m.Slug = v
		case "updated":
			m.Updated, err = time.Parse(time.RFC3339Nano, v)
		}
		if err != nil {
			return RawMemory{}, fmt.Errorf("%w: raw memory %s: %v", ErrBadFile, k, err)
		}
	}
	if CheckRolloutID(m.RolloutID) != nil || !SlugPattern.MatchString(m.Slug) || m.Lines < 1 {
		return RawMemory{}, fmt.Errorf("%w: raw memory front matter incomplete", ErrBadFile)
	}
	m.Text = strings.TrimSpace(text)
	return m, nil
}
