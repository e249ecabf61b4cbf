package workflows

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/capabilities"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/workflows/events"
)

// SandboxCreateInput is the sandbox-create activity's input.
type SandboxCreateInput struct {
	Graph      string `json:"graph"`
	Agent      string `json:"agent"`
	WorkflowID string `json:"workflow_id"`
	// Generation counts the sandboxes this workflow provisioned, so a
	// re-provisioned sandbox never reuses a lost one's id.
	Generation int `json:"generation"`
	// Run is the agent's run context, for Sandbox.ManifestFor.
	Run agents.RunContext `json:"run"`
	// Snapshot, when set, is restored into the new workspace.
	Snapshot string `json:"snapshot,omitempty"`
	// Owner, when set, is the workflow that owns the sandbox beyond
	// WorkflowID's life (a session): its labels name it, so the reaper
	// keeps the sandbox while the owner is open.
	Owner string `json:"owner,omitempty"`
	// Backend, when set, is the backend to provision on, over the
	// agent's own (a session that switched backend).
	Backend string `json:"backend,omitempty"`
}

// SandboxInfo is a live sandbox: its state, and the task queue of the host
// that holds it.
type SandboxInfo struct {
	State sandbox.State `json:"state"`
	Queue string        `json:"queue"`
	// NotInForce lists the limits the backend cannot enforce on that host,
	// and why (sandbox.LimitReporter); the sandbox_provisioned event shows
	// them.
	NotInForce []string `json:"not_in_force,omitempty"`
	// Guidance is the blob key of the workspace's AGENTS.md as the model
	// sees it (capabilities.ReadGuidance), read once the workspace was
	// created (and restored); empty when it has none.
	Guidance string `json:"guidance,omitempty"`
}

// SandboxToolInput is the sandbox-tool activity's input.
type SandboxToolInput struct {
	Tool    troupe.ToolInput `json:"tool"`
	Sandbox sandbox.State    `json:"sandbox"`
}

// Activity names of a sandbox's life.
const (
	SandboxCreateActivityName   = "troupe.SandboxCreate"
	SandboxToolActivityName     = "troupe.SandboxTool"
	SandboxSnapshotActivityName = "troupe.SandboxSnapshot"
	SandboxStopActivityName     = "troupe.SandboxStop"
)

// sessions caches a worker's live sandbox sessions by id.
type sessions struct {
	mu   sync.Mutex
	live map[string]sandbox.Session
}

func (a *Activities) client(backend string) (sandbox.Client, error) {
	if backend == "" {
		backend = a.r.cfg.DefaultBackend
	}
	c, ok := a.r.cfg.Sandboxes[backend]
	if !ok {
		return nil, troupe.NonRetryable(troupe.ErrSandbox, "sandbox backend %q is not configured on this worker", backend)
	}
	return c, nil
}

// session returns the live session of state, resuming it if this worker
// process has not seen it yet.
func (a *Activities) session(ctx context.Context, st sandbox.State) (sandbox.Session, error) {
	a.sessions.mu.Lock()
	s, ok := a.sessions.live[st.ID]
	a.sessions.mu.Unlock()
	if ok {
		return s, nil
	}
	if err := a.r.checkStore(st); err != nil {
		return nil, err
	}
	c, err := a.client(st.Backend)
	if err != nil {
		return nil, err
	}
	s, err = c.Resume(ctx, st)
	if err != nil {
		return nil, sandboxErr(err)
	}
	a.remember(s)
	return s, nil
}

func (a *Activities) remember(s sandbox.Session) {
	a.sessions.mu.Lock()
	a.sessions.live[s.State().ID] = s
	a.sessions.mu.Unlock()
}

func (a *Activities) forget(id string) {
	a.sessions.mu.Lock()
	delete(a.sessions.live, id)
	a.sessions.mu.Unlock()
}

func sandboxErr(err error) error {
	switch {
	case errors.Is(err, sandbox.ErrGone):
		return temporal.NewNonRetryableApplicationError(err.Error(), troupe.ErrSandboxGone, err)
	case errors.Is(err, sandbox.ErrPathEscape), errors.Is(err, sandbox.ErrSourceNotAllowed):
		return temporal.NewNonRetryableApplicationError(err.Error(), troupe.ErrSandbox, err)
	}
	return err
}

