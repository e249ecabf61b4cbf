package workflows

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sync/atomic"

	"github.com/google/uuid"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/capabilities"
	"github.com/troupe-dev/troupe/capabilities/skills"
	"github.com/troupe-dev/troupe/handoff"
	"github.com/troupe-dev/troupe/internal/blobwait"
	"github.com/troupe-dev/troupe/mcp"
	"github.com/troupe-dev/troupe/memory"
	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/gitbundle"
	"github.com/troupe-dev/troupe/runtime/transcript"
	"github.com/troupe-dev/troupe/workflows/approval"
	"github.com/troupe-dev/troupe/workflows/budget"
	"github.com/troupe-dev/troupe/workflows/events"
	"github.com/troupe-dev/troupe/workflows/guardrail"
	"github.com/troupe-dev/troupe/workflows/lease"
	"github.com/troupe-dev/troupe/workflows/retention"
	"github.com/troupe-dev/troupe/workflows/throttle"
)

// Runner holds the workflows and activities that run agent graphs.
type Runner struct {
	cfg        Config
	graphs     map[string]*agents.Graph
	acts       *Activities
	events     *events.Activities
	approvals  *approval.Activities
	guardrails *guardrail.Activities
	budgets    *budget.Activities
	leases     *lease.Activities
	handoffs   *handoff.Activities
	retention  *retention.Activities
	hostQueue  string
	// store is the identity of this worker's sandbox store; storeQueues
	// the queues its sandbox activities are served on besides hostQueue:
	// the store's identity queue, the queue the store had before stores
	// had identities, and the host's queue of before stores (runs in
	// flight over a redeploy keep their sandboxes).
	store       lease.StoreIdentity
	storeQueues []string
	transcripts *transcript.Transcripts
	// repos unpacks the repositories runs name in the blob store; nil
	// without Config.RepoDir.
	repos *gitbundle.Spool
	// mcp is the MCP room's activities, over the pool of Config.MCP or
	// the Runner's own (ownsMCP).
	mcp     *mcp.Activities
	ownsMCP bool
	// mcpQ is the queue of this process's MCP sessions, which
	// StartWorkers serves; "" without StartWorkers.
	mcpQ atomic.Pointer[string]
	// memory is the memory room: MemoryWorkflow, its activities, and
	// what the other activities ask of memory.
	memory *memory.Consolidation
	// throttle keeps the model endpoints within their limits, and
	// modelLimits are the limits by model name (Config.ModelLimits and
	// the graphs').
	throttle    *throttle.Endpoints
	modelLimits []map[string]agents.ModelLimit
	// onWorker is set once RegisterActivities registered on a Temporal
	// worker, whose activities have a client (activity.GetClient) to ask
	// a run's root for its budget with; a test environment's have none.
	onWorker atomic.Bool
}

func (r *Runner) mcpQueue() string {
	if p := r.mcpQ.Load(); p != nil {
		return *p
	}
	return ""
}

// NewRunner checks cfg and returns its Runner.
func NewRunner(cfg Config) (*Runner, error) {
	if cfg.Model == nil {
		return nil, errors.New("workflows: Config.Model is required")
	}
	if cfg.Store == nil {
		return nil, errors.New("workflows: Config.Store is required")
	}
	if err := cfg.fillDefaults(); err != nil {
		return nil, err
	}
	r := &Runner{cfg: cfg, graphs: map[string]*agents.Graph{}, transcripts: transcript.NewTranscripts(cfg.Store), throttle: throttle.New()}
	if cfg.RepoDir != "" {
		r.repos = &gitbundle.Spool{Dir: cfg.RepoDir, Store: cfg.Store}
	}
	if err := r.openStore(); err != nil {
		return nil, err
	}
	if err := checkModelLimits("Config.ModelLimits", cfg.ModelLimits); err != nil {
		return nil, err
	}
	r.modelLimits = append(r.modelLimits, cfg.ModelLimits)
	r.memory = &memory.Consolidation{Store: cfg.Store, Transcripts: r.transcripts, Model: cfg.Model, DefaultModel: cfg.DefaultModel,
		Options: cfg.Memory, ModelTimeout: cfg.ModelTimeout, HeartbeatTimeout: cfg.HeartbeatTimeout, Learnt: skills.NewLearntCache(0)}
	pool := cfg.MCP
	if pool == nil {
		pool, r.ownsMCP = mcp.NewPool(mcp.PoolConfig{}), true
	}
	r.mcp = &mcp.Activities{Pool: pool, Store: cfg.Store, Agent: r.agent, Queue: r.mcpQueue}
	for _, g := range cfg.Graphs {
		if err := r.addGraph(g); err != nil {
			return nil, err
		}
	}
	r.setActivities()
	return r, nil
}

