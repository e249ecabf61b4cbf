//go:build unix

package sandbox

import "syscall"

// noFollow makes an open fail on a symlink, closing the race between a
// walk's lstat and the open.
const noFollow = syscall.O_NOFOLLOW
