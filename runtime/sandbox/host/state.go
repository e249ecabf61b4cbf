package host

import (
	"fmt"

	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// HostState is the sandbox.State of a new session whose workspace ws lives on
// host: what backends that keep their workspace as a host directory (all
// of ours) return from Create.
func HostState(backend, host string, spec sandbox.Spec, ws Workspace) sandbox.State {
	return sandbox.State{
		Backend:   backend,
		Host:      host,
		ID:        spec.ID,
		Workspace: ws.Dir,
		Env:       spec.Manifest.Env,
		Ephemeral: ws.Ephemeral,
		Options:   spec.Options,
	}
}

// ReopenHostWorkspace reopens the workspace of state for a Resume by the
// backend on host: it refuses another backend's state, and fails with
// sandbox.ErrGone when the session is on another host or its workspace is gone.
func ReopenHostWorkspace(root, backend, host string, state sandbox.State) (Workspace, error) {
	if state.Backend != backend {
		return Workspace{}, fmt.Errorf("%s: cannot resume a %q session", backend, state.Backend)
	}
	if state.Host != host {
		return Workspace{}, fmt.Errorf("%w: session %q is on host %q, not %q", sandbox.ErrGone, state.ID, state.Host, host)
	}
	return OpenWorkspace(root, state)
}