var unsafeID = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// sandboxID makes a host-unique, file- and container-name-safe id.
func sandboxID(workflowID string, generation int) string {
	sum := sha256.Sum256([]byte(workflowID))
	base := unsafeID.ReplaceAllString(workflowID, "-")
	if len(base) > 40 {
		base = base[len(base)-40:]
	}
	return fmt.Sprintf("%s-%s-g%d", base, hex.EncodeToString(sum[:4]), generation)
}

// Manifest returns the sandbox agent's whole manifest for a run: its own,
// then what its ManifestFor computes, then each capability's additions.
func Manifest(ctx context.Context, a *agents.Agent, rc agents.RunContext) (sandbox.Manifest, error) {
	m := sandbox.Manifest{Env: map[string]string{}}
	add := func(more sandbox.Manifest) {
		m.Entries = append(m.Entries, more.Entries...)
		for k, v := range more.Env {
			m.Env[k] = v
		}
	}
	if a.Sandbox != nil {
		add(a.Sandbox.Manifest)
		if a.Sandbox.ManifestFor != nil {
			more, err := a.Sandbox.ManifestFor(ctx, rc)
			if err != nil {
				return m, fmt.Errorf("manifest of %s: %w", a.Name, err)
			}
			add(more)
		}
	}
	for _, c := range a.Capabilities {
		add(c.Manifest())
	}
	return m, nil
}

// SandboxCreate provisions the agent's sandbox on this worker's host, and
// restores a snapshot into it when asked.
func (a *Activities) SandboxCreate(ctx context.Context, in SandboxCreateInput) (*SandboxInfo, error) {
	_, agent, err := a.r.agent(in.Graph, in.Agent)
	if err != nil {
		return nil, err
	}
	if agent.Sandbox == nil {
		return nil, troupe.NonRetryable(troupe.ErrSandbox, "agent %s has no sandbox", agent.Name)
	}
	if activity.IsActivity(ctx) && !a.r.storeServed.Load() {
		return nil, troupe.NonRetryable(troupe.ErrStoreNotServed, "agent %s: this worker's sandbox store queue %s has no worker, so the sandbox's commands could reach none: "+
			"start the worker with Runner.StartWorkers (Runner.Register alone serves one queue), or serve %s with RegisterActivities", agent.Name, a.r.hostQueue, a.r.hostQueue)
	}
	c, err := a.client(cmp.Or(in.Backend, agent.Sandbox.Backend))
	if err != nil {
		return nil, err
	}
	// The manifest (ManifestFor may fetch), the workspace (git clones,
	// copies) and the restore can each take long: the activity heartbeats
	// throughout, so a dead worker is noticed within its HeartbeatTimeout.
	m, err := heartbeating(ctx, func() (sandbox.Manifest, error) { return Manifest(ctx, agent, in.Run) })
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), troupe.ErrSandbox, err)
	}
	spec := sandbox.Spec{
		ID: sandboxID(in.WorkflowID, in.Generation), Manifest: m, Options: agent.Sandbox.Options,
		Labels: a.sandboxLabels(ctx, cmp.Or(in.Owner, in.WorkflowID), agent.Name),
	}
	// A retry after a worker died mid-create replaces what it left (the
	// sandbox.Client contract).
	s, err := heartbeating(ctx, func() (sandbox.Session, error) { return c.Create(ctx, spec) })
	if err != nil {
		return nil, sandboxErr(fmt.Errorf("create %s sandbox for %s: %w", c.Backend(), agent.Name, err))
	}
	if in.Snapshot != "" {
		if err := a.restore(ctx, s, in.Snapshot); err != nil {
			_ = s.Stop(context.WithoutCancel(ctx))
			return nil, fmt.Errorf("restore snapshot %s: %w", in.Snapshot, err)
		}
	}
	// Memory after any restore: the store's version is the one to see.
	if agent.Memory.Reads() {
		if _, err := heartbeating(ctx, func() (struct{}, error) {
			return struct{}{}, a.materialiseMemory(ctx, s, agent, memoryScopeOf(agent, in.Run))
		}); err != nil {
			_ = s.Stop(context.WithoutCancel(ctx))
			return nil, err
		}
	}
	guidance, err := a.saveGuidance(ctx, s, in.WorkflowID)
	if err != nil {
		_ = s.Stop(context.WithoutCancel(ctx))
		return nil, sandboxErr(err)
	}
	a.remember(s)
	info := &SandboxInfo{State: s.State(), Queue: a.r.hostQueue, Guidance: guidance}
	if r, ok := c.(sandbox.LimitReporter); ok {
		for _, l := range r.Enforced() {
			if !l.InForce() {
				info.NotInForce = append(info.NotInForce, l.Limit+": "+l.NotInForce)
			}
		}
	}
	return info, nil
}

