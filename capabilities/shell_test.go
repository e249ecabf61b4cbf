package capabilities

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/troupe-dev/troupe/runtime/sandbox"
)

func TestFormatExec(t *testing.T) {
	tests := []struct {
		name   string
		res    sandbox.ExecResult
		tokens int
		want   string
	}{
		{
			name:   "success",
			res:    sandbox.ExecResult{Output: "hello\n", OriginalBytes: 6},
			tokens: 100,
			want:   "Chunk ID: abc123\nWall time: 0.0123 seconds\nProcess exited with code 0\nOutput:\nhello\n",
		},
		{
			name:   "failure without output",
			res:    sandbox.ExecResult{ExitCode: 127},
			tokens: 100,
			want:   "Chunk ID: abc123\nWall time: 0.0123 seconds\nProcess exited with code 127\nOutput:\n",
		},
		{
			name:   "timed out with partial output",
			res:    sandbox.ExecResult{ExitCode: -1, TimedOut: true, Output: "started\n", OriginalBytes: 8},
			tokens: 100,
			want:   "Chunk ID: abc123\nWall time: 0.0123 seconds\nOutput:\nCommand timed out after 2.500 seconds.\nstarted\n",
		},
		{
			name:   "timed out silently",
			res:    sandbox.ExecResult{ExitCode: -1, TimedOut: true},
			tokens: 100,
			want:   "Chunk ID: abc123\nWall time: 0.0123 seconds\nOutput:\nCommand timed out after 2.500 seconds.",
		},
		{
			name:   "truncated",
			res:    sandbox.ExecResult{Output: strings.Repeat("abcdefghij", 10), OriginalBytes: 100},
			tokens: 10,
			// 40 bytes: no room for the line count, so head, marker, tail.
			want: "Chunk ID: abc123\nWall time: 0.0123 seconds\nProcess exited with code 0\nOriginal token count: 25\nOutput:\nabcdefg…22 tokens truncated…cdefghij",
		},
		{
			name:   "truncated with the line count",
			res:    sandbox.ExecResult{Output: strings.Repeat("0123456789\n", 20), OriginalBytes: 220},
			tokens: 25,
			// 100 bytes: 24 of header, 25 of marker, 25 of head, 26 of tail.
			want: "Chunk ID: abc123\nWall time: 0.0123 seconds\nProcess exited with code 0\nOriginal token count: 55\nOutput:\n" +
				"Total output lines: 20\n\n0123456789\n0123456789\n012…43 tokens truncated…789\n0123456789\n0123456789\n",
		},
		{
			name:   "already cut by the session",
			res:    sandbox.ExecResult{Output: "head\n…[999990 bytes truncated]…\ntail\n", Truncated: true, OriginalBytes: 1_000_000},
			tokens: 100,
			want:   "Chunk ID: abc123\nWall time: 0.0123 seconds\nProcess exited with code 0\nOriginal token count: 250000\nOutput:\nhead\n…[999990 bytes truncated]…\ntail\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := formatExec("abc123", 12300*time.Microsecond, tt.res, 2500*time.Millisecond, tt.tokens)
			if got != tt.want {
				t.Errorf("formatExec:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

// TestTruncateOutputBounds checks, over many outputs and budgets, that a
// truncated output fits its budget, is valid UTF-8, and keeps the head
// and the tail.
func TestTruncateOutputBounds(t *testing.T) {
	outputs := []string{
		strings.Repeat("x", 1000),
		strings.Repeat("日本語のテキスト\n", 200),
		strings.Repeat("🙂", 333),
		strings.Repeat("line\n", 10_000),
	}
	for _, out := range outputs {
		for _, tokens := range []int{1, 2, 5, 8, 13, 50, 100, 1000, 100_000} {
			got, orig, cut := truncateOutput(out, len(out), false, tokens)
			budget := tokens * BytesPerToken
			if !cut {
				if len(out) > budget || got != out {
					t.Errorf("%d tokens, %d bytes: not cut", tokens, len(out))
				}
				continue
			}
			if len(got) > budget {
				t.Errorf("%d tokens: %d bytes > budget %d", tokens, len(got), budget)
			}
			if !utf8.ValidString(got) {
				t.Errorf("%d tokens: invalid UTF-8: %q", tokens, got)
			}
			if orig != (len(out)+3)/4 {
				t.Errorf("original tokens = %d; want %d", orig, (len(out)+3)/4)
			}
			if !strings.Contains(got, "tokens truncated…") && budget >= 30 {
				t.Errorf("%d tokens: no marker in %q", tokens, got)
			}
		}
	}
}
