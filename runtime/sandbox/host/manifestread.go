package host

// Reading one file of a manifest without making the workspace: what a
// fresh workspace would hold at a path, read from the entries' sources.
// The worker uses it to show an agent its workspace's AGENTS.md from its
// first model call, before any sandbox is provisioned.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// ErrRemoteSource reports that ManifestFile, asked with LocalSourcesOnly,
// would have to fetch a remote source (a git_repo URL) to answer.
var ErrRemoteSource = errors.New("sandbox: the file is in a remote source")

// A ManifestReadOption changes what ManifestFile may do.
type ManifestReadOption func(*manifestRead)

type manifestRead struct{ localOnly bool }

// LocalSourcesOnly keeps ManifestFile from cloning a git_repo URL: when
// such an entry could hold the path, it fails with ErrRemoteSource.
func LocalSourcesOnly() ManifestReadOption { return func(r *manifestRead) { r.localOnly = true } }

// ManifestFile returns what a workspace made from m would hold at the
// workspace path name, at most max bytes, reading the entries' sources
// (inline content, host files and directories under p, git trees) and
// writing nothing. Later entries win over earlier ones, as in
// Materialize; an entry that does not hold name (a directory without it)
// leaves the earlier ones' say.
//
// A path no entry makes fails with fs.ErrNotExist; one that would be a
// directory, or a symlink, fails with sandbox.ErrNotRegular (ManifestFile
// does not follow links: a workspace read would, but only inside the
// workspace); one over max bytes fails with sandbox.ErrTooLarge. A manifest
// that Validate refuses fails as Materialize would. A git_repo entry from a
// URL is cloned, as Materialize would, when it could hold name.
func ManifestFile(ctx context.Context, m sandbox.Manifest, p sandbox.Policy, name string, max int64, opts ...ManifestReadOption) ([]byte, error) {
	var o manifestRead
	for _, opt := range opts {
		opt(&o)
	}
	name, err := sandbox.CleanPath(name)
	if err != nil {
		return nil, err
	}
	if err := m.Validate(p); err != nil {
		return nil, err
	}
	for i := len(m.Entries) - 1; i >= 0; i-- {
		e := m.Entries[i]
		at, _ := sandbox.CleanPath(e.Path) // Validated above.
		if !within(name, at) {
			continue
		}
		rel := relTo(at, name)
		data, err := entryFile(ctx, e, p, rel, name, max, o)
		if errors.Is(err, errNotHeld) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("manifest entry %d (%s %q): %w", i, e.Kind, e.Path, err)
		}
		return data, nil
	}
	return nil, fmt.Errorf("sandbox: %q: %w", name, fs.ErrNotExist)
}

// errNotHeld: an entry that could hold a path does not.
var errNotHeld = errors.New("not held by this entry")

// relTo is the clean workspace path name, which is within the clean
// path at, relative to at ("." when the same).
func relTo(at, name string) string {
	switch {
	case at == name:
		return "."
	case at == ".":
		return name
	}
	return strings.TrimPrefix(name, at+"/")
}

// entryFile reads the file at rel inside entry e (rel is "." when e is
// at the path itself), or fails with errNotHeld when e has nothing there.
func entryFile(ctx context.Context, e sandbox.Entry, p sandbox.Policy, rel, name string, max int64, o manifestRead) ([]byte, error) {
	switch e.Kind {
	case sandbox.EntryFile:
		if rel != "." {
			return nil, fmt.Errorf("%w: %q is under a file", fs.ErrNotExist, name)
		}
		if int64(len(e.Content)) > max {
			return nil, fmt.Errorf("%w: %s is over %d bytes", sandbox.ErrTooLarge, name, max)
		}
		return []byte(e.Content), nil
	case sandbox.EntryDir:
		if rel == "." {
			return nil, fmt.Errorf("%w: %q is a directory", sandbox.ErrNotRegular, name)
		}
		return nil, errNotHeld
	case sandbox.EntryLocalFile:
		if rel != "." {
			return nil, fmt.Errorf("%w: %q is under a file", fs.ErrNotExist, name)
		}
		src, err := p.Allows(e.Source)
		if err != nil {
			return nil, err
		}
		return readHostFile(ctx, nil, src, name, max)
	case sandbox.EntryLocalDir:
		if rel == "." {
			return nil, fmt.Errorf("%w: %q is a directory", sandbox.ErrNotRegular, name)
		}
		src, err := p.Allows(e.Source)
		if err != nil {
			return nil, err
		}
		root, err := os.OpenRoot(src)
		if err != nil {
			return nil, err
		}
		defer root.Close()
		return readHostFile(ctx, root, rel, name, max)
	case sandbox.EntryGitRepo:
		if rel == "." {
			return nil, fmt.Errorf("%w: %q is a directory", sandbox.ErrNotRegular, name)
		}
		if _, remote, _ := sandbox.GitSource(e.Source); remote != "" && o.localOnly {
			return nil, ErrRemoteSource
		}
		t, err := openGitTree(ctx, e, p)
		if err != nil {
			return nil, err
		}
		defer t.close()
		return t.file(ctx, rel, name, max)
	}
	return nil, fmt.Errorf("unknown entry kind %q", e.Kind)
}

// readHostFile reads the host file at p (in root, when set) if it is a
// regular file (not a symlink) of at most max bytes.
func readHostFile(ctx context.Context, root *os.Root, p, name string, max int64) ([]byte, error) {
	var (
		fi  fs.FileInfo
		err error
	)
	if root != nil {
		fi, err = root.Lstat(p)
	} else {
		fi, err = os.Lstat(p)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist) && root != nil:
		return nil, errNotHeld
	case err != nil:
		return nil, err
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%w: %q is a %s", sandbox.ErrNotRegular, name, kind(fi.Mode()))
	case fi.Size() > max:
		return nil, fmt.Errorf("%w: %s is over %d bytes", sandbox.ErrTooLarge, name, max)
	}
	var f *os.File
	if root != nil {
		f, _, err = openRegular(root, p, os.O_RDONLY, 0)
	} else {
		f, err = os.OpenFile(p, os.O_RDONLY|nonBlock, 0)
		if err == nil {
			f, _, err = regular(f, nil, name)
		}
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readBounded(ctx, f, max, name)
}

// file reads the regular file at rel in the tree.
func (t *gitTree) file(ctx context.Context, rel, name string, max int64) ([]byte, error) {
	entry, err := t.tree.FindEntry(rel)
	if errors.Is(err, object.ErrEntryNotFound) || errors.Is(err, object.ErrDirectoryNotFound) {
		return nil, errNotHeld
	}
	if err != nil {
		return nil, err
	}
	switch entry.Mode {
	case filemode.Regular, filemode.Deprecated, filemode.Executable:
	case filemode.Dir, filemode.Submodule:
		return nil, fmt.Errorf("%w: %q is a directory", sandbox.ErrNotRegular, name)
	default:
		return nil, fmt.Errorf("%w: %q is a symlink", sandbox.ErrNotRegular, name)
	}
	blob, err := t.repo.BlobObject(entry.Hash)
	if err != nil {
		return nil, err
	}
	if blob.Size > max {
		return nil, fmt.Errorf("%w: %s is over %d bytes", sandbox.ErrTooLarge, name, max)
	}
	r, err := blob.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return readBounded(ctx, r, max, name)
}
