package lease

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/workflows/events"
)

// Settings are the worker's settings that a sandbox's life goes by. They
// are read, not recorded: timeouts are not part of the commands replay
// checks. Every field's zero value works.
type Settings struct {
	// HostTimeout is how long a sandbox activity waits for its host
	// (schedule-to-start, and heartbeats) before the sandbox is taken as
	// lost and re-provisioned elsewhere; the default is 30 seconds.
	HostTimeout time.Duration
	// IdleTimeout is how long an unused sandbox stays up before it is
	// suspended (snapshot, then stop); the default is 5 minutes.
	IdleTimeout time.Duration
}

func (s Settings) hostTimeout() time.Duration {
	if s.HostTimeout <= 0 {
		return 30 * time.Second
	}
	return s.HostTimeout
}

func (s Settings) idleTimeout() time.Duration {
	if s.IdleTimeout <= 0 {
		return 5 * time.Minute
	}
	return s.IdleTimeout
}

// Life is the workflow side of an agent's sandbox: provisioned when first
// needed, snapshotted after each turn that used it, suspended when idle,
// re-provisioned from the last snapshot when lost, stopped at the end (see
// the package doc). Where the sandbox stands is its lease
// (runtime.SandboxLease), plain data whose transitions refuse what its
// state does not allow; Life carries out the effects that lead to them.
// A Life belongs to one workflow: its methods are workflow code.
type Life struct {
	set        Settings
	rec        *events.Recorder
	graph      string
	agent      string
	wfID       string
	run        agents.RunContext
	lease      *runtime.SandboxLease
	idleCancel workflow.CancelFunc
	// idleFailures counts the idle suspensions in a row whose snapshot
	// failed (idleRetry).
	idleFailures int
	// owner is the session that owns the sandbox across turns, if any;
	// backend the backend it chose, if any.
	owner, backend string
	// hosts are the sandbox stores the workflow took as gone: nothing
	// more is sent there (hostgone.go).
	hosts *Hosts
}

// NewLife returns the life of the sandbox of agent (of graph) in its
// workflow wfID and run, with a new lease: nothing is provisioned until
// Ensure. Events go to rec.
func NewLife(set Settings, rec *events.Recorder, graph, agent, wfID string, run agents.RunContext) *Life {
	return &Life{set: set, rec: rec, graph: graph, agent: agent, wfID: wfID, run: run, lease: runtime.NewSandboxLease(), hosts: &Hosts{}}
}

// KeptBy marks the sandbox as kept by the session owner across its turns
// (its labels name the session, so the reaper keeps it while the session
// is open), on backend when set (a session that switched backend).
func (s *Life) KeptBy(owner, backend string) {
	s.owner, s.backend = owner, backend
}

// On has the sandbox provisioned on backend when set, over the agent's
// own: an agent started under a session's turn after the session
// switched backend.
func (s *Life) On(backend string) {
	s.backend = backend
}

// Take takes up lease l, a session's or the one a previous run of the
// workflow carried: the Life holds it (and changes it in place), and an
// idle sandbox's idle timer starts again.
func (s *Life) Take(ctx workflow.Context, l *runtime.SandboxLease) {
	s.lease = l
	if l.State == runtime.LeaseIdle {
		s.touch(ctx)
	}
}

// Lease is the lease the Life holds, as it stands; the Life changes it in
// place.
func (s *Life) Lease() *runtime.SandboxLease { return s.lease }

// Guidance is the blob key of the guidance of the agent's workspace, if
// any: what the model activity adds to the instructions. A nil Life has
// none.
func (s *Life) Guidance() string {
	if s == nil || s.lease == nil {
		return ""
	}
	return s.lease.Guidance
}

// leaseErr is a lease transition refused: a bug in this package, never
// the model's doing.
func leaseErr(err error) error {
	return troupe.NonRetryable(troupe.ErrInternal, "%v", err)
}

