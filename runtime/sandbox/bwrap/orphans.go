package bwrap

import (
	"context"
	"time"

	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/host"
)

var _ sandbox.Reaper = (*Client)(nil)

// Orphans lists the workspaces under Root for which keep answers false
// (see host.HostReaper): those of sessions a killed worker never
// stopped, once their owner is gone.
func (c *Client) Orphans(ctx context.Context, keep func(labels map[string]string) bool) ([]host.HostOrphan, error) {
	return c.reaper().Orphans(ctx, keep)
}

// Reap removes the orphans, each its cgroups (killing what is left in
// them) and then its workspace, and returns their session ids. It also
// removes the empty parent cgroups that clients of other roots left when
// they ended without Close, once a minute old.
func (c *Client) Reap(ctx context.Context, keep func(labels map[string]string) bool) ([]string, error) {
	ids, err := c.reaper().Reap(ctx, keep)
	c.cgroup.removeEmptySiblings(siblingAge)
	return ids, err
}

// siblingAge is how old another root's empty parent cgroup must be before
// Reap removes it.
const siblingAge = time.Minute

func (c *Client) reaper() host.HostReaper {
	return host.HostReaper{Root: c.root, Release: c.releaseCgroup}
}

// releaseCgroup removes the pids cgroup of the session whose workspace
// directory is name, killing what is left in it.
func (c *Client) releaseCgroup(name string) error {
	if c.cgroup == nil {
		return nil
	}
	return c.cgroup.remove(name)
}
