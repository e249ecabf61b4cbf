package host

// Workspace is the host directory every backend keeps a session's files in.
// Backends embed it (or call it) for file operations and snapshots, so
// those behave the same everywhere and a snapshot from one backend restores
// into any other.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// Workspace is a workspace directory on this host. Its methods match the
// sandbox.Session's file operations; each opens Dir as an os.Root, so no
// path, not even through a symlink that a command created, reaches outside
// Dir: such attempts fail with sandbox.ErrPathEscape. When Dir no longer
// exists they fail with sandbox.ErrGone.
//
// Paths are workspace-relative and checked with sandbox.CleanPath. A
// Workspace is a plain value; its methods are safe for concurrent use
// (concurrent writes to one file race as they would on any file system).
type Workspace struct {
	// Dir is the workspace's absolute host path.
	Dir string
	// Ephemeral lists workspace paths (clean, as sandbox.CleanPath returns
	// them) that snapshots leave out and restores keep.
	Ephemeral []string
}

// Provision creates the workspace of spec as a new directory under the
// host directory root (created, mode 0700, if missing), named
// DirName(spec.ID), and materialises spec.Manifest in it with p. The
// manifest is validated before the directory is created; if materialising
// fails, the directory is removed.
//
// A directory that the session already has (left by a Create whose worker
// was killed before it returned, so that nobody holds it) is removed and
// provisioned afresh: Create is idempotent under retry. Before the
// directory, Provision writes its sidecar (spec.ID, spec.Labels and the
// time) beside it, for HostReaper.
func Provision(ctx context.Context, root string, spec sandbox.Spec, p sandbox.Policy) (Workspace, error) {
	return ProvisionBounded(ctx, root, spec, p, nil, 0)
}

// ProvisionBounded is Provision with the workspace on a file system of
// its own of diskBytes (sandbox.Limits.DiskBytes), made by disks, which must be
// root's, and mounted before the manifest is materialised; with a nil
// disks it is Provision. Destroy unmounts it and removes its image.
func ProvisionBounded(ctx context.Context, root string, spec sandbox.Spec, p sandbox.Policy, disks *Disks, diskBytes int64) (Workspace, error) {
	if spec.ID == "" {
		return Workspace{}, errors.New("sandbox: spec has no ID")
	}
	if err := spec.Manifest.Validate(p); err != nil {
		return Workspace{}, err
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return Workspace{}, err
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return Workspace{}, fmt.Errorf("sandbox: workspace root: %w", err)
	}
	dir := filepath.Join(root, DirName(spec.ID))
	w := Workspace{Dir: dir, Ephemeral: spec.Manifest.EphemeralPaths()}
	if err := w.Destroy(); err != nil {
		return Workspace{}, fmt.Errorf("sandbox: remove the earlier workspace of session %q: %w", spec.ID, err)
	}
	if err := writeSidecar(dir, spec); err != nil {
		return Workspace{}, err
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return Workspace{}, fmt.Errorf("sandbox: workspace of session %q: %w", spec.ID, err)
	}
	if err := disks.Attach(dir, diskBytes); err != nil {
		w.Destroy()
		return Workspace{}, fmt.Errorf("sandbox: workspace of session %q: %w", spec.ID, err)
	}
	made, err := os.Lstat(dir)
	if err != nil {
		return Workspace{}, err
	}
	if err := Materialize(ctx, spec.Manifest, dir, p); err != nil {
		// Unless a retry of this Create has replaced it meanwhile.
		if now, serr := os.Lstat(dir); serr == nil && os.SameFile(made, now) {
			w.Destroy()
		}
		return Workspace{}, err
	}
	return w, nil
}

// OpenWorkspace returns the workspace of a session's sandbox.State, checking
// that it is the directory Provision made for state.ID under the host
// directory root (a State that names any other directory is refused, so a
// forged State cannot make Stop remove it), and that it still exists;
// otherwise it fails with sandbox.ErrGone.
func OpenWorkspace(root string, state sandbox.State) (Workspace, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return Workspace{}, err
	}
	want := filepath.Join(root, DirName(state.ID))
	if state.ID == "" || filepath.Clean(state.Workspace) != want {
		return Workspace{}, fmt.Errorf("%w: workspace %q is not session %q's under %q", sandbox.ErrGone, state.Workspace, state.ID, root)
	}
	w := Workspace{Dir: want, Ephemeral: state.Ephemeral}
	return w, w.Alive()
}

