package host

// Materialize turns a sandbox.Manifest into files. It works in three phases
// so that nothing is written unless everything can be: validate the
// manifest, fetch every git tree (and check its symlinks), then create the
// entries in order through an os.Root on the workspace directory.

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// Materialize creates the manifest's entries, in order, under the existing
// host directory dir, after checking the whole manifest with
// sandbox.Manifest.Validate and p. Later entries may overwrite earlier ones;
// parent directories are created as needed (mode 0755).
//
// Entries are created as follows:
//   - file: Content, with Mode (default 0644).
//   - dir: an empty directory with Mode (default 0755).
//   - local_file: a copy of the host file, with Mode or else the source's
//     permission bits.
//   - local_dir: a recursive copy of the host directory, keeping
//     permission bits. Symlinks are copied as symlinks; one that is
//     absolute or leads out of the source tree makes Validate fail with
//     sandbox.ErrPathEscape (it is never skipped silently). Devices,
//     sockets and pipes are skipped.
//   - git_repo: the work tree of the commit that Ref names (a branch, tag,
//     commit hash or any revision go-git resolves; HEAD when empty), with
//     executable bits and symlinks, and without .git: the workspace gets
//     files, not a repository, so the sandbox needs neither git nor the
//     network. A remote URL is cloned with go-git into a temporary
//     directory on the host, bare, with Depth when set (with a Depth, Ref
//     must be a branch or tag, or a commit within that depth); a local
//     path is read in place, so Depth does not matter and uncommitted
//     changes are not copied. Submodules are not fetched; their
//     directories are left empty. A symlink in the tree that is absolute or
//     leads out of the repository fails with sandbox.ErrPathEscape before
//     anything is written.
//
// On an error the entries already created stay; callers that provision a
// workspace remove the whole directory (as Provision does).
func Materialize(ctx context.Context, m sandbox.Manifest, dir string, p sandbox.Policy) error {
	if err := m.Validate(p); err != nil {
		return err
	}
	trees := make(map[int]*gitTree)
	defer func() {
		for _, t := range trees {
			t.close()
		}
	}()
	for i, e := range m.Entries {
		if e.Kind != sandbox.EntryGitRepo {
			continue
		}
		t, err := openGitTree(ctx, e, p)
		if err != nil {
			return fmt.Errorf("manifest entry %d (git_repo %q): %w", i, e.Path, err)
		}
		trees[i] = t
	}

	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("sandbox: workspace: %w", err)
	}
	defer root.Close()
	for i, e := range m.Entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		clean, _ := sandbox.CleanPath(e.Path) // Validated above.
		var err error
		switch e.Kind {
		case sandbox.EntryFile:
			err = writeFile(root, clean, strings.NewReader(e.Content), modeOr(e.Mode, 0o644))
		case sandbox.EntryDir:
			err = makeDir(root, clean, modeOr(e.Mode, 0o755))
		case sandbox.EntryLocalFile:
			err = copyHostFile(root, clean, e, p)
		case sandbox.EntryLocalDir:
			err = copyHostDir(ctx, root, clean, e, p)
		case sandbox.EntryGitRepo:
			err = trees[i].writeTo(ctx, root, clean, e.Mode)
		}
		if err != nil {
			return fmt.Errorf("manifest entry %d (%s %q): %w", i, e.Kind, e.Path, rootError("create", e.Path, err))
		}
	}
	return nil
}

func modeOr(mode uint32, def fs.FileMode) fs.FileMode {
	if mode == 0 {
		return def
	}
	return fs.FileMode(mode) & fs.ModePerm
}

