package lease

import (
	"crypto/sha256"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// rooted is a sandbox client that keeps its workspaces under a host
// directory, as local, bwrap and docker do.
type rooted interface{ Root() string }

// DefaultStoreQueue names the store of host and the roots of clients
// (StoreQueue): the default sandbox queue of a worker.
func DefaultStoreQueue(host string, clients map[string]sandbox.Client) string {
	var roots []string
	for _, b := range slices.Sorted(maps.Keys(clients)) {
		if c, ok := clients[b].(rooted); ok {
			roots = append(roots, c.Root())
		}
	}
	return StoreQueue(host, roots...)
}

// StoreQueue names the task queue of the sandbox store of host
// whose workspaces live under roots: troupe-sandbox-<host>-<8 hex
// digits>, a hash of host and the roots (made absolute, symlinks
// resolved, sorted). A worker that offers different backends after a
// restart keeps its queue when it names its store by the directory that
// holds every backend's root (the CLI uses $TROUPE_HOME/sandboxes).
func StoreQueue(host string, roots ...string) string {
	clean := make([]string, 0, len(roots))
	for _, r := range roots {
		if abs, err := filepath.Abs(r); err == nil {
			r = abs
		}
		if real, err := filepath.EvalSymlinks(r); err == nil {
			r = real
		}
		clean = append(clean, r)
	}
	slices.Sort(clean)
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", host)
	for _, r := range slices.Compact(clean) {
		fmt.Fprintf(h, "%s\n", r)
	}
	return fmt.Sprintf("troupe-sandbox-%s-%x", host, h.Sum(nil)[:4])
}

// LegacyHostQueue is the sandbox queue of runs started before queues
// named stores: a worker serves it too, so those runs' sandboxes are not
// taken as lost after a redeploy (a call that reaches a worker of another
// store fails as misrouted, as on any queue).
func LegacyHostQueue(host string) string { return "troupe-host-" + host }

// checkStore fails with ErrSandboxMisrouted when the sandbox of st is not
// in this worker's store (another host, or another root of this host):
// the worker cannot see its workspace, and must say so rather than answer
// from a workspace it does not have.
func (a *Activities) checkStore(st sandbox.State) error {
	c, ok := a.Sandboxes[st.Backend]
	if !ok {
		return nil // client() says so.
	}
	rc, ok := c.(rooted)
	if !ok {
		return nil
	}
	// Backends record the machine's hostname in a State (the worker's
	// Config.Host may be another name for it).
	machine, _ := os.Hostname()
	rel, err := filepath.Rel(rc.Root(), filepath.Clean(st.Workspace))
	if st.Host == machine && err == nil && rel != "." && filepath.IsLocal(rel) {
		return nil
	}
	return troupe.NonRetryable(troupe.ErrSandboxMisrouted,
		"sandbox %s (%s workspace %s on host %s) is not in this worker's store (host %s, root %s, task queue %s): workers with different sandbox stores share the task queue; give each its own --sandbox-queue, or leave it to the default",
		st.ID, st.Backend, st.Workspace, st.Host, machine, rc.Root(), a.Queue)
}
