package host_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/host"
)

func TestHostReaper(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	provision := func(id, workflow string) host.Workspace {
		t.Helper()
		w, err := host.Provision(ctx, root, sandbox.Spec{ID: id, Labels: map[string]string{"troupe.workflow": workflow},
			Manifest: sandbox.Manifest{Entries: []sandbox.Entry{{Kind: sandbox.EntryFile, Path: "f", Content: "x"}}}}, sandbox.Policy{})
		must(t, err)
		return w
	}
	dead := provision("dead/1", "wf-dead")
	live := provision("live", "wf-live")
	// Only its sidecar is left: a Stop cut short after the directory went.
	half := provision("half", "wf-dead")
	must(t, os.RemoveAll(half.Dir))
	// Unlabelled workspaces, as made before sidecars: a new one and one
	// untouched for longer than UnlabelledAge.
	fresh, old := filepath.Join(root, "fresh"), filepath.Join(root, "old")
	must(t, os.MkdirAll(filepath.Join(fresh, "sub"), 0o755))
	must(t, os.MkdirAll(filepath.Join(old, "sub"), 0o755))
	long := time.Now().Add(-host.UnlabelledAge - time.Hour)
	must(t, os.Chtimes(old, long, long))
	// A backend's own files are never workspaces.
	must(t, os.MkdirAll(filepath.Join(root, ".bwrap-etc"), 0o755))

	keep := func(labels map[string]string) bool { return labels["troupe.workflow"] == "wf-live" }
	var released []string
	h := host.HostReaper{Root: root, Release: func(name string) error {
		released = append(released, name)
		return nil
	}}
	orphans, err := h.Orphans(ctx, keep)
	must(t, err)
	var names []string
	for _, o := range orphans {
		names = append(names, o.Name)
		if o.Name == host.DirName("dead/1") && (o.ID != "dead/1" || o.Labels["troupe.workflow"] != "wf-dead" || o.Created.IsZero()) {
			t.Errorf("orphan %+v: want its id, labels and creation time", o)
		}
	}
	want := []string{host.DirName("dead/1"), "half", "old"}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("Orphans = %v, want %v", names, want)
	}

	removed, err := h.Reap(ctx, keep)
	must(t, err)
	slices.Sort(removed)
	if want := []string{"dead/1", "half", "old"}; !slices.Equal(removed, want) {
		t.Errorf("Reap = %v, want %v", removed, want)
	}
	slices.Sort(released)
	if !slices.Equal(released, names) {
		t.Errorf("released %v, want %v", released, names)
	}
	var left []string
	entries, err := os.ReadDir(root)
	must(t, err)
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if want := []string{".bwrap-etc", ".live.json", "fresh", "live"}; !slices.Equal(left, want) {
		t.Errorf("left after Reap: %v, want %v", left, want)
	}
	if err := live.Alive(); err != nil {
		t.Errorf("the kept workspace: %v", err)
	}
	if err := dead.Alive(); !errors.Is(err, sandbox.ErrGone) {
		t.Errorf("the reaped workspace: Alive = %v, want ErrGone", err)
	}
	// Nothing more to do: Reap is idempotent.
	if removed, err := h.Reap(ctx, keep); err != nil || len(removed) != 0 {
		t.Errorf("second Reap = %v, %v", removed, err)
	}
}

func TestHostReaperLeavesWhatChanged(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	spec := sandbox.Spec{ID: "s", Labels: map[string]string{"troupe.workflow": "wf"}}
	_, err := host.Provision(ctx, root, spec, sandbox.Policy{})
	must(t, err)
	h := host.HostReaper{Root: root}
	orphans, err := h.Orphans(ctx, func(map[string]string) bool { return false })
	must(t, err)
	if len(orphans) != 1 {
		t.Fatalf("Orphans = %+v", orphans)
	}
	// A new session of the same id comes between the listing and the
	// removal: the orphan is gone, and the new session is not it.
	time.Sleep(10 * time.Millisecond)
	w, err := host.Provision(ctx, root, spec, sandbox.Policy{})
	must(t, err)
	if err := h.Remove(orphans[0]); !errors.Is(err, host.ErrOrphanGone) {
		t.Errorf("Remove of an orphan that became a new session's = %v, want ErrOrphanGone", err)
	}
	if err := w.Alive(); err != nil {
		t.Errorf("the new session was reaped: %v", err)
	}

	// An unlabelled orphan that goes (its Stop's Destroy finishing) between
	// the listing and the removal: nothing to remove, and nothing reported.
	old := filepath.Join(root, "old")
	must(t, os.Mkdir(old, 0o755))
	long := time.Now().Add(-host.UnlabelledAge - time.Hour)
	must(t, os.Chtimes(old, long, long))
	unlabelled, err := h.Orphans(ctx, func(map[string]string) bool { return true })
	must(t, err)
	if len(unlabelled) != 1 || unlabelled[0].Name != "old" {
		t.Fatalf("Orphans = %+v, want the old unlabelled workspace", unlabelled)
	}
	must(t, os.Remove(old))
	if err := h.Remove(unlabelled[0]); !errors.Is(err, host.ErrOrphanGone) {
		t.Errorf("Remove of an orphan gone since the listing = %v, want ErrOrphanGone", err)
	}

	// A failing Release leaves the workspace for the next round.
	h.Release = func(string) error { return errors.New("busy") }
	if removed, err := h.Reap(ctx, nil); err == nil || len(removed) != 0 {
		t.Errorf("Reap with a failing Release = %v, %v", removed, err)
	}
	if err := w.Alive(); err != nil {
		t.Errorf("the workspace went though its Release failed: %v", err)
	}
}
