package memory_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/memory"
)

func TestParsePhase1(t *testing.T) {
	long := strings.Repeat("x", memory.MaxRawMemoryBytes+1)
	cases := []struct {
		name   string
		answer string
		want   memory.Phase1Result
		err    error
		field  string
	}{
		{"full", `{"rollout_slug":"fix-go-tests","rollout_summary":"Fixed tests.","raw_memory":"- run go test -race"}`,
			memory.Phase1Result{Slug: "fix-go-tests", Summary: "Fixed tests.", Raw: "- run go test -race"}, nil, ""},
		{"all empty keeps nothing", ` {"rollout_slug":"","rollout_summary":"","raw_memory":""}
`, memory.Phase1Result{}, nil, ""},
		{"prose", `Here it is: {"rollout_slug":"a"}`, memory.Phase1Result{}, memory.ErrNotJSON, ""},
		{"code fence", "```json\n{\"rollout_slug\":\"\",\"rollout_summary\":\"\",\"raw_memory\":\"\"}\n```", memory.Phase1Result{}, memory.ErrNotJSON, ""},
		{"trailing text", `{"rollout_slug":"","rollout_summary":"","raw_memory":""} done`, memory.Phase1Result{}, memory.ErrNotJSON, ""},
		{"two objects", `{"rollout_slug":"","rollout_summary":"","raw_memory":""}{}`, memory.Phase1Result{}, memory.ErrNotJSON, ""},
		{"array", `[]`, memory.Phase1Result{}, memory.ErrNotJSON, ""},
		{"missing field", `{"rollout_slug":"a","rollout_summary":"b"}`, memory.Phase1Result{}, memory.ErrFields, "raw_memory"},
		{"extra field", `{"rollout_slug":"a","rollout_summary":"b","raw_memory":"c","mood":"ok"}`, memory.Phase1Result{}, memory.ErrFields, "mood"},
		{"not a string", `{"rollout_slug":"a","rollout_summary":"b","raw_memory":["c"]}`, memory.Phase1Result{}, memory.ErrFields, "raw_memory"},
		{"some empty", `{"rollout_slug":"a","rollout_summary":"","raw_memory":"c"}`, memory.Phase1Result{}, memory.ErrEmpty, "rollout_summary"},
		{"slug with spaces", `{"rollout_slug":"Fix tests","rollout_summary":"b","raw_memory":"c"}`, memory.Phase1Result{}, memory.ErrBadSlug, "rollout_slug"},
		{"slug with a path", `{"rollout_slug":"../etc","rollout_summary":"b","raw_memory":"c"}`, memory.Phase1Result{}, memory.ErrBadSlug, "rollout_slug"},
		{"slug too long", `{"rollout_slug":"` + strings.Repeat("a", memory.MaxSlugLen+1) + `","rollout_summary":"b","raw_memory":"c"}`, memory.Phase1Result{}, memory.ErrBadSlug, "rollout_slug"},
		{"raw memory too large", `{"rollout_slug":"a","rollout_summary":"b","raw_memory":"` + long + `"}`, memory.Phase1Result{}, memory.ErrTooLarge, "raw_memory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := memory.ParsePhase1(c.answer)
			if c.err == nil {
				if err != nil {
					t.Fatal(err)
				}
				if got != c.want {
					t.Errorf("got %+v, want %+v", got, c.want)
				}
				return
			}
			if !errors.Is(err, c.err) {
				t.Fatalf("err = %v, want %v", err, c.err)
			}
			var oe *memory.OutputError
			if !errors.As(err, &oe) || oe.Phase != 1 || oe.Field != c.field {
				t.Errorf("err = %#v, want an OutputError of phase 1 on field %q", err, c.field)
			}
		})
	}
}

const skillMD = "---\nname: review-go\ndescription: Review Go code the team's way.\n---\nRun go vet first.\n"

