package skills_test

// Tests of learnt skills (WithLearnt): a capability bound to a Learnt
// offers its skills in the index, through load_skill (into a local
// sandbox) and read_skill, validated like every skill, read again at
// every call.

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"maps"
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
// folder of the skills, each listed with a Version (its content's hash)
// unless noVersions; it records what it is told of skipped skills, the
// run contexts it lists for, and how often it lists and opens each file.
type learntTree struct {
	mu         sync.Mutex
	files      map[string]string
	noVersions bool
	listErr    error
	skipped    []error
	runs       []agents.RunContext
	lists      int
	opened     map[string]int
}

func (l *learntTree) List(ctx context.Context) ([]skills.LearntFile, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	rc, _ := agents.RunContextFrom(ctx)
	l.runs = append(l.runs, rc)
	l.lists++
	if l.listErr != nil {
		return nil, l.listErr
	}
	var out []skills.LearntFile
	for p, content := range l.files {
		open := func(context.Context) (io.ReadCloser, error) {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.opened == nil {
				l.opened = map[string]int{}
			}
			l.opened[p]++
			return io.NopCloser(strings.NewReader(content)), nil
		}
		if content == "<unreadable>" {
			open = func(context.Context) (io.ReadCloser, error) { return nil, errors.New("gone since the listing") }
		}
		version := ""
		if !l.noVersions {
			version = fmt.Sprintf("%x", sha256.Sum256([]byte(content)))
		}
		out = append(out, skills.LearntFile{Path: p, Version: version, Open: open})
	}
	return out, nil
}

// reads returns how many times each file was opened since the last call,
// and the number of listings.
func (l *learntTree) reads() (map[string]int, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	opened, lists := l.opened, l.lists
	l.opened, l.lists = nil, 0
	return opened, lists
}

