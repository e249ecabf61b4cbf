package bench

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/runtime/sandbox/host"
)

// The snapshot benchmark's workspace: many small files in nested
// directories, like a source tree, and a few large ones, about 100 MB in
// all.
const (
	snapTopDirs  = 20
	snapSubDirs  = 10
	snapFilesPer = 100 // per subdirectory: 20,000 small files
	snapSmallMin = 1 << 10
	snapSmallMax = 4 << 10
	snapRounds   = 2 // per iteration, alternating which side goes first
)

// BenchmarkSnapshot measures host.Workspace.Snapshot (tar + zstd, what
// every backend's Session.Snapshot is) of a workspace of about 100 MB —
// 20,000 files of 1–4 KB of source-like text in 200 nested directories,
// plus a 20 MB text log (compressible), a 20 MB random blob
// (incompressible) and a 10 MB file mixing both — to a file, and
// Workspace.Restore of that file into a fresh directory. The baseline is
// the command line doing the same:
//
//	tar -C DIR -cf - . | zstd -q -o FILE
//	zstd -dc FILE | tar -C DIR2 -xf -
//
// Each side runs snapRounds times per iteration, alternating which goes
// first; every restored tree is checked against the original (file count
// and bytes). All files stay in the page cache, so this measures CPU and
// file-system work, not the disk. tar and zstd are required: the
// benchmark fails when they are missing (scripts/setup.sh should install
// them).
//
// Reported: workspace-MB and files; snapshot-s, tar-zstd-s and
// snapshot-ratio (Troupe's time over the command line's), with
// snapshot-MB/s and tar-zstd-MB/s (of workspace data); restore-s,
// unzstd-tar-s, restore-ratio, restore-MB/s and unzstd-tar-MB/s; and the
// archives' sizes, archive-MB and cli-archive-MB.
func BenchmarkSnapshot(b *testing.B) {
	for _, tool := range []string{"tar", "zstd"} {
		if _, err := exec.LookPath(tool); err != nil {
			b.Fatalf("%s is missing: add it to scripts/setup.sh (Debian: apt-get install %s): %v", tool, tool, err)
		}
	}
	ctx := context.Background()
	dir := b.TempDir()
	src := filepath.Join(dir, "src")
	built := time.Now()
	want := buildSnapshotWorkspace(b, src)
	b.Logf("built the workspace in %s: %d files, %d directories, %.1f MB", time.Since(built).Round(time.Millisecond), want.files, want.dirs, mb(want.bytes))

	ws := host.Workspace{Dir: src}
	var snap, cliSnap, rest, cliRest time.Duration
	var archive, cliArchive int64
	round := 0

	troupeSide := func() {
		file := filepath.Join(dir, fmt.Sprintf("troupe-%d.tar.zst", round))
		t0 := time.Now()
		f, err := os.Create(file)
		if err != nil {
			b.Fatal(err)
		}
		if err := ws.Snapshot(ctx, f); err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
		snap += time.Since(t0)
		archive = fileSize(b, file)

		dst := freshDir(b, dir, "troupe-restore", round)
		t0 = time.Now()
		f, err = os.Open(file)
		if err != nil {
			b.Fatal(err)
		}
		if err := (host.Workspace{Dir: dst}).Restore(ctx, f); err != nil {
			b.Fatal(err)
		}
		f.Close()
		rest += time.Since(t0)
		checkTree(b, dst, want)
		os.RemoveAll(dst)
		os.Remove(file)
	}
	cliSide := func() {
		file := filepath.Join(dir, fmt.Sprintf("cli-%d.tar.zst", round))
		t0 := time.Now()
		if err := run("", "sh", "-c", `tar -C "$1" -cf - . | zstd -q -o "$2"`, "sh", src, file); err != nil {
			b.Fatal(err)
		}
		cliSnap += time.Since(t0)
		cliArchive = fileSize(b, file)

		dst := freshDir(b, dir, "cli-restore", round)
		t0 = time.Now()
		if err := run("", "sh", "-c", `zstd -dc "$1" | tar -C "$2" -xf -`, "sh", file, dst); err != nil {
			b.Fatal(err)
		}
		cliRest += time.Since(t0)
		checkTree(b, dst, want)
		os.RemoveAll(dst)
		os.Remove(file)
	}

	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for r := 0; r < snapRounds; r++ {
			round++
			if round%2 == 1 {
				cliSide()
				troupeSide()
			} else {
				troupeSide()
				cliSide()
			}
		}
	}
	b.StopTimer()

	n := float64(b.N * snapRounds)
	size := mb(want.bytes)
	sec := func(d time.Duration) float64 { return d.Seconds() / n }
	b.ReportMetric(size, "workspace-MB")
	b.ReportMetric(float64(want.files), "files")
	b.ReportMetric(sec(snap), "snapshot-s")
	b.ReportMetric(sec(cliSnap), "tar-zstd-s")
	b.ReportMetric(sec(snap)/sec(cliSnap), "snapshot-ratio")
	b.ReportMetric(size/sec(snap), "snapshot-MB/s")
	b.ReportMetric(size/sec(cliSnap), "tar-zstd-MB/s")
	b.ReportMetric(sec(rest), "restore-s")
	b.ReportMetric(sec(cliRest), "unzstd-tar-s")
	b.ReportMetric(sec(rest)/sec(cliRest), "restore-ratio")
	b.ReportMetric(size/sec(rest), "restore-MB/s")
	b.ReportMetric(size/sec(cliRest), "unzstd-tar-MB/s")
	b.ReportMetric(mb(archive), "archive-MB")
	b.ReportMetric(mb(cliArchive), "cli-archive-MB")
	b.Logf("snapshot: %.2f s (%.0f MB/s) against tar | zstd %.2f s (%.0f MB/s): ratio %.2f; archives %.1f MB and %.1f MB",
		sec(snap), size/sec(snap), sec(cliSnap), size/sec(cliSnap), sec(snap)/sec(cliSnap), mb(archive), mb(cliArchive))
	b.Logf("restore: %.2f s (%.0f MB/s) against zstd -d | tar -x %.2f s (%.0f MB/s): ratio %.2f",
		sec(rest), size/sec(rest), sec(cliRest), size/sec(cliRest), sec(rest)/sec(cliRest))
}

