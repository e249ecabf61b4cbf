package lease_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/local"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/lease"
	"github.com/troupe-dev/troupe/workflows/workflowstest"
)

// storeRunner is a runner of host "host" whose local sandboxes live in
// root, with the blob store store.
func storeRunner(t *testing.T, root string, store *blob.Store, queue string, tweak ...func(*workflows.Config)) *workflows.Runner {
	t.Helper()
	lc, err := local.New(local.Config{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	g := agents.MustGraph("sb", "worker", &agents.Agent{Name: "worker", Instructions: "w",
		Sandbox: &agents.Sandbox{Manifest: sandbox.Manifest{Entries: []sandbox.Entry{{Kind: sandbox.EntryFile, Path: "f.txt", Content: "mine"}}}}})
	cfg := workflows.Config{Graphs: []*agents.Graph{g}, Model: &workflowstest.FuncModel{Func: func(model.Request) []agents.Item { return nil }},
		Store: store, Host: "host", SandboxQueue: queue, Sandboxes: map[string]sandbox.Client{"local": degraded{lc}}}
	for _, f := range tweak {
		f(&cfg)
	}
	r, err := workflows.NewRunner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// degraded is a client that cannot enforce its memory limit here.
type degraded struct{ *local.Client }

func (degraded) Enforced() []sandbox.LimitReport {
	return []sandbox.LimitReport{
		{Limit: sandbox.LimitPIDs, Mechanism: "cgroup"},
		{Limit: sandbox.LimitMemory, NotInForce: "no memory controller"},
	}
}

// TestSandboxStore: the sandbox queue names the store (its identity, kept
// in its root), and a worker asked about a sandbox of another store fails
// the call as misrouted instead of answering from a workspace it does not
// have, or that only looks like it (same hostname, same path).
func TestSandboxStore(t *testing.T) {
	ctx := context.Background()
	store, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	rootA, rootB := t.TempDir(), t.TempDir()
	a, b, a2 := storeRunner(t, rootA, store, ""), storeRunner(t, rootB, store, ""), storeRunner(t, rootA, store, "")
	if a.SandboxQueue() == b.SandboxQueue() {
		t.Errorf("workers with roots %s and %s share the sandbox queue %s", rootA, rootB, a.SandboxQueue())
	}
	if a.SandboxQueue() != a2.SandboxQueue() {
		t.Errorf("a worker restarted on the same store moved from queue %s to %s", a.SandboxQueue(), a2.SandboxQueue())
	}

	info, err := a.Lease().SandboxCreate(ctx, lease.SandboxCreateInput{Graph: "sb", Agent: "worker", WorkflowID: "wf", Generation: 1})
	if err != nil {
		t.Fatal(err)
	}
	if info.Queue != a.SandboxQueue() {
		t.Errorf("sandbox routed to %s, want its store's queue %s", info.Queue, a.SandboxQueue())
	}
	if want := []string{"memory: no memory controller"}; !slices.Equal(info.NotInForce, want) {
		t.Errorf("limits not in force = %q, want %q", info.NotInForce, want)
	}
	if info.State.Store == "" || info.State.Store != a.Store().ID {
		t.Errorf("sandbox of store %q, want the store's identity %q", info.State.Store, a.Store().ID)
	}
	// Even forced onto one queue, B cannot see A's workspace: it says so.
	// Nor can a store of another host of the same name whose root has the
	// same path (here: the very directory, which it must not answer from).
	forced := storeRunner(t, rootB, store, a.SandboxQueue())
	twin := storeRunner(t, rootA, store, a.SandboxQueue(), func(c *workflows.Config) { c.StoreID = "host-0123456789abcdef" })
	for name, r := range map[string]*workflows.Runner{"other root": b, "same queue, other root": forced, "same hostname and root, other store": twin} {
		if _, err := r.Lease().SandboxSnapshot(ctx, info.State); troupe.ErrorType(err) != troupe.ErrSandboxMisrouted {
			t.Errorf("%s: snapshot of another store's sandbox = %v, want %s", name, err, troupe.ErrSandboxMisrouted)
		}
	}
	// Snapshots spool in Config.SpoolDir: one that cannot be written
	// fails the snapshot (and the worker's memory holds none of it).
	missing := filepath.Join(t.TempDir(), "missing")
	noSpool := storeRunner(t, rootA, store, "", func(c *workflows.Config) { c.SpoolDir = missing })
	if _, err := noSpool.Lease().SandboxSnapshot(ctx, info.State); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("snapshot with an unwritable spool dir = %v, want its error", err)
	}
	// A (restarted: a new process, same store) snapshots it, and the
	// snapshot restores into a new sandbox, through the store's streams.
	key, err := a2.Lease().SandboxSnapshot(ctx, info.State)
	if err != nil {
		t.Fatalf("snapshot on the sandbox's own store: %v", err)
	}
	// A state of before store identities is checked by hostname and root:
	// a runner of this machine's hostname and the sandbox's root takes it.
	legacy := info.State
	legacy.Store = ""
	host, _ := os.Hostname()
	if _, err := storeRunner(t, rootA, store, "", func(c *workflows.Config) { c.Host = host }).Lease().SandboxSnapshot(ctx, legacy); err != nil {
		t.Errorf("snapshot of a state of before store identities, on its store: %v", err)
	}
	if _, err := b.Lease().SandboxSnapshot(ctx, legacy); troupe.ErrorType(err) != troupe.ErrSandboxMisrouted {
		t.Errorf("snapshot of a state of before store identities, on another root: %v, want %s", err, troupe.ErrSandboxMisrouted)
	}
	restored, err := b.Lease().SandboxCreate(ctx, lease.SandboxCreateInput{Graph: "sb", Agent: "worker", WorkflowID: "wf", Generation: 2, Snapshot: key})
	if err != nil {
		t.Fatalf("create from snapshot %s: %v", key, err)
	}
	lc, _ := local.New(local.Config{Root: rootB})
	s, err := lc.Resume(ctx, restored.State)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.ReadFile(ctx, "f.txt"); err != nil || string(got) != "mine" {
		t.Errorf("restored f.txt = %q, %v", got, err)
	}
	if err := a.Lease().SandboxStop(ctx, info.State); err != nil {
		t.Error(err)
	}
	if err := b.Lease().SandboxStop(ctx, restored.State); err != nil {
		t.Error(err)
	}
}

// TestSandboxStoreQueue: a store's queue depends on the host and where
// its workspaces are, not on how the roots are spelt or listed.
func TestSandboxStoreQueue(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(dir+"/b", 0o700); err != nil {
		t.Fatal(err)
	}
	link := dir + "-link"
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(link) })
	q := lease.StoreQueue("h", dir, dir+"/b")
	for name, other := range map[string]string{
		"symlinked":  lease.StoreQueue("h", link, link+"/b"),
		"reordered":  lease.StoreQueue("h", dir+"/b", dir),
		"duplicated": lease.StoreQueue("h", dir, dir+"/b", dir),
	} {
		if other != q {
			t.Errorf("%s roots: queue %s, want %s", name, other, q)
		}
	}
	for name, other := range map[string]string{
		"another host": lease.StoreQueue("h2", dir, dir+"/b"),
		"another root": lease.StoreQueue("h", dir+"/c"),
	} {
		if other == q {
			t.Errorf("%s has the same queue %s", name, q)
		}
	}
	if !strings.HasPrefix(q, "troupe-sandbox-h-") {
		t.Errorf("queue %s does not name its host", q)
	}
}