// openStore reads (or makes) the identity of the worker's sandbox store
// and sets the queues it serves: the default SandboxQueue is the identity
// queue.
func (r *Runner) openStore() error {
	cfg := &r.cfg
	dir := cfg.StoreDir
	if dir == "" {
		for _, b := range slices.Sorted(maps.Keys(cfg.Sandboxes)) {
			if c, ok := cfg.Sandboxes[b].(interface{ Root() string }); ok {
				dir = filepath.Join(c.Root(), lease.StoreDirName)
				break
			}
		}
	}
	// Before identities, the store's queue was named by the host and the
	// roots: runs in flight over a redeploy still send there.
	legacy := lease.DefaultStoreQueue(cfg.Host, cfg.Sandboxes)
	if cfg.StoreDir != "" {
		legacy = lease.StoreQueue(cfg.Host, cfg.StoreDir)
	}
	switch {
	case cfg.StoreID != "":
		r.store = lease.StoreIdentity{ID: cfg.StoreID}
	case dir != "":
		id, err := lease.OpenStoreIdentity(dir, cfg.Host)
		if err != nil {
			return fmt.Errorf("workflows: %w", err)
		}
		r.store = id
	}
	queue := cfg.SandboxQueue
	if queue == "" {
		queue = legacy
		if r.store.ID != "" {
			queue = lease.IdentityQueue(r.store.ID)
		}
	}
	r.hostQueue = queue
	seen := map[string]bool{queue: true}
	for _, q := range []string{lease.IdentityQueue(r.store.ID), legacy, lease.LegacyHostQueue(cfg.Host)} {
		if r.store.ID == "" && q == lease.IdentityQueue("") || seen[q] {
			continue
		}
		seen[q] = true
		r.storeQueues = append(r.storeQueues, q)
	}
	return nil
}

// defaultBackend is the sandbox backend of agents that name none: bwrap,
// else local, else the only one configured, else none.
func defaultBackend(sandboxes map[string]sandbox.Client) string {
	for _, b := range []string{"bwrap", "local"} {
		if _, ok := sandboxes[b]; ok {
			return b
		}
	}
	if len(sandboxes) == 1 {
		for b := range sandboxes {
			return b
		}
	}
	return ""
}

// addGraph serves g: it checks it and adds what the runner gives every
// graph (the default capabilities, memory's tools and learnt skills, the
// budget), so that workflows find each graph ready by its name.
func (r *Runner) addGraph(g *agents.Graph) error {
	if g == nil {
		return errors.New("workflows: nil graph")
	}
	defaultBudget, prices, limits := g.Budget(), g.Prices(), g.ModelLimits()
	if err := checkModelLimits("graph "+g.Name(), limits); err != nil {
		return err
	}
	g, err := withDefaultCapabilities(g)
	if err != nil {
		return err
	}
	if err := memory.CheckGraph(g); err != nil {
		return fmt.Errorf("workflows: %w", err)
	}
	if g, err = r.memory.WithTools(g); err != nil {
		return err
	}
	if g, err = r.memory.WithLearntSkills(g); err != nil {
		return err
	}
	if err := g.CheckApprovals(); err != nil {
		return err
	}
	if g, err = budget.WithBudget(g, defaultBudget, prices, r.cfg.Prices, r.cfg.DefaultModel); err != nil {
		return err
	}
	if _, dup := r.graphs[g.Name()]; dup {
		return fmt.Errorf("workflows: two graphs named %q", g.Name())
	}
	r.graphs[g.Name()] = g
	if limits != nil {
		r.modelLimits = append(r.modelLimits, limits)
	}
	return nil
}

// modelLimit is the limit on the endpoint of model: the stricter of the
// worker's and the graphs' limits for it (or for every model).
func (r *Runner) modelLimit(model string) agents.ModelLimit {
	var l agents.ModelLimit
	for _, t := range r.modelLimits {
		l = l.Stricter(t[""]).Stricter(t[model])
	}
	return l
}

