package host

// What crashed workers leave behind. Provision writes, beside each
// workspace directory, a sidecar file with the sandbox's id, labels and
// creation time, before it makes the directory; Destroy removes it after
// the directory. So a later worker can tell whose a workspace is, and
// HostReaper removes the ones whose owner is gone: the same job
// docker.Client.Reap does for containers, whose labels the engine keeps.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// UnlabelledAge is how old a workspace with no readable sidecar (one made
// before sidecars existed, or whose sidecar write was cut short) must be,
// by the last modification of it or its sidecar, before HostReaper takes
// it for an orphan: nothing says whose it is, so only age can.
const UnlabelledAge = 24 * time.Hour

// maxSidecarBytes bounds what a sidecar read takes in.
const maxSidecarBytes = 1 << 20

// sidecar is what the file .<dirname>.json beside a workspace holds.
type sidecar struct {
	ID      string            `json:"id"`
	Labels  map[string]string `json:"labels,omitempty"`
	Created time.Time         `json:"created"`
}

// sidecarPath is the sidecar of the workspace directory dir; "" for a
// directory whose name starts with a dot (no workspace's does).
func sidecarPath(dir string) string {
	base := filepath.Base(dir)
	if strings.HasPrefix(base, ".") {
		return ""
	}
	return filepath.Join(filepath.Dir(dir), "."+base+".json")
}

// writeSidecar records spec's id and labels beside the workspace
// directory dir.
func writeSidecar(dir string, spec sandbox.Spec) error {
	b, err := json.Marshal(sidecar{ID: spec.ID, Labels: spec.Labels, Created: time.Now().UTC()})
	if err != nil {
		return err
	}
	if err := os.WriteFile(sidecarPath(dir), b, 0o600); err != nil {
		return fmt.Errorf("sandbox: labels of session %q: %w", spec.ID, err)
	}
	return nil
}

func removeSidecar(dir string) error {
	p := sidecarPath(dir)
	if p == "" {
		return nil
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// readSidecar reads the sidecar of the workspace directory named name
// under root; it fails unless the sidecar is a regular file that names a
// session whose directory is name.
func readSidecar(root, name string) (sidecar, error) {
	var sc sidecar
	f, err := os.OpenFile(sidecarPath(filepath.Join(root, name)), os.O_RDONLY|noFollow|nonBlock, 0)
	if err != nil {
		return sc, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return sc, fmt.Errorf("sandbox: sidecar of %q is not a regular file", name)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSidecarBytes))
	if err != nil {
		return sc, err
	}
	if err := json.Unmarshal(b, &sc); err != nil {
		return sc, err
	}
	if sc.ID == "" || DirName(sc.ID) != name {
		return sc, fmt.Errorf("sandbox: sidecar of %q names session %q", name, sc.ID)
	}
	return sc, nil
}

// HostOrphan is a workspace under a backend's root that its owner no
// longer wants.
type HostOrphan struct {
	// ID is the session's sandbox.Spec.ID; empty for an unlabelled workspace
	// (no readable sidecar).
	ID string
	// Name is the workspace directory's name under the root: DirName(ID).
	Name string
	// Dir is the workspace directory. It may be gone already, with only
	// the sidecar left (a Create or Stop cut short).
	Dir string
	// Labels are the sandbox.Spec.Labels the sandbox was created with.
	Labels map[string]string
	// Created is when its Create began; for an unlabelled workspace, when
	// it was last modified.
	Created time.Time
}

// HostReaper finds and removes orphan workspaces under the host directory
// of a backend that keeps its workspaces there (local and bwrap use it;
// docker for workspaces whose container was never made). A workspace is
// an orphan when keep answers false for the labels of its sidecar, or,
// with no readable sidecar, when it is older than UnlabelledAge.
//
// keep carries the policy: KeepOpen of package workflows/lease keeps the
// sandboxes of open workflows and those of other Temporal clusters and
// namespaces. A sandbox is never without its labels (the sidecar comes
// before the directory and goes after it), so one created moments ago is
// judged by keep like any other, and kept while its workflow is open.
type HostReaper struct {
	// Root is the backend's workspace root.
	Root string
	// Release, when set, frees what a session holds besides its workspace
	// (bwrap: its pids cgroup) before the workspace is removed; it gets
	// the workspace directory's name.
	Release func(name string) error
}

// Orphans lists the orphan workspaces under Root, sorted by name. A nil
// keep keeps nothing.
func (h HostReaper) Orphans(ctx context.Context, keep func(labels map[string]string) bool) ([]HostOrphan, error) {
	root, err := filepath.Abs(h.Root)
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox: list workspaces: %w", err)
	}
	found := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if inner, ok := strings.CutPrefix(name, "."); ok {
			if inner, ok = strings.CutSuffix(inner, ".json"); ok && inner != "" && !strings.HasPrefix(inner, ".") && e.Type().IsRegular() {
				found[inner] = true // A sidecar, its workspace there or not.
			}
			continue // A backend's own files, such as bwrap's .bwrap-etc.
		}
		if e.IsDir() {
			found[name] = true
		}
	}
	names := make([]string, 0, len(found))
	for name := range found {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []HostOrphan
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		o := HostOrphan{Name: name, Dir: filepath.Join(root, name)}
		if sc, err := readSidecar(root, name); err == nil {
			if keep != nil && keep(sc.Labels) {
				continue
			}
			o.ID, o.Labels, o.Created = sc.ID, sc.Labels, sc.Created
		} else {
			o.Created = lastModified(o.Dir, sidecarPath(o.Dir))
			if o.Created.IsZero() || time.Since(o.Created) < UnlabelledAge {
				continue // Gone since the listing (a Stop's Destroy), or young.
			}
		}
		out = append(out, o)
	}
	return out, nil
}

