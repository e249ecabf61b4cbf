package memory_test

import (
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/memory"
)

func TestMaterialised(t *testing.T) {
	for path, want := range map[string]bool{
		memory.SummaryPath:                           true,
		memory.HandbookPath:                          true,
		"memories/rollout_summaries/s1_a.md":         true,
		"memories/skills/review-go/SKILL.md":         true,
		"memories/skills/review-go/scripts/run.sh":   true,
		"memories/raw_memories/s1.md":                false,
		memory.SelectionPath:                         false,
		"sessions/s1.jsonl":                          false,
		"memories/rollout_summaries/x/y.md":          false,
		"memories/skills/Bad_Name/SKILL.md":          false,
		"memories/skills/review-go/../../x/SKILL.md": false,
		"memories/other.md":                          false,
	} {
		if got := memory.Materialised(path); got != want {
			t.Errorf("Materialised(%s) = %v, want %v", path, got, want)
		}
	}
}

func TestCheckDirAndWorkspacePath(t *testing.T) {
	for dir, ok := range map[string]bool{"": true, "a": true, "coder-2": true, "../x": false, "a/b": false, "A": false, "skills": false, "raw_memories": false} {
		if err := memory.CheckDir(dir); (err == nil) != ok {
			t.Errorf("CheckDir(%q) = %v, want ok %v", dir, err, ok)
		}
	}
	if got := memory.WorkspacePath("a", memory.SkillPath("x")); got != "memories/a/skills/x/SKILL.md" {
		t.Errorf("WorkspacePath = %s", got)
	}
	if got := memory.WorkspacePath("", memory.HandbookPath); got != memory.HandbookPath {
		t.Errorf("WorkspacePath without dir = %s", got)
	}
}

func TestCheckLiveUpdate(t *testing.T) {
	for _, tc := range []struct {
		path string
		data string
		ok   bool
	}{
		{memory.HandbookPath, "- lesson\n", true},
		{memory.SummaryPath, strings.Repeat("x", memory.MaxSummaryBytes+1), false},
		{memory.HandbookPath, "\xff\xfe", false},
		{memory.SelectionPath, "{}", false},
	} {
		if err := memory.CheckLiveUpdate(tc.path, []byte(tc.data)); (err == nil) != tc.ok {
			t.Errorf("CheckLiveUpdate(%s, %d bytes) = %v, want ok %v", tc.path, len(tc.data), err, tc.ok)
		}
	}
}

func TestParseSkillInfoAndIndex(t *testing.T) {
	for _, tc := range []struct {
		name, data, wantName, wantDesc string
	}{
		{"review-go", "---\nname: review-go\ndescription: \"Review Go code.\"\n---\nbody", "review-go", "Review Go code."},
		{"folder", "no frontmatter\ndescription: not this", "folder", ""},
		{"folder", "---\nname: Bad Name\n---\n", "folder", ""},
	} {
		got := memory.ParseSkillInfo(tc.name, []byte(tc.data))
		if got.Name != tc.wantName || got.Description != tc.wantDesc {
			t.Errorf("ParseSkillInfo(%q) = %+v", tc.data, got)
		}
	}
	var many []memory.SkillInfo
	for range 200 {
		many = append(many, memory.SkillInfo{Name: "s", Description: strings.Repeat("d", 100)})
	}
	idx := memory.SkillIndex(many, func(n string) string { return n })
	if len(idx) > memory.MaxSkillIndexBytes+100 || !strings.Contains(idx, "more skills") {
		t.Errorf("an index of 200 skills is %d bytes, not bounded", len(idx))
	}
}

func TestSearch(t *testing.T) {
	text := "# Handbook\n- discount: escalate above 30%\n- style: terse\n- Discount codes expire\n"
	if got := memory.Search(text, "DISCOUNT escalate", 0); got != "2: - discount: escalate above 30%\n" {
		t.Errorf("Search = %q", got)
	}
	if got := memory.Search(text, "", 0); got != "" {
		t.Errorf("an empty query matched %q", got)
	}
	if got := memory.Search(strings.Repeat("hit\n", 1000), "hit", 100); len(got) > 150 || !strings.Contains(got, "more matches") {
		t.Errorf("Search is not bounded: %d bytes", len(got))
	}
}

func TestForkScope(t *testing.T) {
	long := strings.Repeat("a", 79) + ".b" + strings.Repeat("c", 19)
	for _, scope := range []string{"team", long, strings.Repeat("x", 79) + ".", "team.fork-0123456789ab"} {
		f := memory.ForkScope(scope, "session-1-fork")
		if err := memory.CheckScope(f); err != nil || f == scope {
			t.Errorf("ForkScope(%s) = %s: %v", scope, f, err)
		}
		if memory.ForkScope(scope, "session-1-fork") != f || memory.ForkScope(scope, "other") == f {
			t.Errorf("ForkScope(%s) is not one per fork", scope)
		}
	}
}