// reports returns what Skipped was told.
func (l *learntTree) reports() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.skipped)
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
func bind(t *testing.T, mode skills.Mode, learnt skills.Learnt, opts ...skills.LearntOption) *skills.Capability {
	t.Helper()
	c, err := skills.New(context.Background(), skills.Config{Sources: []skills.Source{bundle}, Mode: mode})
	if err != nil {
		t.Fatal(err)
	}
	caps, ok := skills.WithLearnt([]agents.Capability{c}, learnt, opts...)
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

// A learnt skill whose SKILL.md breaks a rule, or that a bundled skill's
// name shadows, is left out of the index and reported, once; the others
// are offered. One whose other files break a rule is in the index (only
// SKILL.md is read for it), and its load fails with the reason, reported
// once.
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
	broken := skillMD("broken", "d", "b")
	for _, tc := range []struct {
		name   string
		files  map[string]string
		limits skills.Limits
		other  bool // the agent has a second, Eager, capability with bundle's skills renamed
		skill  string
		want   error
		// atLoad: the skill is in the index, and its load fails.
		atLoad bool
	}{
		{name: "no frontmatter", files: with(map[string]string{"broken/SKILL.md": "Just do it.\n"}), skill: "broken", want: skills.ErrFrontmatter},
		{name: "frontmatter not closed", files: with(map[string]string{"broken/SKILL.md": "---\nname: broken\ndescription: d\n"}), skill: "broken", want: skills.ErrFrontmatter},
		{name: "name differs from folder", files: with(map[string]string{"broken/SKILL.md": skillMD("other", "d", "b")}), skill: "broken", want: skills.ErrInvalidName},
		{name: "bad name", files: with(map[string]string{"Bad_Name/SKILL.md": skillMD("Bad_Name", "d", "b")}), skill: "Bad_Name", want: skills.ErrInvalidName},
		{name: "no description", files: with(map[string]string{"broken/SKILL.md": skillMD("broken", "", "b")}), skill: "broken", want: skills.ErrDescription},
		{name: "description too long", files: with(map[string]string{"broken/SKILL.md": skillMD("broken", strings.Repeat("d", skills.MaxDescription+1), "b")}), skill: "broken", want: skills.ErrDescription},
		{name: "SKILL.md too large", limits: skills.Limits{MaxFileBytes: 200}, files: with(map[string]string{"broken/SKILL.md": skillMD("broken", "d", strings.Repeat("x", 300))}), skill: "broken", want: skills.ErrTooLarge},
		{name: "bundled wins", files: with(map[string]string{"review-go/SKILL.md": skillMD("review-go", "A learnt review.", "b")}), skill: "review-go", want: skills.ErrDuplicate},
		{name: "bundled in another capability wins", other: true, files: with(map[string]string{"eager-review-go/SKILL.md": skillMD("eager-review-go", "A learnt review.", "b")}), skill: "eager-review-go", want: skills.ErrDuplicate},
		{name: "more than MaxSkills", limits: skills.Limits{MaxSkills: 3}, files: with(map[string]string{"zz-last/SKILL.md": skillMD("zz-last", "d", "b")}), skill: "zz-last", want: skills.ErrTooLarge},
		{name: "file too large", atLoad: true, files: with(map[string]string{"broken/SKILL.md": broken, "broken/data.bin": strings.Repeat("x", 1<<20+1)}), skill: "broken", want: skills.ErrTooLarge},
		{name: "skill too large", atLoad: true, limits: skills.Limits{MaxSkillBytes: 300}, files: with(map[string]string{"broken/SKILL.md": broken, "broken/a": strings.Repeat("a", 200), "broken/b": strings.Repeat("b", 200), "broken/c": strings.Repeat("c", 200)}), skill: "broken", want: skills.ErrTooLarge},
		{name: "too many files", atLoad: true, limits: skills.Limits{MaxFiles: 2}, files: with(map[string]string{"broken/SKILL.md": broken, "broken/a": "a", "broken/b": "b"}), skill: "broken", want: skills.ErrTooLarge},
		{name: "path leaves the folder", atLoad: true, files: with(map[string]string{"broken/SKILL.md": broken, "broken/x/../../y": "y"}), skill: "broken", want: sandbox.ErrPathEscape},
		{name: "unreadable file", atLoad: true, files: with(map[string]string{"broken/SKILL.md": broken, "broken/a": "<unreadable>"}), skill: "broken"},
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
			checkReport := func(when string, want int) {
				t.Helper()
				got := learnt.reports()
				if len(got) != want {
					t.Fatalf("%s: skipped = %v, want %d report(s)", when, got, want)
				}
				if want == 0 {
					return
				}
				var se *skills.Error
				if err := got[0]; !errors.As(err, &se) || se.Skill != tc.skill || se.Source != "learnt" || (tc.want != nil && !errors.Is(err, tc.want)) {
					t.Errorf("%s: skipped %v, want an *Error of learnt skill %s wrapping %v", when, err, tc.skill, tc.want)
				}
			}
			// A skipped skill is reported at the first call, not at the
			// ones after while it stays as it is.
			for call := range 2 {
				in, err := sc.DynamicInstructions(context.Background(), agents.RunContext{})
				if err != nil {
					t.Fatalf("a bad learnt skill failed the call: %v", err)
				}
				if !strings.Contains(in, "- deploy-check: Checks a deploy before it goes out. (learnt") {
					t.Errorf("the good learnt skill is not offered:\n%s", in)
				}
				index, _, _ := strings.Cut(in, "\nHow to use skills")
				if tc.atLoad {
					if !strings.Contains(index, "\n- broken: d (learnt from earlier work") || strings.Count(index, "\n- ") != 4 {
						t.Errorf("a skill whose SKILL.md is fine is not in the index:\n%s", in)
					}
				} else if strings.Count(index, "\n- ") != 3 || strings.Count(index, "(learnt from earlier work") != 1 || strings.Contains(in, "A learnt review.") {
					t.Errorf("the skipped skill %s is in the index, which should list review-go, release-notes and deploy-check:\n%s", tc.skill, in)
				}
				if tc.atLoad {
					checkReport(fmt.Sprintf("call %d", call+1), 0)
				} else {
					checkReport(fmt.Sprintf("call %d", call+1), 1)
				}
			}
			// The index read SKILL.md files only, each once.
			opened, _ := learnt.reads()
			for p, n := range opened {
				if !strings.HasSuffix(p, "/"+skills.SkillFile) || n != 1 {
					t.Errorf("the index read %s %d time(s)", p, n)
				}
			}
			// The tools find the skill as the index says.
			load := tool(t, sc, "load_skill")
			ctx, _ := newSession(t, sandbox.Manifest{})
			for round := range 2 {
				out, err := load.Call(ctx, `{"name":"`+tc.skill+`"}`)
				if opened, _ := learnt.reads(); round == 0 && tc.name == "skill too large" {
					// SKILL.md and two of a, b, c cross the limit: the third
					// is never read.
					n := 0
					for p := range opened {
						if strings.HasPrefix(p, "broken/") {
							n++
						}
					}
					if n > 3 {
						t.Errorf("read %d files of a skill past its limit, want it cut at the file that crossed it: %v", n, opened)
					}
				}
				switch {
				case tc.atLoad:
					// The load fails with the reason, reported once.
					var se *skills.Error
					if !errors.As(err, &se) || se.Skill != tc.skill || (tc.want != nil && !errors.Is(err, tc.want)) {
						t.Errorf("load_skill of a skill that breaks a rule = %q, %v; want an *Error wrapping %v", out, err, tc.want)
					}
					checkReport("load_skill", 1)
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
			}
		})
	}
}

