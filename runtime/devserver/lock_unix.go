//go:build unix

package devserver

// Two servers on one database would each claim the single history shard and keep taking it
// from each other. An advisory lock on a file next to the database keeps a second server
// out, whether it is in this process or another: flock locks belong to an open file, not
// to a process.

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

func lockDatabase(dbPath string) (unlock func(), err error) {
	path := dbPath + ".lock"
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("devserver: open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("devserver: %s: %w", dbPath, ErrDatabaseInUse)
		}
		return nil, fmt.Errorf("devserver: lock %s: %w", path, err)
	}
	return func() { _ = f.Close() }, nil
}

// lockHeld reports whether a server holds dbPath's lock.
func lockHeld(dbPath string) (bool, error) {
	f, err := os.OpenFile(dbPath+".lock", os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("devserver: open lock file: %w", err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return true, nil
		}
		return false, fmt.Errorf("devserver: lock %s.lock: %w", dbPath, err)
	}
	return false, nil // Closing f releases the lock just taken.
}
