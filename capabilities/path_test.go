package capabilities

import (
	"errors"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/runtime/sandbox"
)

func TestWorkspacePath(t *testing.T) {
	tests := []struct {
		in, want string
		err      string // a part of the error; "" for none
	}{
		{"a/b.txt", "a/b.txt", ""},
		{"./a//b/", "a/b", ""},
		{" a.txt ", "a.txt", ""},
		{"", "", ""},
		{".", "", ""},
		{"/workspace", "", ""},
		{"/workspace/", "", ""},
		{"/workspace/src/x.go", "src/x.go", ""},
		{"/workspaces/x", "", `"/workspaces/x" is absolute`},
		{"/etc/passwd", "", `"/etc/passwd" is absolute`},
		{"../x", "", `"../x" has a ".." element`},
		{"a/../b", "", `"a/../b" has a ".." element`},
		{"/workspace/../x", "", `path "/workspace/../x": `},
		{"a\x00b", "", "NUL"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := workspacePath(tt.in)
			if tt.err == "" {
				if err != nil || got != tt.want {
					t.Errorf("workspacePath(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, sandbox.ErrPathEscape) {
				t.Errorf("workspacePath(%q) = %q, %v; want an ErrPathEscape containing %q", tt.in, got, err, tt.err)
			}
		})
	}
}
