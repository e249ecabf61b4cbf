package local_test

import (
	"context"
	"errors"
	"testing"

	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/local"
	"github.com/troupe-dev/troupe/runtime/sandbox/sandboxtest"
)

func TestConformance(t *testing.T) {
	src := t.TempDir()
	c, err := local.New(local.Config{Root: t.TempDir(), Policy: sandbox.Policy{AllowedRoots: []string{src}}})
	if err != nil {
		t.Fatal(err)
	}
	sandboxtest.Run(t, c, sandboxtest.Options{SourceRoot: src})
}

func TestResumeOnAnotherHost(t *testing.T) {
	c, err := local.New(local.Config{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := c.Create(ctx, sandbox.Spec{ID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(ctx)
	st := s.State()
	st.Host = "elsewhere"
	if _, err := c.Resume(ctx, st); !errors.Is(err, sandbox.ErrGone) {
		t.Errorf("Resume of another host's session: %v, want ErrGone", err)
	}
}

func TestDefaultRoot(t *testing.T) {
	t.Setenv("TROUPE_HOME", "/srv/troupe")
	c, err := local.New(local.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Root(); got != "/srv/troupe/sandboxes/local" {
		t.Errorf("Root() with TROUPE_HOME = %q", got)
	}
}