// lastModified is the latest modification time of the paths that exist.
func lastModified(paths ...string) time.Time {
	var t time.Time
	for _, p := range paths {
		if fi, err := os.Lstat(p); err == nil && fi.ModTime().After(t) {
			t = fi.ModTime()
		}
	}
	return t
}

// ErrOrphanGone is Remove's answer for an orphan that went, or became a
// new session's, since Orphans listed it: nothing was removed.
var ErrOrphanGone = errors.New("sandbox: the orphan is gone")

// Remove removes an orphan: what Release frees, its workspace directory,
// then its sidecar. An orphan whose sidecar changed since Orphans read it
// (a new session of the same id), or that is gone, is left alone, with
// ErrOrphanGone.
func (h HostReaper) Remove(o HostOrphan) error {
	root := filepath.Dir(o.Dir)
	if o.Name == "" || strings.HasPrefix(o.Name, ".") || o.Dir != filepath.Join(root, o.Name) {
		return fmt.Errorf("sandbox: refusing to reap %q", o.Dir)
	}
	sc, err := readSidecar(root, o.Name)
	switch {
	case o.ID != "" && (err != nil || !sc.Created.Equal(o.Created)):
		return ErrOrphanGone // Gone already, or a new session's.
	case o.ID == "" && err == nil:
		return ErrOrphanGone // A new session's, labelled.
	case o.ID == "" && lastModified(o.Dir).IsZero():
		return ErrOrphanGone
	}
	if h.Release != nil {
		if err := h.Release(o.Name); err != nil {
			return fmt.Errorf("sandbox: reap %s: %w", o.Name, err)
		}
	}
	return Workspace{Dir: o.Dir}.Destroy()
}

// Reap removes the orphans and returns their ids (the directory name of
// an unlabelled one).
func (h HostReaper) Reap(ctx context.Context, keep func(labels map[string]string) bool) ([]string, error) {
	orphans, err := h.Orphans(ctx, keep)
	var removed []string
	errs := []error{err}
	for _, o := range orphans {
		switch err := h.Remove(o); {
		case errors.Is(err, ErrOrphanGone):
		case err != nil:
			errs = append(errs, err)
		default:
			removed = append(removed, cmp.Or(o.ID, o.Name))
		}
	}
	return removed, errors.Join(errs...)
}
