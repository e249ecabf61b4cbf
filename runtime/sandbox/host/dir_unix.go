//go:build unix

package host

import (
	"io/fs"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// openFile opens d's entry name with flag, never following a symlink.
func (d *wsDir) openFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	fd, err := openat(int(d.f.Fd()), name, flag|unix.O_NOFOLLOW, uint32(perm.Perm()))
	if err != nil {
		return nil, &fs.PathError{Op: "openat", Path: d.path(name), Err: err}
	}
	return os.NewFile(uintptr(fd), d.path(name)), nil
}

// chtimes sets the access and modification times of d's entry name (not
// following a symlink).
func (d *wsDir) chtimes(name string, mtime time.Time) error {
	if err := checkName(name); err != nil {
		return err
	}
	ts := unix.NsecToTimespec(mtime.UnixNano())
	if err := unix.UtimesNanoAt(int(d.f.Fd()), name, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &fs.PathError{Op: "utimensat", Path: d.path(name), Err: err}
	}
	return nil
}

// openat is openat(2) with O_CLOEXEC, retried on EINTR.
func openat(dirfd int, name string, flag int, perm uint32) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flag|unix.O_CLOEXEC, perm)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}
