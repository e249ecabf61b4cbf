package lease

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
	"strconv"
	"sync"
	"sync/atomic"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/capabilities"
	"github.com/troupe-dev/troupe/internal/heartbeat"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/gitbundle"
	"github.com/troupe-dev/troupe/runtime/transcript"
	"github.com/troupe-dev/troupe/telemetry"
)

// Activities are the sandbox activities of a worker: they create, run
// tools on, snapshot and stop the sandboxes of its store, and read the
// guidance of workspaces not yet made. workflows.NewRunner builds them
// from its Config; Agent is required, and every other field's zero value
// works.
type Activities struct {
	// Sandboxes are the sandbox clients this worker can provision with,
	// by backend name.
	Sandboxes map[string]sandbox.Client
	// DefaultBackend is the backend of sandbox agents that name none.
	DefaultBackend string
	// Store holds snapshots, large tool outputs and workspaces' guidance.
	Store *blob.Store
	// SpoolDir is where snapshots and restores are spooled on their way
	// to and from Store; "" is os.TempDir().
	SpoolDir string
	// Queue is the task queue of this worker's sandbox store (StoreQueue):
	// a sandbox it creates names it, so the sandbox's activities reach a
	// worker that sees its workspace.
	Queue string
	// StoreID is the identity of this worker's sandbox store
	// (OpenStoreIdentity): every sandbox it creates records it in its
	// state (sandbox.State.Store), and a call of a sandbox of another
	// identity fails as misrouted (troupe.ErrSandboxMisrouted), which its
	// workflow sends on to that store's queue (IdentityQueue). Empty for
	// a worker with no store on disk (no backend keeps workspaces in a
	// host directory): its sandboxes are checked by hostname and root.
	StoreID string
	// Agent resolves a run's agent in the graph this worker serves now:
	// an agent (or graph) that is not there fails with
	// troupe.GraphChanged.
	Agent func(graph, name string) (*agents.Graph, *agents.Agent, error)
	// Memory, when set, is the memory of agents in their workspaces:
	// SandboxCreate materialises it, SandboxSnapshot writes it back,
	// SandboxStop forgets it.
	Memory Memory
	// Repos, when set, is the spool of the repositories runs name in the
	// blob store: SandboxCreate puts it in the context of the agent's
	// ManifestFor (gitbundle.Resolve).
	Repos *gitbundle.Spool

	sessions sessions
	// cluster is the id of the Temporal cluster the worker talks to, for
	// sandbox labels (SetCluster); nil when unknown.
	cluster atomic.Pointer[string]
	// served is set once something serves the sandbox store's queue, or
	// may (Register); registered counts the workers Register registered
	// on.
	served     atomic.Bool
	registered atomic.Int32
	// identity is the identity of the workers serving the activities
	// (SetIdentity), which their heartbeats carry.
	identity atomic.Pointer[string]
}

// SetIdentity names the workers that serve the activities (their
// worker.Options.Identity): the sandbox activities' heartbeats carry it,
// so a workflow whose activity's heartbeats stopped knows which worker
// died, and asks whether another serves the store (StoreServed).
func (a *Activities) SetIdentity(id string) { a.identity.Store(&id) }

func (a *Activities) who() string {
	if p := a.identity.Load(); p != nil {
		return *p
	}
	return ""
}

// Memory is what the sandbox activities ask of the memory of agents
// (agents.MemoryConfig) in their workspaces.
type Memory interface {
	// Materialise writes the memory files of agent's scope in the run rc
	// into the workspace of s, after its create and any restore. An error
	// of s comes back wrapped, for the caller to classify.
	Materialise(ctx context.Context, s sandbox.Session, agent *agents.Agent, rc agents.RunContext) error
	// WriteBack writes the agent's edits of its memory files in the
	// workspace of s back to its scope, before a snapshot; it returns
	// the paths written and those skipped for a conflict.
	WriteBack(ctx context.Context, s sandbox.Session) (written, conflicts []string, err error)
	// Forget drops what Materialise recorded of a sandbox that stopped;
	// best effort.
	Forget(ctx context.Context, sandboxID string)
}

