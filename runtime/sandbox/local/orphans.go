package local

import (
	"context"

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

// Reap removes the orphans' workspaces and returns their session ids.
// Commands a killed worker left running are not found: a local command is
// a host process, and nothing ties it to its workspace.
func (c *Client) Reap(ctx context.Context, keep func(labels map[string]string) bool) ([]string, error) {
	return c.reaper().Reap(ctx, keep)
}

func (c *Client) reaper() host.HostReaper { return host.HostReaper{Root: c.root} }
