package mcp

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
)

// Settings are the timeouts of an agent workflow's MCP activities. They
// are read, not recorded (replay does not check timeouts); every field's
// zero value is its default.
type Settings struct {
	// HostTimeout is how long a listing or a call waits for the process
	// holding the sessions (schedule-to-start) before that process is
	// taken as gone; the default is 30 seconds.
	HostTimeout time.Duration
	// HeartbeatTimeout is how soon a process that died during a listing
	// or a call is noticed; the default is 30 seconds.
	HeartbeatTimeout time.Duration
}

// Tools are an agent workflow's MCP tools: the catalog its servers'
// tools were last listed in (runtime.MCPCatalog, which travels in the
// agent's state), listed again before each turn, and the calls of them.
// A nil *Tools (an agent with no MCP servers) offers nothing. Its methods
// are workflow code.
type Tools struct {
	set   Settings
	agent *runtime.AgentSpec
	in    troupe.AgentInput
	rc    *agents.RunContext
	cat   *runtime.MCPCatalog
	// lost says the process holding the sessions is gone.
	lost bool
}

// NewTools returns the MCP tools of agent, in the agent workflow of in
// whose run context (the turn's, as it changes) rc points to; cat and
// lost are what the workflow's state holds of them (State), nil and false
// at the agent's start.
func NewTools(set Settings, agent *runtime.AgentSpec, in troupe.AgentInput, rc *agents.RunContext, cat *runtime.MCPCatalog, lost bool) *Tools {
	if set.HostTimeout <= 0 {
		set.HostTimeout = 30 * time.Second
	}
	if set.HeartbeatTimeout <= 0 {
		set.HeartbeatTimeout = 30 * time.Second
	}
	return &Tools{set: set, agent: agent, in: in, rc: rc, cat: cat, lost: lost}
}

// State is what the agent's state keeps of the tools through
// continue-as-new: the catalog, and whether the process holding the
// sessions is gone.
func (m *Tools) State() (*runtime.MCPCatalog, bool) {
	if m == nil {
		return nil, false
	}
	return m.cat, m.lost
}

// Names are the names of the tools the catalog offers the model.
func (m *Tools) Names() []string {
	if m == nil || m.cat == nil {
		return nil
	}
	names := make([]string, len(m.cat.Tools))
	for i, t := range m.cat.Tools {
		names[i] = t.Name
	}
	return names
}

// Specs is the blob key of the catalog's tool specs, for the model
// activity (Activities.ToolSpecs); "" for none.
func (m *Tools) Specs() string {
	if m == nil || m.cat == nil {
		return ""
	}
	return m.cat.Specs
}

// Ref is the tool of the catalog the model calls name.
func (m *Tools) Ref(name string) (runtime.MCPToolRef, bool) {
	if m == nil || m.cat == nil {
		return runtime.MCPToolRef{}, false
	}
	for _, t := range m.cat.Tools {
		if t.Name == name {
			return t, true
		}
	}
	return runtime.MCPToolRef{}, false
}

// Refresh lists the tools before each turn: the first time, and after the
// holding process was lost, on any worker (which then holds the
// sessions); otherwise on the holding process, from its cache unless a
// server's list changed. A failed first listing fails the agent; a failed
// refresh keeps the last catalog, whose calls then fail as tool errors.
func (m *Tools) Refresh(ctx workflow.Context) error {
	if m == nil {
		return nil
	}
	if m.cat == nil || m.lost || m.cat.Queue == "" {
		return m.list(ctx, "")
	}
	err := m.list(ctx, m.cat.Queue)
	var te *temporal.TimeoutError
	if errors.As(err, &te) && te.TimeoutType() == enums.TIMEOUT_TYPE_SCHEDULE_TO_START {
		return m.list(ctx, "")
	}
	return nil
}

func (m *Tools) list(ctx workflow.Context, queue string) error {
	opts := workflow.ActivityOptions{
		Summary:             "list the MCP tools",
		StartToCloseTimeout: 2 * time.Minute,
		HeartbeatTimeout:    m.set.HeartbeatTimeout,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 3},
	}
	if queue != "" {
		// Only the holding process will do: it is there, or it is lost.
		opts.TaskQueue = queue
		opts.ScheduleToStartTimeout = m.set.HostTimeout
		opts.RetryPolicy.MaximumAttempts = 1
	}
	var cat runtime.MCPCatalog
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), ToolsActivityName,
		ToolsInput{Graph: m.in.Graph, Agent: m.in.Agent, Run: *m.rc}).Get(ctx, &cat)
	if err != nil {
		if m.cat != nil && queue == "" {
			return nil
		}
		return err
	}
	m.cat, m.lost = &cat, false
	return nil
}

// Call runs one MCP tool call on the worker holding the server's session.
// Every failure becomes a tool output the model can act on; the run goes
// on.
func (m *Tools) Call(ctx workflow.Context, c agents.Item, outputKey string) workflow.Future {
	f, set := workflow.NewFuture(ctx)
	answer := func(text string) {
		item := agents.FunctionCallOutput(c.CallID, text)
		item.Agent = m.in.Agent
		set.Set(item, nil)
	}
	ref, ok := m.Ref(c.Name)
	if !ok {
		answer(fmt.Sprintf("Error: MCP tool %q is not available.", c.Name))
		return f
	}
	srv := m.agent.MCPServer(ref.Server)
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		Summary:                c.Name + " (MCP server " + ref.Server + ")",
		TaskQueue:              m.cat.Queue,
		ScheduleToStartTimeout: m.set.HostTimeout,
		// A call may first restart its server and list its tools (the
		// pool bounds each by the larger of the call timeout and 30 s),
		// then run for the call timeout; the pool ends it then.
		// Heartbeats tell a lost process sooner.
		StartToCloseTimeout: 3*max(srv.CallTimeout, 30*time.Second) + 30*time.Second,
		HeartbeatTimeout:    m.set.HeartbeatTimeout,
		// A call is not retried: an MCP tool may not be idempotent. The
		// model sees what happened and decides.
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	inner := workflow.ExecuteActivity(actx, CallActivityName, CallInput{Graph: m.in.Graph, Agent: m.in.Agent, Run: *m.rc,
		Server: ref.Server, Call: c, OutputKey: outputKey})
	workflow.Go(ctx, func(gctx workflow.Context) {
		var item agents.Item
		err := inner.Get(gctx, &item)
		var te *temporal.TimeoutError
		switch {
		case err == nil:
			set.Set(item, nil)
		case errors.As(err, &te) && te.TimeoutType() == enums.TIMEOUT_TYPE_SCHEDULE_TO_START:
			m.lost = true
			answer(fmt.Sprintf("Error: the call of %s was not made: the worker holding MCP server %s is gone. "+
				"The server is reconnected before your next turn; call the tool again.", c.Name, ref.Server))
		case errors.As(err, &te) && te.TimeoutType() == enums.TIMEOUT_TYPE_HEARTBEAT:
			m.lost = true
			answer(fmt.Sprintf("Error: the worker running the call of %s (MCP server %s) was lost during the call, "+
				"so it may or may not have taken effect. The server is reconnected before your next turn.", c.Name, ref.Server))
		case errors.As(err, &te):
			answer(fmt.Sprintf("Error: the call of %s (MCP server %s) timed out.", c.Name, ref.Server))
		default:
			answer(fmt.Sprintf("Error: MCP tool %s failed: %v", c.Name, err))
		}
	})
	return f
}