// Alive returns nil when the workspace directory exists, and an error
// wrapping sandbox.ErrGone otherwise. For the local and bwrap backends that
// is the whole of sandbox.Session.Alive.
func (w Workspace) Alive() error {
	fi, err := os.Stat(w.Dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: workspace %q", sandbox.ErrGone, w.Dir)
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("%w: workspace %q is not a directory", sandbox.ErrGone, w.Dir)
	}
	return nil
}

// Destroy removes the workspace directory and everything in it, even
// read-only directories a command left behind, then its sidecar (see
// HostReaper). A bounded workspace's file system is unmounted first, and
// its image removed (see Disks). It is idempotent.
func (w Workspace) Destroy() error {
	if w.Dir == "" || w.Dir == "/" {
		return errors.New("sandbox: refusing to remove workspace " + w.Dir)
	}
	// A bounded workspace's file system goes first (see Disks).
	if err := detachDisk(w.Dir); err != nil {
		return err
	}
	err := os.RemoveAll(w.Dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		// A command may have made directories read-only; make them
		// writable (without following symlinks) and try again.
		filepath.WalkDir(w.Dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				os.Chmod(p, 0o700)
			}
			return nil
		})
		err = os.RemoveAll(w.Dir)
	}
	if err != nil {
		return err
	}
	// The sidecar goes last, so a workspace is never without its labels.
	return removeSidecar(w.Dir)
}

// open opens the workspace as an os.Root, or fails with sandbox.ErrGone.
func (w Workspace) open(ctx context.Context) (*os.Root, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, err := os.OpenRoot(w.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: workspace %q", sandbox.ErrGone, w.Dir)
	}
	return r, err
}

// ReadFile returns the content of the workspace file p. It reads regular
// files only: a FIFO (with or without a writer), a socket, a device or a
// directory fails at once with sandbox.ErrNotRegular, and a file over
// sandbox.MaxReadBytes (a sparse one included) with sandbox.ErrTooLarge,
// before any of it is read.
func (w Workspace) ReadFile(ctx context.Context, p string) ([]byte, error) {
	clean, err := sandbox.CleanPath(p)
	if err != nil {
		return nil, err
	}
	root, err := w.open(ctx)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, fi, err := openRegular(root, clean, os.O_RDONLY, 0)
	if err != nil {
		return nil, rootError("read", p, err)
	}
	defer f.Close()
	if fi.Size() > sandbox.MaxReadBytes {
		return nil, rootError("read", p, fmt.Errorf("%w: %d bytes, over the %d bytes the host reads from a workspace", sandbox.ErrTooLarge, fi.Size(), sandbox.MaxReadBytes))
	}
	b, err := readBounded(ctx, f, sandbox.MaxReadBytes, "the file")
	return b, rootError("read", p, err)
}

// WriteFile writes data to the workspace file p, creating it and its
// parent directories (mode 0755) as needed, and sets its mode to the
// permission bits of mode (0644 when zero). Modes with setuid, setgid or
// sticky bits are refused.
func (w Workspace) WriteFile(ctx context.Context, p string, data []byte, mode fs.FileMode) error {
	clean, err := sandbox.CleanPath(p)
	if err != nil {
		return err
	}
	if clean == "." {
		return fmt.Errorf("sandbox: write %q: the workspace root is a directory", p)
	}
	if mode&^fs.ModePerm != 0 {
		return fmt.Errorf("sandbox: write %q: mode %v has bits beyond the permission bits", p, mode)
	}
	if mode == 0 {
		mode = 0o644
	}
	root, err := w.open(ctx)
	if err != nil {
		return err
	}
	defer root.Close()
	return rootError("write", p, writeFile(root, clean, bytes.NewReader(data), mode))
}

// Remove removes the workspace file or empty directory p. A symlink is
// removed itself, not its target. The workspace root cannot be removed.
func (w Workspace) Remove(ctx context.Context, p string) error {
	clean, err := sandbox.CleanPath(p)
	if err != nil {
		return err
	}
	if clean == "." {
		return fmt.Errorf("sandbox: remove %q: cannot remove the workspace root", p)
	}
	root, err := w.open(ctx)
	if err != nil {
		return err
	}
	defer root.Close()
	return rootError("remove", p, root.Remove(clean))
}