// Ensure makes the sandbox live: it waits for a suspension under way, and
// provisions the sandbox (restoring the last snapshot, if any) unless it
// is live.
func (s *Life) Ensure(ctx workflow.Context) error {
	if err := workflow.Await(ctx, func() bool { return s.lease.State != runtime.LeaseSuspending }); err != nil {
		return err
	}
	if s.lease.Live() {
		why, gone := s.hosts.Gone(s.lease.Sandbox.Queue)
		if !gone {
			return nil
		}
		// Its host is gone: restore it elsewhere now, rather than send
		// the turn's calls there.
		s.lost(ctx, hostGoneErr(s.lease.Sandbox.Queue, why))
	}
	generation, snapshot, err := s.lease.Provision()
	if err != nil {
		return leaseErr(err)
	}
	// The activity heartbeats: a worker killed mid-create is noticed within
	// HostTimeout and the create retried (a retry on the dead attempt's
	// host replaces what it left; elsewhere, a reaper removes that once
	// the workflow closes; see the package doc). StartToClose only bounds
	// a live worker's create, so it is generous, for big manifests and
	// restores.
	summary := "create the sandbox"
	if snapshot != "" {
		summary = "restore the sandbox from its last snapshot"
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		Summary:             summary,
		StartToCloseTimeout: 30 * time.Minute,
		HeartbeatTimeout:    s.set.hostTimeout(),
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	var info SandboxInfo
	in := SandboxCreateInput{Graph: s.graph, Agent: s.agent, WorkflowID: s.wfID, Generation: generation, Run: s.run, Snapshot: snapshot, Owner: s.owner, Backend: s.backend}
	if err := workflow.ExecuteActivity(actx, SandboxCreateActivityName, in).Get(ctx, &info); err != nil {
		_ = s.lease.ProvisionFailed()
		return err
	}
	if err := s.lease.Provisioned(runtime.LeasedSandbox{State: info.State, Queue: info.Queue}); err != nil {
		return leaseErr(err)
	}
	s.lease.Guidance = info.Guidance
	kind, detail := troupe.EventSandboxProvisioned, troupe.BackendLabel(info.State.Backend)+" sandbox on "+info.State.Host
	if len(info.NotInForce) > 0 {
		detail += " (limits not in force: " + strings.Join(info.NotInForce, "; ") + ")"
	}
	if snapshot != "" {
		kind, detail = troupe.EventSandboxRestored, detail+" from "+snapshot
	}
	if why, back := s.hosts.takeBack(ctx, info.Queue); back {
		// Calls go there again.
		detail += " (its host, taken as gone when " + why + ", is back)"
	}
	s.rec.Add(ctx, troupe.Event{Kind: kind, Agent: s.agent, Detail: detail})
	return nil
}

// hostCtx routes an activity to the store holding the sandbox sb; a host
// that is gone shows as a schedule-to-start timeout.
func (s *Life) hostCtx(ctx workflow.Context, sb runtime.LeasedSandbox, timeout time.Duration, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		Summary:                summary,
		TaskQueue:              sb.Queue,
		ScheduleToStartTimeout: s.set.hostTimeout(),
		HeartbeatTimeout:       s.set.hostTimeout(),
		StartToCloseTimeout:    timeout,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
	})
}

// Call runs a sandbox tool on the live sandbox, within timeout, its
// activity summed up as summary. A call whose worker died (its heartbeats
// stopped) while the host lives runs again, on the same workspace, which
// the host's next worker takes up (Client.Resume): at least once, as any
// activity (twice more at most). A lost sandbox or host becomes a tool
// error the model sees, and the next call re-provisions from the last
// snapshot. The future holds the call's output item.
func (s *Life) Call(ctx workflow.Context, ti troupe.ToolInput, timeout time.Duration, summary string) workflow.Future {
	f, set := workflow.NewFuture(ctx)
	if !s.lease.Live() || s.lease.CallStarted() != nil {
		set.Set(agents.FunctionCallOutput(ti.Call.CallID, "Error: the sandbox is not available"), nil)
		return f
	}
	sb := *s.lease.Sandbox
	call := ti.Call.Name + " " + ti.Call.CallID
	s.lease.CallMade(call)
	in := SandboxToolInput{Tool: ti, Sandbox: sb.State}
	var inner workflow.Future
	if why, gone := s.hosts.Gone(sb.Queue); gone {
		// Another call of the turn found the host gone: this one is not
		// sent there.
		f, set := workflow.NewFuture(ctx)
		set.Set(nil, hostGoneErr(sb.Queue, why))
		inner = f
	} else {
		inner = workflow.ExecuteActivity(s.hostCtx(ctx, sb, timeout, summary), SandboxToolActivityName, in)
	}
	workflow.Go(ctx, func(gctx workflow.Context) {
		defer func() { _ = s.lease.CallEnded() }()
		var item agents.Item
		run := func() error {
			return workflow.ExecuteActivity(s.hostCtx(gctx, sb, timeout, summary), SandboxToolActivityName, in).Get(gctx, &item)
		}
		err := s.reroute(gctx, &sb, inner.Get(gctx, &item), run)
		err = s.again(gctx, versionCallRetry, err, func(error) troupe.Event {
			return troupe.Event{Kind: troupe.EventSandboxCallRetry, Agent: s.agent, Turn: ti.Run.Turn, Tool: ti.Call.Name, CallID: ti.Call.CallID,
				Detail: "the worker running " + ti.Call.Name + " stopped answering; running it again on the same workspace"}
		}, run)
		switch {
		case err != nil && s.isLost(err):
			s.lost(gctx, err)
			// The call's output says what was lost.
			text := lostNote(s.lease, call)
			item = agents.FunctionCallOutput(ti.Call.CallID, text)
			item.Agent, err = ti.Agent, nil
		case err == nil && s.lease.Notice != "" && item.OutputRef == "":
			item.Output, s.lease.Notice = s.lease.Notice+item.Output, ""
		}
		set.Set(item, err)
	})
	return f
}

