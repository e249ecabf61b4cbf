package workflows

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync/atomic"
	"time"

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
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/transcript"
	"github.com/troupe-dev/troupe/workflows/approval"
	"github.com/troupe-dev/troupe/workflows/budget"
	"github.com/troupe-dev/troupe/workflows/events"
	"github.com/troupe-dev/troupe/workflows/guardrail"
	"github.com/troupe-dev/troupe/workflows/lease"
	"github.com/troupe-dev/troupe/workflows/retention"
)

// Config configures a Runner. Graphs, Model and Store are required; every
// other field's zero value works.
type Config struct {
	// Graphs are the graphs the worker serves, by name.
	Graphs []*agents.Graph
	// Events, when set, gets every event this worker's workflows record,
	// as they record them, for followers in this process (FollowLive),
	// and the text deltas of its model calls; StartWorkers also serves
	// both to followers in other processes and on other hosts through
	// Temporal, by the bus's live feed (events.Bus.ServeFeed), which
	// opens no port.
	Events *events.Bus
	// Model answers every agent's turns.
	Model model.Model
	// DefaultModel is the model name for agents that name none; the
	// default is "gpt-4.1".
	DefaultModel string
	// Prices price the model calls of every graph's agents, by model
	// name, over each graph's own table (agents.Graph.WithPrices): runs
	// and sessions report their cost by them, and a cost budget needs
	// them. A run keeps the prices it started with.
	Prices agents.Prices
	// Store holds transcripts and large tool outputs.
	Store *blob.Store
	// ModelTimeout bounds one model call (start to close); the default is
	// 5 minutes.
	ModelTimeout time.Duration
	// HeartbeatTimeout is how soon a model call on a dead worker is
	// retried elsewhere; the default is 30 seconds.
	HeartbeatTimeout time.Duration
	// ModelActivities runs model calls as regular activities instead of
	// the default local ones. Local activities save a round trip through
	// the server per turn (about 5 ms on the embedded server; see bench/)
	// and are as durable: their results are recorded in history, and a
	// call cut off by a worker crash is retried once the workflow task
	// times out. Regular activities add server-side timeouts and heartbeats
	// (a dead worker is noticed within HeartbeatTimeout), and let model
	// calls go to their own task queue and worker pool.
	ModelActivities bool
	// MaxHandoffs bounds the handoffs of one run; the default is 10.
	MaxHandoffs int
	// MaxToolDepth bounds the nesting of agents-as-tools; the default is 5.
	MaxToolDepth int
	// ContinueAfterTurns and ContinueAfterEvents bound one run of an agent
	// workflow: at the first turn boundary once the run has taken
	// ContinueAfterTurns turns (default 500) or its history holds
	// ContinueAfterEvents events (default 5,000), it continues as new,
	// carrying its state, so an agent can take any number of turns and
	// each run's history stays near that bound (plus one turn's events,
	// far below Temporal's 50,000-event limit). A turn with one tool call
	// adds about two events, so 500 turns is about 1,100. The server holds
	// back a run that continues less than a second after it started, so
	// small bounds slow fast agents down. Negative disables either. A
	// run's orchestrator continues as new on ContinueAfterEvents too,
	// between two agents of a chain of handoffs.
	ContinueAfterTurns  int
	ContinueAfterEvents int

	// Sandboxes are the sandbox clients this worker can provision with,
	// by backend name. Sandbox agents need at least one.
	Sandboxes map[string]sandbox.Client
	// DefaultBackend is the backend of sandbox agents that name none; the
	// default is "bwrap" when configured, else "local", else the only one.
	DefaultBackend string
	// Host names this worker's host; the default is the machine's
	// hostname.
	Host string
	// SandboxQueue is the task queue of this worker's sandbox store: the
	// host and the directories its Sandboxes keep workspaces in. Sandbox
	// activities of the sandboxes it creates are routed there, so they
	// reach the worker that can see the workspace. The default is
	// troupe-sandbox-<Host>-<8 hex digits>, the digits a hash of Host and
	// the Sandboxes' roots: two workers of one host with different
	// TROUPE_HOMEs never take each other's sandbox activities, and a
	// worker restarted with the same home takes over the sandboxes of the
	// one before it. Set it only to give one store a name of its own.
	SandboxQueue string
	// HostTimeout is how long a sandbox activity waits for its host before
	// the sandbox is taken as lost and re-provisioned elsewhere; the
	// default is 30 seconds.
	HostTimeout time.Duration
	// SandboxIdleTimeout is how long an unused sandbox stays up before it
	// is suspended (snapshot, then stop); the default is 5 minutes.
	SandboxIdleTimeout time.Duration
	// SpoolDir is where snapshots and restores are spooled on their way
	// to and from the blob store (unlinked files, as large as a snapshot);
	// the default is os.TempDir(). Put it on a disk: a /tmp in memory
	// would hold each snapshot in RAM.
	SpoolDir string

	// Memory configures the consolidation of the memory scopes of agents
	// with memory (agents.MemoryConfig): models and bounds.
	Memory memory.MemoryOptions

	// MCP holds this worker's MCP sessions. The default is a pool of the
	// Runner's own, which the stop func of StartWorkers closes (ending
	// the stdio servers it started).
	MCP *mcp.Pool
}