// A call reads only the SKILL.md files whose versions the cache lacks:
// none when the learnt skills are as they were, the changed and new ones
// when they changed, all of them every time when the lister gives no
// versions. A cache shared by capabilities serves them all.
func TestLearntIndexCached(t *testing.T) {
	rc := agents.RunContext{Agent: "coder", MemoryScope: "team"}
	files := map[string]string{
		"triage/SKILL.md":   skillMD("triage", "Triages a bug report.", "Reproduce first.\n"),
		"triage/repro.sh":   "#!/bin/sh\nmake repro\n",
		"triage/big.log":    strings.Repeat("log line\n", 1<<18),
		"notes/SKILL.md":    "No frontmatter.\n",
		"README.md":         "not a skill\n",
		"release/notes.txt": "not a skill either\n",
	}
	for p, content := range deployCheck {
		files[p] = content
	}
	learnt := &learntTree{files: files}
	cache := skills.NewLearntCache(0)
	c := bind(t, skills.Lazy, learnt, skills.SharedCache(cache))
	index := func(c *skills.Capability) string {
		t.Helper()
		in, err := c.DynamicInstructions(context.Background(), rc)
		if err != nil {
			t.Fatal(err)
		}
		return in
	}
	// reads checks what the last calls read: the files named, once each,
	// and lists listings.
	reads := func(when string, lists int, want ...string) {
		t.Helper()
		opened, n := learnt.reads()
		got := slices.Sorted(maps.Keys(opened))
		slices.Sort(want)
		if !slices.Equal(got, want) || n != lists {
			t.Errorf("%s: read %v in %d listing(s), want %v in %d", when, opened, n, want, lists)
		}
		for p, n := range opened {
			if n != 1 {
				t.Errorf("%s: read %s %d times", when, p, n)
			}
		}
	}

	first := index(c)
	reads("the first call", 1, "deploy-check/SKILL.md", "notes/SKILL.md", "triage/SKILL.md")
	if !strings.Contains(first, "- triage: Triages a bug report. (learnt") || !strings.Contains(first, "- deploy-check:") {
		t.Fatalf("the index:\n%s", first)
	}
	if got := learnt.reports(); len(got) != 1 || !errors.Is(got[0], skills.ErrFrontmatter) {
		t.Errorf("reports = %v, want notes' (no frontmatter)", got)
	}
	for i := range 3 {
		if again := index(c); again != first {
			t.Fatalf("call %d: the index changed with the learnt skills as they were:\n%s", i+2, again)
		}
	}
	reads("three calls more, nothing changed", 3)
	if got := learnt.reports(); len(got) != 1 {
		t.Errorf("reports = %v, want notes' once", got)
	}

	// Another capability, given the cache, reads nothing either; one with
	// a cache of its own reads the index for itself.
	other := bind(t, skills.Text, learnt, skills.SharedCache(cache))
	if in := index(other); !strings.Contains(in, "- triage: Triages a bug report. (learnt from earlier work)\n") {
		t.Errorf("the other capability's index:\n%s", in)
	}
	reads("a capability sharing the cache", 1)
	index(bind(t, skills.Lazy, learnt))
	reads("a capability with a cache of its own", 1, "deploy-check/SKILL.md", "notes/SKILL.md", "triage/SKILL.md")

	// A new version of the skills (consolidation changed triage, wrote
	// rollback and left deploy-check): what changed is read, the rest is
	// not.
	changed := maps.Clone(files)
	changed["triage/SKILL.md"] = skillMD("triage", "Triages a bug report, with logs.", "Reproduce first.\n")
	changed["rollback/SKILL.md"] = skillMD("rollback", "Rolls a deploy back.", "Revert, then redeploy.\n")
	changed["deploy-check/scripts/check.sh"] = "#!/bin/sh\necho deploy checked\n"
	learnt.set(changed)
	in := index(c)
	reads("after a change", 1, "rollback/SKILL.md", "triage/SKILL.md")
	for _, want := range []string{"- triage: Triages a bug report, with logs. (learnt", "- rollback: Rolls a deploy back. (learnt", "- deploy-check:"} {
		if !strings.Contains(in, want) {
			t.Errorf("after a change, the index lacks %q:\n%s", want, in)
		}
	}
	delete(changed, "deploy-check/SKILL.md")
	learnt.set(changed)
	if in := index(c); strings.Contains(in, "deploy-check") {
		t.Errorf("a skill gone is still in the index:\n%s", in)
	}
	reads("after a skill went", 1)

	// load_skill reads the skill it loads, all of it, as it is now.
	load := tool(t, c, "load_skill")
	ctx, _ := newSession(t, sandbox.Manifest{})
	if out, err := load.Call(ctx, `{"name":"rollback"}`); err != nil || !strings.Contains(out, "Revert, then redeploy.") {
		t.Errorf("load_skill rollback = %q, %v", out, err)
	}
	reads("load_skill", 1, "rollback/SKILL.md")

	// Without versions, each call reads every SKILL.md, and no other file.
	plain := &learntTree{files: files, noVersions: true}
	pc := bind(t, skills.Lazy, plain, skills.SharedCache(cache))
	for i := range 2 {
		if _, err := pc.DynamicInstructions(context.Background(), rc); err != nil {
			t.Fatal(err)
		}
		opened, _ := plain.reads()
		if got := slices.Sorted(maps.Keys(opened)); strings.Join(got, " ") != "deploy-check/SKILL.md notes/SKILL.md triage/SKILL.md" {
			t.Errorf("call %d without versions read %v", i+1, opened)
		}
	}
	if got := plain.reports(); len(got) != 2 {
		t.Errorf("without versions, reports = %v, want notes' at each call", got)
	}
}

