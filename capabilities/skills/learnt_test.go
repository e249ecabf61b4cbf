package skills_test

// Tests of learnt skills (WithLearnt): a capability bound to a Learnt
// offers its skills in the index, through load_skill (into a local
// sandbox) and read_skill, validated like every skill, read again at
// every call.

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/capabilities"
	"github.com/troupe-dev/troupe/capabilities/skills"
	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// learntTree is a Learnt over files held in memory, by path from the
// folder of the skills; it records what it is told of skipped skills and
// the run contexts it lists for.
type learntTree struct {
	mu      sync.Mutex
	files   map[string]string
	listErr error
	skipped []error
	runs    []agents.RunContext
	opened  map[string]bool
}

func (l *learntTree) List(ctx context.Context) ([]skills.LearntFile, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	rc, _ := agents.RunContextFrom(ctx)
	l.runs = append(l.runs, rc)
	if l.listErr != nil {
		return nil, l.listErr
	}
	var out []skills.LearntFile
	for p, content := range l.files {
		open := func(context.Context) (io.ReadCloser, error) {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.opened == nil {
				l.opened = map[string]bool{}
			}
			l.opened[p] = true
			return io.NopCloser(strings.NewReader(content)), nil
		}
		if content == "<unreadable>" {
			open = func(context.Context) (io.ReadCloser, error) { return nil, errors.New("gone since the listing") }
		}
		out = append(out, skills.LearntFile{Path: p, Open: open})
	}
	return out, nil
}

func (l *learntTree) Skipped(_ context.Context, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.skipped = append(l.skipped, err)
}

func (l *learntTree) set(files map[string]string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.files, l.skipped = files, nil
}

// deployCheck is a learnt skill with a script.
var deployCheck = map[string]string{
	"deploy-check/SKILL.md":         skillMD("deploy-check", "Checks a deploy before it goes out.", "Run scripts/check.sh and report.\n"),
	"deploy-check/scripts/check.sh": "#!/bin/sh\necho deploy ok\n",
	"deploy-check/notes.md":         "Learnt on the Acme rollout.\n",
}

// bind binds learnt to a capability of mode, with bundle's skills.
func bind(t *testing.T, mode skills.Mode, learnt skills.Learnt) *skills.Capability {
	t.Helper()
	c, err := skills.New(context.Background(), skills.Config{Sources: []skills.Source{bundle}, Mode: mode})
	if err != nil {
		t.Fatal(err)
	}
	caps, ok := skills.WithLearnt([]agents.Capability{c}, learnt)
	if !ok {
		t.Fatalf("WithLearnt did not bind a %s capability", mode)
	}
	bound := caps[0].(*skills.Capability)
	if bound == c || c.OffersLearnt() || !bound.OffersLearnt() {
		t.Fatal("WithLearnt changed the capability it was given rather than a copy")
	}
	return bound
}

func TestLearntIndex(t *testing.T) {
	rc := agents.RunContext{Agent: "coder", MemoryScope: "team"}
	for _, tc := range []struct {
		mode skills.Mode
		want []string
	}{
		{skills.Lazy, []string{
			"- review-go: Reviews Go code. (file: .agents/skills/review-go/SKILL.md)\n" +
				"- release-notes: Writes release notes. (file: .agents/skills/release-notes/SKILL.md)\n" +
				"- deploy-check: Checks a deploy before it goes out. (learnt from earlier work; file: .agents/skills/deploy-check/SKILL.md)\n",
			"`load_skill`"}},
		{skills.Text, []string{
			"- review-go: Reviews Go code.\n- release-notes: Writes release notes.\n" +
				"- deploy-check: Checks a deploy before it goes out. (learnt from earlier work)\n",
			"`read_skill`"}},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			learnt := &learntTree{files: deployCheck}
			c := bind(t, tc.mode, learnt)
			in, err := c.DynamicInstructions(context.Background(), rc)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(in, w) {
					t.Errorf("instructions lack %q:\n%s", w, in)
				}
			}
			if strings.Contains(c.Instructions(), "deploy-check") {
				t.Errorf("the fixed instructions list a learnt skill:\n%s", c.Instructions())
			}
			if len(learnt.runs) == 0 || learnt.runs[0].MemoryScope != "team" {
				t.Errorf("the learnt skills were listed for %+v, want the call's run context", learnt.runs)
			}
			// Learnt skills change between calls: each call reads them.
			learnt.set(map[string]string{"triage/SKILL.md": skillMD("triage", "Triages a bug report.", "Reproduce first.\n")})
			in, err = c.DynamicInstructions(context.Background(), rc)
			if err != nil || strings.Contains(in, "deploy-check") || !strings.Contains(in, "- triage: Triages a bug report. (learnt from earlier work") {
				t.Errorf("after the learnt skills changed (%v):\n%s", err, in)
			}
			// None learnt: the fixed index, as it was.
			learnt.set(nil)
			if in, err = c.DynamicInstructions(context.Background(), rc); err != nil || in != c.Instructions() {
				t.Errorf("with no learnt skill = %q (%v), want Instructions()", in, err)
			}
			// A store that cannot be listed fails the call (it is retried).
			learnt.listErr = errors.New("store down")
			if _, err := c.DynamicInstructions(context.Background(), rc); err == nil || !strings.Contains(err.Error(), "store down") {
				t.Errorf("a failed listing: %v", err)
			}
		})
	}
}

