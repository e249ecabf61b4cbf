//go:build unix

package host

import (
	"errors"
	"syscall"
)

// noFollow makes an open fail on a symlink, closing the race between a
// walk's lstat and the open.
const noFollow = syscall.O_NOFOLLOW

// nonBlock makes an open of a FIFO return at once (with or without a
// writer), so the host never waits on a pipe a command left in the
// workspace; the opened file is then refused as not regular.
const nonBlock = syscall.O_NONBLOCK

// dirOnly makes an open fail at once on anything but a directory: a FIFO
// swapped in for a directory is refused, never waited on.
const dirOnly = syscall.O_DIRECTORY

// isNoReader reports the error of a non-blocking write-only open of a FIFO
// that nobody reads (ENXIO).
func isNoReader(err error) bool { return errors.Is(err, syscall.ENXIO) }
