package lease

import (
	"slices"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/workflows/events"
)

// Keeper keeps a session's sandboxes between its turns, one per agent
// that has one: it lends an agent's lease to the agent workflow that
// answers (Lend), takes it back at the agent's end (Back), and runs the
// sandbox's idle timer in the session, so a sandbox left idle is
// suspended (snapshot, then stop) and the next command restores it.
//
// While the session runs, each agent's Life holds the lease; the
// session's state (runtime.SessionState.Leases) gets a copy when it
// continues as new (Settle). A Keeper belongs to the session's workflow:
// its methods are workflow code.
type Keeper struct {
	set   Settings
	rec   *events.Recorder
	id    string
	graph string
	st    *runtime.SessionState
	// ctx is the session's own context, on which idle timers run: a
	// cancelled turn leaves them be.
	ctx   workflow.Context
	lives map[string]*Life
	// names are the agents of lives, in order (workflow code does not
	// range over maps).
	names []string
	// lent are the leases out on loan to the running turn's agents, as
	// they were lent.
	lent map[string]runtime.SandboxLease
	// hosts are the sandbox stores the session took as gone, shared by
	// its Lives: a host found gone by one sandbox is sent nothing more
	// for the others.
	hosts Hosts
}

// NewKeeper returns the keeper of the sandboxes of session id (of graph),
// whose state st holds the leases it carried; ctx is the session's own
// context, on which idle timers run. The idle timers of the live
// sandboxes start again.
func NewKeeper(ctx workflow.Context, set Settings, rec *events.Recorder, id, graph string, st *runtime.SessionState) *Keeper {
	b := &Keeper{set: set, rec: rec, id: id, graph: graph, st: st, ctx: ctx, lives: map[string]*Life{}, lent: map[string]runtime.SandboxLease{}}
	for _, al := range st.Leases {
		l := b.life(al.Agent)
		*l.lease = al.Lease
		if l.lease.Live() {
			l.touch(ctx) // The idle timer starts again after continue-as-new.
		}
	}
	return b
}

// life is agent's Life, made with a new lease if it has none.
func (b *Keeper) life(agent string) *Life {
	l, ok := b.lives[agent]
	if !ok {
		l = NewLife(b.set, b.rec, b.graph, agent, b.id, agents.RunContext{WorkflowID: b.id, RunID: b.id, Agent: agent})
		l.owner, l.hosts = b.id, &b.hosts
		b.lives[agent] = l
		i, _ := slices.BinarySearch(b.names, agent)
		b.names = slices.Insert(b.names, i, agent)
	}
	return l
}

// agents are the agents with a lease, in order.
func (b *Keeper) agents() []string { return slices.Clone(b.names) }

// Lend takes agent's lease from the session for the agent workflow that
// answers: its idle timer stops, and a suspension under way finishes
// first.
func (b *Keeper) Lend(ctx workflow.Context, agent string) (*troupe.SessionLink, error) {
	if ctx.Err() != nil {
		return nil, temporal.NewCanceledError() // The turn is over: nothing to lend to.
	}
	l := b.life(agent)
	if err := l.Hold(ctx); err != nil {
		return nil, err
	}
	lease := *l.lease
	b.lent[agent] = lease
	return &troupe.SessionLink{ID: b.id, Lease: &lease, Backend: b.st.Backend}, nil
}

// Unlend takes agent's lease back as it was lent: the agent workflow it
// was lent to never started.
func (b *Keeper) Unlend(agent string) {
	lent, ok := b.lent[agent]
	if !ok {
		return
	}
	delete(b.lent, agent)
	l := b.life(agent)
	*l.lease = lent
	if l.lease.Live() {
		l.touch(b.ctx)
	}
}

// Back takes agent's lease back: as the agent gave it, at its end or with
// its failure (a live sandbox's idle timer starts in the session), or,
// when the agent ended without giving it (it was cancelled, or failed on
// code from before versionKeepFailedWorkspace, and stopped its sandbox),
// as it was lent, forfeited: the next command restores the last snapshot
// the session knows. A sandbox the agent made on a store the session took
// as gone tells the session that store's host is back (versionHostBack).
func (b *Keeper) Back(ctx workflow.Context, agent string, given *runtime.SandboxLease) {
	lent, ok := b.lent[agent]
	if !ok {
		return
	}
	delete(b.lent, agent)
	l := b.life(agent)
	if given == nil {
		lent.Forfeit()
		*l.lease = lent
		return
	}
	*l.lease = *given
	if l.lease.Live() {
		if l.lease.Generation != lent.Generation {
			// The agent made the sandbox: on a store the session took as
			// gone, its host is back (restarted on the same disk), and
			// the session's snapshots and stops go there again.
			b.hosts.takeBack(ctx, l.lease.Sandbox.Queue)
		}
		l.touch(b.ctx)
	}
}

// Leases are the leases the session holds now, by agent.
func (b *Keeper) Leases() map[string]runtime.SandboxLease {
	out := map[string]runtime.SandboxLease{}
	for _, a := range b.names {
		out[a] = *b.lives[a].lease
	}
	return out
}

// Restore undoes a rolled-back turn's effect on the workspaces: each
// sandbox given back live during the turn is stopped, and each lease goes
// back to where it stood at the turn's start, forfeited, so the next
// command restores the turn's starting snapshot.
func (b *Keeper) Restore(ctx workflow.Context, start map[string]runtime.SandboxLease) {
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	for _, a := range b.agents() {
		l := b.lives[a]
		was, had := start[a]
		if had && sameLease(*l.lease, was) {
			continue // Untouched by the turn.
		}
		_ = l.Hold(dctx)
		l.stopNow(dctx, troupe.EventSandboxStopped)
		if !had {
			was = *runtime.NewSandboxLease()
		}
		gen := l.lease.Generation
		was.Forfeit()
		was.Generation = max(was.Generation, gen)
		*l.lease = was
	}
}