// A learnt skill alone makes an index, with its $name.
func TestLearntOnly(t *testing.T) {
	c, err := skills.New(context.Background(), skills.Config{})
	if err != nil {
		t.Fatal(err)
	}
	caps, ok := skills.WithLearnt([]agents.Capability{c}, &learntTree{files: deployCheck})
	if !ok {
		t.Fatal("not bound")
	}
	in, err := caps[0].(*skills.Capability).DynamicInstructions(context.Background(), agents.RunContext{})
	if err != nil || !strings.Contains(in, "`$deploy-check`") || !strings.Contains(in, "- deploy-check: Checks a deploy before it goes out. (learnt") {
		t.Errorf("instructions = %q, %v", in, err)
	}
}

func TestLearntLoadAndRead(t *testing.T) {
	learnt := &learntTree{files: deployCheck}
	load := tool(t, bind(t, skills.Lazy, learnt), "load_skill")
	ctx, s := newSession(t, sandbox.Manifest{})
	out, err := load.Call(ctx, `{"name":"$deploy-check"}`)
	if err != nil || out != "Skill deploy-check is loaded in .agents/skills/deploy-check/ (files: SKILL.md, notes.md, scripts/check.sh). Its instructions (SKILL.md):\n\nRun scripts/check.sh and report.\n" {
		t.Fatalf("load_skill = %q, %v", out, err)
	}
	// A script (#!) is written executable; the other files are not.
	res, err := s.Exec(ctx, sandbox.ExecRequest{Cmd: ".agents/skills/deploy-check/scripts/check.sh && test ! -x .agents/skills/deploy-check/notes.md && head -2 .agents/skills/deploy-check/SKILL.md"})
	if err != nil || res.ExitCode != 0 || res.Output != "deploy ok\n---\nname: deploy-check\n" {
		t.Fatalf("after load_skill: %+v, %v", res, err)
	}
	// A bundled skill still loads; an unknown name lists both kinds.
	if out, err := load.Call(ctx, `{"name":"review-go"}`); err != nil || !strings.Contains(out, "Run scripts/vet.sh and report.") {
		t.Errorf("load_skill review-go = %q, %v", out, err)
	}
	if _, err := load.Call(ctx, `{"name":"nope"}`); !errors.Is(err, skills.ErrUnknown) || !strings.Contains(err.Error(), "the skills are: review-go, release-notes, deploy-check") {
		t.Errorf("load_skill nope: %v", err)
	}

	read := tool(t, bind(t, skills.Text, learnt), "read_skill")
	for args, want := range map[string]string{
		`{"name":"deploy-check"}`:                             "Run scripts/check.sh and report.\n",
		`{"name":"deploy-check","path":"scripts/check.sh"}`:   "#!/bin/sh\necho deploy ok\n",
		`{"name":"deploy-check","path":"../review-go/x.md"}`:  "error: sandbox: path escapes",
		`{"name":"deploy-check","path":"scripts/missing.sh"}`: "error: skill deploy-check has no file",
	} {
		out, err := read.Call(context.Background(), args)
		if err != nil {
			out = "error: " + err.Error()
		}
		if !strings.HasPrefix(out, want) {
			t.Errorf("read_skill %s = %q, want %q", args, out, want)
		}
	}
}