func (s *Life) isLost(err error) bool {
	if t := troupe.ErrorType(err); t == troupe.ErrSandboxGone || t == troupe.ErrHostGone {
		return true
	}
	// The host is gone: nobody took the task (schedule-to-start), or the
	// worker that took it stopped heartbeating.
	var te *temporal.TimeoutError
	if !errors.As(err, &te) {
		return false
	}
	t := te.TimeoutType()
	return t == enums.TIMEOUT_TYPE_SCHEDULE_TO_START || t == enums.TIMEOUT_TYPE_HEARTBEAT
}

func (s *Life) lost(ctx workflow.Context, err error) {
	if !s.lease.Live() {
		return
	}
	dead := *s.lease.Sandbox
	gone := s.hostGone(ctx, err)
	_ = s.lease.Lost()
	detail := err.Error()
	if gone {
		why, _ := s.hosts.Gone(dead.Queue)
		detail = "its host is gone (" + why + "): " + detail + "; what is left there is reaped when the host comes back"
	}
	// The model hears of it at its next call, unless the loss took
	// nothing (no call since the last snapshot); a call lost with the
	// sandbox (one is running) says it itself instead.
	if len(s.lease.Unsaved) > 0 {
		if s.lease.Calls == 0 {
			s.lease.Notice = lostNote(s.lease, "")
		}
		detail += "; lost since the last snapshot: " + strings.Join(s.lease.Unsaved, ", ")
	} else {
		detail += "; nothing lost since the last snapshot"
	}
	s.rec.Add(ctx, troupe.Event{Kind: troupe.EventSandboxLost, Agent: s.agent, Detail: detail})
	if gone {
		return // Nothing more goes to a host that is gone.
	}
	// The host is there but the sandbox died, or the worker that ran the
	// call died (its heartbeats stopped) and the host may have another:
	// clear what is left of the sandbox (a container, its workspace) on
	// its host.
	if troupe.ErrorType(err) == troupe.ErrSandboxGone || heartbeatTimeout(err) && workflow.GetVersion(ctx, versionClearLostSandbox, workflow.DefaultVersion, 1) == 1 {
		_ = workflow.ExecuteActivity(s.hostCtx(ctx, dead, time.Minute, "clear the lost sandbox"), SandboxStopActivityName, dead.State).Get(ctx, nil)
	}
}

// versionClearLostSandbox marks the change to agents that clear a sandbox
// lost with its worker (a heartbeat timeout) from its host, as they
// always cleared one that died. The marker is written only then.
const versionClearLostSandbox = "troupe.clear-lost-sandbox"

// AfterTurn snapshots the workspace after a turn that used it and
// restarts the idle timer. A snapshot that fails (and did not lose the
// sandbox) leaves the sandbox up with its files, is an event, and the
// idle timer starts all the same: its suspension takes the snapshot
// again.
func (s *Life) AfterTurn(ctx workflow.Context) {
	if !s.lease.Live() {
		return
	}
	if err := s.snapshotSafely(ctx); err != nil {
		if s.isLost(err) {
			s.lost(ctx, err)
			return
		}
		if !snapshotBeforeStop(ctx) {
			return
		}
		_ = s.snapshotFailed(ctx, "after the turn", err, "it is taken again when the sandbox idles, or at the next turn's end")
	}
	s.touch(ctx)
}

