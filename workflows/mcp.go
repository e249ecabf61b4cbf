package workflows

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/capabilities"
	"github.com/troupe-dev/troupe/internal/heartbeat"
	"github.com/troupe-dev/troupe/mcp"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/transcript"
	"github.com/troupe-dev/troupe/telemetry"
)

// This file is how an agent uses its MCP servers' tools. The process that
// lists an agent's tools opens the sessions (package mcp keeps them in a
// pool, one per server declaration) and names its own MCP queue in the
// catalog; the agent's calls go to that queue, so they reach the process
// that holds the sessions (and owns the stdio server processes), not just
// its host. The pool caches each server's listing until the server says
// tools/list_changed or restarts; the agent asks the holding process for
// it before every turn, so the model sees a change at its next turn. When
// the holding process is gone, the tools are listed again elsewhere.

// Names of the MCP activities.
const (
	MCPToolsActivityName = "troupe.MCPTools"
	MCPCallActivityName  = "troupe.MCPCall"
)

// MCPToolsInput is the MCP listing activity's input.
type MCPToolsInput struct {
	Graph string            `json:"graph"`
	Agent string            `json:"agent"`
	Run   agents.RunContext `json:"run"`
}

// MCPCatalog is an agent's MCP tools as listed by one worker
// (runtime.MCPCatalog): it travels in the agent's state.
type MCPCatalog = runtime.MCPCatalog

// MCPToolRef is one MCP tool of a catalog (runtime.MCPToolRef).
type MCPToolRef = runtime.MCPToolRef

// MCPCallInput is the MCP call activity's input.
type MCPCallInput struct {
	Graph  string            `json:"graph"`
	Agent  string            `json:"agent"`
	Run    agents.RunContext `json:"run"`
	Server string            `json:"server"`
	Call   agents.Item       `json:"call"`
	// OutputKey is where an output too large to inline is stored.
	OutputKey string `json:"output_key"`
}

// mcpTools is an agent workflow's MCP catalog. A nil *mcpTools (an agent
// with no MCP servers) offers nothing.
type mcpTools struct {
	r     *Runner
	agent *runtime.AgentSpec
	in    troupe.AgentInput
	rc    *agents.RunContext
	cat   *MCPCatalog
	// lost says the process holding the sessions is gone.
	lost bool
}

func (m *mcpTools) names() []string {
	if m == nil || m.cat == nil {
		return nil
	}
	names := make([]string, len(m.cat.Tools))
	for i, t := range m.cat.Tools {
		names[i] = t.Name
	}
	return names
}

func (m *mcpTools) specs() string {
	if m == nil || m.cat == nil {
		return ""
	}
	return m.cat.Specs
}

func (m *mcpTools) ref(name string) (MCPToolRef, bool) {
	if m == nil || m.cat == nil {
		return MCPToolRef{}, false
	}
	for _, t := range m.cat.Tools {
		if t.Name == name {
			return t, true
		}
	}
	return MCPToolRef{}, false
}

// refresh lists the tools before each turn: the first time, and after the
// holding process was lost, on any worker (which then holds the
// sessions); otherwise on the holding process, from its cache unless a
// server's list changed. A failed first listing fails the agent; a failed
// refresh keeps the last catalog, whose calls then fail as tool errors.
func (m *mcpTools) refresh(ctx workflow.Context) error {
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

func (m *mcpTools) list(ctx workflow.Context, queue string) error {
	opts := workflow.ActivityOptions{
		Summary:             "list the MCP tools",
		StartToCloseTimeout: 2 * time.Minute,
		HeartbeatTimeout:    m.r.cfg.HeartbeatTimeout,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 3},
	}
	if queue != "" {
		// Only the holding process will do: it is there, or it is lost.
		opts.TaskQueue = queue
		opts.ScheduleToStartTimeout = m.r.cfg.HostTimeout
		opts.RetryPolicy.MaximumAttempts = 1
	}
	var cat MCPCatalog
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), MCPToolsActivityName,
		MCPToolsInput{Graph: m.in.Graph, Agent: m.in.Agent, Run: *m.rc}).Get(ctx, &cat)
	if err != nil {
		if m.cat != nil && queue == "" {
			return nil
		}
		return err
	}
	m.cat, m.lost = &cat, false
	return nil
}

