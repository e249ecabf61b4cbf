package host

// Sparse files in snapshots. A file whose blocks cover less than its size
// has holes; its data segments are found with SEEK_DATA and SEEK_HOLE, only
// they are archived, and the PAX records below say where they go. (Go's
// archive/tar reads GNU sparse archives but cannot write them, hence
// records of our own.)

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// PAX records of a sparse file's tar entry.
const (
	// paxSparseMap lists the data segments as "offset,length,...".
	paxSparseMap = "TROUPE.sparse.map"
	// paxSparseSize is the file's real size.
	paxSparseSize = "TROUPE.sparse.size"
)

// maxSparseSegments bounds a sparse map; a file with more data segments
// (a hostile pattern of holes) is archived dense.
const maxSparseSegments = 4096

// maxSparseSize bounds the real size a restored sparse file may claim.
const maxSparseSize = 1 << 44

// segment is a run of a file's data.
type segment struct{ off, len int64 }

type segments []segment

func (s segments) dataBytes() int64 {
	var n int64
	for _, sg := range s {
		n += sg.len
	}
	return n
}

// sparseRecords are the PAX records of a file of size with data segs.
func sparseRecords(segs segments, size int64) map[string]string {
	var b strings.Builder
	for i, sg := range segs {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d,%d", sg.off, sg.len)
	}
	return map[string]string{paxSparseMap: b.String(), paxSparseSize: strconv.FormatInt(size, 10)}
}

// parseSparse returns the data segments and real size of a tar entry: one
// segment of the whole entry for a dense file. It checks that the segments
// are in order, do not overlap, lie within the real size and add up to the
// entry's size.
func parseSparse(hdr *tar.Header) (segments, int64, error) {
	m, ok := hdr.PAXRecords[paxSparseMap]
	if !ok {
		return segments{{0, hdr.Size}}, hdr.Size, nil
	}
	size, err := strconv.ParseInt(hdr.PAXRecords[paxSparseSize], 10, 64)
	if err != nil || size < 0 || size > maxSparseSize {
		return nil, 0, fmt.Errorf("invalid sparse size %q", hdr.PAXRecords[paxSparseSize])
	}
	var segs segments
	if m != "" {
		f := strings.Split(m, ",")
		if len(f)%2 != 0 || len(f)/2 > maxSparseSegments {
			return nil, 0, fmt.Errorf("invalid sparse map")
		}
		end := int64(0)
		for i := 0; i < len(f); i += 2 {
			off, err1 := strconv.ParseInt(f[i], 10, 64)
			n, err2 := strconv.ParseInt(f[i+1], 10, 64)
			if err1 != nil || err2 != nil || off < end || n < 0 || off > size || n > size-off {
				return nil, 0, fmt.Errorf("invalid sparse map")
			}
			segs = append(segs, segment{off, n})
			end = off + n
		}
	}
	if segs.dataBytes() != hdr.Size {
		return nil, 0, fmt.Errorf("sparse map holds %d bytes, the entry %d", segs.dataBytes(), hdr.Size)
	}
	return segs, size, nil
}

// writeSegments writes a regular file's entry data to f: each segment at
// its offset, leaving holes between them, then the file's real size.
func writeSegments(ctx context.Context, f *os.File, hdr *tar.Header, data io.Reader) error {
	segs, size, err := parseSparse(hdr)
	if err != nil {
		return err
	}
	for _, sg := range segs {
		if _, err := f.Seek(sg.off, io.SeekStart); err != nil {
			return err
		}
		if _, err := io.CopyN(f, ctxReader{ctx, data}, sg.len); err != nil {
			return err
		}
	}
	if _, sparse := hdr.PAXRecords[paxSparseMap]; sparse {
		return f.Truncate(size)
	}
	return nil
}
