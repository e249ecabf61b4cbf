package blob

// Written: a blob a file store wrote, held open, so that its writer can
// tell later, with one stat and no read, whether the key still holds it.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Written is a blob this store wrote, whose file it holds open (see
// PutWritten). The caller closes it.
type Written struct {
	f    *os.File
	path string
	info fs.FileInfo
}

// PutWritten writes data under key as Put does. A file store on a local
// file system writes the file itself, as its bucket would (a temporary
// file beside the blob, renamed over it), and returns it held open as a
// Written; other stores, and keys a file store escapes, return nil.
func (s *Store) PutWritten(ctx context.Context, key string, data []byte) (*Written, error) {
	path, ok := s.plainPath(key)
	if !ok || !s.local {
		return nil, s.Put(ctx, key, data)
	}
	w, err := writeFile(ctx, path, data)
	if err != nil {
		return nil, fmt.Errorf("blob: put %s: %w", key, err)
	}
	s.forget(key)
	return w, nil
}

// writeFile writes data to path as fileblob does with no_tmp_dir and no
// metadata: a temporary file path.<hex time>.tmp, renamed over path once
// written, unless ctx ended first. The file stays open.
func writeFile(ctx context.Context, path string, data []byte) (*Written, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o777); err != nil {
		return nil, err
	}
	var f *os.File
	var err error
	for try := 0; ; try++ {
		name := path + "." + strconv.FormatInt(time.Now().UnixNano(), 16) + ".tmp"
		f, err = os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if !errors.Is(err, fs.ErrExist) || try == 10000 {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Written, error) {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fail(err)
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &Written{f: f, path: path, info: info}, nil
}

// Unchanged reports whether w's key still holds what was written, as a
// read now would find it: the file at its path is the one w holds open,
// with the size and modification time it had when written.
//
// A file held open keeps its inode, so no other file of the file system
// can have its number meanwhile; a blob written again since, by any
// writer, is a new file renamed over the path (no store writes a blob in
// place), so it is not the same file. PutWritten holds files only on
// local file systems, whose stat cannot be stale (a network file system's
// may be, for the time it caches attributes).
func (w *Written) Unchanged() bool {
	info, err := os.Stat(w.path)
	return err == nil && os.SameFile(info, w.info) && info.Size() == w.info.Size() && info.ModTime().Equal(w.info.ModTime())
}

// Close releases the file.
func (w *Written) Close() error { return w.f.Close() }
