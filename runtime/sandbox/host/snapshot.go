package host

// Snapshots: a tar archive of the workspace, compressed with zstd. The
// format is the same for every backend, because every backend keeps its
// workspace as a host directory, so a snapshot taken on one restores on
// any other.

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// Snapshot writes an archive of the workspace to out: a PAX tar stream
// compressed with zstd.
//
// The archive holds directories, regular files and symlinks, in the
// lexical order of their paths, without the ephemeral paths; the root
// itself is not an entry. Each entry keeps its permission bits (not
// setuid, setgid or sticky bits) and its modification time; owners are
// left out (uid and gid 0, no names), so an archive restores under any
// user. A symlink is stored as a symlink with its target as it is, even an
// absolute one (a virtualenv's bin/python -> /usr/bin/python3 must
// survive); Restore keeps it confined. Hard links become separate files;
// devices, sockets and pipes are left out. The same workspace contents
// give the same tar stream, byte for byte.
//
// Snapshot reads the workspace while commands may still change it; take
// it between commands for a consistent archive. A file that changes size
// while it is read fails the snapshot.
func (w Workspace) Snapshot(ctx context.Context, out io.Writer) error {
	root, err := w.open(ctx)
	if err != nil {
		return err
	}
	defer root.Close()
	// The fastest level, on a goroutine of its own fed through a few
	// buffers: the walk and the compression then overlap, and a snapshot
	// takes about what `tar | zstd` does, for an archive about 5 % larger
	// than zstd's default level makes.
	zw, err := zstd.NewWriter(out, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return err
	}
	aw := newAsyncWriter(zw, 4, 1<<20)
	tw := tar.NewWriter(aw)
	top, err := openDir(root, ".")
	if err == nil {
		err = top.walk(ctx, func(p string, dir *wsDir, d fs.DirEntry) error {
			if w.ephemeral(p) {
				if d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
			return snapshotEntry(ctx, dir, tw, p, d)
		})
		top.close()
	}
	if err == nil {
		err = tw.Close()
	}
	if err2 := aw.Close(); err == nil {
		err = err2
	}
	if err != nil {
		zw.Close()
		return fmt.Errorf("sandbox: snapshot: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("sandbox: snapshot: %w", err)
	}
	return nil
}

// snapshotEntry writes the entry d of dir, at the workspace path p, to tw.
func snapshotEntry(ctx context.Context, dir *wsDir, tw *tar.Writer, p string, d fs.DirEntry) error {
	fi, err := d.Info()
	if err != nil {
		return err
	}
	hdr := &tar.Header{
		Name:    p,
		Mode:    int64(fi.Mode().Perm()),
		ModTime: fi.ModTime(),
		Format:  tar.FormatPAX,
	}
	switch {
	case d.IsDir():
		hdr.Typeflag = tar.TypeDir
		hdr.Name += "/"
		return tw.WriteHeader(hdr)
	case d.Type()&fs.ModeSymlink != 0:
		target, err := dir.readlink(d.Name())
		if err != nil {
			return err
		}
		hdr.Typeflag = tar.TypeSymlink
		hdr.Linkname = target
		return tw.WriteHeader(hdr)
	case d.Type().IsRegular():
		f, fi, err := dir.openRegular(d.Name(), os.O_RDONLY, 0)
		if errors.Is(err, sandbox.ErrNotRegular) {
			return fmt.Errorf("%q changed while it was archived: %w", p, err)
		}
		if err != nil {
			return err
		}
		defer f.Close()
		hdr.Typeflag = tar.TypeReg
		hdr.Size = fi.Size()
		hdr.Mode = int64(fi.Mode().Perm())
		hdr.ModTime = fi.ModTime()
		segs, err := dataSegments(f, fi)
		if err != nil {
			return fmt.Errorf("%q: %w", p, err)
		}
		if segs != nil {
			hdr.PAXRecords = sparseRecords(segs, fi.Size())
			hdr.Size = segs.dataBytes()
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if segs == nil {
			segs = segments{{0, hdr.Size}}
		}
		for _, sg := range segs {
			if _, err := f.Seek(sg.off, io.SeekStart); err != nil {
				return err
			}
			n, err := io.Copy(tw, io.LimitReader(ctxReader{ctx, f}, sg.len))
			if err != nil {
				return err
			}
			if n != sg.len {
				return fmt.Errorf("%q shrank while it was archived", p)
			}
		}
	}
	return nil
}

// Restore replaces the workspace's contents with the snapshot read from
// in (as Snapshot writes it, from any backend).
//
// It reads the whole archive first and checks every entry: each name must be
// clean and workspace-relative (sandbox.ErrPathEscape otherwise), and no
// entry may lie under a symlink of the archive, be one twice, or have a type
// other than directory, regular file or symlink. Only then does it clear the
// workspace and extract. The workspace's own ephemeral paths are kept as
// they are, and archive entries at those paths are skipped: ephemeral data
// belongs to the live workspace, not to the snapshot. Extraction goes
// through an os.Root, so a symlink (even an absolute one) is created as such
// but nothing is ever written through one. Permission bits and the
// modification times of files and directories are restored (not those of
// symlinks); files belong to the user running Restore.
//
// A bad archive leaves the workspace untouched; an I/O error during
// extraction (a full disk, say) leaves it partly restored: restore again.
// When in is not an io.ReadSeeker the archive is spooled to a temporary
// file for the two passes.
func (w Workspace) Restore(ctx context.Context, in io.Reader) error {
	root, err := w.open(ctx)
	if err != nil {
		return err
	}
	defer root.Close()
	rewind, done, err := rereadable(in)
	if err != nil {
		return fmt.Errorf("sandbox: restore: %w", err)
	}
	defer done()

	r, err := rewind()
	if err != nil {
		return fmt.Errorf("sandbox: restore: %w", err)
	}
	seen := make(map[string]bool)
	links := make(map[string]bool)
	err = readArchive(ctx, r, func(hdr *tar.Header, name string, _ io.Reader) error {
		if seen[name] {
			return fmt.Errorf("entry %q appears twice", name)
		}
		seen[name] = true
		for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
			if links[dir] {
				return fmt.Errorf("%w: entry %q lies under the symlink %q", sandbox.ErrPathEscape, name, dir)
			}
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
		case tar.TypeReg:
			if _, _, err := parseSparse(hdr); err != nil {
				return fmt.Errorf("entry %q: %w", name, err)
			}
		case tar.TypeSymlink:
			if hdr.Linkname == "" || strings.IndexByte(hdr.Linkname, 0) >= 0 {
				return fmt.Errorf("symlink %q has an invalid target", name)
			}
			links[name] = true
		default:
			return fmt.Errorf("entry %q has the unsupported type %q", name, hdr.Typeflag)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sandbox: restore: %w", err)
	}

	if err := w.clear(ctx, root, "."); err != nil {
		return fmt.Errorf("sandbox: restore: clear the workspace: %w", err)
	}
	r, err = rewind()
	if err != nil {
		return fmt.Errorf("sandbox: restore: %w", err)
	}
	type dirMeta struct {
		name  string
		perm  fs.FileMode
		mtime time.Time
	}
	var dirs []dirMeta
	open := dirStack{root: root}
	defer open.close()
	err = readArchive(ctx, r, func(hdr *tar.Header, name string, data io.Reader) error {
		if w.ephemeral(name) {
			return nil
		}
		perm := fs.FileMode(hdr.Mode) & fs.ModePerm
		if hdr.Typeflag == tar.TypeDir {
			d, err := open.enter(name)
			if err != nil {
				return rootError("restore", name, err)
			}
			if err := d.f.Chmod(0o700 | perm); err != nil { // Writable until the end.
				return rootError("restore", name, err)
			}
			dirs = append(dirs, dirMeta{name, perm, hdr.ModTime})
			return nil
		}
		parent, err := open.enter(path.Dir(name))
		if err != nil {
			return rootError("restore", name, err)
		}
		base := path.Base(name)
		switch hdr.Typeflag {
		case tar.TypeReg:
			f, err := parent.openFile(base, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return rootError("restore", name, err)
			}
			if err := writeSegments(ctx, f, hdr, data); err != nil {
				f.Close()
				return fmt.Errorf("%q: %w", name, err)
			}
			if err := f.Chmod(perm); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			if err := parent.chtimes(base, hdr.ModTime); err != nil {
				return rootError("restore", name, err)
			}
		case tar.TypeSymlink:
			if err := parent.symlink(hdr.Linkname, base); err != nil {
				return rootError("restore", name, err)
			}
		}
		return nil
	})
	open.close()
	if err != nil {
		return fmt.Errorf("sandbox: restore: %w", err)
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		d := dirs[i]
		if err := root.Chmod(d.name, d.perm); err != nil {
			return fmt.Errorf("sandbox: restore: %w", rootError("restore", d.name, err))
		}
		if err := root.Chtimes(d.name, d.mtime, d.mtime); err != nil {
			return fmt.Errorf("sandbox: restore: %w", rootError("restore", d.name, err))
		}
	}
	return nil
}

// dirStack keeps open the directory an extraction in archive order is
// writing into: entries of one directory follow each other, so each
// directory is made and opened about once. It holds one descriptor, so no
// depth of tree can exhaust the worker's descriptors.
type dirStack struct {
	root *os.Root
	cur  *wsDir
}

// enter returns the open directory at the clean workspace path dir,
// making those of its directories that do not exist.
func (s *dirStack) enter(dir string) (*wsDir, error) {
	if s.cur != nil && s.cur.name == dir {
		return s.cur, nil
	}
	s.close()
	if dir != "." {
		if err := s.root.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	d, err := openDir(s.root, dir)
	if err != nil {
		return nil, err
	}
	s.cur = d
	return d, nil
}

func (s *dirStack) close() {
	if s.cur != nil {
		s.cur.close()
		s.cur = nil
	}
}

// readArchive decompresses and reads the tar stream r, calling fn for each
// entry but the root with its clean workspace path. It fails with
// sandbox.ErrPathEscape on a name that is not clean and workspace-relative.
func readArchive(ctx context.Context, r io.Reader, fn func(hdr *tar.Header, name string, data io.Reader) error) error {
	zr, err := zstd.NewReader(r)
	if err != nil {
		return err
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		name, err := sandbox.CleanPath(strings.TrimSuffix(hdr.Name, "/"))
		if err != nil {
			return err
		}
		if name == "." {
			if hdr.Typeflag == tar.TypeDir {
				continue
			}
			return fmt.Errorf("entry %q is the workspace root", hdr.Name)
		}
		if hdr.Typeflag == tar.TypeRegA {
			hdr.Typeflag = tar.TypeReg
		}
		if err := fn(hdr, name, tr); err != nil {
			return err
		}
	}
}

// rereadable lets Restore read in twice: by seeking when it can, otherwise
// from a temporary copy. done releases the copy.
func rereadable(in io.Reader) (rewind func() (io.Reader, error), done func(), err error) {
	if rs, ok := in.(io.ReadSeeker); ok {
		start, err := rs.Seek(0, io.SeekCurrent)
		if err == nil {
			return func() (io.Reader, error) {
				_, err := rs.Seek(start, io.SeekStart)
				return rs, err
			}, func() {}, nil
		}
	}
	f, err := os.CreateTemp("", "troupe-restore-*")
	if err != nil {
		return nil, nil, err
	}
	os.Remove(f.Name()) // Unlinked at once: a crash leaves nothing behind.
	done = func() { f.Close() }
	if _, err := io.Copy(f, in); err != nil {
		done()
		return nil, nil, err
	}
	return func() (io.Reader, error) {
		_, err := f.Seek(0, io.SeekStart)
		return f, err
	}, done, nil
}

// clear removes everything in the workspace directory dir except the
// ephemeral paths.
func (w Workspace) clear(ctx context.Context, root *os.Root, dir string) error {
	d, err := openDir(root, dir)
	if err != nil {
		return err
	}
	entries, err := d.entries()
	d.close()
	if err != nil {
		return err
	}
	for _, e := range entries {
		p := path.Join(dir, e.Name())
		switch {
		case w.ephemeral(p):
		case e.IsDir() && w.holdsEphemeral(p):
			if err := w.clear(ctx, root, p); err != nil {
				return err
			}
		default:
			if err := root.RemoveAll(p); err != nil {
				// A command may have left read-only directories.
				root.Chmod(p, 0o700)
				if d, err := openDir(root, p); err == nil {
					d.walk(ctx, func(q string, _ *wsDir, e fs.DirEntry) error {
						if e.IsDir() {
							root.Chmod(q, 0o700)
						}
						return nil
					})
					d.close()
				}
				if err := root.RemoveAll(p); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
