package capabilities_test

import (
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/capabilities"
	"github.com/troupe-dev/troupe/runtime/sandbox"
)

func TestReadGuidance(t *testing.T) {
	big := strings.Repeat("rule\n", capabilities.MaxGuidanceBytes/5+10)
	cases := []struct {
		name    string
		entries []sandbox.Entry
		want    string // the whole result, or with "…" at the end its start
		note    bool
	}{
		{name: "none"},
		{name: "small", entries: []sandbox.Entry{{Kind: sandbox.EntryFile, Path: "AGENTS.md", Content: "Run make lint.\n"}}, want: "Run make lint.\n"},
		{name: "bounded", entries: []sandbox.Entry{{Kind: sandbox.EntryFile, Path: "AGENTS.md", Content: big}},
			want: big[:capabilities.MaxGuidanceBytes] + "…", note: true},
		{name: "a directory", entries: []sandbox.Entry{{Kind: sandbox.EntryDir, Path: "AGENTS.md"}}},
		{name: "not at the root", entries: []sandbox.Entry{{Kind: sandbox.EntryFile, Path: "sub/AGENTS.md", Content: "x"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, s := newSession(t, sandbox.Manifest{Entries: tc.entries})
			got, err := capabilities.ReadGuidance(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			if prefix, ok := strings.CutSuffix(tc.want, "…"); ok {
				if !strings.HasPrefix(got, prefix) || len(got) > capabilities.MaxGuidanceBytes+200 {
					t.Fatalf("ReadGuidance = %d bytes, want the first %d and a note", len(got), capabilities.MaxGuidanceBytes)
				}
			} else if got != tc.want {
				t.Fatalf("ReadGuidance = %q, want %q", got, tc.want)
			}
			if hasNote := strings.Contains(got, "only the first 32768 are shown"); hasNote != tc.note {
				t.Errorf("note = %v, want %v", hasNote, tc.note)
			}
		})
	}
	// A link that leads out of the workspace is no guidance.
	ctx, s := newSession(t, sandbox.Manifest{})
	if res, err := s.Exec(ctx, sandbox.ExecRequest{Cmd: "ln -s /etc/hostname AGENTS.md"}); err != nil || res.ExitCode != 0 {
		t.Fatalf("ln: %+v %v", res, err)
	}
	if got, err := capabilities.ReadGuidance(ctx, s); got != "" || err != nil {
		t.Errorf("ReadGuidance through a link out = %q, %v; want none", got, err)
	}
	if capabilities.GuidanceInstructions("") != "" || !strings.HasPrefix(capabilities.GuidanceInstructions("x"), "## Repository guidance (AGENTS.md)\n") {
		t.Error("GuidanceInstructions renders wrongly")
	}
}
