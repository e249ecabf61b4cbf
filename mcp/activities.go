package mcp

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
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/capabilities"
	"github.com/troupe-dev/troupe/internal/heartbeat"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/transcript"
	"github.com/troupe-dev/troupe/telemetry"
)

// Names of the MCP activities.
const (
	ToolsActivityName = "troupe.MCPTools"
	CallActivityName  = "troupe.MCPCall"
)

// ToolsInput is the MCP listing activity's input.
type ToolsInput struct {
	Graph string            `json:"graph"`
	Agent string            `json:"agent"`
	Run   agents.RunContext `json:"run"`
}

// CallInput is the MCP call activity's input.
type CallInput struct {
	Graph  string            `json:"graph"`
	Agent  string            `json:"agent"`
	Run    agents.RunContext `json:"run"`
	Server string            `json:"server"`
	Call   agents.Item       `json:"call"`
	// OutputKey is where an output too large to inline is stored.
	OutputKey string `json:"output_key"`
}

// toolKind is the kind of an MCP tool call, on its span and at the gate
// (gate.KindMCP).
const toolKind = "mcp"

// Activities are the MCP activities of a worker: they list an agent's
// MCP tools on this process, which opens (or reuses) the sessions and
// names its own queue in the catalog, and call them there.
// workflows.NewRunner builds them from its Config; Pool, Store and Agent
// are required.
type Activities struct {
	// Pool holds this process's MCP sessions.
	Pool *Pool
	// Store holds the catalogs' tool specs (content-addressed, under
	// mcp/tools/) and the outputs too large to inline.
	Store *blob.Store
	// Agent resolves a run's agent in the graph this worker serves now:
	// an agent (or graph) that is not there fails with
	// troupe.GraphChanged.
	Agent func(graph, name string) (*agents.Graph, *agents.Agent, error)
	// Queue is the task queue of this process's MCP sessions, which the
	// catalogs it lists name so that the agent's calls reach it; nil, or
	// "", names none, and the calls go to the workflow's own queue.
	Queue func() string

	// specs caches the tool specs of catalogs by blob key.
	specs sync.Map
}

// Register registers the listing and the call activities on w, by their
// names (ToolsActivityName, CallActivityName).
func (a *Activities) Register(w worker.ActivityRegistry) {
	w.RegisterActivityWithOptions(a.Tools, activity.RegisterOptions{Name: ToolsActivityName})
	w.RegisterActivityWithOptions(a.Call, activity.RegisterOptions{Name: CallActivityName})
}

func (a *Activities) queue() string {
	if a.Queue == nil {
		return ""
	}
	return a.Queue()
}

// Tools lists an agent's MCP tools on this worker, which opens (or
// reuses) the sessions and will take the agent's calls.
func (a *Activities) Tools(ctx context.Context, in ToolsInput) (*runtime.MCPCatalog, error) {
	g, agent, err := a.Agent(in.Graph, in.Agent)
	if err != nil {
		return nil, err
	}
	owner := map[string]string{}
	for _, s := range g.ToolSpecs(agent.Name) {
		owner[s.Name] = "the agent's own tool"
	}
	cat := &runtime.MCPCatalog{Queue: a.queue()}
	var specs []agents.ToolSpec
	for _, srv := range agent.MCPServers {
		l, err := heartbeat.While(ctx, func() (*Listing, error) { return a.Pool.Tools(ctx, srv) })
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
			cat.Tools = append(cat.Tools, runtime.MCPToolRef{Name: t.Name, Server: srv.Name, Remote: t.Remote, Approval: srv.NeedsApproval(t.Remote)})
			specs = append(specs, t.Spec)
		}
	}
	if len(specs) == 0 {
		return cat, nil
	}
	data, err := json.Marshal(specs)
	if err != nil {
		return nil, fmt.Errorf("mcp: tool specs of %s: %w", agent.Name, err)
	}
	sum := sha256.Sum256(data)
	cat.Specs = "mcp/tools/" + hex.EncodeToString(sum[:])
	if _, known := a.specs.Load(cat.Specs); !known {
		if err := a.Store.Put(ctx, cat.Specs, data); err != nil {
			return nil, fmt.Errorf("mcp: store the tool specs of %s: %w", agent.Name, err)
		}
		a.specs.Store(cat.Specs, specs)
	}
	return cat, nil
}

// ToolSpecs loads the specs a catalog names (runtime.MCPCatalog.Specs),
// for the model activity; "" names none. They are immutable
// (content-addressed), so each worker keeps what it read.
func (a *Activities) ToolSpecs(ctx context.Context, key string) ([]agents.ToolSpec, error) {
	if key == "" {
		return nil, nil
	}
	if v, ok := a.specs.Load(key); ok {
		return v.([]agents.ToolSpec), nil
	}
	data, err := a.Store.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("mcp: tool specs %s: %w", key, err)
	}
	var specs []agents.ToolSpec
	if err := json.Unmarshal(data, &specs); err != nil {
		return nil, fmt.Errorf("mcp: tool specs %s: %w", key, err)
	}
	a.specs.Store(key, specs)
	return specs, nil
}

// Call calls an MCP tool on the session this process holds, sending the
// call's idempotency key in the request's _meta (MetaIdempotencyKey). What the
// server answers, a tool error included, is the call's output; so are a
// server that died during the call (it is restarted on the next use) and
// a call that timed out. An answer's first image reaches the model as an
// image; further ones are named in the text.
func (a *Activities) Call(ctx context.Context, in CallInput) (agents.Item, error) {
	_, agent, err := a.Agent(in.Graph, in.Agent)
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
	mctx, span := telemetry.StartToolCall(ctx, troupe.ToolInput{Agent: in.Agent, Run: in.Run, Call: in.Call}, toolKind, attribute.String("troupe.mcp.server", in.Server))
	// The call's idempotency key goes to the server in the request's _meta.
	mctx = agents.WithRunContext(mctx, in.Run.ForCall(in.Call.CallID))
	res, err := heartbeat.While(ctx, func() (*Result, error) { return a.Pool.Call(mctx, srv, in.Call.Name, in.Call.Arguments) })
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
			return agents.Item{}, fmt.Errorf("mcp: image output of %s: %w", in.Call.Name, err)
		}
		text = string(doc)
	default:
		text = res.Text
	}
	item := agents.FunctionCallOutput(in.Call.CallID, text)
	item.Agent = in.Agent
	return transcript.Offload(ctx, a.Store, in.OutputKey, item)
}
