package docker

import (
	"context"
	"errors"
	"path/filepath"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/troupe-dev/troupe/runtime/sandbox"
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

// Reap removes the orphans' containers, and their workspace directories
// when those lie under this client's Root. It returns the removed
// containers' ids.
func (c *Client) Reap(ctx context.Context, keep func(labels map[string]string) bool) ([]string, error) {
	orphans, err := c.Orphans(ctx, keep)
	if err != nil {
		return nil, err
	}
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
			if err := (sandbox.Workspace{Dir: dir}).Destroy(); err != nil {
				errs = append(errs, err)
			}
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
