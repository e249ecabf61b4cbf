package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/bwrap"
	"github.com/troupe-dev/troupe/runtime/sandbox/docker"
	"github.com/troupe-dev/troupe/runtime/sandbox/local"
)

// sandboxClients returns the sandbox backends a worker offers (local;
// bwrap when installed; docker when its engine answers) and the default
// one: TROUPE_SANDBOX when set (bwrap, local, docker), else bwrap when
// bubblewrap is installed, else local (no isolation) with a warning.
// Workspaces live under $TROUPE_HOME/sandboxes. Manifests may copy host
// files from roots and from TROUPE_SANDBOX_ALLOWED_ROOTS (a list like
// PATH), and from nowhere else.
func sandboxClients(roots []string, stderr io.Writer) (map[string]sandbox.Client, string, error) {
	policy := sandbox.Policy{AllowedRoots: roots}
	for _, r := range filepath.SplitList(os.Getenv("TROUPE_SANDBOX_ALLOWED_ROOTS")) {
		if r != "" {
			policy.AllowedRoots = append(policy.AllowedRoots, r)
		}
	}
	dir, err := home()
	if err != nil {
		return nil, "", err
	}
	root := filepath.Join(dir, "sandboxes")
	clients := map[string]sandbox.Client{}
	lc, err := local.New(local.Config{Root: filepath.Join(root, local.Backend), Policy: policy})
	if err != nil {
		return nil, "", err
	}
	clients[local.Backend] = lc
	bc, bwrapErr := bwrap.New(bwrap.Config{Root: filepath.Join(root, bwrap.Backend), Policy: policy})
	if bwrapErr == nil {
		clients[bwrap.Backend] = bc
	}
	if dc, err := docker.New(docker.Config{Root: filepath.Join(root, docker.Backend), Policy: policy}); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if dc.Ping(ctx) == nil {
			clients[docker.Backend] = dc
		}
		cancel()
	}
	want := os.Getenv("TROUPE_SANDBOX")
	switch {
	case want != "":
		if _, ok := clients[want]; !ok {
			return nil, "", fmt.Errorf("TROUPE_SANDBOX=%s is not available here (bwrap: %v)", want, bwrapErr)
		}
		return clients, want, nil
	case bwrapErr == nil:
		return clients, bwrap.Backend, nil
	}
	fmt.Fprintf(stderr, "troupe: bubblewrap is not available (%v): sandbox agents run in local workspaces without isolation\n", bwrapErr)
	return clients, local.Backend, nil
}
