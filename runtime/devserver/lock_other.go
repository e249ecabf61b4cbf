//go:build !unix

package devserver

import (
	"os"
	"path/filepath"
)

// Without flock, nothing keeps a second server off the same database here; see lock_unix.go.
func lockDatabase(string) (unlock func(), err error) { return func() {}, nil }

// lockHeld reports whether the database's address file exists: without flock, a file left
// by a dead server cannot be told from a live one's.
func lockHeld(dbPath string) (bool, error) {
	_, err := os.Stat(filepath.Join(filepath.Dir(dbPath), InfoFile))
	return err == nil, nil
}