// A learnt skill that breaks a rule, or that a bundled skill's name
// shadows, is left out and reported; the others are offered.
func TestLearntSkipped(t *testing.T) {
	good := map[string]string{"deploy-check/SKILL.md": deployCheck["deploy-check/SKILL.md"]}
	with := func(more map[string]string) map[string]string {
		out := map[string]string{}
		for _, m := range []map[string]string{good, more} {
			for k, v := range m {
				out[k] = v
			}
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		files  map[string]string
		limits skills.Limits
		other  bool // the agent has a second, Eager, capability with bundle's skills renamed
		skill  string
		want   error
	}{
		{name: "no frontmatter", files: with(map[string]string{"broken/SKILL.md": "Just do it.\n"}), skill: "broken", want: skills.ErrFrontmatter},
		{name: "frontmatter not closed", files: with(map[string]string{"broken/SKILL.md": "---\nname: broken\ndescription: d\n"}), skill: "broken", want: skills.ErrFrontmatter},
		{name: "name differs from folder", files: with(map[string]string{"broken/SKILL.md": skillMD("other", "d", "b")}), skill: "broken", want: skills.ErrInvalidName},
		{name: "bad name", files: with(map[string]string{"Bad_Name/SKILL.md": skillMD("Bad_Name", "d", "b")}), skill: "Bad_Name", want: skills.ErrInvalidName},
		{name: "no description", files: with(map[string]string{"broken/SKILL.md": skillMD("broken", "", "b")}), skill: "broken", want: skills.ErrDescription},
		{name: "description too long", files: with(map[string]string{"broken/SKILL.md": skillMD("broken", strings.Repeat("d", skills.MaxDescription+1), "b")}), skill: "broken", want: skills.ErrDescription},
		{name: "file too large", limits: skills.Limits{MaxFileBytes: 200}, files: with(map[string]string{"broken/SKILL.md": skillMD("broken", "d", strings.Repeat("x", 300))}), skill: "broken", want: skills.ErrTooLarge},
		{name: "skill too large", limits: skills.Limits{MaxSkillBytes: 300}, files: with(map[string]string{"broken/SKILL.md": skillMD("broken", "d", "b"), "broken/a": strings.Repeat("a", 200), "broken/b": strings.Repeat("b", 200), "broken/c": strings.Repeat("c", 200)}), skill: "broken", want: skills.ErrTooLarge},
		{name: "too many files", limits: skills.Limits{MaxFiles: 2}, files: with(map[string]string{"broken/SKILL.md": skillMD("broken", "d", "b"), "broken/a": "a", "broken/b": "b"}), skill: "broken", want: skills.ErrTooLarge},
		{name: "path leaves the folder", files: with(map[string]string{"broken/SKILL.md": skillMD("broken", "d", "b"), "broken/x/../../y": "y"}), skill: "broken", want: sandbox.ErrPathEscape},
		{name: "unreadable file", files: with(map[string]string{"broken/SKILL.md": skillMD("broken", "d", "b"), "broken/a": "<unreadable>"}), skill: "broken"},
		{name: "bundled wins", files: with(map[string]string{"review-go/SKILL.md": skillMD("review-go", "A learnt review.", "b")}), skill: "review-go", want: skills.ErrDuplicate},
		{name: "bundled in another capability wins", other: true, files: with(map[string]string{"eager-review-go/SKILL.md": skillMD("eager-review-go", "A learnt review.", "b")}), skill: "eager-review-go", want: skills.ErrDuplicate},
		{name: "more than MaxSkills", limits: skills.Limits{MaxSkills: 3}, files: with(map[string]string{"zz-last/SKILL.md": skillMD("zz-last", "d", "b")}), skill: "zz-last", want: skills.ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := skills.New(context.Background(), skills.Config{Sources: []skills.Source{bundle}, Limits: tc.limits})
			if err != nil {
				t.Fatal(err)
			}
			caps := []agents.Capability{capabilities.Shell(), c}
			if tc.other {
				var renamed skills.Inline
				for _, s := range bundle {
					s.Name = "eager-" + s.Name
					renamed = append(renamed, s)
				}
				eager, err := skills.New(context.Background(), skills.Config{Sources: []skills.Source{renamed}, Mode: skills.Eager})
				if err != nil {
					t.Fatal(err)
				}
				caps = append([]agents.Capability{eager}, caps...)
			}
			learnt := &learntTree{files: tc.files}
			bound, ok := skills.WithLearnt(caps, learnt)
			if !ok {
				t.Fatal("not bound")
			}
			i := slices.IndexFunc(bound, func(c agents.Capability) bool { sc, ok := c.(*skills.Capability); return ok && sc.OffersLearnt() })
			if i != len(caps)-1 {
				t.Fatalf("capability %d offers the learnt skills, want the lazy one, %d", i, len(caps)-1)
			}
			sc := bound[i].(*skills.Capability)
			in, err := sc.DynamicInstructions(context.Background(), agents.RunContext{})
			if err != nil {
				t.Fatalf("a bad learnt skill failed the call: %v", err)
			}
			if !strings.Contains(in, "- deploy-check: Checks a deploy before it goes out. (learnt") {
				t.Errorf("the good learnt skill is not offered:\n%s", in)
			}
			index, _, _ := strings.Cut(in, "\nHow to use skills")
			if strings.Count(index, "\n- ") != 3 || strings.Count(index, "(learnt from earlier work") != 1 || strings.Contains(in, "A learnt review.") {
				t.Errorf("the skipped skill %s is in the index, which should list review-go, release-notes and deploy-check:\n%s", tc.skill, in)
			}
			if len(learnt.skipped) != 1 {
				t.Fatalf("skipped = %v, want one report", learnt.skipped)
			}
			var se *skills.Error
			if err := learnt.skipped[0]; !errors.As(err, &se) || se.Skill != tc.skill || se.Source != "learnt" || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Errorf("skipped %v, want an *Error of learnt skill %s wrapping %v", err, tc.skill, tc.want)
			}
			if tc.name == "skill too large" {
				// SKILL.md and two of a, b, c cross the limit: the third is
				// never read.
				n := 0
				for p := range learnt.opened {
					if strings.HasPrefix(p, "broken/") {
						n++
					}
				}
				if n > 3 {
					t.Errorf("read %d files of a skill past its limit, want it cut at the file that crossed it: %v", n, learnt.opened)
				}
			}
			// The tools find the skill as the index says.
			load := tool(t, sc, "load_skill")
			ctx, _ := newSession(t, sandbox.Manifest{})
			out, err := load.Call(ctx, `{"name":"`+tc.skill+`"}`)
			switch {
			case tc.want == skills.ErrDuplicate && tc.other:
				if !errors.Is(err, skills.ErrUnknown) {
					t.Errorf("load_skill of a skill bundled in another capability = %q, %v; want ErrUnknown here", out, err)
				}
			case tc.want == skills.ErrDuplicate:
				if err != nil || !strings.Contains(out, "Run scripts/vet.sh and report.") {
					t.Errorf("load_skill %s = %q, %v; want the bundled skill", tc.skill, out, err)
				}
			default:
				if !errors.Is(err, skills.ErrUnknown) {
					t.Errorf("load_skill of a skipped skill = %q, %v; want ErrUnknown", out, err)
				}
			}
		})
	}
}

// Eager capabilities take no learnt skills; nor do agents without a
// skills capability.
func TestLearntNotBound(t *testing.T) {
	eager, err := skills.New(context.Background(), skills.Config{Sources: []skills.Source{bundle}, Mode: skills.Eager})
	if err != nil {
		t.Fatal(err)
	}
	for name, caps := range map[string][]agents.Capability{
		"eager":     {capabilities.Shell(), eager},
		"no skills": capabilities.Default(),
		"none":      nil,
	} {
		got, ok := skills.WithLearnt(caps, &learntTree{files: deployCheck})
		if ok || !slices.Equal(got, caps) {
			t.Errorf("%s: bound (%v)", name, ok)
		}
	}
}