// saveGuidance reads the workspace's AGENTS.md through its session and
// stores it, bounded, in the blob store (storeGuidance); it returns the
// key, or "" when the workspace has none.
func (a *Activities) saveGuidance(ctx context.Context, s sandbox.Session, workflowID string) (string, error) {
	text, err := capabilities.ReadGuidance(ctx, s)
	if err != nil || text == "" {
		return "", err
	}
	return a.storeGuidance(ctx, text, workflowID)
}

// SandboxTool runs a sandbox tool with the agent's session in its context.
// A sandbox that died before or during the call fails the activity with
// ErrSandboxGone, so the workflow re-provisions it.
func (a *Activities) SandboxTool(ctx context.Context, in SandboxToolInput) (agents.Item, error) {
	g, _, err := a.r.agent(in.Tool.Graph, in.Tool.Agent)
	if err != nil {
		return agents.Item{}, err
	}
	ref := g.Tool(in.Tool.Agent, in.Tool.Call.Name)
	if ref.Kind != agents.ToolFunction || !ref.Function.NeedsSandbox() {
		return in.Tool.Gone(), nil
	}
	s, err := a.session(ctx, in.Sandbox)
	if err != nil {
		return agents.Item{}, err
	}
	if err := s.Alive(ctx); err != nil {
		a.forget(in.Sandbox.ID)
		return agents.Item{}, sandboxErr(err)
	}
	sctx, span := startTool(ctx, in.Tool, callSandbox)
	tctx := sandbox.WithSession(agents.WithRunContext(sctx, in.Tool.Run), traceSession(sctx, s))
	output, _ := heartbeating(ctx, func() (string, error) { return ref.Function.Answer(tctx, in.Tool.Call.Arguments), nil })
	endTool(span, output)
	if err := s.Alive(ctx); err != nil {
		a.forget(in.Sandbox.ID)
		return agents.Item{}, sandboxErr(fmt.Errorf("the sandbox died during %s: %w", in.Tool.Call.Name, err))
	}
	item := agents.FunctionCallOutput(in.Tool.Call.CallID, output)
	item.Agent = in.Tool.Agent
	return runtime.Offload(ctx, a.r.cfg.Store, in.Tool.OutputKey, item)
}

// SandboxSnapshot archives the workspace into the blob store under its
// content hash and returns the key. First, for an agent whose memory is
// updated live, it writes the agent's edits of its memory files back to
// the memory scope (memory_workspace.go).
func (a *Activities) SandboxSnapshot(ctx context.Context, st sandbox.State) (string, error) {
	s, err := a.session(ctx, st)
	if err != nil {
		return "", err
	}
	// The agent's edits of its memory go back to the store first
	// (memory_workspace.go).
	if _, _, err := a.writeBackMemory(ctx, s); err != nil {
		return "", err
	}
	// The archive is spooled to a file, hashed on the way, then streamed
	// to the store: the worker holds none of it in memory.
	spool, err := a.spool("snapshot")
	if err != nil {
		return "", err
	}
	defer spool.Close()
	h := sha256.New()
	if _, err := heartbeating(ctx, func() (struct{}, error) {
		return struct{}{}, s.Snapshot(ctx, io.MultiWriter(spool, h))
	}); err != nil {
		return "", sandboxErr(err)
	}
	// Under the run's own prefix, so its data goes with it (retention.go).
	key := "snapshots/" + hex.EncodeToString(h.Sum(nil)) + ".tar.zst"
	if activity.IsActivity(ctx) {
		key = "snapshots/" + troupe.RunOf(activity.GetInfo(ctx).WorkflowExecution.ID) + "/" + hex.EncodeToString(h.Sum(nil)) + ".tar.zst"
	}
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	if _, err := heartbeating(ctx, func() (struct{}, error) {
		return struct{}{}, a.r.cfg.Store.PutFrom(ctx, key, spool)
	}); err != nil {
		return "", err
	}
	return key, nil
}

// spool returns a new file in Config.SpoolDir for an archive on its way
// to or from the store. It is unlinked at once: the open file is all there
// is of it, so a worker killed mid-transfer leaves nothing behind.
func (a *Activities) spool(what string) (*os.File, error) {
	f, err := os.CreateTemp(a.r.cfg.SpoolDir, "troupe-"+what+"-*")
	if err != nil {
		return nil, err
	}
	os.Remove(f.Name())
	return f, nil
}

