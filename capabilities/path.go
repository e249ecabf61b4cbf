package capabilities

import (
	"fmt"
	"strings"

	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// WorkspaceDir is the name the model knows the workspace by. Whatever
// backend holds it, tools accept "/workspace/x" as an alias of the
// workspace-relative path "x"; every other absolute path is rejected.
const WorkspaceDir = "/workspace"

// workspacePath turns a path given by the model into a clean
// workspace-relative one ("" for the workspace root), by the rule of
// sandbox.CleanPath once the /workspace alias is taken off. An absolute
// path outside WorkspaceDir, or one with a ".." element, is rejected with
// an error that names the path and wraps sandbox.ErrPathEscape; the
// session enforces the same rule (and symlinks) again when the path is
// used.
func workspacePath(p string) (string, error) {
	rel := strings.TrimSpace(p)
	switch {
	case rel == "" || rel == WorkspaceDir:
		return "", nil
	case strings.HasPrefix(rel, WorkspaceDir+"/"):
		rel = strings.TrimPrefix(rel, WorkspaceDir+"/")
		if rel == "" {
			return "", nil
		}
	case strings.HasPrefix(rel, "/"):
		return "", fmt.Errorf("%w: %q is absolute; use a path relative to the workspace root", sandbox.ErrPathEscape, p)
	}
	clean, err := sandbox.CleanPath(rel)
	if err != nil {
		if rel != p {
			err = fmt.Errorf("path %q: %w", p, err)
		}
		return "", fmt.Errorf("%w (paths are relative to the workspace root, and \"..\" is not allowed)", err)
	}
	if clean == "." {
		return "", nil
	}
	return clean, nil
}

// workspaceFile is workspacePath for a file: the workspace root itself is
// not one.
func workspaceFile(p string) (string, error) {
	clean, err := workspacePath(p)
	if err != nil {
		return "", err
	}
	if clean == "" {
		if strings.TrimSpace(p) == "" {
			return "", fmt.Errorf("empty path")
		}
		return "", fmt.Errorf("path %q is the workspace root, not a file", p)
	}
	return clean, nil
}