// versionSnapshotBeforeStop marks the change to agents and sessions that
// stop, suspend, switch or fork no sandbox without a good snapshot of its
// current state: a snapshot that fails keeps the sandbox up, is an event
// (troupe.EventSandboxSnapshotFailed), fails the command that needed it
// (troupe.ErrSnapshotFailed) and, for an idle suspension, is tried again
// later. Before, the last snapshot stood and the sandbox was stopped,
// losing what changed since. The marker is written when a snapshot fails,
// and when a session pauses (the pause now waits for its suspensions).
const versionSnapshotBeforeStop = "troupe.snapshot-before-stop"

// snapshotBeforeStop reports whether the workflow runs on code that keeps
// a sandbox whose snapshot failed (versionSnapshotBeforeStop).
func snapshotBeforeStop(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, versionSnapshotBeforeStop, workflow.DefaultVersion, 1) == 1
}

// SnapshotBeforeStop is snapshotBeforeStop for the session's commands.
func SnapshotBeforeStop(ctx workflow.Context) bool { return snapshotBeforeStop(ctx) }

// snapshotFailed records that the snapshot the sandbox needed for what
// (an idle suspension, a pause...) failed with err, and that the sandbox
// stays up; then says what happens next. It returns the error a command
// that needed the snapshot fails with.
func (s *Life) snapshotFailed(ctx workflow.Context, what string, err error, next string) error {
	why := strings.TrimPrefix(troupe.FailureText(err), troupe.ErrSnapshotFailed+": ")
	last := "it has no good snapshot yet"
	if s.lease.Snapshot != "" {
		last = "its last good snapshot is " + s.lease.Snapshot
	}
	msg := fmt.Sprintf("%s: the snapshot of %s's sandbox failed, so the sandbox stays up with its files (%s): %s. %s",
		what, s.agent, last, why, snapshotAdvice(err))
	s.rec.Add(ctx, troupe.Event{Kind: troupe.EventSandboxSnapshotFailed, Agent: s.agent, Detail: msg + "; " + next})
	return troupe.NonRetryable(troupe.ErrSnapshotFailed, "%s", msg)
}

// snapshotAdvice is what a user can do about the snapshot failure err.
func snapshotAdvice(err error) string {
	if troupe.ErrorType(err) == troupe.ErrSnapshotFailed {
		// The snapshot refused a file of the workspace: the activity's
		// message names it and says why.
		return "Delete that file (or copy it dense, or move it out of the workspace), then try again"
	}
	return "Mend the cause (free space on the worker's spool directory, check the blob store), then try again"
}

// snapshotSafely archives the live sandbox as snapshotNow does, and takes
// the snapshot again (twice at most) when the worker that took it died
// (its heartbeats stopped): the sandbox may well be alive on its host,
// which another worker serves, and a sandbox taken for lost would lose
// the work since its last snapshot. A host that is gone does not take the
// retry (schedule-to-start), and the sandbox is lost then.
func (s *Life) snapshotSafely(ctx workflow.Context) error {
	return s.again(ctx, versionSnapshotRetry, s.snapshotNow(ctx), func(err error) troupe.Event {
		return troupe.Event{Kind: troupe.EventSandboxSnapshotRetry, Agent: s.agent, Detail: "the worker taking the snapshot stopped answering; taking it again: " + err.Error()}
	}, func() error { return s.snapshotNow(ctx) })
}

// again runs do again, twice more at most, while err (do's last error)
// says that the worker running it died (its heartbeats stopped) and the
// sandbox is live: the sandbox may well be alive on its host, which the
// host's next worker takes up. Each time it first records the event that
// event makes of err. The change that does so is version, asked only
// then; histories from before it end with err.
func (s *Life) again(ctx workflow.Context, version string, err error, event func(error) troupe.Event, do func() error) error {
	for attempt := 1; err != nil && attempt < 3 && heartbeatTimeout(err) && s.lease.Live(); attempt++ {
		if workflow.GetVersion(ctx, version, workflow.DefaultVersion, 1) != 1 {
			break
		}
		if s.hostGone(ctx, err) {
			break // Nobody is there to run it again.
		}
		s.rec.Add(ctx, event(err))
		err = do()
	}
	return err
}