// restore restores the snapshot under key into s, streaming it from the
// store through a spool file (Restore reads an archive twice).
func (a *Activities) restore(ctx context.Context, s sandbox.Session, key string) error {
	r, err := a.r.cfg.Store.Open(ctx, key)
	if err != nil {
		return err
	}
	defer r.Close()
	spool, err := a.spool("restore")
	if err != nil {
		return err
	}
	defer spool.Close()
	_, err = heartbeating(ctx, func() (struct{}, error) {
		if _, err := io.Copy(spool, r); err != nil {
			return struct{}{}, err
		}
		if _, err := spool.Seek(0, io.SeekStart); err != nil {
			return struct{}{}, err
		}
		return struct{}{}, s.Restore(ctx, spool)
	})
	return err
}

// SandboxStop stops the sandbox; a sandbox already gone is not an error.
func (a *Activities) SandboxStop(ctx context.Context, st sandbox.State) error {
	defer a.forget(st.ID)
	s, err := a.session(ctx, st)
	if err != nil {
		if troupe.ErrorType(err) == troupe.ErrSandboxGone {
			a.forgetMemory(ctx, st.ID)
			return nil
		}
		return err
	}
	if _, err = heartbeating(ctx, func() (struct{}, error) { return struct{}{}, s.Stop(ctx) }); err != nil {
		return err
	}
	a.forgetMemory(ctx, st.ID)
	return nil
}

// sandboxLife is the workflow side of an agent's sandbox: provisioned when
// first needed, snapshotted after each turn that used it, suspended when
// idle, re-provisioned from the last snapshot when lost, stopped at the end.
// Where the sandbox stands is its lease (runtime.SandboxLease), plain data
// whose transitions refuse what its state does not allow; sandboxLife
// carries out the effects that lead to them.
type sandboxLife struct {
	r          *Runner
	rec        *events.Recorder
	graph      string
	agent      string
	wfID       string
	run        agents.RunContext
	lease      *runtime.SandboxLease
	idleCancel workflow.CancelFunc
	// owner is the session that owns the sandbox across turns, if any;
	// backend the backend it chose, if any.
	owner, backend string
}

func newSandboxLife(r *Runner, rec *events.Recorder, graph, agent, wfID string, run agents.RunContext) *sandboxLife {
	return &sandboxLife{r: r, rec: rec, graph: graph, agent: agent, wfID: wfID, run: run, lease: runtime.NewSandboxLease()}
}

// guidance is the blob key of the guidance of the agent's workspace, if
// any: what the model activity adds to the instructions.
func (s *sandboxLife) guidance() string {
	if s == nil || s.lease == nil {
		return ""
	}
	return s.lease.Guidance
}

// leaseErr is a lease transition refused: a bug in this file, never the
// model's doing.
func leaseErr(err error) error {
	return troupe.NonRetryable(troupe.ErrInternal, "%v", err)
}

func (s *sandboxLife) ensure(ctx workflow.Context) error {
	if err := workflow.Await(ctx, func() bool { return s.lease.State != runtime.LeaseSuspending }); err != nil {
		return err
	}
	if s.lease.Live() {
		return nil
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
		HeartbeatTimeout:    s.r.cfg.HostTimeout,
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
	s.rec.Add(ctx, troupe.Event{Kind: kind, Agent: s.agent, Detail: detail})
	return nil
}

// hostCtx routes an activity to the store holding the sandbox sb; a host
// that is gone shows as a schedule-to-start timeout.
func (s *sandboxLife) hostCtx(ctx workflow.Context, sb runtime.LeasedSandbox, timeout time.Duration, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		Summary:                summary,
		TaskQueue:              sb.Queue,
		ScheduleToStartTimeout: s.r.cfg.HostTimeout,
		HeartbeatTimeout:       s.r.cfg.HostTimeout,
		StartToCloseTimeout:    timeout,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
	})
}

