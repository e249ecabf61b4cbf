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