// call runs one MCP tool call on the worker holding the server's session.
// Every failure becomes a tool output the model can act on; the run goes
// on.
func (m *mcpTools) call(ctx workflow.Context, c agents.Item, outputKey string) workflow.Future {
	f, set := workflow.NewFuture(ctx)
	answer := func(text string) {
		item := agents.FunctionCallOutput(c.CallID, text)
		item.Agent = m.in.Agent
		set.Set(item, nil)
	}
	ref, ok := m.ref(c.Name)
	if !ok {
		answer(fmt.Sprintf("Error: MCP tool %q is not available.", c.Name))
		return f
	}
	srv := m.agent.MCPServer(ref.Server)
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		Summary:                c.Name + " (MCP server " + ref.Server + ")",
		TaskQueue:              m.cat.Queue,
		ScheduleToStartTimeout: m.r.cfg.HostTimeout,
		// A call may first restart its server and list its tools (the
		// pool bounds each by the larger of the call timeout and 30 s),
		// then run for the call timeout; the pool ends it then.
		// Heartbeats tell a lost process sooner.
		StartToCloseTimeout: 3*max(srv.CallTimeout, 30*time.Second) + 30*time.Second,
		HeartbeatTimeout:    m.r.cfg.HeartbeatTimeout,
		// A call is not retried: an MCP tool may not be idempotent. The
		// model sees what happened and decides.
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	inner := workflow.ExecuteActivity(actx, MCPCallActivityName, MCPCallInput{Graph: m.in.Graph, Agent: m.in.Agent, Run: *m.rc,
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

// MCPTools lists an agent's MCP tools on this worker, which opens (or
// reuses) the sessions and will take the agent's calls.
func (a *Activities) MCPTools(ctx context.Context, in MCPToolsInput) (*MCPCatalog, error) {
	g, agent, err := a.r.agent(in.Graph, in.Agent)
	if err != nil {
		return nil, err
	}
	owner := map[string]string{}
	for _, s := range g.ToolSpecs(agent.Name) {
		owner[s.Name] = "the agent's own tool"
	}
	cat := &MCPCatalog{Queue: a.r.mcpQueue()}
	var specs []agents.ToolSpec
	for _, srv := range agent.MCPServers {
		l, err := heartbeat.While(ctx, func() (*mcp.Listing, error) { return a.r.mcp.Tools(ctx, srv) })
		if err != nil {
			msg := fmt.Sprintf("agent %s: listing the tools of MCP server %s: %v", agent.Name, srv.Name, err)
			if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
				// A command that cannot run will not run on a retry either.
				return nil, temporal.NewNonRetryableApplicationError(msg, troupe.ErrMCP, err)
			}
			return nil, temporal.NewApplicationErrorWithCause(msg, troupe.ErrMCP, err)
		}
		for _, t := range l.Tools {
			if other, dup := owner[t.Name]; dup {
				return nil, troupe.NonRetryable(troupe.ErrMCP, "agent %s: tool %s of MCP server %s is named %q like %s; set a Prefix on the server",
					agent.Name, t.Remote, srv.Name, t.Name, other)
			}
			owner[t.Name] = "tool " + t.Remote + " of MCP server " + srv.Name
			cat.Tools = append(cat.Tools, MCPToolRef{Name: t.Name, Server: srv.Name, Remote: t.Remote, Approval: srv.NeedsApproval(t.Remote)})
			specs = append(specs, t.Spec)
		}
	}
	if len(specs) == 0 {
		return cat, nil
	}
	data, err := json.Marshal(specs)
	if err != nil {
		return nil, fmt.Errorf("workflows: MCP tool specs of %s: %w", agent.Name, err)
	}
	sum := sha256.Sum256(data)
	cat.Specs = "mcp/tools/" + hex.EncodeToString(sum[:])
	if _, known := a.mcpSpecs.Load(cat.Specs); !known {
		if err := a.r.cfg.Store.Put(ctx, cat.Specs, data); err != nil {
			return nil, fmt.Errorf("workflows: store MCP tool specs of %s: %w", agent.Name, err)
		}
		a.mcpSpecs.Store(cat.Specs, specs)
	}
	return cat, nil
}

// mcpToolSpecs loads the specs a catalog names; they are immutable
// (content-addressed), so each worker keeps what it read.
func (a *Activities) mcpToolSpecs(ctx context.Context, key string) ([]agents.ToolSpec, error) {
	if key == "" {
		return nil, nil
	}
	if v, ok := a.mcpSpecs.Load(key); ok {
		return v.([]agents.ToolSpec), nil
	}
	data, err := a.r.cfg.Store.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("workflows: MCP tool specs %s: %w", key, err)
	}
	var specs []agents.ToolSpec
	if err := json.Unmarshal(data, &specs); err != nil {
		return nil, fmt.Errorf("workflows: MCP tool specs %s: %w", key, err)
	}
	a.mcpSpecs.Store(key, specs)
	return specs, nil
}

// MCPCall calls an MCP tool on the session this process holds. What the
// server answers, a tool error included, is the call's output; so are a
// server that died during the call (it is restarted on the next use) and
// a call that timed out. An answer's first image reaches the model as an
// image; further ones are named in the text.
func (a *Activities) MCPCall(ctx context.Context, in MCPCallInput) (agents.Item, error) {
	_, agent, err := a.r.agent(in.Graph, in.Agent)
	if err != nil {
		return agents.Item{}, err
	}
	var srv *agents.MCPServer
	for _, s := range agent.MCPServers {
		if s.Name == in.Server {
			srv = s
		}
	}
	if srv == nil {
		return agents.Item{}, troupe.NonRetryable(troupe.ErrInternal, "agent %s has no MCP server %q", in.Agent, in.Server)
	}
	mctx, span := startMCP(ctx, in)
	res, err := heartbeat.While(ctx, func() (*mcp.Result, error) { return a.r.mcp.Call(mctx, srv, in.Call.Name, in.Call.Arguments) })
	var text string
	defer func() { telemetry.EndTool(span, text) }()
	switch {
	case err != nil && ctx.Err() != nil:
		return agents.Item{}, err
	case err != nil:
		text = "Error: " + err.Error()
	case res.IsError:
		text = "Error: " + res.Text
	case len(res.Images) > 0:
		img := res.Images[0]
		caption := res.Text
		if n := len(res.Images) - 1; n > 0 {
			caption += fmt.Sprintf("\n(%d more image(s) not shown)", n)
		}
		doc, err := json.Marshal(capabilities.ImageOutput{Text: caption,
			ImageURL: "data:" + img.MIMEType + ";base64," + base64.StdEncoding.EncodeToString(img.Data)})
		if err != nil {
			return agents.Item{}, fmt.Errorf("workflows: image output of %s: %w", in.Call.Name, err)
		}
		text = string(doc)
	default:
		text = res.Text
	}
	item := agents.FunctionCallOutput(in.Call.CallID, text)
	item.Agent = in.Agent
	return transcript.Offload(ctx, a.r.cfg.Store, in.OutputKey, item)
}
