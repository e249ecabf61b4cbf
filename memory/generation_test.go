package memory_test

import (
	"errors"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/memory"
)

// A generation encodes and parses back; one that would write a file that
// is not consolidated (a rollout, a raw memory, a path out of the scope)
// or text that is not UTF-8 is refused either way; only generations and
// their marks are read from generations/ (a crashed create's temporary
// file is not).
func TestGeneration(t *testing.T) {
	at := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	g := memory.Generation{Version: 1, Seq: 3, By: memory.ByPhase2, At: at, ApplyBy: at.Add(30 * time.Second),
		Files: []memory.GenerationFile{{Path: memory.HandbookPath, Data: "# h\n"}, {Path: memory.SkillPath("price-review"), Data: "---\n"}, {Path: memory.SelectionPath, Data: "{}"}}}
	data, err := g.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := memory.ParseGeneration(data)
	if err != nil || back.Seq != 3 || len(back.Files) != 3 || back.Files[2].Path != memory.SelectionPath || !back.ApplyBy.Equal(g.ApplyBy) {
		t.Errorf("parsed back %+v, %v", back, err)
	}
	for _, bad := range []memory.GenerationFile{
		{Path: memory.RolloutPath("s1"), Data: "x"},
		{Path: memory.RawMemoryPath("s1"), Data: "x"},
		{Path: memory.RolloutSummaryPath("s1", "slug"), Data: "x"},
		{Path: "memories/skills/../../sessions/s1.jsonl", Data: "x"},
		{Path: memory.HandbookPath, Data: "\xff"},
	} {
		g := g
		g.Files = []memory.GenerationFile{bad}
		if _, err := g.Encode(); !errors.Is(err, memory.ErrBadGeneration) {
			t.Errorf("encode with %s: %v, want ErrBadGeneration", bad.Path, err)
		}
	}
	if _, err := memory.ParseGeneration([]byte(`{"version":1,"seq":1,"by":"phase2","files":[{"path":"sessions/s1.jsonl","data":""}]}`)); !errors.Is(err, memory.ErrBadGeneration) {
		t.Errorf("parse of a generation writing a rollout: %v", err)
	}
	for _, tc := range []struct {
		path          string
		seq           int64
		applied, isOK bool
	}{
		{memory.GenerationPath(12), 12, false, true},
		{memory.AppliedPath(12), 12, true, true},
		{"generations/.00000000000000000012.json.k3j.tmp", 0, false, false},
		{memory.TakeoverPath(12, 3), 0, false, false},
		{"generations/12.json", 0, false, false},
		{"generations/00000000000000000000.json", 0, false, false},
		{"memories/MEMORY.md", 0, false, false},
	} {
		seq, applied, ok := memory.ParseGenerationPath(tc.path)
		if seq != tc.seq || applied != tc.applied || ok != tc.isOK {
			t.Errorf("ParseGenerationPath(%s) = %d %v %v", tc.path, seq, applied, ok)
		}
	}
}

// A takeover encodes and parses back; its path is told apart from a
// generation's, a mark's and a temporary file's.
func TestTakeover(t *testing.T) {
	at := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	tk := memory.Takeover{Version: 1, Seq: 12, N: 2, Writer: "memory-acme/5#2/X7", At: at, ApplyBy: at.Add(30 * time.Second)}
	data, err := tk.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if back, err := memory.ParseTakeover(data); err != nil || back != tk {
		t.Errorf("parsed back %+v, %v", back, err)
	}
	for _, bad := range []string{`{"version":1,"seq":12,"n":0}`, `{"version":2,"seq":12,"n":1}`, `{`} {
		if _, err := memory.ParseTakeover([]byte(bad)); !errors.Is(err, memory.ErrBadGeneration) {
			t.Errorf("parse of %s: %v, want ErrBadGeneration", bad, err)
		}
	}
	for _, tc := range []struct {
		path string
		seq  int64
		n    int
		isOK bool
	}{
		{memory.TakeoverPath(12, 3), 12, 3, true},
		{memory.TakeoverPath(12, 10), 12, 10, true},
		{memory.GenerationPath(12), 0, 0, false},
		{memory.AppliedPath(12), 0, 0, false},
		{"generations/00000000000000000012.takeover.0.json", 0, 0, false},
		{"generations/00000000000000000012.takeover.03.json", 0, 0, false},
		{"generations/00000000000000000012.takeover.3", 0, 0, false},
		{"generations/.00000000000000000012.takeover.3.json.k3j.tmp", 0, 0, false},
	} {
		seq, n, ok := memory.ParseTakeoverPath(tc.path)
		if seq != tc.seq || n != tc.n || ok != tc.isOK {
			t.Errorf("ParseTakeoverPath(%s) = %d %d %v", tc.path, seq, n, ok)
		}
	}
}
