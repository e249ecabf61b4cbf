package sandbox_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/troupe-dev/troupe/runtime/sandbox"
)

func TestCapOutput(t *testing.T) {
	for _, tc := range []struct {
		in        string
		max       int
		want      string
		truncated bool
	}{
		{in: "", max: 10, want: ""},
		{in: "short", max: 10, want: "short"},
		{in: "exactly10!", max: 10, want: "exactly10!"},
		{in: "0123456789abcdefghij", max: 10, want: "01234\n…[10 bytes truncated]…\nfghij", truncated: true},
		{in: "0123456789a", max: 3, want: "0\n…[8 bytes truncated]…\n9a", truncated: true},
		{in: "abc", max: 0, want: "…[3 bytes truncated]…\n", truncated: true},
		{in: "ab\ncdef\ngh", max: 4, want: "ab\n…[6 bytes truncated]…\ngh", truncated: true},
		{in: "ab\ncdef\ngh", max: 6, want: "ab\n…[4 bytes truncated]…\n\ngh", truncated: true},
		// "é" is two bytes: a cut inside it moves to its edge.
		{in: "ééééé", max: 5, want: "é\n…[6 bytes truncated]…\né", truncated: true},
	} {
		got, truncated := sandbox.CapOutput([]byte(tc.in), tc.max)
		if got != tc.want || truncated != tc.truncated {
			t.Errorf("CapOutput(%q, %d) = %q, %v; want %q, %v", tc.in, tc.max, got, truncated, tc.want, tc.truncated)
		}
	}
}

// TestCappedOutputStreams checks that writes in any chunking keep what
// CapOutput keeps of the whole.
func TestCappedOutputStreams(t *testing.T) {
	var all bytes.Buffer
	for i := range 5000 {
		all.WriteString(strings.Repeat("ü", i%7) + "line\n")
	}
	for _, max := range []int{0, 1, 7, 100, 4096, all.Len(), all.Len() + 1} {
		want, wantCut := sandbox.CapOutput(all.Bytes(), max)
		for _, chunk := range []int{1, 3, 64, 1000, all.Len()} {
			c := sandbox.NewCappedOutput(max)
			for b := all.Bytes(); len(b) > 0; {
				n := min(chunk, len(b))
				c.Write(b[:n])
				b = b[n:]
			}
			got, cut, total := c.Result()
			if got != want || cut != wantCut || total != all.Len() {
				t.Errorf("max %d, chunks of %d: %d bytes, cut %v, total %d; want %d bytes, cut %v", max, chunk, len(got), cut, total, len(want), wantCut)
			}
			if !utf8.ValidString(got) {
				t.Errorf("max %d, chunks of %d: invalid UTF-8", max, chunk)
			}
		}
	}
}

func TestNormalize(t *testing.T) {
	r, err := sandbox.ExecRequest{Cmd: "true"}.Normalize()
	if err != nil || r.Workdir != "." || r.Timeout != sandbox.DefaultTimeout || r.MaxOutputBytes != sandbox.DefaultMaxOutputBytes {
		t.Errorf("Normalize() = %+v, %v", r, err)
	}
	r, err = sandbox.ExecRequest{Workdir: "./a//b/", Timeout: time.Second, MaxOutputBytes: 10}.Normalize()
	if err != nil || r.Workdir != "a/b" || r.Timeout != time.Second || r.MaxOutputBytes != 10 {
		t.Errorf("Normalize() = %+v, %v", r, err)
	}
	if _, err := (sandbox.ExecRequest{Workdir: "../x"}).Normalize(); !errors.Is(err, sandbox.ErrPathEscape) {
		t.Errorf("Normalize of ../x: %v", err)
	}
}