// MaxListEntries bounds the entries List returns: a larger directory
// fails with sandbox.ErrTooLarge.
const MaxListEntries = 100_000

// List returns the entries of the workspace directory p ("" or "." for
// the root), sorted by name; a directory of more than MaxListEntries
// fails with sandbox.ErrTooLarge. A symlink is listed as a symlink (its Mode
// has fs.ModeSymlink), not followed.
func (w Workspace) List(ctx context.Context, p string) ([]sandbox.FileInfo, error) {
	if p == "" {
		p = "."
	}
	clean, err := sandbox.CleanPath(p)
	if err != nil {
		return nil, err
	}
	root, err := w.open(ctx)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	// A directory or a symlink to one inside the workspace; anything else
	// (a FIFO, say) fails at once instead of blocking the open.
	d, err := root.OpenFile(clean, os.O_RDONLY|dirOnly|nonBlock, 0)
	if err != nil {
		return nil, rootError("list", p, err)
	}
	defer d.Close()
	var entries []fs.DirEntry
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		batch, err := d.ReadDir(1024)
		entries = append(entries, batch...)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, rootError("list", p, err)
		}
		if len(entries) > MaxListEntries {
			return nil, rootError("list", p, fmt.Errorf("%w: over %d entries", sandbox.ErrTooLarge, MaxListEntries))
		}
	}
	out := make([]sandbox.FileInfo, 0, len(entries))
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			continue // Removed while we listed.
		}
		out = append(out, sandbox.FileInfo{Name: e.Name(), Size: fi.Size(), Mode: fi.Mode(), IsDir: fi.IsDir()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// ResolveWorkdir checks a command's workspace-relative working directory
// (empty for the root) and returns its clean form: it must be a directory
// inside the workspace, reached without leaving it (sandbox.ErrPathEscape).
// Backends call it before they run a command, so a symlink to a host
// directory cannot become a command's working directory.
func (w Workspace) ResolveWorkdir(ctx context.Context, workdir string) (string, error) {
	if workdir == "" {
		workdir = "."
	}
	clean, err := sandbox.CleanPath(workdir)
	if err != nil {
		return "", err
	}
	root, err := w.open(ctx)
	if err != nil {
		return "", err
	}
	defer root.Close()
	fi, err := root.Stat(clean)
	if err != nil {
		return "", rootError("workdir", workdir, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("sandbox: workdir %q is not a directory", workdir)
	}
	return clean, nil
}

// ephemeral reports whether the clean path p is, or lies under, one of the
// workspace's ephemeral paths. The root itself is never ephemeral.
func (w Workspace) ephemeral(p string) bool {
	return slices.ContainsFunc(w.Ephemeral, func(e string) bool {
		e, err := sandbox.CleanPath(e)
		return err == nil && e != "." && within(p, e)
	})
}

// holdsEphemeral reports whether the clean directory path p has an
// ephemeral path under it.
func (w Workspace) holdsEphemeral(p string) bool {
	return slices.ContainsFunc(w.Ephemeral, func(e string) bool {
		e, err := sandbox.CleanPath(e)
		return err == nil && e != "." && e != p && within(e, p)
	})
}

// DefaultPATH is the PATH of a command whose manifest sets none: Debian's
// default for a login shell of root.
const DefaultPATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// CommandEnv returns a command's whole environment as "NAME=value" pairs,
// sorted: exactly env (the manifest's), plus PATH=DefaultPATH and
// HOME=home when env does not set them. Nothing comes from the host's
// environment.
func CommandEnv(env map[string]string, home string) []string {
	out := make([]string, 0, len(env)+2)
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	if _, ok := env["PATH"]; !ok {
		out = append(out, "PATH="+DefaultPATH)
	}
	if _, ok := env["HOME"]; !ok {
		out = append(out, "HOME="+home)
	}
	sort.Strings(out)
	return out
}

// DefaultRoot returns the default host directory for a backend's
// workspaces: $TROUPE_HOME/sandboxes/BACKEND when TROUPE_HOME is set, and
// troupe-sandboxes-UID/BACKEND in os.TempDir otherwise. Each backend has
// its own directory, so one session id can have a workspace on two
// backends at once (while a session switches backend, say).
func DefaultRoot(backend string) string {
	if home := os.Getenv("TROUPE_HOME"); home != "" {
		return filepath.Join(home, "sandboxes", backend)
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("troupe-sandboxes-%d", os.Getuid()), backend)
}