func TestParsePhase2(t *testing.T) {
	skill := func(name, md string) string {
		b, _ := json.Marshal(map[string]string{"name": name, "skill_md": md})
		return string(b)
	}
	cases := []struct {
		name   string
		answer string
		skills int
		err    error
		field  string
	}{
		{"no skills", `{"memory_md":"## go\n- vet","memory_summary":"- vet"}`, 0, nil, ""},
		{"empty skills", `{"memory_md":"m","memory_summary":"s","skills":[]}`, 0, nil, ""},
		{"a skill", `{"memory_md":"m","memory_summary":"s","skills":[` + skill("review-go", skillMD) + `]}`, 1, nil, ""},
		{"not json", `MEMORY.md: ...`, 0, memory.ErrNotJSON, ""},
		{"missing summary", `{"memory_md":"m"}`, 0, memory.ErrFields, "memory_summary"},
		{"extra field", `{"memory_md":"m","memory_summary":"s","notes":"n"}`, 0, memory.ErrFields, "notes"},
		{"empty handbook", `{"memory_md":" ","memory_summary":"s"}`, 0, memory.ErrEmpty, "memory_md"},
		{"summary too large", `{"memory_md":"m","memory_summary":"` + strings.Repeat("s", memory.MaxSummaryBytes+1) + `"}`, 0, memory.ErrTooLarge, "memory_summary"},
		{"skills not an array", `{"memory_md":"m","memory_summary":"s","skills":{}}`, 0, memory.ErrFields, "skills"},
		{"skill bad name", `{"memory_md":"m","memory_summary":"s","skills":[` + skill("../x", skillMD) + `]}`, 0, memory.ErrBadSkill, "skills[0].name"},
		{"skill name differs", `{"memory_md":"m","memory_summary":"s","skills":[` + skill("review-sec", skillMD) + `]}`, 0, memory.ErrBadSkill, "skills[0].skill_md"},
		{"skill without front matter", `{"memory_md":"m","memory_summary":"s","skills":[` + skill("review-go", "Run go vet.") + `]}`, 0, memory.ErrBadSkill, "skills[0].skill_md"},
		{"skill twice", `{"memory_md":"m","memory_summary":"s","skills":[` + skill("review-go", skillMD) + `,` + skill("review-go", skillMD) + `]}`, 0, memory.ErrBadSkill, "skills[1].name"},
		{"skill extra field", `{"memory_md":"m","memory_summary":"s","skills":[{"name":"a","skill_md":"x","path":"/etc"}]}`, 0, memory.ErrFields, "skills[0].path"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := memory.ParsePhase2(c.answer)
			if c.err == nil {
				if err != nil {
					t.Fatal(err)
				}
				if len(got.Skills) != c.skills {
					t.Errorf("%d skills, want %d", len(got.Skills), c.skills)
				}
				files := memory.Phase2Files(got)
				if len(files) != 2+c.skills || files[memory.HandbookPath] == nil || files[memory.SummaryPath] == nil {
					t.Errorf("files %v", files)
				}
				return
			}
			var oe *memory.OutputError
			if !errors.Is(err, c.err) || !errors.As(err, &oe) || oe.Phase != 2 || oe.Field != c.field {
				t.Fatalf("err = %v, want %v on field %q", err, c.err, c.field)
			}
		})
	}
}

func TestAppendLine(t *testing.T) {
	at := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	var data []byte
	steps := []struct {
		seq   int
		lines int
		added bool
	}{{1, 1, true}, {2, 2, true}, {2, 2, false}, {1, 2, false}, {3, 3, true}}
	for _, s := range steps {
		out, n, added, err := memory.AppendLine(data, memory.Line{Seq: s.seq, Workflow: "s1", Input: "hi", Outcome: memory.OutcomeAnswered, Ended: at})
		if err != nil {
			t.Fatal(err)
		}
		if n != s.lines || added != s.added {
			t.Fatalf("append seq %d: %d lines added=%v, want %d %v", s.seq, n, added, s.lines, s.added)
		}
		data = out
	}
	lines, err := memory.ParseLines(data)
	if err != nil || len(lines) != 3 || lines[2].Seq != 3 {
		t.Fatalf("lines %+v %v", lines, err)
	}
	for _, bad := range []string{"{", `{"seq":0}`, "not json\n"} {
		if _, err := memory.ParseLines([]byte(bad)); !errors.Is(err, memory.ErrBadRollout) {
			t.Errorf("ParseLines(%q) = %v, want ErrBadRollout", bad, err)
		}
	}
}

