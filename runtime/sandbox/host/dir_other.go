//go:build !unix

package host

import (
	"io/fs"
	"os"
	"time"
)

// Where there is no openat, a wsDir opens its entries by path through the
// workspace's os.Root.

func (d *wsDir) openFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	return d.root.OpenFile(d.path(name), flag, perm)
}

func (d *wsDir) chtimes(name string, mtime time.Time) error {
	if err := checkName(name); err != nil {
		return err
	}
	return d.root.Chtimes(d.path(name), mtime, mtime)
}
