package lease

import (
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

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
// in this worker's store: the worker cannot see its workspace, and must
// say so rather than answer from a workspace it does not have (as gone).
// A sandbox's state names its store by identity (sandbox.State.Store):
// another identity is another store, whatever the host's name and the
// workspace's path. A state of before identities names its host by name:
// the legacy check is the hostname and the root, and cannot tell two
// hosts of one name and one home path apart.
func (a *Activities) checkStore(st sandbox.State) error {
	c, ok := a.Sandboxes[st.Backend]
	if !ok {
		return nil // client() says so.
	}
	rc, ok := c.(rooted)
	if !ok {
		return nil
	}
	under := func(root string) bool {
		rel, err := filepath.Rel(root, filepath.Clean(st.Workspace))
		return err == nil && rel != "." && filepath.IsLocal(rel)
	}
	if st.Store != "" {
		// This store's, under the root of any of its backends (a session
		// that switched backend keeps its state's backend name).
		for _, c := range a.Sandboxes {
			if r, ok := c.(rooted); ok && st.Store == a.StoreID && under(r.Root()) {
				return nil
			}
		}
		return troupe.NonRetryable(troupe.ErrSandboxMisrouted,
			"sandbox %s (%s workspace %s in store %s, host %s) is not in this worker's store (store %s, root %s, task queue %s): "+
				"workers with different sandbox stores share the task queue; give each its own --sandbox-queue, or leave it to the default",
			st.ID, st.Backend, st.Workspace, st.Store, st.Host, cmp.Or(a.StoreID, "none"), rc.Root(), a.Queue)
	}
	// Backends record the machine's hostname in a State (the worker's
	// Config.Host may be another name for it).
	machine, _ := os.Hostname()
	if st.Host == machine && under(rc.Root()) {
		return nil
	}
	return troupe.NonRetryable(troupe.ErrSandboxMisrouted,
		"sandbox %s (%s workspace %s on host %s) is not in this worker's store (host %s, root %s, task queue %s): workers with different sandbox stores share the task queue; give each its own --sandbox-queue, or leave it to the default",
		st.ID, st.Backend, st.Workspace, st.Host, machine, rc.Root(), a.Queue)
}

// pollerFresh is how recent a worker's last poll of a queue must be for
// CheckQueueStore to take it as serving the queue: the server lists a
// stopped worker's polls for about a minute.
const pollerFresh = 75 * time.Second

// CheckQueueStore fails when a worker that serves the sandbox queue
// queue now says (in its identity, troupe.WithStore) that its sandbox
// store is another than store: two stores on one queue would take each
// other's sandbox calls, answered as misrouted and sent on, call after
// call. A worker that says nothing of its store (one of before store
// identities) does not count, nor one of the same store (a second worker
// of one home), nor anything when the server cannot say.
func CheckQueueStore(ctx context.Context, c client.Client, queue, store string) error {
	if store == "" {
		return nil
	}
	d, err := c.DescribeTaskQueue(ctx, queue, enums.TASK_QUEUE_TYPE_ACTIVITY)
	if err != nil {
		return nil // Nothing to compare with: the server will say what is wrong.
	}
	for _, p := range d.GetPollers() {
		if time.Since(p.GetLastAccessTime().AsTime()) >= pollerFresh {
			continue
		}
		theirs, rest := troupe.StoreOf(p.GetIdentity())
		if theirs == "" || theirs == store {
			continue
		}
		who, _, _ := strings.Cut(rest, " ")
		return fmt.Errorf("sandbox queue %s is served by another troupe worker (%s) whose sandbox store is %s; this one's is %s, "+
			"and each would take the other's sandbox calls: give each store its own --sandbox-queue (or leave it to the default, "+
			"the store's own queue), or stop the other first (a worker that has just stopped is listed for about a minute)",
			queue, who, theirs, store)
	}
	return nil
}
