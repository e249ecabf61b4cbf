package host

// Workspace paths on the host. A path that names something in a workspace
// has passed sandbox.CleanPath (a lexical check); every host-side
// operation on it then goes through os.Root (the kernel's check), so a
// path can escape neither by spelling ("..", "/etc") nor by a symlink
// that a command planted in the workspace. The errors of os.Root become
// sandbox.ErrPathEscape here.

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// escapeError reports op on the workspace path p as an escape.
func escapeError(op, p string) error {
	return fmt.Errorf("sandbox: %s %q: %w through a symlink", op, p, sandbox.ErrPathEscape)
}

// rootError maps an os.Root error for the workspace path p onto the
// package's errors: an escape (through a symlink, or to an absolute
// target) becomes sandbox.ErrPathEscape; anything else keeps its cause, so
// errors.Is(err, fs.ErrNotExist) still works.
func rootError(op, p string, err error) error {
	if err == nil {
		return nil
	}
	if isRootEscape(err) {
		return escapeError(op, p)
	}
	return fmt.Errorf("sandbox: %s %q: %w", op, p, err)
}

// isRootEscape reports whether err is os.Root refusing a path that leaves
// the root. The os package does not export that error, so it is matched by
// its text (stable since Go 1.24); a symlink loop is reported the same way
// because, inside a Root, it can only be an attempt to escape or a mess.
func isRootEscape(err error) bool {
	for err != nil {
		if err.Error() == "path escapes from parent" {
			return true
		}
		var pe *fs.PathError
		if errors.As(err, &pe) && pe.Err != nil && pe.Err.Error() == "path escapes from parent" {
			return true
		}
		err = errors.Unwrap(err)
	}
	return false
}

// DirName returns the name of the directory that holds the workspace of the
// session id: id itself when it is a short, plain name, otherwise a
// sanitised prefix of it, a "~" and a hash, so every id maps to one safe,
// distinct name that never starts with a dot or a dash.
func DirName(id string) string {
	plain := len(id) > 0 && len(id) <= 64 && id[0] != '.' && id[0] != '-'
	var b strings.Builder
	for i := 0; i < len(id) && b.Len() < 48; i++ {
		c := id[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' {
			b.WriteByte(c)
			continue
		}
		plain = false
		b.WriteByte('_')
	}
	if plain {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	// "~" never occurs in a plain name, so a hashed name never equals one.
	return strings.TrimLeft(b.String(), ".-") + "~" + hex.EncodeToString(sum[:6])
}

// within reports whether the clean workspace path p is the clean path dir
// or lies under it.
func within(p, dir string) bool {
	return p == dir || dir == "." || strings.HasPrefix(p, dir+"/")
}