// Runner holds the workflows and activities that run agent graphs.
type Runner struct {
	cfg         Config
	graphs      map[string]*agents.Graph
	acts        *Activities
	events      *events.Activities
	approvals   *approval.Activities
	guardrails  *guardrail.Activities
	budgets     *budget.Activities
	leases      *lease.Activities
	handoffs    *handoff.Activities
	retention   *retention.Activities
	hostQueue   string
	transcripts *transcript.Transcripts
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
	r := &Runner{cfg: cfg, graphs: map[string]*agents.Graph{}, hostQueue: cfg.SandboxQueue,
		transcripts: transcript.NewTranscripts(cfg.Store)}
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

// fillDefaults sets the fields of cfg left zero to their documented
// defaults, so that the rest of the Runner never checks for zero.
func (cfg *Config) fillDefaults() error {
	if cfg.DefaultModel == "" {
		cfg.DefaultModel = "gpt-4.1"
	}
	if cfg.ModelTimeout == 0 {
		cfg.ModelTimeout = 5 * time.Minute
	}
	if cfg.HeartbeatTimeout == 0 {
		cfg.HeartbeatTimeout = 30 * time.Second
	}
	if cfg.MaxHandoffs == 0 {
		cfg.MaxHandoffs = 10
	}
	if cfg.ContinueAfterTurns == 0 {
		cfg.ContinueAfterTurns = 500
	}
	if cfg.ContinueAfterEvents == 0 {
		cfg.ContinueAfterEvents = 5000
	}
	if cfg.MaxToolDepth == 0 {
		cfg.MaxToolDepth = 5
	}
	if cfg.HostTimeout == 0 {
		cfg.HostTimeout = 30 * time.Second
	}
	if cfg.SandboxIdleTimeout == 0 {
		cfg.SandboxIdleTimeout = 5 * time.Minute
	}
	if cfg.Host == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("workflows: hostname: %w", err)
		}
		cfg.Host = h
	}
	if cfg.DefaultBackend == "" {
		cfg.DefaultBackend = defaultBackend(cfg.Sandboxes)
	}
	if cfg.SandboxQueue == "" {
		cfg.SandboxQueue = lease.DefaultStoreQueue(cfg.Host, cfg.Sandboxes)
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
	defaultBudget, prices := g.Budget(), g.Prices()
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
	return nil
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
		Queue: r.hostQueue, Agent: r.agent, Memory: r.memory}
}

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
}

// Close releases what the Runner holds: the MCP sessions of its own pool
// (Config.MCP is the caller's to close), stopping the stdio servers it
// started, and the files of the transcript segments it holds as written.
// The stop func of StartWorkers calls it; call it yourself after stopping
// workers you registered with Register.
func (r *Runner) Close() error {
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
	// An activity that stays without its blob fails, typed, rather than
	// retrying for ever (blobwait).
	opts.Interceptors = append(slices.Clip(opts.Interceptors), &blobwait.Interceptor{})
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
	legacy := worker.New(c, lease.LegacyHostQueue(r.cfg.Host), opts)
	r.RegisterActivities(legacy)
	if err := legacy.Start(); err != nil {
		host.Stop()
		shared.Stop()
		releaseFeed()
		return nil, fmt.Errorf("workflows: start worker on %s: %w", lease.LegacyHostQueue(r.cfg.Host), err)
	}
	// MCP sessions live in this process, not just on this host: another
	// process of the host has sessions of its own.
	mcpQueue := fmt.Sprintf("troupe-mcp-%s-%s", r.cfg.Host, uuid.NewString()[:8])
	sessions := worker.New(c, mcpQueue, opts)
	r.mcp.Register(sessions)
	if err := sessions.Start(); err != nil {
		legacy.Stop()
		host.Stop()
		shared.Stop()
		releaseFeed()
		return nil, fmt.Errorf("workflows: start worker on %s: %w", mcpQueue, err)
	}
	r.mcpQ.Store(&mcpQueue)
	return func() {
		sessions.Stop()
		legacy.Stop()
		host.Stop()
		shared.Stop()
		releaseFeed()
		r.Close()
	}, nil
}