// treeStats counts a tree's regular files, directories (the root not
// among them) and file bytes.
type treeStats struct {
	files, dirs int
	bytes       int64
}

func statTree(b *testing.B, root string) treeStats {
	b.Helper()
	var st treeStats
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case p == root:
		case d.IsDir():
			st.dirs++
		case d.Type().IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			st.files++
			st.bytes += fi.Size()
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return st
}

func checkTree(b *testing.B, dir string, want treeStats) {
	b.Helper()
	if got := statTree(b, dir); got != want {
		b.Fatalf("restored %s holds %+v, want %+v", dir, got, want)
	}
}

func freshDir(b *testing.B, parent, name string, round int) string {
	b.Helper()
	dir := filepath.Join(parent, fmt.Sprintf("%s-%d", name, round))
	if err := os.Mkdir(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	return dir
}

func fileSize(b *testing.B, name string) int64 {
	b.Helper()
	fi, err := os.Stat(name)
	if err != nil {
		b.Fatal(err)
	}
	return fi.Size()
}

func mb(n int64) float64 { return float64(n) / (1 << 20) }

// snapWords are the vocabulary of the generated text: source-like, so it
// compresses about as well as a real tree does.
var snapWords = []string{
	"func", "return", "if", "err", "!=", "nil", "{", "}", "(", ")", "ctx", "context.Context", "string", "int",
	"for", "range", ":= ", "=", "b.Fatal(err)", "package", "import", "type", "struct", "map[string]any",
	"workspace", "sandbox", "session", "snapshot", "restore", "manifest", "agent", "tool", "model", "turn",
	"// ", "the", "a", "of", "and", "to", "in", "is", "it", "that", "with", "as", "for", "on", "by",
	"0", "1", "42", "\"ok\"", "true", "false", "len(x)", "append(out, v)", "fmt.Errorf(\"%w\", err)",
}

// writeText appends n bytes of generated source-like text to buf.
func writeText(rng *rand.Rand, buf *bytes.Buffer, n int) {
	end := buf.Len() + n
	col := 0
	for buf.Len() < end {
		w := snapWords[rng.IntN(len(snapWords))]
		buf.WriteString(w)
		col += len(w) + 1
		if col > 60+rng.IntN(40) {
			buf.WriteByte('\n')
			col = 0
			if rng.IntN(4) == 0 {
				buf.WriteByte('\t')
			}
		} else {
			buf.WriteByte(' ')
		}
	}
	buf.Truncate(end)
}

// writeRandom appends n random bytes to buf.
func writeRandom(rng *rand.Rand, buf *bytes.Buffer, n int) {
	p := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := rng.Uint64()
		for j := 0; j < 8; j++ {
			p[i+j] = byte(v >> (8 * j))
		}
	}
	buf.Write(p)
}

// buildSnapshotWorkspace writes the benchmark's workspace to dir (always
// the same bytes: the generator has a fixed seed) and returns its stats.
func buildSnapshotWorkspace(b *testing.B, dir string) treeStats {
	b.Helper()
	rng := rand.New(rand.NewPCG(3, 14))
	var buf bytes.Buffer
	write := func(name string) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
			b.Fatal(err)
		}
		buf.Reset()
	}
	for t := 0; t < snapTopDirs; t++ {
		for s := 0; s < snapSubDirs; s++ {
			for f := 0; f < snapFilesPer; f++ {
				writeText(rng, &buf, snapSmallMin+rng.IntN(snapSmallMax-snapSmallMin+1))
				write(fmt.Sprintf("pkg%02d/sub%02d/file%03d.go", t, s, f))
			}
		}
	}
	writeText(rng, &buf, 20<<20)
	write("data/build.log")
	writeRandom(rng, &buf, 20<<20)
	write("data/blob.bin")
	for i := 0; i < 10<<20; i += 128 << 10 {
		writeText(rng, &buf, 64<<10)
		writeRandom(rng, &buf, 64<<10)
	}
	write("data/mixed.bin")
	return statTree(b, dir)
}