// call runs a sandbox tool; a lost sandbox or host becomes a tool error
// the model sees, and the next call re-provisions from the last snapshot.
func (s *sandboxLife) call(ctx workflow.Context, ti troupe.ToolInput, timeout time.Duration) workflow.Future {
	f, set := workflow.NewFuture(ctx)
	if !s.lease.Live() || s.lease.CallStarted() != nil {
		set.Set(agents.FunctionCallOutput(ti.Call.CallID, "Error: the sandbox is not available"), nil)
		return f
	}
	sb := *s.lease.Sandbox
	inner := workflow.ExecuteActivity(s.hostCtx(ctx, sb, timeout, callSummary(ti.Call)), SandboxToolActivityName, SandboxToolInput{Tool: ti, Sandbox: sb.State})
	workflow.Go(ctx, func(gctx workflow.Context) {
		defer func() { _ = s.lease.CallEnded() }()
		var item agents.Item
		err := inner.Get(gctx, &item)
		if err != nil && s.isLost(err) {
			s.lost(gctx, err)
			item = agents.FunctionCallOutput(ti.Call.CallID, "Error: the sandbox was lost while running this call; it will be restored from its last snapshot on the next call, so run the command again if its effect is needed.")
			item.Agent, err = ti.Agent, nil
		}
		set.Set(item, err)
	})
	return f
}

