package sandboxtest

// The hostile-workspace subtest: files a hostile command leaves in its
// workspace for the host to trip on. Whatever the host reads of them
// (ReadFile, Snapshot, Restore) must fail with a clear error or succeed
// within bounded memory, never hang, and leave the host's memory where
// it was.

import (
	"errors"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// maxRSSGrowth bounds how much the test process's peak RSS may grow while
// it reads a hostile workspace: the reads' bounds (sandbox.MaxReadBytes,
// a streamed snapshot) plus the Go runtime's slack.
const maxRSSGrowth = 192 << 20

func (s *suite) testHostile(t *testing.T) {
	ctx := ctxFor(t)
	sess := s.create(t, sandbox.Manifest{})
	// A 2 GiB sparse file, a 100 MB line, 64 MiB of random data, a
	// directory tree 200 deep, a FIFO with no writer and one with a
	// writer that never stops, a symlink loop.
	run(t, sess, `dd if=/dev/zero of=sparse bs=1 count=1 seek=2147483647 2>/dev/null &&
head -c 100000000 /dev/zero | tr '\0' a > line &&
head -c 67108864 /dev/urandom > random &&
d=deep; i=0; while [ $i -lt 200 ]; do d=$d/d; i=$((i+1)); done; mkdir -p $d && echo bottom > $d/f &&
mkfifo fifo && mkfifo fed && ln -s loop1 loop2 && ln -s loop2 loop1`)
	// The writer of "fed" runs until the session stops; without a reader
	// it blocks in open, which is what a hostile command would do.
	go sess.Exec(ctx, sandbox.ExecRequest{Cmd: "yes hostile > fed", Timeout: 2 * time.Minute})

	base := resetPeakRSS(t)
	reads := []struct {
		path string
		want error
	}{
		{"sparse", sandbox.ErrTooLarge},
		{"line", sandbox.ErrTooLarge},
		{"random", sandbox.ErrTooLarge},
		{"fifo", sandbox.ErrNotRegular},
		{"fed", sandbox.ErrNotRegular},
		{"deep", sandbox.ErrNotRegular},
		{"loop1", syscall.ELOOP},
	}
	for _, r := range reads {
		err := within(t, "ReadFile("+r.path+")", func() error {
			_, err := sess.ReadFile(ctx, r.path)
			return err
		})
		if !errors.Is(err, r.want) {
			t.Errorf("ReadFile(%q) = %v, want %v", r.path, err, r.want)
		}
	}
	// A FIFO where a directory is expected (view_image and apply_patch
	// list a file's directory) fails at once too.
	for _, p := range []string{"fifo", "fed", "fifo/x.png"} {
		if _, err := within2(t, "List("+p+")", func() ([]sandbox.FileInfo, error) { return sess.List(ctx, p) }); err == nil {
			t.Errorf("List(%q) succeeded on a FIFO", p)
		}
	}
	if _, err := within2(t, "ReadFile(fifo/x)", func() ([]byte, error) { return sess.ReadFile(ctx, "fifo/x") }); err == nil {
		t.Errorf("ReadFile(fifo/x) succeeded")
	}
	for _, p := range []string{"fifo", "fed"} {
		if err := within(t, "WriteFile("+p+")", func() error { return sess.WriteFile(ctx, p, []byte("x"), 0) }); !errors.Is(err, sandbox.ErrNotRegular) {
			t.Errorf("WriteFile(%q) = %v, want ErrNotRegular", p, err)
		}
	}
	if b, err := sess.ReadFile(ctx, "deep/"+strings.Repeat("d/", 200)+"f"); err != nil || string(b) != "bottom\n" {
		t.Errorf("ReadFile(deep/.../f) = %q, %v", b, err)
	}

	// The snapshot streams past all of it: the FIFOs are left out, the
	// sparse file costs its data only, the random data is not held.
	snap, err := os.CreateTemp(t.TempDir(), "snapshot-*")
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	if err := within(t, "Snapshot", func() error { return sess.Snapshot(ctx, snap) }); err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	if grown := peakRSS(t) - base; grown > maxRSSGrowth {
		t.Errorf("peak RSS grew by %d MiB reading the hostile workspace, over %d MiB", grown>>20, maxRSSGrowth>>20)
	}
	size, err := snap.Seek(0, io.SeekEnd)
	if err != nil {
		t.Fatal(err)
	}
	if size < 64<<20 || size > 80<<20 {
		t.Errorf("snapshot is %d bytes; want the random data's 64 MiB and little more (the sparse file's holes and the 100 MB line compress away)", size)
	}
	if _, err := snap.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}

	into := s.create(t, sandbox.Manifest{})
	base = resetPeakRSS(t)
	if err := within(t, "Restore", func() error { return into.Restore(ctx, snap) }); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if grown := peakRSS(t) - base; grown > maxRSSGrowth {
		t.Errorf("peak RSS grew by %d MiB restoring the hostile snapshot, over %d MiB", grown>>20, maxRSSGrowth>>20)
	}
	// The sparse file comes back sparse, with its size and its last byte.
	out := run(t, into, `ls -ls sparse | awk '{print $1, $6}'; tail -c 1 sparse | od -An -tx1; ls fifo fed 2>&1 | wc -l; wc -c < line`)
	f := strings.Fields(out)
	if len(f) < 5 {
		t.Fatalf("restored workspace: %q", out)
	}
	if blocks, _ := strconv.Atoi(f[0]); blocks > 1024 {
		t.Errorf("restored sparse file uses %s KiB on disk; want its holes kept", f[0])
	}
	if f[1] != "2147483648" || f[2] != "00" {
		t.Errorf("restored sparse file: size %s, last byte %s; want 2147483648 and 00", f[1], f[2])
	}
	if f[4] != "100000000" {
		t.Errorf("restored line is %s bytes, want 100000000", f[4])
	}
}

// within runs fn and fails the test if it has not returned after a
// minute: a host-side read that blocks on a workspace is the bug.
func within(t *testing.T, what string, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("%s is still blocked after a minute", what)
		return nil
	}
}

// within2 is within for a function with a result.
func within2[T any](t *testing.T, what string, fn func() (T, error)) (T, error) {
	t.Helper()
	var v T
	err := within(t, what, func() error {
		var err error
		v, err = fn()
		return err
	})
	return v, err
}

// resetPeakRSS resets the process's peak RSS (VmHWM) to its current RSS
// and returns it.
func resetPeakRSS(t *testing.T) int64 {
	t.Helper()
	runtime.GC()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Fatalf("reset the peak RSS: %v", err)
	}
	return peakRSS(t)
}

// peakRSS returns the process's peak RSS (VmHWM) in bytes.
func peakRSS(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatalf("read the peak RSS: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
	return 0
}
