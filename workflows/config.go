package workflows

// This file holds a Runner's configuration (Config) and its defaults.

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/mcp"
	"github.com/troupe-dev/troupe/memory"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/workflows/events"
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
	// ModelLimits limit the calls to this worker's model endpoints (the
	// Model's base URL and a model name), by model name; the key ""
	// limits every model. Each endpoint is kept within the stricter of
	// this limit and the served graphs' (agents.Graph.WithModelLimits),
	// shared with every worker of the task queue that StartWorkers
	// serves: the workers lease shares of it from a limiter workflow per
	// endpoint (workflows/throttle), so the endpoint as a whole never sees
	// more calls at once, or more starts in a window, than the limit, and
	// a crashed worker's share goes to the others within about half a
	// minute. A call waits for room (at most half of ModelTimeout, then
	// it is retried as a rate-limited call). Without StartWorkers, each
	// Runner keeps the limits alone. The default limits nothing.
	ModelLimits map[string]agents.ModelLimit
	// ModelRateLimitWait bounds how long one model call of an agent may
	// stay rate-limited: answered 429 by the provider, or kept waiting
	// by ModelLimits. Each wait is the one the provider asked for
	// (retry-after-ms, Retry-After, x-ratelimit-reset-*), or a backoff
	// when it did not say, and is an event; none counts against the
	// attempts a failing model gets. Past the bound the agent fails with
	// troupe.ModelRateLimited, saying for how long. A run keeps the bound
	// it started with. The default is 30 minutes.
	ModelRateLimitWait time.Duration
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
	// directories its Sandboxes keep workspaces in, on this host's disk.
	// Sandbox activities of the sandboxes it creates are routed there, so
	// they reach the worker that can see the workspace. The default is
	// the store's identity queue, lease.IdentityQueue(StoreID)
	// (troupe-sandbox-<host>-<16 hex digits>): two workers with different
	// stores never share it, whatever their hostnames and paths, and a
	// worker restarted on the same store takes over the sandboxes of the
	// one before it. Set it only to give one store a name of its own: the
	// worker then serves the identity queue too (a call that reached a
	// worker of another store goes on there), and StartWorkers refuses to
	// start beside a live worker of another store on SandboxQueue.
	SandboxQueue string
	// StoreDir is the directory that keeps the identity of this worker's
	// sandbox store (lease.OpenStoreIdentity: a file made there once). The
	// default is lease.StoreDirName in the root of the first of the
	// Sandboxes, by backend name, that keeps its workspaces in a host
	// directory (a dot directory: reapers leave it alone); give the directory
	// that holds every backend's root (the CLI gives $TROUPE_HOME/sandboxes)
	// so the identity stays when the backends change. With no such
	// backend and no StoreDir, the store has no identity, and its
	// sandboxes are told apart by hostname and root as before.
	StoreDir string
	// StoreID, when set, is the identity of this worker's sandbox store,
	// over the one kept in StoreDir: for tests, and for stores whose
	// identity is kept elsewhere. Two stores must never share one.
	StoreID string
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
	// RepoDir is where this worker unpacks the git repositories clients
	// send through the blob store (package gitbundle: a run variable
	// "blob:KEY", such as the code review's --repo from a client whose
	// disk the workers cannot see), each once per host. The agents'
	// ManifestFor and instructions open them with gitbundle.Resolve, and
	// sandboxes copy from them: put it under the sandbox policy's allowed
	// roots (the troupe command's workers use $TROUPE_HOME/repos and
	// allow it). Function and sandbox tools find the spool in their
	// context too. The default, "", unpacks none: a run that names one
	// fails, saying so. Repos().Reap removes those no run opened lately.
	RepoDir string

	// Memory configures the consolidation of the memory scopes of agents
	// with memory (agents.MemoryConfig): models and bounds.
	Memory memory.MemoryOptions

	// MCP holds this worker's MCP sessions. The default is a pool of the
	// Runner's own, which the stop func of StartWorkers closes (ending
	// the stdio servers it started).
	MCP *mcp.Pool
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
	if cfg.ModelRateLimitWait == 0 {
		cfg.ModelRateLimitWait = DefaultModelRateLimitWait
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
	return nil
}

// DefaultModelRateLimitWait is the default of Config.ModelRateLimitWait.
const DefaultModelRateLimitWait = 30 * time.Minute

// checkModelLimits reports the invalid limits of a table, named by what.
func checkModelLimits(what string, limits map[string]agents.ModelLimit) error {
	var errs []error
	for _, m := range slices.Sorted(maps.Keys(limits)) {
		if err := limits[m].Check(); err != nil {
			errs = append(errs, fmt.Errorf("workflows: %s: model limit of %q: %w", what, m, err))
		}
	}
	return errors.Join(errs...)
}