// Register registers the sandbox activities on w, under their names.
//
// It counts the workers it registers on: the first real worker serves
// the run's task queue; the sandbox store's queue is served once a second
// one is registered (a worker on Queue), or once it registers on a
// registry that is not a worker (a test environment), which may serve
// it. Until then SandboxCreate fails with troupe.ErrStoreNotServed.
func (a *Activities) Register(w worker.ActivityRegistry) {
	if _, real := w.(worker.Worker); !real || a.registered.Add(1) > 1 {
		a.served.Store(true)
	}
	w.RegisterActivityWithOptions(a.SandboxCreate, activity.RegisterOptions{Name: SandboxCreateActivityName})
	w.RegisterActivityWithOptions(a.SandboxTool, activity.RegisterOptions{Name: SandboxToolActivityName})
	w.RegisterActivityWithOptions(a.SandboxSnapshot, activity.RegisterOptions{Name: SandboxSnapshotActivityName})
	w.RegisterActivityWithOptions(a.SandboxStop, activity.RegisterOptions{Name: SandboxStopActivityName})
	w.RegisterActivityWithOptions(a.WorkspaceGuidance, activity.RegisterOptions{Name: WorkspaceGuidanceActivityName})
	w.RegisterActivityWithOptions(a.StoreServed, activity.RegisterOptions{Name: StoreServedActivityName})
}

// SetCluster names the Temporal cluster the worker talks to (ClusterID),
// for the labels of the sandboxes it creates (see KeepOpen).
func (a *Activities) SetCluster(id string) { a.cluster.Store(&id) }

func (a *Activities) clusterID() string {
	if p := a.cluster.Load(); p != nil {
		return *p
	}
	return ""
}

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
		backend = a.DefaultBackend
	}
	c, ok := a.Sandboxes[backend]
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
	if err := a.checkStore(st); err != nil {
		return nil, err
	}
	c, err := a.client(st.Backend)
	if err != nil {
		return nil, err
	}
	if st, err = a.openEnv(st); err != nil {
		return nil, sandboxErr(err)
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
	if a.sessions.live == nil {
		a.sessions.live = map[string]sandbox.Session{}
	}
	a.sessions.live[s.State().ID] = s
	a.sessions.mu.Unlock()
}

func (a *Activities) forget(id string) {
	a.sessions.mu.Lock()
	delete(a.sessions.live, id)
	a.sessions.mu.Unlock()
}

