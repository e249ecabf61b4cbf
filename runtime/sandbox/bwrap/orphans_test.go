package bwrap_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/bwrap"
	"github.com/troupe-dev/troupe/runtime/sandbox/host"
)

// TestReap: the workspace and cgroup of a session its worker never stopped
// are removed once keep says its owner is gone, and a process left in the
// cgroup is killed; those whose keep says true (an open workflow, another
// cluster's) stay.
func TestReap(t *testing.T) {
	c := newClient(t, bwrap.Config{})
	ctx := context.Background()
	nonce := strconv.FormatInt(time.Now().UnixNano(), 36)
	create := func(name string, labels map[string]string) sandbox.Session {
		t.Helper()
		s, err := c.Create(ctx, sandbox.Spec{ID: "reap-" + name + "-" + nonce, Labels: labels})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Stop(context.Background()) })
		exec1(t, s, "echo hi > note", 10*time.Second) // The first command makes the session's cgroup.
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

	cgroup := func(s sandbox.Session) string { return bwrap.SessionCgroup(c, host.DirName(s.State().ID)) }
	var survivor *exec.Cmd
	if cg := cgroup(dead); cg != "" {
		// A process that outlived its worker, in the session's cgroup.
		survivor = exec.Command("sleep", "300")
		if err := survivor.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { survivor.Process.Kill(); survivor.Wait() })
		if err := os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(strconv.Itoa(survivor.Process.Pid)), 0); err != nil {
			t.Fatal(err)
		}
	} else {
		t.Logf("no pids cgroup on this host (%s): only workspaces are reaped", c.LimitsMechanism())
	}

	orphans, err := c.Orphans(ctx, keep)
	if err != nil || len(orphans) != 1 || orphans[0].ID != dead.State().ID || orphans[0].Labels["troupe.workflow"] != "wf-closed" {
		t.Fatalf("Orphans = %+v, %v; want only %s", orphans, err, dead.State().ID)
	}
	removed, err := c.Reap(ctx, keep)
	if err != nil || len(removed) != 1 || removed[0] != dead.State().ID {
		t.Fatalf("Reap = %v, %v; want [%s]", removed, err, dead.State().ID)
	}
	if err := dead.Alive(ctx); !errors.Is(err, sandbox.ErrGone) {
		t.Errorf("the orphan: Alive = %v, want ErrGone", err)
	}
	if cg := cgroup(dead); cg != "" {
		if _, err := os.Stat(cg); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the orphan's cgroup %s: %v, want it removed", cg, err)
		}
	}
	if survivor != nil {
		done := make(chan error, 1)
		go func() { done <- survivor.Wait() }()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("the process in the orphan's cgroup exited by itself")
			}
		case <-time.After(10 * time.Second):
			t.Errorf("the process in the orphan's cgroup outlived Reap")
		}
	}
	entries, err := os.ReadDir(c.Root())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == host.DirName(dead.State().ID) || e.Name() == fmt.Sprintf(".%s.json", host.DirName(dead.State().ID)) {
			t.Errorf("the orphan left %s", e.Name())
		}
	}
	for _, s := range []sandbox.Session{open, foreign} {
		if err := s.Alive(ctx); err != nil {
			t.Errorf("%s was reaped: %v", s.State().ID, err)
		}
		if cg := cgroup(s); cg != "" {
			if _, err := os.Stat(cg); err != nil {
				t.Errorf("the cgroup of %s: %v", s.State().ID, err)
			}
		}
		if out := exec1(t, s, "cat note", 10*time.Second).Output; out != "hi\n" {
			t.Errorf("%s after Reap: %q", s.State().ID, out)
		}
	}
}

// TestCreateReplacesCgroup: a Create for the id of a session whose worker
// died replaces its cgroup too, killing what was left in it.
func TestCreateReplacesCgroup(t *testing.T) {
	c := newClient(t, bwrap.Config{})
	ctx := context.Background()
	first := session(t, c, sandbox.Options{}, sandbox.Manifest{})
	exec1(t, first, "true", 10*time.Second)
	cg := bwrap.SessionCgroup(c, host.DirName(first.State().ID))
	if cg == "" {
		t.Skipf("no pids cgroup on this host: %s", c.LimitsMechanism())
	}
	survivor := exec.Command("sleep", "300")
	if err := survivor.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { survivor.Process.Kill(); survivor.Wait() })
	if err := os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(strconv.Itoa(survivor.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	second, err := c.Create(ctx, sandbox.Spec{ID: first.State().ID})
	if err != nil {
		t.Fatalf("Create of a leftover session's id: %v", err)
	}
	defer second.Stop(ctx)
	done := make(chan error, 1)
	go func() { done <- survivor.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Errorf("the process in the replaced session's cgroup outlived Create")
	}
	if out := exec1(t, second, "ls; echo ok", 10*time.Second).Output; out != "ok\n" {
		t.Errorf("the new session: %q", out)
	}
}

// TestReapEmptyParents: Reap removes the empty parent cgroups that clients
// of other roots left (they ended without Close), once unchanged for a
// minute; a parent holding a session cgroup, one made just now, and the
// client's own parent stay.
func TestReapEmptyParents(t *testing.T) {
	c := newClient(t, bwrap.Config{})
	parents := bwrap.ParentCgroups(c)
	if len(parents) == 0 {
		t.Skipf("no cgroups on this host: %s", c.LimitsMechanism())
	}
	nonce := strconv.FormatInt(time.Now().UnixNano(), 36)
	old := time.Now().Add(-2 * time.Minute)
	type sibling struct {
		dir      string
		old      bool
		session  bool
		wantGone bool
	}
	var sibs []sibling
	for _, p := range parents {
		up := filepath.Dir(p)
		sibs = append(sibs,
			sibling{filepath.Join(up, "troupe-bwrap-empty"+nonce), true, false, true},
			sibling{filepath.Join(up, "troupe-bwrap-busy"+nonce), true, true, false},
			sibling{filepath.Join(up, "troupe-bwrap-new"+nonce), false, false, false},
			sibling{filepath.Join(up, "other-empty"+nonce), true, false, false})
	}
	for _, s := range sibs {
		if err := os.Mkdir(s.dir, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(filepath.Join(s.dir, "session")); os.Remove(s.dir) })
		if s.session {
			if err := os.Mkdir(filepath.Join(s.dir, "session"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if s.old {
			if err := os.Chtimes(s.dir, old, old); err != nil {
				t.Skipf("cannot age a cgroup on this host: %v", err)
			}
		}
	}
	if _, err := c.Reap(context.Background(), func(map[string]string) bool { return true }); err != nil {
		t.Fatal(err)
	}
	for _, s := range sibs {
		_, err := os.Stat(s.dir)
		if gone := errors.Is(err, fs.ErrNotExist); gone != s.wantGone {
			t.Errorf("%s: gone %v, want %v (%v)", s.dir, gone, s.wantGone, err)
		}
	}
	for _, p := range parents {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("the client's own parent %s: %v", p, err)
		}
	}
}
