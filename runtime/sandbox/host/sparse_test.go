//go:build linux

package host_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/troupe-dev/troupe/runtime/sandbox/host"
)

// TestSnapshotKeepsSparseFiles: a file with holes is archived as its data
// and restored with its holes, whatever its size.
func TestSnapshotKeepsSparseFiles(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		size int64
		data map[int64]string // offset: data
	}{
		{"hole only", 1 << 30, nil},
		{"data at the end", 2 << 30, map[int64]string{2<<30 - 1: "z"}},
		{"data in the middle", 1 << 30, map[int64]string{0: "head", 512 << 20: "middle"}},
		{"more runs than a map holds", 4200 << 14, fragments(4200, 1<<14)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := host.Workspace{Dir: t.TempDir()}
			p := filepath.Join(src.Dir, "sparse.bin")
			f, err := os.Create(p)
			must(t, err)
			must(t, f.Truncate(tc.size))
			for off, d := range tc.data {
				_, err := f.WriteAt([]byte(d), off)
				must(t, err)
			}
			must(t, f.Close())
			var before syscall.Stat_t
			must(t, syscall.Stat(p, &before))

			var snap bytes.Buffer
			must(t, src.Snapshot(ctx, &snap))
			if snap.Len() > 64<<10 {
				t.Errorf("snapshot of a %d-byte sparse file is %d bytes; want its data only", tc.size, snap.Len())
			}
			dst := host.Workspace{Dir: t.TempDir()}
			must(t, dst.Restore(ctx, bytes.NewReader(snap.Bytes())))
			q := filepath.Join(dst.Dir, "sparse.bin")
			var st syscall.Stat_t
			must(t, syscall.Stat(q, &st))
			if st.Size != tc.size {
				t.Errorf("restored size %d, want %d", st.Size, tc.size)
			}
			// Its holes are kept: it takes on disk about what the original
			// did (merged runs may fill a few small holes).
			if st.Blocks*512 > 2*before.Blocks*512+1<<20 {
				t.Errorf("restored file uses %d bytes on disk, the original %d; want its holes kept", st.Blocks*512, before.Blocks*512)
			}
			g, err := os.Open(q)
			must(t, err)
			defer g.Close()
			for off, d := range tc.data {
				got := make([]byte, len(d))
				_, err := g.ReadAt(got, off)
				must(t, err)
				if string(got) != d {
					t.Errorf("at %d: %q, want %q", off, got, d)
				}
			}
			// Snapshots of the same contents are the same bytes.
			var again bytes.Buffer
			must(t, dst.Snapshot(ctx, &again))
			if !bytes.Equal(again.Bytes(), snap.Bytes()) {
				t.Errorf("the restored workspace's snapshot differs from the original's")
			}
		})
	}
}

// fragments is n one-byte runs of data, every stride bytes.
func fragments(n int, stride int64) map[int64]string {
	m := map[int64]string{}
	for i := range n {
		m[int64(i)*stride] = string(rune('a' + i%26))
	}
	return m
}
