package server

// This file holds the Server: its Config, construction (one MCP tool per
// exposed agent, plus the run tools) and the stdio-style Serve. Calls are
// in tools.go, run lookups in runs.go, HTTP in http.go, the in-flight
// registry that turns cancellations into workflow cancels in calls.go.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	troupeclient "github.com/troupe-dev/troupe/client"
)

// Keys of _meta this package reads or writes.
const (
	// MetaIdempotencyKey is the request _meta key of a client's
	// idempotency key: a string of 1 to 256 bytes. Calls with the same
	// key, tool and arguments are one run, whatever their session.
	MetaIdempotencyKey = "troupe/idempotency_key"
	// MetaRunID is the result and first progress notification _meta key
	// of the run's workflow id.
	MetaRunID = "troupe/run_id"
	// MetaErrorType is the result _meta key of the troupe error type
	// (troupe.ErrorType) of a failed run, or "cancelled", "terminated",
	// "timed_out".
	MetaErrorType = "troupe/error_type"
	// MetaStatus is the _meta key of the run's status in the answers of
	// troupe_run_result and troupe_run_approve, and of
	// StatusWaitingForApproval in any answer that lists calls that wait.
	MetaStatus = "troupe/status"
	// MetaApprovals is the _meta key, in an answer whose run or session
	// waits for decisions (MetaStatus StatusWaitingForApproval), of the
	// calls that wait: [{"id", "agent", "tool", "arguments", "since",
	// "deadline"?, "on_timeout"?}].
	MetaApprovals = "troupe/approvals"
	// MetaSessionID is the _meta key of a session tool's session id, in
	// its result and its first progress notification.
	MetaSessionID = "troupe/session_id"
	// metaRequestID is where HTTPHandler and Serve copy a tools/call's
	// JSON-RPC id; whatever the client sends there is overwritten.
	metaRequestID = "troupe/jsonrpc_id"
)

// Names of the run tools.
const (
	ToolRunStatus = "troupe_run_status"
	ToolRunResult = "troupe_run_result"
	// ToolRunApprove decides a call that waits for approval, then waits
	// for the run or session as the tool that started it did.
	ToolRunApprove = "troupe_run_approve"
)

// Config configures a Server. Its zero value works but for Client.
type Config struct {
	// Client is the Temporal client runs are started and read through.
	// Required.
	Client client.Client
	// TaskQueue is the queue of the workers that run Graphs; empty means
	// troupe.DefaultTaskQueue.
	TaskQueue string
	// Graphs are the graphs served: each exposed agent becomes a tool, and
	// the run tools answer for runs of these graphs only. Tool names must
	// be unique across graphs.
	Graphs []*agents.Graph
	// Name and Version identify the server to clients; empty means
	// "troupe" and the main module's version.
	Name, Version string
	// Logger receives the server's diagnostics (and go-sdk's); nil
	// discards them. Over stdio it must not write to stdout.
	Logger *slog.Logger
	// PollInterval is how often a call polls its run's events for
	// progress notifications; 0 means 250ms.
	PollInterval time.Duration
	// Events, when set, is the EventBus of a worker in this process
	// (workflows.Config.Events) that runs Graphs: a call's progress
	// notifications then carry its run's events as they are recorded,
	// and polls bring only those of other workers.
	Events troupeclient.LiveEvents
	// Workers, when set, is asked before a call of an agent or session
	// tool starts anything whether a worker serves TaskQueue: when it
	// returns an error, the call answers with it (isError, with
	// troupe.ErrNoWorker under MetaErrorType) at once, instead of
	// waiting for a worker that may never come, and nothing is started.
	// Nil starts calls without asking (the workers run beside the
	// server, say).
	Workers func(ctx context.Context) error
	// Inputs, when set, is the workers' blob store, where a call's
	// message over troupe.MessageInline goes to travel by reference
	// (client.Config.Inputs); without it, such a call fails with
	// troupe.ErrPayloadTooLarge.
	Inputs troupeclient.InputStore
	// PrepareVars, when set, readies the variables of each run and
	// session a call starts, before it starts: it gets the graph, the id
	// the run or session will have, and its own copy of the variables
	// the call's arguments set, which it may change. `troupe mcp serve`
	// sends a repository on its disk to the workers there and names it
	// by reference. The id is derived from the call before the variables
	// are readied, so a retried call still finds its run or session
	// (whose variables are those of the first attempt); a session found
	// so is not readied again. Its error, one line that says what to do,
	// is the call's answer (isError), and nothing starts. Nil starts runs
	// and sessions with the variables as the arguments set them.
	PrepareVars func(ctx context.Context, graph, id string, vars map[string]string) error
	// DataConverter is the data converter Client was dialled with, which
	// reads runs' and sessions' inputs from their histories (the payload
	// codec's: troupeclient.Config.DataConverter). Default: the SDK's.
	DataConverter converter.DataConverter
}

// Server is an MCP server whose tools are the exposed agents of its graphs,
// each as an agent tool (a run per call) and a session tool (a
// conversation).
// Serve it over HTTP with HTTPHandler, or over stdio (or any single-session
// transport) with Serve.
type Server struct {
	cfg    Config
	log    *slog.Logger
	sdk    *mcp.Server
	graphs map[string]*agents.Graph
	tools  []*agentTool
	// sessions are the agent tools' session tools, in the same order.
	sessions []*sessionTool
	calls    *calls
	runs     *troupeclient.Client // starts, follows, reads and cancels runs
}