func (s *sandboxLife) isLost(err error) bool {
	if troupe.ErrorType(err) == troupe.ErrSandboxGone {
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

func (s *sandboxLife) lost(ctx workflow.Context, err error) {
	if !s.lease.Live() {
		return
	}
	dead := *s.lease.Sandbox
	_ = s.lease.Lost()
	s.rec.Add(ctx, troupe.Event{Kind: troupe.EventSandboxLost, Agent: s.agent, Detail: err.Error()})
	// The host is there but the sandbox died, or the worker that ran the
	// call died (its heartbeats stopped) and the host may have another:
	// clear what is left of the sandbox (a container, its workspace) on
	// its host. Best effort: a host that is gone does not take the stop
	// (schedule-to-start), and its orphans are reaped once the owner
	// closes, which for a session's sandbox may be weeks away.
	if troupe.ErrorType(err) == troupe.ErrSandboxGone || heartbeatTimeout(err) && workflow.GetVersion(ctx, versionClearLostSandbox, workflow.DefaultVersion, 1) == 1 {
		_ = workflow.ExecuteActivity(s.hostCtx(ctx, dead, time.Minute, "clear the lost sandbox"), SandboxStopActivityName, dead.State).Get(ctx, nil)
	}
}

// versionClearLostSandbox marks the change to agents that clear a sandbox
// lost with its worker (a heartbeat timeout) from its host, as they
// always cleared one that died. The marker is written only then.
const versionClearLostSandbox = "troupe.clear-lost-sandbox"

// afterTurn snapshots the workspace after a turn that used it and restarts
// the idle timer.
func (s *sandboxLife) afterTurn(ctx workflow.Context) {
	if !s.lease.Live() {
		return
	}
	if err := s.snapshotSafely(ctx); err != nil {
		if s.isLost(err) {
			s.lost(ctx, err)
		}
		return
	}
	s.touch(ctx)
}

// snapshotSafely archives the live sandbox as snapshotNow does, and takes
// the snapshot again (twice at most) when the worker that took it died
// (its heartbeats stopped): the sandbox may well be alive on its host,
// which another worker serves, and a sandbox taken for lost would lose
// the work since its last snapshot. A host that is gone does not take the
// retry (schedule-to-start), and the sandbox is lost then.
func (s *sandboxLife) snapshotSafely(ctx workflow.Context) error {
	err := s.snapshotNow(ctx)
	for attempt := 1; err != nil && attempt < 3 && heartbeatTimeout(err) && s.lease.Live(); attempt++ {
		if workflow.GetVersion(ctx, versionSnapshotRetry, workflow.DefaultVersion, 1) != 1 {
			break
		}
		s.rec.Add(ctx, troupe.Event{Kind: troupe.EventSandboxSnapshotRetry, Agent: s.agent, Detail: "the worker taking the snapshot stopped answering; taking it again: " + err.Error()})
		err = s.snapshotNow(ctx)
	}
	return err
}

// versionSnapshotRetry marks the change to agents and sessions that take
// a snapshot again when its worker died, rather than lose the sandbox.
// The marker is written only then.
const versionSnapshotRetry = "troupe.snapshot-retry"

// heartbeatTimeout reports whether err is an activity whose worker
// stopped heartbeating.
func heartbeatTimeout(err error) bool {
	var te *temporal.TimeoutError
	return errors.As(err, &te) && te.TimeoutType() == enums.TIMEOUT_TYPE_HEARTBEAT
}

// snapshotNow archives the live sandbox; on success the archive is the
// one a re-provisioned sandbox starts from.
func (s *sandboxLife) snapshotNow(ctx workflow.Context) error {
	sb := *s.lease.Sandbox
	var key string
	if err := workflow.ExecuteActivity(s.hostCtx(ctx, sb, 10*time.Minute, "snapshot the sandbox"), SandboxSnapshotActivityName, sb.State).Get(ctx, &key); err != nil {
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
func (s *sandboxLife) touch(ctx workflow.Context) {
	if s.idleCancel != nil {
		s.idleCancel()
	}
	_ = s.lease.Idle()
	tctx, cancel := workflow.WithCancel(ctx)
	s.idleCancel = cancel
	workflow.Go(tctx, func(gctx workflow.Context) {
		if err := workflow.NewTimer(gctx, s.r.cfg.SandboxIdleTimeout).Get(gctx, nil); err != nil {
			return // cancelled by a newer touch or the end of the agent
		}
		if !s.lease.Suspend() {
			return
		}
		// Block on this coroutine's own context, and let no newer touch
		// cancel a suspend under way.
		sctx, cancel := workflow.NewDisconnectedContext(gctx)
		defer cancel()
		_ = s.snapshotSafely(sctx) // on failure the last snapshot stands
		s.stopNow(sctx, troupe.EventSandboxSuspended)
	})
}

// stopNow stops the live sandbox, if any: the lease is then suspended (if
// it was suspending) or stopped.
func (s *sandboxLife) stopNow(ctx workflow.Context, kind string) {
	if !s.lease.Live() {
		return
	}
	sb := *s.lease.Sandbox
	err := workflow.ExecuteActivity(s.hostCtx(ctx, sb, 5*time.Minute, "stop the sandbox"), SandboxStopActivityName, sb.State).Get(ctx, nil)
	detail := sb.State.Backend + " sandbox " + sb.State.ID
	if err != nil {
		detail += " (stop failed: " + err.Error() + ")"
	}
	if s.lease.Live() {
		_ = s.lease.Stopped()
	}
	s.rec.Add(ctx, troupe.Event{Kind: kind, Agent: s.agent, Detail: detail})
}

// end stops the sandbox when the agent ends, however it ends: it runs on
// a disconnected context so a cancelled workflow still cleans up.
func (s *sandboxLife) end(ctx workflow.Context) {
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	_ = s.hold(dctx)
	s.stopNow(dctx, troupe.EventSandboxStopped)
	_ = s.lease.End()
}

// release lets go of the sandbox when the agent ends and a session keeps
// it: the idle timer stops and a suspension under way finishes; the lease
// goes back to the session as it stands, the sandbox live or suspended.
func (s *sandboxLife) release(ctx workflow.Context) *runtime.SandboxLease {
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	_ = s.hold(dctx)
	l := *s.lease
	return &l
}

// suspendNow suspends the live sandbox at once (snapshot, then stop),
// unless a call runs on it; the next command restores it.
func (s *sandboxLife) suspendNow(ctx workflow.Context) error {
	if err := s.hold(ctx); err != nil {
		return err
	}
	if !s.lease.Suspend() {
		return nil
	}
	_ = s.snapshotSafely(ctx) // On failure the last snapshot stands.
	s.stopNow(ctx, troupe.EventSandboxSuspended)
	return nil
}

// hold stops the idle timer and waits for a suspension under way to
// finish, so that the lease stands still.
func (s *sandboxLife) hold(ctx workflow.Context) error {
	if s.idleCancel != nil {
		s.idleCancel()
		s.idleCancel = nil
	}
	return workflow.Await(ctx, func() bool { return s.lease.State != runtime.LeaseSuspending })
}

// sandboxLabels are the labels of a new sandbox: its workflow and agent,
// and the workflow's cluster and namespace (see KeepOpen).
func (a *Activities) sandboxLabels(ctx context.Context, workflowID, agent string) map[string]string {
	labels := map[string]string{"troupe.workflow": workflowID, "troupe.agent": agent}
	if !activity.IsActivity(ctx) {
		return labels
	}
	labels[troupe.LabelNamespace] = activity.GetInfo(ctx).WorkflowNamespace
	if cluster := a.r.clusterID(); cluster != "" {
		labels[troupe.LabelCluster] = cluster
	}
	return labels
}
