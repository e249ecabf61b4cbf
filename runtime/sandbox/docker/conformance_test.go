package docker

import (
	"os"
	"testing"

	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/sandboxtest"
)

func TestConformance(t *testing.T) {
	// The workspaces go under the test client's root, so that a crashed
	// run's leftovers are found by reapCrashedRuns.
	root, err := os.MkdirTemp(dockerClient(t).Root(), "conformance-")
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	c, err := New(Config{Image: BusyboxImage, Root: root, Policy: sandbox.Policy{AllowedRoots: []string{src}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sandboxtest.Run(t, c, sandboxtest.Options{SourceRoot: src})
}

func TestLimits(t *testing.T) {
	sandboxtest.RunLimits(t, dockerClient(t), sandboxtest.Options{})
}