// SuspendAll suspends, in the background, each live sandbox the session
// holds (a paused session's, on code from before
// versionSnapshotBeforeStop: SuspendEach since): snapshot, then stop; the
// next command restores it.
func (b *Keeper) SuspendAll() {
	for _, a := range b.agents() {
		l := b.lives[a]
		if _, out := b.lent[a]; out || !l.lease.Live() {
			continue
		}
		workflow.Go(b.ctx, func(gctx workflow.Context) { _ = l.Suspend(gctx, "pause") })
	}
}

// SuspendEach suspends each live sandbox the session holds and has not
// lent to a running turn (whose agent suspends it if need be), for what
// (a pause, a switch), and waits for it: the workspaces are then in their
// snapshots only. It stops at the first snapshot that fails, with
// troupe.ErrSnapshotFailed: that sandbox stays up with its files, its
// idle timer running again, and those not yet suspended stay as they
// were.
func (b *Keeper) SuspendEach(ctx workflow.Context, what string) error {
	for _, a := range b.agents() {
		l := b.lives[a]
		if _, out := b.lent[a]; out {
			continue
		}
		if err := l.Suspend(ctx, what); err != nil {
			if l.lease.Live() && l.idleCancel == nil {
				l.touch(b.ctx)
			}
			return err
		}
	}
	return nil
}

// SnapshotEach takes a fresh snapshot of each live sandbox the session
// holds (they stay live), and returns the leases as they stand then.
func (b *Keeper) SnapshotEach(ctx workflow.Context) ([]runtime.AgentLease, error) {
	var out []runtime.AgentLease
	for _, a := range b.agents() {
		l := b.lives[a]
		if err := l.Hold(ctx); err != nil {
			return nil, err
		}
		if l.lease.Live() {
			if err := l.snapshotSafely(ctx); err != nil {
				if !l.isLost(err) {
					if !snapshotBeforeStop(ctx) {
						return nil, err
					}
					// The sandbox goes on as it was, idle timer and all.
					l.touch(b.ctx)
					return nil, l.snapshotFailed(ctx, "fork", err, "no fork was made")
				}
				l.lost(ctx, err) // The fork restores the last snapshot.
			} else {
				l.touch(b.ctx)
			}
		}
		out = append(out, runtime.AgentLease{Agent: a, Lease: *l.lease})
	}
	return out, nil
}

// Rearm starts the idle timers of the live sandboxes again, after a
// settle that did not end in continue-as-new.
func (b *Keeper) Rearm() {
	for _, a := range b.agents() {
		if l := b.lives[a]; l.lease.Live() && l.idleCancel == nil {
			l.touch(b.ctx)
		}
	}
}

// Settle readies the leases to be carried through continue-as-new: idle
// timers stop, suspensions under way finish, and the state holds a copy.
func (b *Keeper) Settle(ctx workflow.Context) error {
	for _, a := range b.agents() {
		l := b.lives[a]
		if err := l.Hold(ctx); err != nil {
			return err
		}
		b.st.SetLease(a, *l.lease)
	}
	return nil
}

// StopAll stops every sandbox the session keeps, when it ends.
func (b *Keeper) StopAll(ctx workflow.Context) {
	for _, a := range b.agents() {
		l := b.lives[a]
		l.End(ctx)
		b.st.SetLease(a, *l.lease)
	}
}

// Describe is the sandboxes as the session's query shows them.
func (b *Keeper) Describe() []troupe.SessionSandbox {
	var out []troupe.SessionSandbox
	for _, a := range b.agents() {
		l := b.lives[a].lease
		sb := troupe.SessionSandbox{Agent: a, State: l.State, Snapshot: l.Snapshot}
		_, sb.Lent = b.lent[a]
		if l.Sandbox != nil {
			sb.Backend, sb.ID = l.Sandbox.State.Backend, l.Sandbox.State.ID
		}
		out = append(out, sb)
	}
	return out
}

// sameLease reports whether two leases hold the same sandbox and snapshot.
func sameLease(a, b runtime.SandboxLease) bool {
	id := func(l runtime.SandboxLease) string {
		if l.Sandbox == nil {
			return ""
		}
		return l.Sandbox.State.ID
	}
	return a.State == b.State && a.Snapshot == b.Snapshot && a.Generation == b.Generation && id(a) == id(b)
}

// versionKeepFailedWorkspace: a session's agent that fails gives its
// sandbox back to the session as the failure left it, instead of stopping
// it (after which the session restored the snapshot it had lent, losing
// what the failed turn wrote).
const versionKeepFailedWorkspace = "troupe.keep-failed-workspace"

// KeepsFailedWorkspace reports whether an agent that ends with err gives
// its session's sandbox back (Life.Release): it failed (a cancelled
// turn's workspaces go back to the turn's start, or the session is
// stopping), and the run started on code that does so.
func KeepsFailedWorkspace(ctx workflow.Context, err error) bool {
	if err == nil || temporal.IsCanceledError(err) || ctx.Err() != nil {
		return false
	}
	return workflow.GetVersion(ctx, versionKeepFailedWorkspace, workflow.DefaultVersion, 1) == 1
}
