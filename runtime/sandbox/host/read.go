package host

// Host-side reads of workspace content. A workspace is written by
// untrusted commands, so everything the worker reads from it is bounded,
// streamed, refuses FIFOs, sockets and devices without waiting on them, and
// stops when its context is cancelled: no workspace can exhaust, crash or
// block the worker that reads it.

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// openRegular opens the clean workspace path name in root with flag (plus
// O_NONBLOCK, so that a FIFO never blocks the open) and returns it with
// its FileInfo when it is a regular file; anything else fails with
// sandbox.ErrNotRegular, a FIFO without a writer included.
func openRegular(root *os.Root, name string, flag int, perm fs.FileMode) (*os.File, fs.FileInfo, error) {
	f, err := root.OpenFile(name, flag|nonBlock, perm)
	return regular(f, err, name)
}

// regular takes the outcome of a non-blocking open of the workspace path
// name: the file and its FileInfo when it is a regular file, or
// sandbox.ErrNotRegular (the file closed) when it is not.
func regular(f *os.File, err error, name string) (*os.File, fs.FileInfo, error) {
	if err != nil {
		if isNoReader(err) {
			return nil, nil, fmt.Errorf("%w: %q is a FIFO", sandbox.ErrNotRegular, name)
		}
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%w: %q is a %s", sandbox.ErrNotRegular, name, kind(fi.Mode()))
	}
	return f, fi, nil
}

// kind names a file mode's type for an error message.
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0, m&fs.ModeCharDevice != 0:
		return "device"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	}
	return "special file"
}

// readBounded reads all of r, failing with sandbox.ErrTooLarge once it
// passes max bytes (a file that grows while it is read) and with ctx's error
// when ctx is done.
func readBounded(ctx context.Context, r io.Reader, max int64, what string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(ctxReader{ctx, r}, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%w: %s is over %d bytes", sandbox.ErrTooLarge, what, max)
	}
	return b, nil
}

// ctxReader stops reading once its context is done, so a long copy
// honours cancellation between chunks.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