// Calls at once, on a cache they share, give one index, reading each
// SKILL.md at most once per capability; a cache too small to hold the
// index still gives the right one, reading again.
func TestLearntIndexCacheShared(t *testing.T) {
	files := map[string]string{}
	var want []string
	for i := range 40 {
		name := fmt.Sprintf("skill-%02d", i)
		files[name+"/SKILL.md"] = skillMD(name, "Does thing "+name+".", "Do it.\n")
		want = append(want, "- "+name+": Does thing "+name+". (learnt from earlier work)\n")
	}
	rc := agents.RunContext{MemoryScope: "team"}
	for _, tc := range []struct {
		name  string
		size  int64
		caps  int
		reads func(n int) bool
	}{
		{"shared", 0, 8, func(n int) bool { return n >= 40 && n <= 8*40 }},
		{"too small", 1, 1, func(n int) bool { return n >= 2*40 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			learnt := &learntTree{files: files}
			cache := skills.NewLearntCache(tc.size)
			caps := make([]*skills.Capability, tc.caps)
			for i := range caps {
				caps[i] = bind(t, skills.Text, learnt, skills.SharedCache(cache))
			}
			var wg sync.WaitGroup
			errs := make([]error, len(caps))
			for i, c := range caps {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 3 {
						in, err := c.DynamicInstructions(context.Background(), rc)
						if err == nil && !strings.Contains(in, strings.Join(want, "")) {
							err = fmt.Errorf("the index lacks skills:\n%s", in)
						}
						if err != nil {
							errs[i] = err
							return
						}
					}
				}()
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			opened, _ := learnt.reads()
			n := 0
			for _, c := range opened {
				n += c
			}
			if !tc.reads(n) {
				t.Errorf("%d capabilities, 3 calls each, 40 skills: %d reads of SKILL.md files", tc.caps, n)
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
