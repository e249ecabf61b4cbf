package host_test

// A snapshot and a restore hold a few descriptors however deep the tree:
// a command can nest directories deeper than the worker has descriptors
// to spare, and that must neither fail the snapshot nor starve the worker.

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/host"
)

func TestSnapshotDeepTree(t *testing.T) {
	ctx := context.Background()
	w, err := host.Provision(ctx, t.TempDir(), sandbox.Spec{ID: "deep"}, sandbox.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	p := w.Dir
	for range 600 {
		p = filepath.Join(p, "d")
	}
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	old := lim
	lim.Cur = 256 // a worker with 256 descriptors to spare
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	defer syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old)
	if err := w.Snapshot(ctx, io.Discard); err != nil {
		t.Errorf("snapshot of a 600-deep tree with 256 fds: %v", err)
	}

	syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old)
	var snap bytes.Buffer
	if err := w.Snapshot(ctx, &snap); err != nil {
		t.Fatal(err)
	}
	w2, err := host.Provision(ctx, t.TempDir(), sandbox.Spec{ID: "deep2"}, sandbox.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	if err := w2.Restore(ctx, bytes.NewReader(snap.Bytes())); err != nil {
		t.Errorf("restore of a 600-deep tree with 256 fds: %v", err)
	}
}
