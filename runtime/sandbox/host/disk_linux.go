package host

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// makeImage makes an empty ext4 file system of size bytes in the new file
// path: sparse, with no reserved blocks (the sandbox may use all of it),
// its root owned by the worker, and no inode table or journal written out
// (the unwritten parts of a sparse file read as zeros, as mkfs would have
// written them).
func makeImage(path string, size int64) error {
	mkfs, err := lookSbin("mkfs.ext4")
	if err != nil {
		return fmt.Errorf("%w (Debian: apt-get install e2fsprogs)", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	out, err := exec.Command(mkfs, "-q", "-F", "-m", "0", "-L", "troupe-ws",
		"-E", fmt.Sprintf("lazy_itable_init=1,lazy_journal_init=1,nodiscard,root_owner=%d:%d", os.Getuid(), os.Getgid()),
		path).CombinedOutput()
	if err != nil {
		return fmt.Errorf("mkfs.ext4: %v: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// lookSbin finds a system tool in PATH, or in the sbin directories a
// non-root PATH often lacks.
func lookSbin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin"} {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found", name)
}

// cloneFile copies the file src to the new file dst: a reflink where the
// file system has them, otherwise only src's data segments, so a sparse
// image stays sparse.
func cloneFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	err = copySparse(out, in, fi.Size())
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

func copySparse(out, in *os.File, size int64) error {
	if unix.IoctlFileClone(int(out.Fd()), int(in.Fd())) == nil {
		return nil
	}
	if err := out.Truncate(size); err != nil {
		return err
	}
	for off := int64(0); off < size; {
		data, err := unix.Seek(int(in.Fd()), off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			return nil // Only a hole is left.
		}
		if err != nil { // No SEEK_DATA here: copy it all.
			_, err = io.Copy(io.NewOffsetWriter(out, 0), io.NewSectionReader(in, 0, size))
			return err
		}
		hole, err := unix.Seek(int(in.Fd()), data, unix.SEEK_HOLE)
		if err != nil {
			return err
		}
		if _, err := io.Copy(io.NewOffsetWriter(out, data), io.NewSectionReader(in, data, hole-data)); err != nil {
			return err
		}
		off = hole
	}
	return nil
}

// mountImage mounts the ext4 image img on the directory dir.
func mountImage(img, dir string) error {
	m, err := prepareImage(img)
	if err != nil {
		return err
	}
	return m.attach(dir)
}

// prepared is a file system mounted nowhere yet: a detached mount
// (fsmount), or, on kernels before 5.2, the loop device to mount, held
// open so that autoclear does not free it meanwhile.
type prepared struct {
	mnt  *os.File
	loop *os.File
	dev  string
}

// prepareImage mounts the ext4 image img through a free loop device,
// which frees itself when the file system goes, as a detached mount:
// attach puts it on a directory in an instant, while mounting is the slow
// part (ext4 reads and writes its superblock and journal through the
// loop device).
func prepareImage(img string) (*prepared, error) {
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dev, loop, err := attachLoop(f)
	if err != nil {
		return nil, err
	}
	fsfd, err := unix.Fsopen("ext4", unix.FSOPEN_CLOEXEC)
	if errors.Is(err, unix.ENOSYS) {
		return &prepared{loop: loop, dev: dev}, nil // Before Linux 5.2: attach mounts it.
	}
	defer loop.Close() // The file system holds the device; autoclear frees it after.
	if err != nil {
		return nil, fmt.Errorf("fsopen ext4: %w", err)
	}
	defer unix.Close(fsfd)
	// noinit_itable: the image's unwritten inode tables read as zeros, so
	// the kernel need not write them out.
	err = unix.FsconfigSetString(fsfd, "source", dev)
	if err == nil {
		err = unix.FsconfigSetFlag(fsfd, "noinit_itable")
	}
	if err == nil {
		err = unix.FsconfigCreate(fsfd)
	}
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", dev, err)
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", dev, err)
	}
	return &prepared{mnt: os.NewFile(uintptr(mfd), dev), dev: dev}, nil
}

// attach mounts the prepared file system on dir, and releases m.
func (m *prepared) attach(dir string) error {
	defer m.release()
	var err error
	if m.mnt != nil {
		err = unix.MoveMount(int(m.mnt.Fd()), "", unix.AT_FDCWD, dir, unix.MOVE_MOUNT_F_EMPTY_PATH)
	} else {
		err = unix.Mount(m.dev, dir, "ext4", unix.MS_NOSUID|unix.MS_NODEV, "noinit_itable")
	}
	if err != nil {
		return fmt.Errorf("mount %s on %s: %w", m.dev, dir, err)
	}
	return nil
}

// release drops a prepared file system that is not attached (and with
// it, its loop device), or the hold on one that is.
func (m *prepared) release() {
	for _, f := range []*os.File{m.mnt, m.loop} {
		if f != nil {
			f.Close()
		}
	}
}

// ready readies the prepared file system for its workspace: it removes the
// lost+found directory mkfs made at its root (a fresh workspace holds only
// its manifest), and makes and removes a directory and a file, so that
// the metadata a workspace's first files need is read in now, through the
// loop device, and not while a manifest is materialised (before Linux
// 5.2, Attach removes lost+found after mounting).
func (m *prepared) ready() {
	if m.mnt == nil {
		return
	}
	fd := int(m.mnt.Fd())
	unix.Unlinkat(fd, "lost+found", unix.AT_REMOVEDIR)
	const warm = ".troupe-warm"
	if unix.Mkdirat(fd, warm, 0o700) == nil {
		if f, err := unix.Openat(fd, warm+"/f", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o600); err == nil {
			unix.Close(f)
			unix.Unlinkat(fd, warm+"/f", 0)
		}
		unix.Unlinkat(fd, warm, unix.AT_REMOVEDIR)
	}
}

// attachLoop binds the file f to a free loop device, set to clear itself
// on its last close, and returns the device's path and an open file of it.
func attachLoop(f *os.File) (string, *os.File, error) {
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return "", nil, fmt.Errorf("no loop devices: %w", err)
	}
	defer ctl.Close()
	for attempt := 0; ; attempt++ {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return "", nil, fmt.Errorf("find a free loop device: %w", err)
		}
		dev := "/dev/loop" + strconv.Itoa(n)
		loop, err := os.OpenFile(dev, os.O_RDWR, 0)
		if err != nil {
			return "", nil, err
		}
		cfg := unix.LoopConfig{Fd: uint32(f.Fd())}
		cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR
		err = unix.IoctlLoopConfigure(int(loop.Fd()), &cfg)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOTTY) {
			// Before Linux 5.8: no LOOP_CONFIGURE.
			if err = unix.IoctlSetInt(int(loop.Fd()), unix.LOOP_SET_FD, int(f.Fd())); err == nil {
				err = unix.IoctlLoopSetStatus64(int(loop.Fd()), &unix.LoopInfo64{Flags: unix.LO_FLAGS_AUTOCLEAR})
				if err != nil {
					unix.IoctlSetInt(int(loop.Fd()), unix.LOOP_CLR_FD, 0)
				}
			}
		}
		if err == nil {
			return dev, loop, nil
		}
		loop.Close()
		if !errors.Is(err, unix.EBUSY) || attempt == 20 {
			return "", nil, fmt.Errorf("set up %s: %w", dev, err)
		}
		// Another process took the device between GET_FREE and ours.
	}
}

// detachMount detaches the file system mounted on dir while holding it
// open, which is quick; release drops the hold, and with it the file
// system, its loop device and the page cache they held: the slow part.
func detachMount(dir string) (release func(), err error) {
	hold, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
		hold.Close()
		return nil, err
	}
	return func() { hold.Close() }, nil
}

// imageInUse reports whether a loop device is bound to the image img: its
// file system is still mounted somewhere (in another mount namespace, say)
// or being torn down, so mounting it again would corrupt it.
func imageInUse(img string) bool {
	if p, err := filepath.EvalSymlinks(img); err == nil {
		img = p
	}
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if strings.TrimSuffix(strings.TrimSpace(string(b)), " (deleted)") == img {
			return true
		}
	}
	return false
}

// isMountPoint reports whether a file system is mounted on dir.
func isMountPoint(dir string) (bool, error) {
	var st, parent unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return false, &os.PathError{Op: "lstat", Path: dir, Err: err}
	}
	if err := unix.Lstat(filepath.Dir(dir), &parent); err != nil {
		return false, &os.PathError{Op: "lstat", Path: filepath.Dir(dir), Err: err}
	}
	return st.Dev != parent.Dev, nil
}

func processAlive(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}