// New returns a Server for cfg. It fails when cfg has no Client, or when
// two tools (agent, session or run tools) share a name.
func New(cfg Config) (*Server, error) {
	if cfg.Client == nil {
		return nil, errors.New("server: Config.Client is required")
	}
	if cfg.TaskQueue == "" {
		cfg.TaskQueue = troupe.DefaultTaskQueue
	}
	if cfg.Name == "" {
		cfg.Name = "troupe"
	}
	if cfg.Version == "" {
		cfg.Version = moduleVersion()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 250 * time.Millisecond
	}
	runs, err := troupeclient.New(troupeclient.Config{Temporal: cfg.Client, TaskQueue: cfg.TaskQueue, PollInterval: cfg.PollInterval, Events: cfg.Events, Inputs: cfg.Inputs, DataConverter: cfg.DataConverter})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, graphs: map[string]*agents.Graph{}, runs: runs}
	s.calls = newCalls(func(ctx context.Context, id string) error { return runs.Run(id).Cancel(ctx) }, cfg.Logger)
	s.sdk = mcp.NewServer(&mcp.Implementation{Name: cfg.Name, Title: "Troupe", Version: cfg.Version}, &mcp.ServerOptions{
		Instructions: "Each agent tool starts a durable Troupe run. Its id is in the result's _meta[\"" + MetaRunID +
			"\"] and in the first progress notification; if a call is interrupted, the run goes on: read it with " +
			ToolRunStatus + " and " + ToolRunResult + ". Each agent tool X has a session tool X" + SessionToolSuffix +
			" that holds a conversation: its answers (and first progress notification) carry a session_id; pass it back to continue the conversation, from any connection. " +
			"A call an agent makes may need a human's approval: a client that supports elicitation is asked; otherwise the answer says the run waits (status " + StatusWaitingForApproval +
			") and lists the calls: ask the user, then decide each with " + ToolRunApprove + ", which answers with the result.",
		Logger:   cfg.Logger,
		HasTools: true,
	})
	s.sdk.AddReceivingMiddleware(s.interceptCancel)
	names := map[string]string{ToolRunStatus: "a run tool", ToolRunResult: "a run tool", ToolRunApprove: "a run tool"}
	for _, g := range cfg.Graphs {
		if g == nil {
			return nil, errors.New("server: nil graph")
		}
		if _, dup := s.graphs[g.Name()]; dup {
			return nil, fmt.Errorf("server: graph %s given twice", g.Name())
		}
		s.graphs[g.Name()] = g
		for _, a := range g.Exposed() {
			t, err := newAgentTool(g, a)
			if err != nil {
				return nil, err
			}
			if other, dup := names[t.name]; dup {
				return nil, fmt.Errorf("server: tool name %s of agent %s/%s is taken by %s", t.name, g.Name(), a.Name, other)
			}
			names[t.name] = g.Name() + "/" + a.Name
			s.tools = append(s.tools, t)
			s.sdk.AddTool(t.tool, s.callAgent(t))
		}
	}
	// The session tools come after all agent tools, so that a clash
	// between an agent tool and a session tool names the session tool.
	for _, t := range s.tools {
		st, err := newSessionTool(t)
		if err != nil {
			return nil, err
		}
		if other, dup := names[st.name]; dup {
			return nil, fmt.Errorf("server: session tool name %s of agent %s/%s is taken by %s", st.name, t.graph.Name(), t.agent.Name, other)
		}
		names[st.name] = "the session tool of " + t.graph.Name() + "/" + t.agent.Name
		s.sessions = append(s.sessions, st)
		s.sdk.AddTool(st.tool, s.callSession(st))
	}
	s.sdk.AddTool(runStatusTool, s.runStatus)
	s.sdk.AddTool(runResultTool, s.runResult)
	s.sdk.AddTool(runApproveTool, s.runApprove)
	return s, nil
}

// MCP returns the underlying go-sdk server, for transports this package
// does not wrap. Calls served through it carry no JSON-RPC id (see the
// package doc), so only an idempotency key dedupes them and
// notifications/cancelled cannot find them.
func (s *Server) MCP() *mcp.Server { return s.sdk }

// Tools lists the names of the agent tools, each followed by its session
// tool's, in the order of Graphs and of each graph's exposed agents.
func (s *Server) Tools() []string {
	out := make([]string, 0, 2*len(s.tools))
	for i, t := range s.tools {
		out = append(out, t.name, s.sessions[i].name)
	}
	return out
}

// Serve runs one session over t — a persistent, single-session transport
// such as mcp.StdioTransport — until the client disconnects or ctx is done.
// The session gets a random id when t has none, so requests are scoped
// for idempotency and cancellation. Calls still waiting when Serve returns
// are released: they stop waiting, and their runs go on.
func (s *Server) Serve(ctx context.Context, t mcp.Transport) error {
	ss, err := s.sdk.Connect(ctx, &stampingTransport{Transport: t}, nil)
	if err != nil {
		return fmt.Errorf("server: connect: %w", err)
	}
	closed := make(chan error, 1)
	go func() { closed <- ss.Wait() }()
	select {
	case err := <-closed:
		s.calls.releaseSession(ss.ID(), errDisconnected)
		return err
	case <-ctx.Done():
		// Close waits for the handlers in flight: release them first.
		s.calls.releaseSession(ss.ID(), errShutdown)
		_ = ss.Close()
		<-closed
		return nil
	}
}

// Close releases every call still waiting on its run (the runs go on),
// so that HTTP servers and sessions can shut down promptly. The Server
// keeps serving new requests; stop the transports first.
func (s *Server) Close() {
	s.calls.releaseAll(errShutdown)
}

func moduleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
