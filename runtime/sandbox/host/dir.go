package host

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
)

// A wsDir is an open directory of a workspace. Its files are opened
// relative to it, one name at a time, never through a symlink and never
// waiting on a FIFO, so that a walk or an extraction costs one open per
// file however deep the tree is, where an os.Root resolves every
// component of every path again. Directories themselves, far fewer, are
// opened through the os.Root, which also makes their entries' FileInfo
// come from the open directory, never from a path. A directory moved while
// it is open stays confined: the workspace is its own mount, and renames
// do not cross mounts.
type wsDir struct {
	root *os.Root // The workspace.
	f    *os.File // The open directory.
	name string   // Its clean workspace path ("." for the root).
}

// openDir opens the clean workspace directory name in root, refusing at
// once anything that is not a directory (a symlink, a FIFO). os.Root
// follows a symlink in the last component too (inside the root), so what
// was opened is checked against what the path names now: a symlink there,
// or a directory swapped in or out meanwhile, is refused.
func openDir(root *os.Root, name string) (*wsDir, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|dirOnly|nonBlock|noFollow, 0)
	if err != nil {
		return nil, err
	}
	if name != "." {
		opened, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		now, err := root.Lstat(name)
		if err != nil {
			f.Close()
			return nil, err
		}
		if !now.IsDir() || !os.SameFile(opened, now) {
			f.Close()
			return nil, &fs.PathError{Op: "open", Path: name, Err: errors.New("not a directory (a symlink, or it changed while it was opened)")}
		}
	}
	return &wsDir{root: root, f: f, name: name}, nil
}

func (d *wsDir) close() error { return d.f.Close() }

// path returns the workspace path of d's entry name.
func (d *wsDir) path(name string) string { return path.Join(d.name, name) }

// checkName refuses anything but one path component.
func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("sandbox: %q is not a name in a directory", name)
	}
	return nil
}

// readlink returns the target of d's symlink name.
func (d *wsDir) readlink(name string) (string, error) {
	if err := checkName(name); err != nil {
		return "", err
	}
	return d.root.Readlink(d.path(name))
}

// symlink makes d's entry name a symlink to target.
func (d *wsDir) symlink(target, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	return d.root.Symlink(target, d.path(name))
}

// entries returns d's entries, sorted by name.
func (d *wsDir) entries() ([]fs.DirEntry, error) {
	if _, err := d.f.Seek(0, 0); err != nil {
		return nil, err
	}
	entries, err := d.f.ReadDir(-1)
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, err
}

// openRegular opens d's entry name with flag (plus O_NONBLOCK and
// O_NOFOLLOW) and returns it with its FileInfo when it is a regular file;
// anything else fails with sandbox.ErrNotRegular, a FIFO without a writer
// included.
func (d *wsDir) openRegular(name string, flag int, perm fs.FileMode) (*os.File, fs.FileInfo, error) {
	f, err := d.openFile(name, flag|nonBlock|noFollow, perm)
	return regular(f, err, d.path(name))
}

// walk calls fn for each entry under d, depth first, in lexical order
// within each directory (as fs.WalkDir), with the workspace path of the
// entry and the open directory that holds it; fn may return fs.SkipDir to
// leave a directory out. Directories are opened as walk reaches them, so
// that no open can block or follow a symlink. While walk is below a
// directory it holds no descriptor of it (it opens it again after), so no
// depth of tree can exhaust the worker's descriptors: a walk holds two at
// most, and whatever fn opens. It stops when ctx is done.
func (d *wsDir) walk(ctx context.Context, fn func(p string, dir *wsDir, e fs.DirEntry) error) error {
	entries, err := d.entries()
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		p := d.path(e.Name())
		switch err := fn(p, d, e); {
		case errors.Is(err, fs.SkipDir):
			continue
		case err != nil:
			return err
		}
		if !e.IsDir() {
			continue
		}
		if err := checkName(e.Name()); err != nil {
			return err
		}
		d.close()
		sub, err := openDir(d.root, p)
		if err == nil {
			err = sub.walk(ctx, fn)
			sub.close()
		}
		again, rerr := openDir(d.root, d.name)
		if rerr != nil {
			return errors.Join(err, rerr)
		}
		d.f = again.f
		if err != nil {
			return err
		}
	}
	return nil
}