// writeFile creates or truncates the file name in root with the content of
// r and exactly mode perm (whatever the umask), creating parents.
func writeFile(root *os.Root, name string, r io.Reader, perm fs.FileMode) error {
	if dir := path.Dir(name); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	// A FIFO a command left at name is refused, never waited on.
	f, _, err := openRegular(root, name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// makeDir creates the directory name in root, with parents, and sets its
// mode to perm.
func makeDir(root *os.Root, name string, perm fs.FileMode) error {
	if err := root.MkdirAll(name, 0o755); err != nil {
		return err
	}
	return root.Chmod(name, perm)
}

func copyHostFile(root *os.Root, name string, e sandbox.Entry, p sandbox.Policy) error {
	src, err := p.Allows(e.Source)
	if err != nil {
		return err
	}
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("source %q is not a regular file", src)
	}
	return writeFile(root, name, f, modeOr(e.Mode, fi.Mode().Perm()))
}

// copyHostDir copies the host directory e.Source into name. It reads the
// source through an os.Root too, so a source that changes while it is
// copied still cannot make it read outside the source tree.
func copyHostDir(ctx context.Context, dst *os.Root, name string, e sandbox.Entry, p sandbox.Policy) error {
	srcPath, err := p.Allows(e.Source)
	if err != nil {
		return err
	}
	src, err := os.OpenRoot(srcPath)
	if err != nil {
		return err
	}
	defer src.Close()
	type dirMode struct {
		name string
		perm fs.FileMode
	}
	var dirs []dirMode
	err = fs.WalkDir(src.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		target := path.Join(name, rel)
		switch {
		case d.IsDir():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			perm := fi.Mode().Perm()
			if rel == "." && e.Mode != 0 {
				perm = modeOr(e.Mode, perm)
			}
			// Writable while copying; the real mode is set afterwards.
			if err := dst.MkdirAll(target, 0o755); err != nil {
				return err
			}
			if err := dst.Chmod(target, 0o700|perm); err != nil {
				return err
			}
			dirs = append(dirs, dirMode{target, perm})
		case d.Type()&fs.ModeSymlink != 0:
			link, err := src.Readlink(rel)
			if err != nil {
				return err
			}
			if err := sandbox.CheckLink(rel, link); err != nil {
				return err
			}
			return replaceSymlink(dst, link, target)
		case d.Type().IsRegular():
			f, err := src.OpenFile(rel, os.O_RDONLY|noFollow, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			fi, err := f.Stat()
			if err != nil {
				return err
			}
			if !fi.Mode().IsRegular() {
				return nil // Replaced while we walked; skip it.
			}
			return writeFile(dst, target, f, fi.Mode().Perm())
		}
		return nil // Devices, sockets, pipes.
	})
	if err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := dst.Chmod(dirs[i].name, dirs[i].perm); err != nil {
			return err
		}
	}
	return nil
}

// replaceSymlink creates the symlink name -> target in root, replacing a
// file or symlink already there.
func replaceSymlink(root *os.Root, target, name string) error {
	if dir := path.Dir(name); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	if fi, err := root.Lstat(name); err == nil && !fi.IsDir() {
		if err := root.Remove(name); err != nil {
			return err
		}
	}
	return root.Symlink(target, name)
}

// gitTree is the commit of a git_repo entry, fetched and checked, ready to
// be written.
type gitTree struct {
	repo    *git.Repository
	tree    *object.Tree
	tempDir string // The bare clone of a remote, removed by close.
}

func (t *gitTree) close() {
	if t.tempDir != "" {
		os.RemoveAll(t.tempDir)
	}
}

