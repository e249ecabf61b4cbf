package docker

import (
	"cmp"
	"context"
	"errors"
	"path/filepath"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/host"
)

// Orphan is a sandbox container that its owner no longer wants.
type Orphan struct {
	// ContainerID is the container's id.
	ContainerID string
	// Session is its LabelSession.
	Session string
	// Labels are all its labels (troupe.workflow among them when the
	// worker set it through Spec.Labels).
	Labels map[string]string
	// State is the engine's state: "running", "exited", ...
	State string
}

// Orphans lists the engine's sandbox containers (LabelBackend=docker),
// running or not, for which keep answers false. keep carries the policy,
// for example "its troupe.workflow label names a workflow still open".
func (c *Client) Orphans(ctx context.Context, keep func(labels map[string]string) bool) ([]Orphan, error) {
	list, err := c.api.ContainerList(ctx, container.ListOptions{
		All:     true,
		Filters: filters.NewArgs(filters.Arg("label", LabelBackend+"="+Backend)),
	})
	if err != nil {
		return nil, c.engineErr("list containers", err)
	}
	var out []Orphan
	for _, ct := range list {
		if keep != nil && keep(ct.Labels) {
			continue
		}
		out = append(out, Orphan{ContainerID: ct.ID, Session: ct.Labels[LabelSession], Labels: ct.Labels, State: string(ct.State)})
	}
	return out, nil
}

var _ sandbox.Reaper = (*Client)(nil)

// Reap removes the orphans' containers, and their workspace directories
// when those lie under this client's Root. Then it removes the workspaces
// under Root that have no container and whose labels keep answers false
// for (a worker killed between making the workspace and the container;
// see host.HostReaper). It returns the removed containers' ids and
// the removed container-less workspaces' session ids.
func (c *Client) Reap(ctx context.Context, keep func(labels map[string]string) bool) ([]string, error) {
	orphans, err := c.Orphans(ctx, keep)
	if err != nil {
		return nil, err
	}
	removed, err := c.reapContainers(ctx, orphans)
	more, err2 := c.reapWorkspaces(ctx, keep)
	return append(removed, more...), errors.Join(err, err2)
}

func (c *Client) reapContainers(ctx context.Context, orphans []Orphan) ([]string, error) {
	var removed []string
	var errs []error
	for _, o := range orphans {
		err := c.api.ContainerRemove(ctx, o.ContainerID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !cerrdefs.IsNotFound(err) && !isRemovalInProgress(err) {
			errs = append(errs, c.engineErr("remove container "+o.ContainerID, err))
			continue
		}
		removed = append(removed, o.ContainerID)
		if dir := o.Labels[LabelWorkspace]; dir != "" && c.owns(dir) {
			if err := (host.Workspace{Dir: dir}).Destroy(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return removed, errors.Join(errs...)
}

// reapWorkspaces removes the orphan workspaces under Root that no
// container of this engine mounts (those with one are the containers'
// business: a workspace made before sidecars has a container that says
// whose it is).
func (c *Client) reapWorkspaces(ctx context.Context, keep func(labels map[string]string) bool) ([]string, error) {
	h := host.HostReaper{Root: c.root}
	orphans, err := h.Orphans(ctx, keep)
	if err != nil || len(orphans) == 0 {
		return nil, err
	}
	list, err := c.api.ContainerList(ctx, container.ListOptions{
		All:     true,
		Filters: filters.NewArgs(filters.Arg("label", LabelBackend+"="+Backend)),
	})
	if err != nil {
		return nil, c.engineErr("list containers", err)
	}
	mounted := map[string]bool{}
	for _, ct := range list {
		mounted[filepath.Clean(ct.Labels[LabelWorkspace])] = true
	}
	var removed []string
	var errs []error
	for _, o := range orphans {
		if mounted[o.Dir] {
			continue
		}
		switch err := h.Remove(o); {
		case errors.Is(err, host.ErrOrphanGone):
		case err != nil:
			errs = append(errs, err)
		default:
			removed = append(removed, cmp.Or(o.ID, o.Name))
		}
	}
	return removed, errors.Join(errs...)
}

// owns reports whether dir is a workspace directory directly under Root,
// so a label can never make Reap remove anything else.
func (c *Client) owns(dir string) bool {
	dir = filepath.Clean(dir)
	return filepath.Dir(dir) == c.root && !strings.HasPrefix(filepath.Base(dir), ".")
}
