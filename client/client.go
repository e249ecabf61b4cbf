// Package client starts, follows, waits on and stops Troupe runs on a
// Temporal server. It is the one door to runs: the troupe CLI, its MCP
// server and users' own Go code all go through it.
//
// A Client wraps a Temporal client and the task queue that workers serve;
// Start gives a Run, and Client.Run the handle of one started elsewhere
// (by id). A Run's Follow shows its events (and those of every agent it
// starts) in order, each once, across continue-as-new; Result waits for
// its outcome; Cancel and Terminate stop it. Sessions likewise
// (CreateSession, Session).
//
// Following is this package's own: Follow watches each workflow's history
// and reads its events query, walks the run's tree of workflows, keeps a
// Cursor, reads the pages of events saved by workflows that continued as
// new (WithEventStore), takes events from a worker in this process as
// they are recorded (FollowLive, LiveEvents) and the text deltas of model
// turns from the workers' live feeds (WithDeltas).
//
// Connection resolves where a program connects: a command's flags, over
// the TEMPORAL_* environment variables, over a profile of temporal.toml, as
// the temporal CLI and the SDK's contrib/envconfig read them (see
// Connection for the order). The troupe commands all go through it, and
// so can a program of one's own:
//
//	res, err := client.Connection{Profile: "prod"}.Resolve()
//	tc, err := temporalclient.Dial(res.Options)
//
// The package imports no worker code: a program that only starts and
// follows runs links neither the workflows nor a worker. The types of runs
// (RunInput, RunResult, Event) are those of the vocabulary, package troupe,
// aliased here so that a caller needs this package only.
package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/troupe-dev/troupe"
)

// The types a caller of this package sees, from the vocabulary.
type (
	// RunInput is what a run starts with: graph, agent, message, vars.
	RunInput = troupe.RunInput
	// RunResult is what a run ends with: the agent that answered, its
	// output, usage.
	RunResult = troupe.RunResult
	// Event is one thing that happened in a run: a turn, a tool call, a
	// handoff, a retry, the final output.
	Event = troupe.Event

	// Cursor is where a follower stands in a run (FollowFrom).
	Cursor = troupe.Cursor
)

// EventTextDelta is the kind of the events that carry a piece of a model
// turn's text as it is generated (Event.Detail), which followers get with
// WithDeltas. No workflow records them.
const EventTextDelta = troupe.EventTextDelta

// DefaultPollInterval is how often Follow asks a run for new events when
// no EventBus brings them.
const DefaultPollInterval = 100 * time.Millisecond

// Config configures a Client. Its zero value works but for Temporal.
type Config struct {
	// Temporal is the client of the Temporal server the runs live on.
	// Required; the Client does not close it.
	Temporal client.Client
	// TaskQueue is where Start starts runs: the queue the workers of
	// their graphs serve. Default troupe.DefaultTaskQueue, the queue
	// of `troupe dev` and `troupe run`.
	TaskQueue string
	// Events, when set, is the EventBus of a worker in this process
	// (workflows.Config.Events): Follow takes the events it records as
	// they happen and polls only for those of other workers.
	Events LiveEvents
	// PollInterval is how often Follow polls for events; default
	// DefaultPollInterval.
	PollInterval time.Duration
	// Store, when set, is the blob store of the runs' workers: Follow
	// and Events read from it the events that a workflow saved as it
	// continued as new (WithEventStore), which stay readable
	// after Temporal's retention removed its earlier runs. Without it,
	// those events are read from the earlier runs. The Client does not
	// close it.
	Store EventStore
	// DataConverter decodes what the client reads from histories and
	// memos by hand (a run's input and summary, a session's input): the
	// data converter the Temporal client was dialled with
	// (Resolved.Options.DataConverter, which opens sealed payloads).
	// Default: the SDK's default data converter.
	DataConverter converter.DataConverter
	// Inputs, when set, is the workers' blob store, where Start and
	// Session.Send put a run input or message over troupe.MessageInline
	// (up to troupe.MessageLimit), to send it by reference. Without it,
	// those fail with troupe.ErrPayloadTooLarge. The Client does not close
	// it.
	Inputs InputStore
}