// versionCallRetry marks the change to agents that run a sandbox tool
// call again on the same workspace when the worker running it died,
// rather than take the sandbox for lost. The marker is written only then.
const versionCallRetry = "troupe.sandbox-call-retry"

// versionSnapshotRetry marks the change to agents and sessions that take
// a snapshot again when its worker died, rather than lose the sandbox.
// The marker is written only then.
const versionSnapshotRetry = "troupe.snapshot-retry"

// versionStopRetry marks the change to agents and sessions that stop a
// sandbox again when the worker stopping it died, rather than record the
// stop as failed and leave the workspace on its host. The marker is
// written only then.
const versionStopRetry = "troupe.sandbox-stop-retry"

// heartbeatTimeout reports whether err is an activity whose worker
// stopped heartbeating.
func heartbeatTimeout(err error) bool {
	var te *temporal.TimeoutError
	return errors.As(err, &te) && te.TimeoutType() == enums.TIMEOUT_TYPE_HEARTBEAT
}

// snapshotNow archives the live sandbox; on success the archive is the
// one a re-provisioned sandbox starts from.
func (s *Life) snapshotNow(ctx workflow.Context) error {
	sb := *s.lease.Sandbox
	if why, gone := s.hosts.Gone(sb.Queue); gone {
		return hostGoneErr(sb.Queue, why)
	}
	var key string
	snapshot := func() error {
		return workflow.ExecuteActivity(s.hostCtx(ctx, sb, 10*time.Minute, "snapshot the sandbox"), SandboxSnapshotActivityName, sb.State).Get(ctx, &key)
	}
	if err := s.reroute(ctx, &sb, snapshot(), snapshot); err != nil {
		return err
	}
	if s.lease.Live() {
		_ = s.lease.Snapshotted(key)
	}
	return nil
}

// touch starts the idle spell: when the idle timer fires with no call
// running, the sandbox is suspended (snapshot, then stop) until the next
// call.
func (s *Life) touch(ctx workflow.Context) {
	s.idleFailures = 0
	s.arm(ctx, s.set.idleTimeout())
}

// arm starts the idle timer, to fire after d. A suspension whose
// snapshot fails leaves the sandbox up and arms the timer again, a
// little later each time (idleRetry).
func (s *Life) arm(ctx workflow.Context, d time.Duration) {
	if s.idleCancel != nil {
		s.idleCancel()
	}
	_ = s.lease.Idle()
	tctx, cancel := workflow.WithCancel(ctx)
	s.idleCancel = cancel
	workflow.Go(tctx, func(gctx workflow.Context) {
		if err := workflow.NewTimer(gctx, d).Get(gctx, nil); err != nil {
			return // cancelled by a newer touch or the end of the agent
		}
		if !s.lease.Suspend() {
			return
		}
		// Block on this coroutine's own context, and let no newer touch
		// cancel a suspend under way.
		sctx, cancel := workflow.NewDisconnectedContext(gctx)
		defer cancel()
		if err := s.suspendNow(sctx); err != nil {
			s.idleFailures++
			again := s.idleRetry()
			_ = s.snapshotFailed(sctx, "idle suspension", err, "suspension is tried again in "+again.String())
			s.arm(ctx, again)
		}
	})
}

// idleRetry is how long an idle sandbox whose suspension failed
// idleFailures times in a row waits before the next try: the idle
// timeout, doubled at each failure up to an hour (or the idle timeout,
// if longer), so a sandbox left so for days adds little to its history.
func (s *Life) idleRetry() time.Duration {
	d, most := s.set.idleTimeout(), max(s.set.idleTimeout(), time.Hour)
	for i := 1; i < s.idleFailures && d < most; i++ {
		d *= 2
	}
	return min(d, most)
}

