//go:build unix

package lease

import (
	"os"
	"path/filepath"
	"syscall"
)

// lockStoreDir holds an exclusive lock on dir's identity until the
// returned func is called, so two workers starting at once on one store
// agree on its identity.
func lockStoreDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, StoreIDFile+".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

// inodeOf is the inode number of the file at path, 0 when unknown.
func inodeOf(path string) uint64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}
