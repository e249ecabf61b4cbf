package lease

import (
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/runtime"
)

// versionReroute marks the change to agents and sessions that send a
// sandbox activity that reached a worker of another store
// (troupe.ErrSandboxMisrouted) on to the identity queue of the store its
// sandbox's state names, rather than fail the call. The marker is written
// only then, and only for a sandbox whose state names its store (made by
// a worker of this change or later): histories from before it end with
// the error.
const versionReroute = "troupe.sandbox-reroute"

// reroute runs do again when err says that the activity do ran reached a
// worker of another store: on the queue of the store that holds the
// sandbox (IdentityQueue of its state's Store), which sb and the live
// lease route to from then on, so later calls go there at once. do reads
// sb's queue when it runs. A sandbox whose state names no store (made
// before stores had identities), or whose queue is its store's already,
// has nowhere else to go: err comes back as it is. A store that no
// worker serves does not take the call (schedule-to-start, after
// HostTimeout), and the sandbox is lost then, as for any host gone.
func (s *Life) reroute(ctx workflow.Context, sb *runtime.LeasedSandbox, err error, do func() error) error {
	if err == nil || troupe.ErrorType(err) != troupe.ErrSandboxMisrouted || sb.State.Store == "" {
		return err
	}
	to := IdentityQueue(sb.State.Store)
	if sb.Queue == to {
		return err
	}
	if workflow.GetVersion(ctx, versionReroute, workflow.DefaultVersion, 1) != 1 {
		return err
	}
	s.rec.Add(ctx, troupe.Event{Kind: troupe.EventSandboxRerouted, Agent: s.agent,
		Detail: "task queue " + sb.Queue + " reached a worker of another sandbox store; going on to the queue of store " + sb.State.Store + " (" + to + ")"})
	sb.Queue = to
	if l := s.lease.Sandbox; l != nil && l.State.ID == sb.State.ID {
		l.Queue = to
	}
	return do()
}
