package sandbox

// Workspace paths. Every path that names something in a workspace goes
// through CleanPath first (a lexical check), and every host-side operation
// then goes through os.Root (the kernel's check, package host's job), so a
// path can escape neither by spelling ("..", "/etc") nor by a symlink that
// a command planted in the workspace.

import (
	"fmt"
	"path"
	"strings"
)

// CleanPath returns the clean form of the workspace-relative path p, using
// forward slashes: "a//b/./c/" becomes "a/b/c", and "." names the
// workspace root.
//
// It rejects, with an error wrapping ErrPathEscape that names p, a path
// that is empty, absolute, contains a NUL byte, or has a ".." element
// anywhere (even one that would cancel out, like "a/../b": a manifest or
// a tool that spells a path that way is confused or hostile). CleanPath is
// lexical; symlinks are checked when the path is used, by os.Root.
func CleanPath(p string) (string, error) {
	switch {
	case p == "":
		return "", fmt.Errorf("%w: empty path", ErrPathEscape)
	case strings.IndexByte(p, 0) >= 0:
		return "", fmt.Errorf("%w: %q contains a NUL byte", ErrPathEscape, p)
	case strings.HasPrefix(p, "/"):
		return "", fmt.Errorf("%w: %q is absolute", ErrPathEscape, p)
	}
	for _, elem := range strings.Split(p, "/") {
		if elem == ".." {
			return "", fmt.Errorf("%w: %q has a \"..\" element", ErrPathEscape, p)
		}
	}
	return path.Clean(p), nil
}
