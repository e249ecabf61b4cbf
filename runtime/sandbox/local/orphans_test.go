package local_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/local"
)

// TestReap: the workspace of a session its worker never stopped is
// removed, with its sidecar, once keep says its owner is gone; those whose
// keep says true (an open workflow, another cluster's) stay.
func TestReap(t *testing.T) {
	c, err := local.New(local.Config{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	create := func(id string, labels map[string]string) sandbox.Session {
		t.Helper()
		s, err := c.Create(ctx, sandbox.Spec{ID: id, Labels: labels,
			Manifest: sandbox.Manifest{Entries: []sandbox.Entry{{Kind: sandbox.EntryFile, Path: "note", Content: "hi"}}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Stop(context.Background()) })
		return s
	}
	ours := func(workflow string) map[string]string {
		return map[string]string{"troupe.workflow": workflow, "troupe.cluster": "ours"}
	}
	dead := create("dead", ours("wf-closed"))
	open := create("open", ours("wf-open"))
	foreign := create("foreign", map[string]string{"troupe.workflow": "wf-closed", "troupe.cluster": "theirs"})
	// KeepOpen's rule, with the workflows' states made up.
	keep := func(l map[string]string) bool {
		return l["troupe.cluster"] != "ours" || l["troupe.workflow"] == "wf-open"
	}

	removed, err := c.Reap(ctx, keep)
	if err != nil || len(removed) != 1 || removed[0] != "dead" {
		t.Fatalf("Reap = %v, %v; want [dead]", removed, err)
	}
	if err := dead.Alive(ctx); !errors.Is(err, sandbox.ErrGone) {
		t.Errorf("the orphan: Alive = %v, want ErrGone", err)
	}
	entries, err := os.ReadDir(c.Root())
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if want := []string{".foreign.json", ".open.json", "foreign", "open"}; !slices.Equal(left, want) {
		t.Errorf("left after Reap: %v, want %v", left, want)
	}
	for _, s := range []sandbox.Session{open, foreign} {
		if b, err := s.ReadFile(ctx, "note"); err != nil || string(b) != "hi" {
			t.Errorf("%s after Reap: %q, %v", s.State().ID, b, err)
		}
	}
}
