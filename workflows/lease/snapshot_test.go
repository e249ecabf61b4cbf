package lease_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/workflows/lease"
)

// writeSparse writes path as a sparse file of runs data runs: a byte
// every 8 KiB, holes between.
func writeSparse(t *testing.T, path string, runs int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := range runs {
		if _, err := f.WriteAt([]byte{'x'}, int64(i)*8192); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSnapshotActivityErrors: the snapshot activity refuses a workspace
// file it cannot archive (a sparse file of more data runs than the host
// seeks) as troupe.SnapshotFailed, naming the file, so that the workflow
// keeps the sandbox up and tells the user what to delete; once the file
// is gone the snapshot is taken. A restore of a snapshot the store does
// not hold fails as troupe.BlobMissing, making no workspace rather than
// one from another snapshot or an empty one.
func TestSnapshotActivityErrors(t *testing.T) {
	ctx := context.Background()
	store, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	r := storeRunner(t, root, store, "")
	info, err := r.Lease().SandboxCreate(ctx, lease.SandboxCreateInput{Graph: "sb", Agent: "worker", WorkflowID: "wf", Generation: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Lease().SandboxStop(ctx, info.State) }()
	ws, _ := filepath.Glob(filepath.Join(root, "*", "f.txt"))
	if len(ws) != 1 {
		t.Fatalf("workspace files %v, want the manifest's f.txt", ws)
	}
	sparse := filepath.Join(filepath.Dir(ws[0]), "sparse")
	writeSparse(t, sparse, 1<<16+1)

	_, err = r.Lease().SandboxSnapshot(ctx, info.State)
	if troupe.ErrorType(err) != troupe.ErrSnapshotFailed || !strings.Contains(err.Error(), `"sparse"`) || !strings.Contains(err.Error(), "65536 data runs") {
		t.Fatalf("snapshot of a workspace with a sparse file of 65,537 runs = %v; want %s naming the file and the bound", err, troupe.ErrSnapshotFailed)
	}
	if err := os.Remove(sparse); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Lease().SandboxSnapshot(ctx, info.State); err != nil {
		t.Fatalf("snapshot once the file is deleted: %v", err)
	}

	before, _ := os.ReadDir(root)
	_, err = r.Lease().SandboxCreate(ctx, lease.SandboxCreateInput{Graph: "sb", Agent: "worker", WorkflowID: "wf", Generation: 2, Snapshot: "snapshots/wf/gone.tar.zst"})
	if troupe.ErrorType(err) != troupe.ErrBlobMissing || !strings.Contains(err.Error(), "snapshots/wf/gone.tar.zst") {
		t.Errorf("restore of a snapshot the store lacks = %v; want %s naming it", err, troupe.ErrBlobMissing)
	}
	if after, _ := os.ReadDir(root); len(after) != len(before) {
		t.Errorf("the failed restore left a workspace: %d entries in the root, were %d", len(after), len(before))
	}
}