func TestGenerated(t *testing.T) {
	in := []agents.Item{
		{Type: agents.ItemMessage, Role: agents.RoleSystem, Content: "sys"},
		{Type: agents.ItemMessage, Role: agents.RoleDeveloper, Content: "dev"},
		agents.UserMessage("hi"),
		{Type: agents.ItemReasoning, Summary: "thinking", EncryptedContent: "xx"},
		agents.FunctionCall("c1", "lookup", `{}`),
		agents.FunctionCallOutput("c1", "found"),
		agents.AssistantMessage("done"),
	}
	got := memory.Generated(in)
	var kinds []string
	for _, it := range got {
		kinds = append(kinds, string(it.Type)+":"+it.Role)
	}
	if want := "message:user function_call: function_call_output: message:assistant"; strings.Join(kinds, " ") != want {
		t.Errorf("generated %s, want %s", strings.Join(kinds, " "), want)
	}
}

func TestBound(t *testing.T) {
	text := "HEAD" + strings.Repeat("é", 500) + "TAIL"
	cases := []struct {
		name string
		max  int
		cut  bool
	}{{"fits", len(text), false}, {"no bound", 0, false}, {"cut", 90, true}, {"cut odd", 91, true}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := memory.Bound(text, c.max)
			if !c.cut {
				if got != text {
					t.Error("text changed")
				}
				return
			}
			if !strings.HasPrefix(got, "HEAD") || !strings.HasSuffix(got, "TAIL") || !strings.Contains(got, "bytes left out") {
				t.Errorf("bound %q lost its head, tail or marker", got)
			}
			if !utf8.ValidString(got) {
				t.Error("cut inside a UTF-8 sequence")
			}
			if len(got) > c.max+80 {
				t.Errorf("%d bytes for a bound of %d", len(got), c.max)
			}
		})
	}
}

func TestNames(t *testing.T) {
	cases := []struct {
		id      string
		same    bool
		scopeOK bool
	}{
		{"session-1", true, true},
		{"run-2026.11", true, true},
		{"dealdesk/run/1", false, false},
		{"../up", false, false},
		{"", false, false},
		{"ü", false, false},
	}
	for _, c := range cases {
		t.Run(c.id, func(t *testing.T) {
			id := memory.RolloutID(c.id)
			if err := memory.CheckRolloutID(id); err != nil {
				t.Fatalf("RolloutID(%q) = %q: %v", c.id, id, err)
			}
			if (id == c.id) != c.same {
				t.Errorf("RolloutID(%q) = %q", c.id, id)
			}
			if (memory.CheckScope(c.id) == nil) != c.scopeOK {
				t.Errorf("CheckScope(%q) ok = %v", c.id, !c.scopeOK)
			}
		})
	}
	if memory.RolloutID("a/b") == memory.RolloutID("a_b") {
		t.Error("two workflow ids share a rollout id")
	}
	if !memory.IsRolloutSummaryOf(memory.RolloutSummaryPath("s1", "fix-tests"), "s1") || memory.IsRolloutSummaryOf(memory.RolloutSummaryPath("s1_x", "fix"), "s1") {
		t.Error("IsRolloutSummaryOf")
	}
}

func TestRawMemoryRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 26, 8, 0, 0, 123, time.UTC)
	rawPath, raw, sumPath, sum, err := memory.Phase1Files("s1", 3, at, memory.Phase1Result{Slug: "fix-tests", Summary: "Fixed.", Raw: "- use -race"})
	if err != nil {
		t.Fatal(err)
	}
	if rawPath != "memories/raw_memories/s1.md" || sumPath != "memories/rollout_summaries/s1_fix-tests.md" || !strings.Contains(string(sum), "Fixed.") {
		t.Errorf("paths %s %s", rawPath, sumPath)
	}
	m, err := memory.ParseRawMemory(raw)
	if err != nil {
		t.Fatal(err)
	}
	if m.RolloutID != "s1" || m.Lines != 3 || m.Slug != "fix-tests" || !m.Updated.Equal(at) || m.Text != "- use -race" {
		t.Errorf("round trip %+v", m)
	}
	if _, _, _, _, err := memory.Phase1Files("s1", 3, at, memory.Phase1Result{}); err == nil {
		t.Error("an empty result wrote files")
	}
	for _, bad := range []string{"", "no front matter", "---\nrollout_id: ../x\nrollout_lines: 1\nrollout_slug: a\nupdated: 2026-11-26T08:00:00Z\n---\nx"} {
		if _, err := memory.ParseRawMemory([]byte(bad)); !errors.Is(err, memory.ErrBadFile) {
			t.Errorf("ParseRawMemory(%q) = %v", bad, err)
		}
	}
}

func TestDiff(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	raw := func(id string, lines int, min int) memory.RawMemory {
		return memory.RawMemory{RolloutID: id, Lines: lines, Slug: "s", Updated: t0.Add(time.Duration(min) * time.Minute), Text: id}
	}
	all := []memory.RawMemory{raw("a", 1, 1), raw("b", 1, 2), raw("c", 2, 3), raw("d", 1, 4)}
	last := memory.SelectionOf([]memory.RawMemory{raw("b", 1, 2), raw("a", 1, 1), raw("c", 1, 0)}, t0)
	cases := []struct {
		name                 string
		newest               int
		added, kept, removed string
	}{
		{"all", 0, "d c", "b a", ""},
		{"newest 2 forgets a and b", 2, "d c", "", "b a"},
		{"newest 3", 3, "d c", "b", "a"},
	}
	ids := func(ms []memory.RawMemory) string {
		var s []string
		for _, m := range ms {
			s = append(s, m.RolloutID)
		}
		return strings.Join(s, " ")
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := memory.Diff(last, memory.Newest(all, c.newest))
			var removed []string
			for _, r := range d.Removed {
				removed = append(removed, r.RolloutID)
			}
			if ids(d.Added) != c.added || ids(d.Kept) != c.kept || strings.Join(removed, " ") != c.removed {
				t.Errorf("added %q kept %q removed %q, want %q %q %q", ids(d.Added), ids(d.Kept), removed, c.added, c.kept, c.removed)
			}
		})
	}
	enc := last.Encode()
	back, err := memory.ParseSelection(enc)
	if err != nil || len(back.Selected) != 3 || memory.Diff(back, []memory.RawMemory{raw("b", 1, 2)}).Kept == nil {
		t.Errorf("selection round trip: %+v %v", back, err)
	}
	if s, err := memory.ParseSelection(nil); err != nil || len(s.Selected) != 0 {
		t.Errorf("no selection file: %+v %v", s, err)
	}
	for _, bad := range []string{"{", `{"version":2}`, `{"version":1,"selected":[{"rollout_id":"../x"}]}`} {
		if _, err := memory.ParseSelection([]byte(bad)); !errors.Is(err, memory.ErrBadFile) {
			t.Errorf("ParseSelection(%q) = %v", bad, err)
		}
	}
	in := memory.Phase2Input("## old\n- x", memory.Diff(last, memory.Newest(all, 2)), map[string]string{"a": "A's text"}, 100)
	for _, want := range []string{"## old", "ADDED rollout d", "ADDED rollout c", "REMOVED rollout a\nA's text", "REMOVED rollout b\n(its text is gone"} {
		if !strings.Contains(in, want) {
			t.Errorf("phase-2 input lacks %q:\n%s", want, in)
		}
	}
}