// suspendNow suspends the sandbox, in suspending: snapshot, then stop. A
// snapshot that fails, on code from versionSnapshotBeforeStop on, stops
// nothing: the sandbox stays up, idle, and the error comes back (unless
// the sandbox was lost taking it: the lease is lost then, and nothing
// else can be done). Before, the last snapshot stood and the sandbox was
// stopped.
func (s *Life) suspendNow(ctx workflow.Context) error {
	if err := s.snapshotSafely(ctx); err != nil && snapshotBeforeStop(ctx) {
		if s.isLost(err) {
			s.lost(ctx, err)
			return nil
		}
		if ferr := s.lease.SuspendFailed(); ferr != nil {
			return leaseErr(ferr)
		}
		return err
	}
	s.stopNow(ctx, troupe.EventSandboxSuspended)
	return nil
}

// stopNow stops the live sandbox, if any: the lease is then suspended (if
// it was suspending) or stopped.
func (s *Life) stopNow(ctx workflow.Context, kind string) {
	if !s.lease.Live() {
		return
	}
	sb := *s.lease.Sandbox
	if why, gone := s.hosts.Gone(sb.Queue); gone {
		// Not sent, nor waited for: its host's reaper removes it when the
		// host comes back (KeepOwned).
		_ = s.lease.Stopped()
		s.rec.Add(ctx, troupe.Event{Kind: kind, Agent: s.agent, Detail: sb.State.Backend + " sandbox " + sb.State.ID +
			" (not stopped: its host is gone (" + why + "); its reaper removes it when the host comes back)"})
		return
	}
	stop := func() error {
		return workflow.ExecuteActivity(s.hostCtx(ctx, sb, 5*time.Minute, "stop the sandbox"), SandboxStopActivityName, sb.State).Get(ctx, nil)
	}
	// A stop whose worker died goes again on the host's next worker, as a
	// call and a snapshot do: given up, it would leave the workspace (its
	// disk, its mount, its container) on the host until a reaper found it.
	err := s.again(ctx, versionStopRetry, s.reroute(ctx, &sb, stop(), stop), func(err error) troupe.Event {
		return troupe.Event{Kind: troupe.EventSandboxStopRetry, Agent: s.agent, Detail: "the worker stopping the sandbox stopped answering; stopping it again: " + err.Error()}
	}, stop)
	detail := sb.State.Backend + " sandbox " + sb.State.ID
	if err != nil {
		detail += " (stop failed: " + err.Error() + ")"
	}
	if s.lease.Live() {
		_ = s.lease.Stopped()
	}
	s.rec.Add(ctx, troupe.Event{Kind: kind, Agent: s.agent, Detail: detail})
}

// End stops the sandbox when the agent ends, however it ends: it runs on
// a disconnected context so a cancelled workflow still cleans up.
func (s *Life) End(ctx workflow.Context) {
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	_ = s.Hold(dctx)
	s.stopNow(dctx, troupe.EventSandboxStopped)
	_ = s.lease.End()
}

// Release lets go of the sandbox when the agent ends and a session keeps
// it: the idle timer stops and a suspension under way finishes; the lease
// goes back to the session as it stands, the sandbox live or suspended.
func (s *Life) Release(ctx workflow.Context) *runtime.SandboxLease {
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	_ = s.Hold(dctx)
	l := *s.lease
	return &l
}

// Suspend suspends the live sandbox at once (snapshot, then stop),
// unless a call runs on it; the next command restores it. A paused
// session's agents and sandboxes are suspended so, and a session's
// before it switches backend (what names the command that needs it).
//
// A snapshot that fails stops nothing: the sandbox stays up, idle, with
// its files and no idle timer (the caller decides), the failure is an
// event, and Suspend fails with troupe.ErrSnapshotFailed.
func (s *Life) Suspend(ctx workflow.Context, what string) error {
	if err := s.Hold(ctx); err != nil {
		return err
	}
	if !s.lease.Suspend() {
		return nil
	}
	if err := s.suspendNow(ctx); err != nil {
		if troupe.ErrorType(err) == troupe.ErrInternal {
			return err
		}
		return s.snapshotFailed(ctx, what, err, "nothing was stopped")
	}
	return nil
}

// Hold stops the idle timer and waits for a suspension under way to
// finish, so that the lease stands still (before it is carried through
// continue-as-new, say).
func (s *Life) Hold(ctx workflow.Context) error {
	if s.idleCancel != nil {
		s.idleCancel()
		s.idleCancel = nil
	}
	return workflow.Await(ctx, func() bool { return s.lease.State != runtime.LeaseSuspending })
}