// openGitTree opens (local path) or clones (URL) the repository of e and
// resolves e.Ref to a tree, whose symlinks it checks.
func openGitTree(ctx context.Context, e sandbox.Entry, p sandbox.Policy) (_ *gitTree, err error) {
	local, remote, err := sandbox.GitSource(e.Source)
	if err != nil {
		return nil, err
	}
	t := &gitTree{}
	defer func() {
		if err != nil {
			t.close()
		}
	}()
	var repo *git.Repository
	if remote == "" {
		src, err := p.Allows(local)
		if err != nil {
			return nil, err
		}
		repo, err = git.PlainOpenWithOptions(src, &git.PlainOpenOptions{EnableDotGitCommonDir: true})
		if err != nil {
			return nil, fmt.Errorf("open %q: %w", src, err)
		}
	} else {
		t.tempDir, err = os.MkdirTemp("", "troupe-git-*")
		if err != nil {
			return nil, err
		}
		storage := filesystem.NewStorage(osfs.New(t.tempDir), cache.NewObjectLRUDefault())
		repo, err = git.CloneContext(ctx, storage, nil, &git.CloneOptions{
			URL:   remote,
			Depth: e.Depth,
			Tags:  git.AllTags,
		})
		if err != nil {
			return nil, fmt.Errorf("clone %q: %w", remote, err)
		}
	}
	t.repo = repo
	hash, err := ResolveRef(repo, e.Ref, remote != "")
	if err != nil {
		return nil, err
	}
	commit, err := repo.CommitObject(hash)
	if err != nil {
		return nil, fmt.Errorf("ref %q: %w", e.Ref, err)
	}
	t.tree, err = commit.Tree()
	if err != nil {
		return nil, err
	}
	err = t.walk(func(name string, entry object.TreeEntry) error {
		if entry.Mode != filemode.Symlink {
			return nil
		}
		target, err := t.linkTarget(entry)
		if err != nil {
			return err
		}
		return sandbox.CheckLink(name, target)
	})
	return t, err
}

// ResolveRef resolves ref (HEAD when empty) in repo, a repository opened
// or cloned (cloned) with go-git. In a clone, branches live under
// refs/remotes/origin, so a plain branch name is looked up there too.
func ResolveRef(repo *git.Repository, ref string, cloned bool) (plumbing.Hash, error) {
	if ref == "" {
		head, err := repo.Head()
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("HEAD: %w", err)
		}
		return head.Hash(), nil
	}
	h, err := repo.ResolveRevision(plumbing.Revision(ref))
	if err != nil && cloned {
		h, err = repo.ResolveRevision(plumbing.Revision("origin/" + ref))
	}
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("ref %q: %w", ref, err)
	}
	return *h, nil
}

func (t *gitTree) walk(fn func(name string, entry object.TreeEntry) error) error {
	w := object.NewTreeWalker(t.tree, true, nil)
	defer w.Close()
	for {
		name, entry, err := w.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(name, entry); err != nil {
			return err
		}
	}
}

func (t *gitTree) linkTarget(entry object.TreeEntry) (string, error) {
	blob, err := t.repo.BlobObject(entry.Hash)
	if err != nil {
		return "", err
	}
	r, err := blob.Reader()
	if err != nil {
		return "", err
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, 4096))
	return string(b), err
}

// writeTo writes the tree under name in root; mode, when set, is the top
// directory's mode.
func (t *gitTree) writeTo(ctx context.Context, root *os.Root, name string, mode uint32) error {
	if err := root.MkdirAll(name, 0o755); err != nil {
		return err
	}
	err := t.walk(func(rel string, entry object.TreeEntry) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		target := path.Join(name, rel)
		switch entry.Mode {
		case filemode.Dir, filemode.Submodule:
			return root.MkdirAll(target, 0o755)
		case filemode.Symlink:
			link, err := t.linkTarget(entry)
			if err != nil {
				return err
			}
			return replaceSymlink(root, link, target)
		case filemode.Regular, filemode.Deprecated, filemode.Executable:
			blob, err := t.repo.BlobObject(entry.Hash)
			if err != nil {
				return err
			}
			r, err := blob.Reader()
			if err != nil {
				return err
			}
			defer r.Close()
			perm := fs.FileMode(0o644)
			if entry.Mode == filemode.Executable {
				perm = 0o755
			}
			return writeFile(root, target, r, perm)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if mode != 0 {
		return root.Chmod(name, modeOr(mode, 0o755))
	}
	return nil
}
