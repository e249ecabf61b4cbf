package sandbox_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/runtime/sandbox"
)

func TestCleanPath(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		escape   bool
	}{
		{in: "a", want: "a"},
		{in: "a/b/c.txt", want: "a/b/c.txt"},
		{in: "./a//b/./c/", want: "a/b/c"},
		{in: ".", want: "."},
		{in: "./", want: "."},
		{in: "a..b/..c/d..", want: "a..b/..c/d.."},
		{in: "...", want: "..."},
		{in: `back\slash`, want: `back\slash`},
		{in: "", escape: true},
		{in: "/", escape: true},
		{in: "/etc/passwd", escape: true},
		{in: "//a", escape: true},
		{in: "..", escape: true},
		{in: "../x", escape: true},
		{in: "a/..", escape: true},
		{in: "a/../b", escape: true},
		{in: "a/b/../../..", escape: true},
		{in: "a/\x00b", escape: true},
	} {
		got, err := sandbox.CleanPath(tc.in)
		if tc.escape {
			if !errors.Is(err, sandbox.ErrPathEscape) {
				t.Errorf("CleanPath(%q) = %q, %v; want ErrPathEscape", tc.in, got, err)
			} else if tc.in != "" && !strings.Contains(err.Error(), fmt.Sprintf("%q", tc.in)) {
				t.Errorf("CleanPath(%q): error %q does not name the path", tc.in, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("CleanPath(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}