// setActivities makes the rooms' activities, each given what it needs of
// the runner through its fields (rooms do not import this package).
func (r *Runner) setActivities() {
	cfg := r.cfg
	r.events = &events.Activities{Store: cfg.Store}
	r.budgets = budget.NewActivities(r.onWorker.Load)
	r.approvals = &approval.Activities{Agent: r.agent}
	r.guardrails = &guardrail.Activities{Agent: r.agent, Store: cfg.Store, Transcripts: r.transcripts}
	r.acts = &Activities{r: r, budgets: r.budgets}
	r.retention = &retention.Activities{Store: cfg.Store}
	r.handoffs = &handoff.Activities{Graph: r.servedGraph, Transcripts: r.transcripts}
	r.leases = &lease.Activities{Sandboxes: cfg.Sandboxes, DefaultBackend: cfg.DefaultBackend, Store: cfg.Store, SpoolDir: cfg.SpoolDir,
		Queue: r.hostQueue, StoreID: r.store.ID, Agent: r.agent, Memory: r.memory, Repos: r.repos}
}

// Repos is the spool of the repositories this worker's runs name in the
// blob store (Config.RepoDir), for its owner to Reap; nil without one.
func (r *Runner) Repos() *gitbundle.Spool { return r.repos }

// CheckHost checks that this host can run what the graphs need of it: the
// command of every stdio MCP server is on PATH. StartWorkers calls it, so
// a worker that could not start an agent's MCP server refuses to start
// and says which, rather than failing the agent's first turn.
func (r *Runner) CheckHost() error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(r.graphs)) {
		for _, a := range r.graphs[name].Agents() {
			for _, srv := range a.MCPServers {
				if err := mcp.CheckCommand(srv); err != nil {
					errs = append(errs, fmt.Errorf("workflows: graph %s, agent %s: MCP server %s: command %q cannot run on this worker (%w); install it or fix the server's Command",
						name, a.Name, srv.Name, srv.Command[0], err))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// Register registers the workflows and activities on a worker (or a
// test environment). A real worker serves one task queue, and the
// sandbox and MCP activities of a run go to this host's sandbox store's
// queue and to the MCP sessions' queue too: use StartWorkers, which
// starts them all.
func (r *Runner) Register(w worker.Registry) {
	r.RegisterWorkflows(w)
	r.RegisterActivities(w)
}

// SandboxQueue is the task queue of this worker's sandbox store
// (Config.SandboxQueue): run a second worker on it with
// RegisterActivities, so sandbox activities reach the worker that holds
// the sandbox.
func (r *Runner) SandboxQueue() string { return r.hostQueue }

// Store is the identity of this worker's sandbox store (Config.StoreDir,
// Config.StoreID); its ID is empty for a worker with no store on disk.
// When the identity file was found copied, Store says which identity it
// replaced and why, for the worker to tell its operator.
func (r *Runner) Store() lease.StoreIdentity { return r.store }

// mcpSettings are the settings of the MCP tools of this worker's agent
// workflows.
func (r *Runner) mcpSettings() mcp.Settings {
	return mcp.Settings{HostTimeout: r.cfg.HostTimeout, HeartbeatTimeout: r.cfg.HeartbeatTimeout}
}

// leaseSettings are the settings of the sandboxes' lives in this worker's
// workflows.
func (r *Runner) leaseSettings() lease.Settings {
	return lease.Settings{HostTimeout: r.cfg.HostTimeout, IdleTimeout: r.cfg.SandboxIdleTimeout}
}

// RegisterActivities registers the activities only, for the host-queue
// worker.
//
// A worker that creates a sandbox must have its sandbox store's queue
// (SandboxQueue) served too, or the sandbox's commands reach no worker:
// StartWorkers does that; so does a second worker of yours on that queue
// with RegisterActivities. Without either, a sandbox create fails the run
// at once with ErrStoreNotServed, saying so, rather than letting the run
// go on with "sandbox lost" answers.
func (r *Runner) RegisterActivities(w worker.ActivityRegistry) {
	if _, real := w.(worker.Worker); real {
		r.onWorker.Store(true)
	}
	w.RegisterActivityWithOptions(r.acts.Model, activity.RegisterOptions{Name: ModelActivityName})
	r.budgets.Register(w)
	r.leases.Register(w)
	w.RegisterActivityWithOptions(r.acts.FunctionTool, activity.RegisterOptions{Name: ToolActivityName})
	r.handoffs.Register(w)
	w.RegisterActivityWithOptions(r.acts.Extract, activity.RegisterOptions{Name: ExtractActivityName})
	r.approvals.Register(w)
	r.guardrails.Register(w)
	r.mcp.Register(w)
	r.events.Register(w)
	r.retention.Register(w)
	w.RegisterActivityWithOptions(r.acts.RegistryPages, activity.RegisterOptions{Name: RegistryActivityName})
	w.RegisterActivityWithOptions(r.acts.RemoveSessionData, activity.RegisterOptions{Name: RemoveSessionDataActivityName})
	r.memory.Register(w)
}

// RegisterWorkflows registers the workflows only, for example on a
// worker.WorkflowReplayer that replays checked-in histories.
func (r *Runner) RegisterWorkflows(w worker.WorkflowRegistry) {
	w.RegisterWorkflowWithOptions(r.OrchestratorWorkflow, workflow.RegisterOptions{Name: troupe.OrchestratorWorkflowName})
	w.RegisterWorkflowWithOptions(r.AgentWorkflow, workflow.RegisterOptions{Name: troupe.AgentWorkflowName})
	w.RegisterWorkflowWithOptions(r.SessionWorkflow, workflow.RegisterOptions{Name: troupe.SessionWorkflowName})
	w.RegisterWorkflowWithOptions(r.SessionManagerWorkflow, workflow.RegisterOptions{Name: troupe.SessionManagerWorkflowName})
	r.memory.RegisterWorkflows(w)
	w.RegisterWorkflowWithOptions(throttle.LimiterWorkflow, workflow.RegisterOptions{Name: throttle.LimiterWorkflowName})
}

// Close releases what the Runner holds: the MCP sessions of its own pool
// (Config.MCP is the caller's to close), stopping the stdio servers it
// started, and the files of the transcript segments it holds as written.
// The stop func of StartWorkers calls it; call it yourself after stopping
// workers you registered with Register.
func (r *Runner) Close() error {
	r.throttle.Close()
	r.transcripts.Close()
	if r.ownsMCP {
		return r.mcp.Pool.Close()
	}
	return nil
}

// Activities returns the activities, for tests that run them directly.
func (r *Runner) Activities() *Activities { return r.acts }

// Memory returns the memory room the Runner registers, for tests that run
// its activities directly.
func (r *Runner) Memory() *memory.Consolidation { return r.memory }

// MCP returns the MCP activities (the MCP room's), for tests that run
// them directly.
func (r *Runner) MCP() *mcp.Activities { return r.mcp }

// Lease returns the sandbox activities (the sandbox lease room's), for
// tests that run them directly.
func (r *Runner) Lease() *lease.Activities { return r.leases }

// graphNames lists the graphs this worker serves, sorted.
func (r *Runner) graphNames() []string {
	return slices.Sorted(maps.Keys(r.graphs))
}

func (r *Runner) graph(name string) (*agents.Graph, error) {
	g, ok := r.graphs[name]
	if !ok {
		return nil, troupe.NonRetryable(troupe.ErrUnknownAgent, "graph %q is not served by this worker", name)
	}
	return g, nil
}

// servedGraph resolves a run's graph as this worker serves it now, for an
// activity: a graph that is not there was there when the run started, so
// it fails with troupe.GraphChanged.
func (r *Runner) servedGraph(name string) (*agents.Graph, error) {
	g, ok := r.graphs[name]
	if !ok {
		return nil, troupe.NonRetryable(troupe.ErrGraphChanged, "graph %q is no longer served by this worker; the run started with it", name)
	}
	return g, nil
}

// agent resolves a run's agent in the graph this worker serves now, for
// an activity: an agent (or graph) that is not there was there when the
// run started, so it fails with troupe.GraphChanged.
func (r *Runner) agent(graph, name string) (*agents.Graph, *agents.Agent, error) {
	g, err := r.servedGraph(graph)
	if err != nil {
		return nil, nil, err
	}
	a, err := g.Agent(name)
	if err != nil {
		return nil, nil, troupe.NonRetryable(troupe.ErrGraphChanged, "agent %q is no longer in graph %q as this worker serves it; the run started with it", name, graph)
	}
	return g, a, nil
}

// withDefaultCapabilities gives sandbox agents that declare no
// capabilities the default ones (shell, filesystem, compaction), and
// validates the graph again with their tools. It checks, too, that no
// agent has two skills of one name across its skills capabilities.
func withDefaultCapabilities(g *agents.Graph) (*agents.Graph, error) {
	var all []*agents.Agent
	var errs []error
	changed := false
	for _, a := range g.Agents() {
		if err := skills.CheckAgent(a); err != nil {
			errs = append(errs, fmt.Errorf("workflows: graph %s, agent %s: %w", g.Name(), a.Name, err))
		}
		if a.Sandbox != nil && a.Capabilities == nil {
			c := *a
			c.Capabilities = capabilities.Default()
			a, changed = &c, true
		}
		all = append(all, a)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if !changed {
		return g, nil
	}
	return agents.NewGraph(g.Name(), g.Entry(), all...)
}

// StartWorkers starts this process's workers: one on taskQueue with the
// workflows and activities; one on the host queue with the activities, so
// sandbox activities reach this host; and one on a queue of this process
// with the MCP activities, so an agent's MCP calls reach the process that
// holds its sessions. With Config.Events set, it also serves the bus's
// events and text deltas through its live feed (a workflow of the
// process's own, which followers query) and advertises the feed in the
// workers' identity (opts.Identity, or the SDK's default, followed by
// " live=ID"); the identity says, last, that the workers take messages
// and run inputs by reference (troupe.WithInputRefs). The returned func stops them all and closes the Runner.
// (A Runner whose workers are registered by hand sends MCP calls to the
// workflow's own queue.)
func (r *Runner) StartWorkers(c client.Client, taskQueue string, opts worker.Options) (stop func(), err error) {
	if taskQueue == "" {
		taskQueue = troupe.DefaultTaskQueue
	}
	if err := r.CheckHost(); err != nil {
		return nil, err
	}
	if id, err := lease.ClusterID(context.Background(), c); err == nil {
		r.leases.SetCluster(id)
	}
	// One sandbox queue, one store: a queue named by hand must not be
	// shared with a live worker of another store.
	if r.cfg.SandboxQueue != "" {
		if err := lease.CheckQueueStore(context.Background(), c, r.hostQueue, r.store.ID); err != nil {
			return nil, fmt.Errorf("workflows: %w", err)
		}
	}
	// The live feed, advertised in the identity of this process's
	// workers, where followers read it from the task queue's pollers.
	releaseFeed := func() {}
	if r.cfg.Events != nil {
		id, release, err := r.cfg.Events.ServeFeed(c, r.cfg.Host, opts.Identity)
		if err != nil {
			return nil, fmt.Errorf("workflows: %w", err)
		}
		releaseFeed = release
		opts.Identity = troupe.WithLiveFeed(opts.Identity, id)
	}
	// Clients send big run inputs only to queues whose workers all say
	// they take them by reference (troupe.TakesInputRefs).
	opts.Identity = troupe.WithInputRefs(opts.Identity)
	// Workers that would share a sandbox queue read each other's store
	// here (CheckQueueStore).
	opts.Identity = troupe.WithStore(opts.Identity, r.store.ID)
	r.leases.SetIdentity(opts.Identity)
	// An activity that stays without its blob fails, typed, rather than
	// retrying for ever (blobwait).
	opts.Interceptors = append(slices.Clip(opts.Interceptors), &blobwait.Interceptor{})
	// The model endpoints' limits are shared with the queue's workers.
	r.throttle.Connect(c, taskQueue)
	shared := worker.New(c, taskQueue, opts)
	r.Register(shared)
	if err := shared.Start(); err != nil {
		releaseFeed()
		return nil, fmt.Errorf("workflows: start worker on %s: %w", taskQueue, err)
	}
	host := worker.New(c, r.hostQueue, opts)
	r.RegisterActivities(host)
	if err := host.Start(); err != nil {
		shared.Stop()
		releaseFeed()
		return nil, fmt.Errorf("workflows: start worker on %s: %w", r.hostQueue, err)
	}
	// The store's other queues: its identity queue, where calls that
	// reached a worker of another store go on to, and the queues of
	// before store identities, which runs in flight still send to.
	var others []worker.Worker
	stopOthers := func() {
		for _, w := range others {
			w.Stop()
		}
	}
	for _, q := range r.storeQueues {
		w := worker.New(c, q, opts)
		r.RegisterActivities(w)
		if err := w.Start(); err != nil {
			stopOthers()
			host.Stop()
			shared.Stop()
			releaseFeed()
			return nil, fmt.Errorf("workflows: start worker on %s: %w", q, err)
		}
		others = append(others, w)
	}
	// MCP sessions live in this process, not just on this host: another
	// process of the host has sessions of its own.
	mcpQueue := fmt.Sprintf("troupe-mcp-%s-%s", r.cfg.Host, uuid.NewString()[:8])
	sessions := worker.New(c, mcpQueue, opts)
	r.mcp.Register(sessions)
	if err := sessions.Start(); err != nil {
		stopOthers()
		host.Stop()
		shared.Stop()
		releaseFeed()
		return nil, fmt.Errorf("workflows: start worker on %s: %w", mcpQueue, err)
	}
	r.mcpQ.Store(&mcpQueue)
	return func() {
		// The shares first, while the queue's limiter still has workers
		// (these, maybe) to answer.
		r.throttle.Close()
		sessions.Stop()
		stopOthers()
		host.Stop()
		shared.Stop()
		releaseFeed()
		r.Close()
	}, nil
}
