//go:build unix

package sandbox

import (
	"errors"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// dataSegments returns the data segments of the regular file f when it
// has holes, and nil when it has none (or too many segments, or the file
// system cannot say), so it is archived dense.
func dataSegments(f *os.File, fi fs.FileInfo) segments {
	st, ok := fi.Sys().(*syscall.Stat_t)
	size := fi.Size()
	if !ok || size == 0 || int64(st.Blocks)*512 >= size {
		return nil
	}
	fd := int(f.Fd())
	var segs segments
	for off := int64(0); off < size; {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, syscall.ENXIO) {
			break // Only a hole is left.
		}
		if err != nil {
			return nil
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			return nil
		}
		hole = min(hole, size)
		if hole <= data {
			break
		}
		if len(segs) == maxSparseSegments {
			return nil
		}
		segs = append(segs, segment{data, hole - data})
		off = hole
	}
	if segs == nil {
		segs = segments{{0, 0}} // All hole.
	}
	return segs
}