// sandboxErr classifies a sandbox's error onto Temporal's retry rules: a
// sandbox gone, a path escape or a source not allowed is not retried. An
// error already classified (an application error) is left as it is.
func sandboxErr(err error) error {
	if _, ok := err.(*temporal.ApplicationError); ok {
		return err
	}
	switch {
	case errors.Is(err, sandbox.ErrGone):
		return temporal.NewNonRetryableApplicationError(err.Error(), troupe.ErrSandboxGone, err)
	case errors.Is(err, sandbox.ErrSourceNotAllowed):
		return temporal.NewNonRetryableApplicationError(err.Error()+": allow it on the worker that runs the sandbox "+
			"(troupe worker --allow-root DIR, or troupe dev --allow-root DIR; in Go, the backend's Policy.AllowedRoots)",
			troupe.ErrSourceNotAllowed, err)
	case errors.Is(err, sandbox.ErrPathEscape):
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
	_, agent, err := a.Agent(in.Graph, in.Agent)
	if err != nil {
		return nil, err
	}
	if agent.Sandbox == nil {
		return nil, troupe.NonRetryable(troupe.ErrSandbox, "agent %s has no sandbox", agent.Name)
	}
	if activity.IsActivity(ctx) && !a.served.Load() {
		return nil, troupe.NonRetryable(troupe.ErrStoreNotServed, "agent %s: this worker's sandbox store queue %s has no worker, so the sandbox's commands could reach none: "+
			"start the worker with Runner.StartWorkers (Runner.Register alone serves one queue), or serve %s with RegisterActivities", agent.Name, a.Queue, a.Queue)
	}
	c, err := a.client(cmp.Or(in.Backend, agent.Sandbox.Backend))
	if err != nil {
		return nil, err
	}
	// The manifest (ManifestFor may fetch), the workspace (git clones,
	// copies) and the restore can each take long: the activity heartbeats
	// throughout, so a dead worker is noticed within its HeartbeatTimeout.
	m, err := heartbeat.While(ctx, func() (sandbox.Manifest, error) { return Manifest(gitbundle.WithSpool(ctx, a.Repos), agent, in.Run) })
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), troupe.ErrSandbox, err)
	}
	spec := sandbox.Spec{
		ID: sandboxID(in.WorkflowID, in.Generation), Manifest: m, Options: agent.Sandbox.Options,
		Labels: a.sandboxLabels(ctx, cmp.Or(in.Owner, in.WorkflowID), agent.Name),
	}
	if in.Generation > 0 {
		spec.Labels[troupe.LabelGeneration] = strconv.Itoa(in.Generation)
	}
	// A retry after a worker died mid-create replaces what it left (the
	// sandbox.Client contract).
	s, err := heartbeat.While(ctx, func() (sandbox.Session, error) { return c.Create(ctx, spec) })
	if err != nil {
		return nil, sandboxErr(fmt.Errorf("create %s sandbox for %s: %w", c.Backend(), agent.Name, err))
	}
	if in.Snapshot != "" {
		if err := a.restore(ctx, s, in.Snapshot); err != nil {
			_ = s.Stop(context.WithoutCancel(ctx))
			if errors.Is(err, blob.ErrNotFound) {
				// The snapshot the lease names, and no other: a workspace
				// is never made from an older one, or empty, instead.
				return nil, temporal.NewApplicationErrorWithCause(fmt.Sprintf("restore snapshot %s: the blob store of this worker does not hold it, "+
					"so the workspace is not made (not from an older snapshot, nor empty): %v", in.Snapshot, err), troupe.ErrBlobMissing, err)
			}
			return nil, fmt.Errorf("restore snapshot %s: %w", in.Snapshot, err)
		}
	}
	// Memory after any restore: the store's version is the one to see.
	if a.Memory != nil && agent.Memory.Reads() {
		if _, err := heartbeat.While(ctx, func() (struct{}, error) {
			return struct{}{}, sandboxErr(a.Memory.Materialise(ctx, s, agent, in.Run))
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
	// The State goes into the workflow's history: its environment goes
	// sealed, for this host alone to open (env.go).
	st, err := a.sealEnv(s.State())
	if err != nil {
		_ = s.Stop(context.WithoutCancel(ctx))
		return nil, err
	}
	// Its store by identity, not by the host's name: its calls reach
	// this store, or are sent on to it (checkStore, Life's reroute).
	st.Store = a.StoreID
	a.remember(s)
	info := &SandboxInfo{State: st, Queue: a.Queue, Guidance: guidance}
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
// ErrSandboxGone, so the workflow re-provisions it. The activity
// heartbeats from its start to its end, not only while the tool runs: a
// worker slow to reach the sandbox (a loaded machine) must not pass for
// a dead one, whose call the workflow runs again.
func (a *Activities) SandboxTool(ctx context.Context, in SandboxToolInput) (agents.Item, error) {
	return heartbeat.WhileAs(ctx, a.who(), func() (agents.Item, error) { return a.sandboxTool(ctx, in) })
}

func (a *Activities) sandboxTool(ctx context.Context, in SandboxToolInput) (agents.Item, error) {
	ctx = gitbundle.WithSpool(ctx, a.Repos)
	g, _, err := a.Agent(in.Tool.Graph, in.Tool.Agent)
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
	rc := in.Tool.CallContext()
	if !ref.Function.Idempotent() {
		// At most once: a call run again after its worker was lost
		// (Life.Call) finds it started, and tells the model.
		if err := transcript.Begin(ctx, a.Store, rc, in.Tool.Call.Name); errors.Is(err, transcript.ErrStarted) {
			return in.Tool.InDoubt(), nil
		} else if err != nil {
			return agents.Item{}, err
		}
	}
	sctx, span := telemetry.StartToolCall(ctx, in.Tool, toolKind)
	tctx := sandbox.WithSession(agents.WithRunContext(sctx, rc), traceSession(sctx, s))
	output := ref.Function.Answer(tctx, in.Tool.Call.Arguments)
	telemetry.EndTool(span, output)
	if err := s.Alive(ctx); err != nil {
		a.forget(in.Sandbox.ID)
		return agents.Item{}, sandboxErr(fmt.Errorf("the sandbox died during %s: %w", in.Tool.Call.Name, err))
	}
	item := agents.FunctionCallOutput(in.Tool.Call.CallID, output)
	item.Agent = in.Tool.Agent
	return transcript.Offload(ctx, a.Store, in.Tool.OutputKey, item)
}

// SandboxSnapshot archives the workspace into the blob store under its
// content hash and returns the key. First, for an agent whose memory is
// updated live, it writes the agent's edits of its memory files back to
// the memory scope (Memory.WriteBack).
func (a *Activities) SandboxSnapshot(ctx context.Context, st sandbox.State) (string, error) {
	s, err := a.session(ctx, st)
	if err != nil {
		return "", err
	}
	// The agent's edits of its memory go back to the store first.
	if a.Memory != nil {
		if _, _, err := a.Memory.WriteBack(ctx, s); err != nil {
			return "", err
		}
	}
	// The archive is spooled to a file, hashed on the way, then streamed
	// to the store: the worker holds none of it in memory.
	spool, err := a.spool("snapshot")
	if err != nil {
		return "", err
	}
	defer spool.Close()
	h := sha256.New()
	if _, err := heartbeat.WhileAs(ctx, a.who(), func() (struct{}, error) {
		return struct{}{}, s.Snapshot(ctx, io.MultiWriter(spool, h))
	}); err != nil {
		if errors.Is(err, sandbox.ErrTooLarge) {
			// A file no retry will archive: the workflow keeps the
			// sandbox up and says which.
			return "", temporal.NewNonRetryableApplicationError(err.Error(), troupe.ErrSnapshotFailed, err)
		}
		return "", sandboxErr(err)
	}
	// Under the run's own prefix, so its data goes with it (the retention
	// of package workflows).
	key := "snapshots/" + hex.EncodeToString(h.Sum(nil)) + ".tar.zst"
	if activity.IsActivity(ctx) {
		key = "snapshots/" + troupe.RunOf(activity.GetInfo(ctx).WorkflowExecution.ID) + "/" + hex.EncodeToString(h.Sum(nil)) + ".tar.zst"
	}
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	if _, err := heartbeat.WhileAs(ctx, a.who(), func() (struct{}, error) {
		return struct{}{}, a.Store.PutFrom(ctx, key, spool)
	}); err != nil {
		return "", err
	}
	return key, nil
}

// spool returns a new file in SpoolDir for an archive on its way
// to or from the store. It is unlinked at once: the open file is all there
// is of it, so a worker killed mid-transfer leaves nothing behind.
func (a *Activities) spool(what string) (*os.File, error) {
	f, err := os.CreateTemp(a.SpoolDir, "troupe-"+what+"-*")
	if err != nil {
		return nil, err
	}
	os.Remove(f.Name())
	return f, nil
}

// restore restores the snapshot under key into s, streaming it from the
// store through a spool file (Restore reads an archive twice).
func (a *Activities) restore(ctx context.Context, s sandbox.Session, key string) error {
	r, err := a.Store.Open(ctx, key)
	if err != nil {
		return err
	}
	defer r.Close()
	spool, err := a.spool("restore")
	if err != nil {
		return err
	}
	defer spool.Close()
	_, err = heartbeat.While(ctx, func() (struct{}, error) {
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
	if _, err = heartbeat.WhileAs(ctx, a.who(), func() (struct{}, error) { return struct{}{}, s.Stop(ctx) }); err != nil {
		return err
	}
	a.forgetMemory(ctx, st.ID)
	return nil
}

// sandboxLabels are the labels of a new sandbox: its workflow and agent,
// and the workflow's cluster and namespace (see KeepOpen).
func (a *Activities) sandboxLabels(ctx context.Context, workflowID, agent string) map[string]string {
	labels := map[string]string{"troupe.workflow": workflowID, "troupe.agent": agent}
	if !activity.IsActivity(ctx) {
		return labels
	}
	labels[troupe.LabelNamespace] = activity.GetInfo(ctx).WorkflowNamespace
	if cluster := a.clusterID(); cluster != "" {
		labels[troupe.LabelCluster] = cluster
	}
	return labels
}

// forgetMemory has Memory forget what it recorded of the sandbox id, when
// there is a Memory.
func (a *Activities) forgetMemory(ctx context.Context, id string) {
	if a.Memory != nil {
		a.Memory.Forget(ctx, id)
	}
}
