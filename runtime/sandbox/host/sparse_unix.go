//go:build unix

package host

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// maxSparseScan bounds the data runs of a sparse file that a snapshot
// looks for: a file with more is refused, so that no pattern of holes can
// keep the host seeking, or make it archive terabytes of zeros.
const maxSparseScan = 1 << 16

// dataSegments returns the data segments of the regular file f when it
// has holes, and nil when it has none (or the file system cannot say), so
// that it is archived dense. A file with more than maxSparseSegments runs
// has the runs closest together merged, holes and all, as long as what is
// archived stays within twice what the file takes on disk (plus 64 MiB);
// beyond that, or past maxSparseScan runs or maxSparseSize bytes, the
// file is refused with sandbox.ErrTooLarge.
func dataSegments(f *os.File, fi fs.FileInfo) (segments, error) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	size := fi.Size()
	if !ok || size == 0 || int64(st.Blocks)*512 >= size {
		return nil, nil
	}
	if size > maxSparseSize {
		return nil, fmt.Errorf("%w: a sparse file of %d bytes, over %d", sandbox.ErrTooLarge, size, int64(maxSparseSize))
	}
	fd := int(f.Fd())
	var segs segments
	for off := int64(0); off < size; {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, syscall.ENXIO) {
			break // Only a hole is left.
		}
		if err != nil {
			return nil, nil
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			return nil, nil
		}
		hole = min(hole, size)
		if hole <= data {
			break
		}
		if len(segs) == maxSparseScan {
			return nil, fmt.Errorf("%w: a sparse file of more than %d data runs", sandbox.ErrTooLarge, maxSparseScan)
		}
		segs = append(segs, segment{data, hole - data})
		off = hole
	}
	if segs == nil {
		return segments{{0, 0}}, nil // All hole.
	}
	segs = coalesce(segs, maxSparseSegments)
	if limit := 2*int64(st.Blocks)*512 + 64<<20; segs.dataBytes() > limit {
		return nil, fmt.Errorf("%w: a sparse file whose %d data runs are too scattered to archive", sandbox.ErrTooLarge, len(segs))
	}
	return segs, nil
}

// coalesce merges the segments separated by the smallest holes until at
// most max are left.
func coalesce(segs segments, max int) segments {
	if len(segs) <= max {
		return segs
	}
	// The gap to keep: the (len-max)-th smallest gap and larger ones stay
	// holes; ties are merged left to right until enough are.
	gaps := make([]int64, len(segs)-1)
	for i := range gaps {
		gaps[i] = segs[i+1].off - (segs[i].off + segs[i].len)
	}
	sorted := slices.Clone(gaps)
	slices.Sort(sorted)
	merge := len(segs) - max
	cut := sorted[merge-1]
	out := segments{segs[0]}
	for i, g := range gaps {
		if merge > 0 && g <= cut {
			last := &out[len(out)-1]
			last.len = segs[i+1].off + segs[i+1].len - last.off
			merge--
			continue
		}
		out = append(out, segs[i+1])
	}
	return out
}