// Client starts and reads runs. It is safe for concurrent use.
type Client struct {
	cfg Config
}

// New returns a Client for cfg.
func New(cfg Config) (*Client, error) {
	if cfg.Temporal == nil {
		return nil, errors.New("client: Config.Temporal is required")
	}
	if cfg.TaskQueue == "" {
		cfg.TaskQueue = troupe.DefaultTaskQueue
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.DataConverter == nil {
		cfg.DataConverter = converter.GetDefaultDataConverter()
	}
	if none(cfg.Events) {
		cfg.Events = nil
	}
	if none(cfg.Store) {
		cfg.Store = nil
	}
	if none(cfg.Inputs) {
		cfg.Inputs = nil
	}
	return &Client{cfg: cfg}, nil
}

// Temporal returns the Temporal client c goes through.
func (c *Client) Temporal() client.Client { return c.cfg.Temporal }

// TaskQueue returns the queue Start starts runs on.
func (c *Client) TaskQueue() string { return c.cfg.TaskQueue }

// StartOption changes how Start starts a run.
type StartOption func(*startOptions)

type startOptions struct {
	id string
}

// WithID starts the run under id instead of a fresh one, or returns the
// run that already holds id (running or closed; a closed run is never
// replaced), so that a derived id makes Start idempotent. An id must not
// hold "/", which separates a run from its agents.
func WithID(id string) StartOption {
	return func(o *startOptions) { o.id = id }
}

// Start starts a run of in on the client's task queue and returns its
// handle. Without WithID the run gets a fresh id, "troupe-<graph>-<8 hex>".
// An input over troupe.MessageInline goes by reference (Config.Inputs),
// when every worker of the queue takes one (else troupe.ErrWorkerTooOld);
// one over troupe.MessageLimit fails with troupe.ErrPayloadTooLarge, and
// nothing starts.
func (c *Client) Start(ctx context.Context, in RunInput, opts ...StartOption) (*Run, error) {
	var o startOptions
	for _, opt := range opts {
		opt(&o)
	}
	if len(in.Input) > troupe.MessageInline && in.InputRef == nil {
		// Too big to travel inside Temporal: by reference, to workers
		// that take one.
		if err := troupe.CheckMessage("the run input", len(in.Input)); err != nil {
			return nil, err
		}
		if err := c.takeInputRefs(ctx, len(in.Input)); err != nil {
			return nil, err
		}
		if o.id == "" {
			// The input is stored under the run's id, so the run is
			// named first.
			o.id = freshRunID(in.Graph)
		}
		ref, err := c.storeMessage(ctx, o.id, "the run input", in.Input)
		if err != nil {
			return nil, err
		}
		in.Input, in.InputRef = ref.Preview, ref
	}
	var (
		wr  client.WorkflowRun
		err error
	)
	if o.id != "" {
		wr, err = StartRunWithID(ctx, c.cfg.Temporal, c.cfg.TaskQueue, o.id, in)
	} else {
		wr, err = StartRun(ctx, c.cfg.Temporal, c.cfg.TaskQueue, in)
	}
	if err != nil {
		return nil, err
	}
	return c.Run(wr.GetID()), nil
}

// Run returns the handle of the run id, started by this client or any
// other. It does not check that the run exists; Describe does.
func (c *Client) Run(id string) *Run { return &Run{c: c, id: id} }

// List returns the runs the server holds (as long as its retention keeps
// closed ones), newest first.
func (c *Client) List(ctx context.Context, o ListOptions) ([]RunInfo, error) {
	return listRuns(ctx, c.cfg.Temporal, c.cfg.DataConverter, o)
}

// Run is the handle of one run.
type Run struct {
	c  *Client
	id string
}

// ID returns the run's id (its orchestrator's workflow id).
func (r *Run) ID() string { return r.id }

// Follow calls fn with each event of the run and of every agent it
// starts, in the order each recorded them, each once, across
// continue-as-new, until ctx is done: cancel ctx once Result has
// returned, and Follow returns after a last reading that brings nothing
// new (within 30 s). With Config.Events set, the events of this process's
// worker arrive as they are recorded. WithDeltas adds the turns' text as
// it is generated.
func (r *Run) Follow(ctx context.Context, fn func(Event), opts ...FollowOption) error {
	return FollowLive(ctx, r.c.cfg.Temporal, r.id, r.c.cfg.PollInterval, r.c.cfg.Events, fn, append(r.c.follow(), opts...)...)
}

// FollowFrom is Follow from cursor on: fn gets the events after those the
// cursor has seen (keep it with Cursor.Add in fn), so a follower that
// stopped, or another process given the cursor, goes on where it was,
// with no event repeated or skipped.
func (r *Run) FollowFrom(ctx context.Context, cursor Cursor, fn func(Event), opts ...FollowOption) error {
	return FollowLive(ctx, r.c.cfg.Temporal, r.id, r.c.cfg.PollInterval, r.c.cfg.Events, fn, append(append(r.c.follow(), From(cursor)), opts...)...)
}

// Events returns the run's events so far, and those of every agent it
// started.
func (r *Run) Events(ctx context.Context) ([]Event, error) {
	return Events(ctx, r.c.cfg.Temporal, r.id, r.c.follow()...)
}

// follow is how the client's followers read events.
func (c *Client) follow() []FollowOption {
	if c.cfg.Store == nil {
		return nil
	}
	return []FollowOption{WithEventStore(c.cfg.Store)}
}

// Result waits for the run to close and returns its result, or its
// error: a *temporal.WorkflowExecutionError whose cause names the failure
// (troupe.ErrorType gives its type, such as "troupe.GraphChanged"), or
// the error that stopped the wait (ctx's, the server's).
func (r *Run) Result(ctx context.Context) (*RunResult, error) {
	var res RunResult
	if err := r.c.cfg.Temporal.GetWorkflow(ctx, r.id, "").Get(ctx, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Describe returns the run as the server sees it now: status, graph,
// summary, times, task queue.
func (r *Run) Describe(ctx context.Context) (RunInfo, error) {
	return describeRun(ctx, r.c.cfg.Temporal, r.c.cfg.DataConverter, r.id)
}

// Input returns the input the run started with.
func (r *Run) Input(ctx context.Context) (RunInput, error) {
	return runInputOf(ctx, r.c.cfg.Temporal, r.c.cfg.DataConverter, r.id)
}

// ErrClosed is the error of Cancel and Terminate for a run that has
// closed already.
var ErrClosed = errors.New("the run has closed")

// Cancel asks the run to stop: its agents are cancelled at their next
// step and their sandboxes stopped; Result then returns a cancelled
// error. The id of a workflow that is not a run (one of a run's agents)
// is refused with ErrNotRun, and a run that has closed with
// ErrClosed.
func (r *Run) Cancel(ctx context.Context) error {
	if err := r.running(ctx, "cancel"); err != nil {
		return err
	}
	if err := r.c.cfg.Temporal.CancelWorkflow(ctx, r.id, ""); err != nil {
		return fmt.Errorf("cancel run %s: %w", r.id, err)
	}
	return nil
}

// Terminate ends the run at once, recording reason in its history. Its
// agents get no chance to clean up: their sandboxes are left to the
// workers' reaping. It refuses what Cancel refuses.
func (r *Run) Terminate(ctx context.Context, reason string) error {
	if err := r.running(ctx, "terminate"); err != nil {
		return err
	}
	if err := r.c.cfg.Temporal.TerminateWorkflow(ctx, r.id, "", reason); err != nil {
		return fmt.Errorf("terminate run %s: %w", r.id, err)
	}
	return nil
}

// running checks that the run exists, is a run, and runs.
func (r *Run) running(ctx context.Context, what string) error {
	info, err := r.Describe(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if info.Close != nil {
		return fmt.Errorf("%s run %s: %w (%s)", what, r.id, ErrClosed, info.Status)
	}
	return nil
}
