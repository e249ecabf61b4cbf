package bwrap_test

// Stop while a session's first command is starting leaves no cgroup: the
// command's move into the session's cgroups (which runs while bwrap
// starts) ends before Stop removes them, so it cannot make them again.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/bwrap"
	"github.com/troupe-dev/troupe/runtime/sandbox/host"
)

func TestStopDuringFirstExec(t *testing.T) {
	c := newClient(t, bwrap.Config{})
	ctx := context.Background()
	leaked := 0
	for i := range 40 {
		s, err := c.Create(ctx, sandbox.Spec{ID: fmt.Sprintf("review-stop-%d-%d", os.Getpid(), i)})
		if err != nil {
			t.Fatal(err)
		}
		cg := bwrap.SessionCgroup(c, host.DirName(s.State().ID))
		if cg == "" {
			t.Skip("no session cgroups here")
		}
		done := make(chan struct{})
		go func() {
			s.Exec(ctx, sandbox.ExecRequest{Cmd: "true", Timeout: 10 * time.Second})
			close(done)
		}()
		time.Sleep(time.Duration(i%8) * 500 * time.Microsecond)
		if err := s.Stop(ctx); err != nil {
			t.Logf("stop: %v", err)
		}
		<-done
		time.Sleep(100 * time.Millisecond)
		if _, err := os.Stat(cg); err == nil {
			leaked++
			t.Logf("session %d: cgroup %s outlives Stop", i, cg)
		}
		for _, p := range bwrap.ParentCgroups(c) { // clean up, every hierarchy
			os.Remove(filepath.Join(p, host.DirName(s.State().ID)))
		}
	}
	if leaked > 0 {
		t.Errorf("%d of 40 stopped sessions left their cgroup", leaked)
	}
}
