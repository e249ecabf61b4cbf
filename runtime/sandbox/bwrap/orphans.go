package bwrap

import (
	"context"

	"github.com/troupe-dev/troupe/runtime/sandbox"
)

var _ sandbox.Reaper = (*Client)(nil)

// Orphans lists the workspaces under Root for which keep answers false
// (see sandbox.HostReaper): those of sessions a killed worker never
// stopped, once their owner is gone.
func (c *Client) Orphans(ctx context.Context, keep func(labels map[string]string) bool) ([]sandbox.HostOrphan, error) {
	return c.reaper().Orphans(ctx, keep)
}

// Reap removes the orphans, each its pids cgroup (killing what is left in
// it) and then its workspace, and returns their session ids.
func (c *Client) Reap(ctx context.Context, keep func(labels map[string]string) bool) ([]string, error) {
	return c.reaper().Reap(ctx, keep)
}

func (c *Client) reaper() sandbox.HostReaper {
	return sandbox.HostReaper{Root: c.root, Release: c.releaseCgroup}
}

// releaseCgroup removes the pids cgroup of the session whose workspace
// directory is name, killing what is left in it.
func (c *Client) releaseCgroup(name string) error {
	if c.cgroup == nil {
		return nil
	}
	return c.cgroup.remove(name)
}
