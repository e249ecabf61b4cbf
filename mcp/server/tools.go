package server

// This file turns exposed agents into MCP tools (schemas, annotations) and
// serves their calls: start the run under its derived id, follow it for
// progress, and answer with its output or the reason it failed.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.temporal.io/sdk/temporal"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	troupeclient "github.com/troupe-dev/troupe/client"
)

// startTimeout bounds starting a run; the start does not depend on the
// request's context, so a cancellation cannot leave it half done.
const startTimeout = 30 * time.Second

// textOutputSchema is the output schema of agents without an output type:
// MCP wants an object, so their text comes as {"output": text}.
var textOutputSchema = json.RawMessage(`{"type":"object","properties":{"output":{"type":"string","description":"The agent's answer."}},"required":["output"],"additionalProperties":false}`)

// agentTool is an exposed agent as an MCP tool.
type agentTool struct {
	name  string
	graph *agents.Graph
	agent *agents.Agent
	tool  *mcp.Tool
}

func newAgentTool(g *agents.Graph, a *agents.Agent) (*agentTool, error) {
	name := g.ExposedName(a)
	in, err := inputSchema(a.Expose.InputSchema())
	if err != nil {
		return nil, fmt.Errorf("server: tool %s: %w", name, err)
	}
	desc := a.Expose.Description
	if desc == "" {
		desc = a.HandoffDescription
	}
	if desc == "" {
		desc = fmt.Sprintf("Runs the %s agent of the %s graph.", a.Name, g.Name())
	}
	t := &mcp.Tool{
		Name:        name,
		Title:       g.Name() + ": " + a.Name,
		Description: desc,
		InputSchema: in,
		Annotations: &mcp.ToolAnnotations{
			Title: g.Name() + ": " + a.Name,
			// A call starts a run: neither read-only nor idempotent (a
			// retry of the same request is, see the package doc). Agents
			// talk to a model and whatever their tools reach.
			OpenWorldHint: new(true),
		},
	}
	if out := outputSchema(g, a); out != nil {
		t.OutputSchema = out
	}
	return &agentTool{name: name, graph: g, agent: a, tool: t}, nil
}

// inputSchema is an exposure's strict input schema as MCP clients should
// see it: properties that accept null are optional (Exposure.Run fills
// them in), so they leave "required".
func inputSchema(strict json.RawMessage) (json.RawMessage, error) {
	var s map[string]any
	if err := json.Unmarshal(strict, &s); err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	if s["type"] != "object" {
		return nil, fmt.Errorf("input schema: type %v, want object", s["type"])
	}
	props, _ := s["properties"].(map[string]any)
	if req, ok := s["required"].([]any); ok {
		kept := []any{}
		for _, r := range req {
			name, _ := r.(string)
			if p, ok := props[name].(map[string]any); ok && acceptsNull(p) {
				dropNullType(p)
				continue
			}
			kept = append(kept, r)
		}
		s["required"] = kept
	}
	return json.Marshal(s)
}

// dropNullType turns the type ["X", "null"] of an optional property into
// "X": a client leaves the property out rather than sending null, and a
// single type is what schema linters (the MCP Inspector's --strict) deem
// portable. Exposure.Run still accepts an explicit null.
func dropNullType(p map[string]any) {
	t, ok := p["type"].([]any)
	if !ok {
		return
	}
	var rest []any
	for _, x := range t {
		if x != "null" {
			rest = append(rest, x)
		}
	}
	if len(rest) == 1 {
		p["type"] = rest[0]
	}
}

func acceptsNull(p map[string]any) bool {
	switch t := p["type"].(type) {
	case string:
		return t == "null"
	case []any:
		for _, x := range t {
			if x == "null" {
				return true
			}
		}
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if list, ok := p[k].([]any); ok {
			for _, sub := range list {
				if m, ok := sub.(map[string]any); ok && acceptsNull(m) {
					return true
				}
			}
		}
	}
	return false
}

// outputSchema is the schema of what a call of a's tool answers. The run
// ends with whichever agent a hands off to, so it is a's output schema
// when every agent reachable by handoffs shares it, and nil (no output
// schema) otherwise.
func outputSchema(g *agents.Graph, a *agents.Agent) json.RawMessage {
	schemaOf := func(a *agents.Agent) json.RawMessage {
		if a.Output == nil {
			return textOutputSchema
		}
		return a.Output.Spec().Schema
	}
	want := schemaOf(a)
	seen := map[string]bool{a.Name: true}
	queue := []*agents.Agent{a}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, h := range cur.Handoffs {
			if seen[h.Target] {
				continue
			}
			seen[h.Target] = true
			next, err := g.Agent(h.Target)
			if err != nil {
				continue // NewGraph checked the targets
			}
			if !bytes.Equal(schemaOf(next), want) {
				return nil
			}
			queue = append(queue, next)
		}
	}
	return want
}

// callAgent serves the calls of an agent tool.
func (s *Server) callAgent(t *agentTool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if req.Params.RequestState != "" {
			// The client answered the input requests of its last answer
			// (the calls that waited): the run goes on.
			return s.resume(ctx, req, t, nil), nil
		}
		run, err := t.agent.Expose.Run(req.Params.Arguments)
		if err != nil {
			var ae *agents.ToolArgsError
			if errors.As(err, &ae) {
				return errorResult(fmt.Sprintf("invalid arguments for %s: %v", t.name, ae.Err), nil), nil
			}
			return errorResult(fmt.Sprintf("%s cannot run with these arguments: %v", t.name, err), nil), nil
		}
		scope, err := scopeOf(req.Params.Meta, sessionID(req))
		if err != nil {
			return errorResult(err.Error(), nil), nil
		}
		id := workflowID(t.graph.Name(), t.name, run, scope)
		cl, wctx := s.calls.add(ctx, scope.callKey())
		interrupted := false
		defer func() { s.calls.remove(cl, interrupted) }()
		// go-sdk may handle the client's notifications/cancelled (or a
		// dropped connection) before this handler begins: then nobody
		// waits for the answer, so start nothing. A later cancellation
		// still finds the call (started cancels the run).
		if ctx.Err() != nil || s.calls.wasCancelled(cl) {
			s.log.Info("mcp: call cancelled before its run started", "tool", t.name, "run", id, "session", sessionID(req))
			return errorResult(fmt.Sprintf("call cancelled before run %s started; no run was started", id), mcp.Meta{MetaErrorType: "cancelled"}), nil
		}

		if res := s.unserved(ctx); res != nil {
			return res, nil
		}
		in := troupe.RunInput{Graph: t.graph.Name(), Agent: t.agent.Name, Input: run.Input, Vars: run.Vars}
		if in.Vars, err = s.prepareVars(ctx, in.Graph, id, run.Vars); err != nil {
			if ctx.Err() != nil {
				return errorResult(fmt.Sprintf("call cancelled before run %s started; no run was started", id), mcp.Meta{MetaErrorType: "cancelled"}), nil
			}
			s.log.Warn("mcp: prepare run", "tool", t.name, "run", id, "error", err)
			return refusedVars(t.name+" cannot run", err), nil
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), startTimeout)
		_, err = s.runs.Start(sctx, in, troupeclient.WithID(id))
		cancel()
		if err != nil {
			s.log.Warn("mcp: start run", "tool", t.name, "run", id, "error", err)
			if typ := troupe.ErrorType(err); typ != "" {
				return errorResult(fmt.Sprintf("%s cannot run: %s: %s", t.name, typ, appMessage(err)), mcp.Meta{MetaErrorType: typ}), nil
			}
			return errorResult(fmt.Sprintf("could not start a run of %s: %v", t.name, err), nil), nil
		}
		s.calls.started(cl, id)
		s.log.Info("mcp: call", "tool", t.name, "run", id, "session", sessionID(req), "request", scope.Request, "idempotency_key", scope.Key != "")
		p := s.progressFor(ctx, req)
		p.send("run "+id+" started", mcp.Meta{MetaRunID: id})
		if out := s.awaitRun(wctx, req, p, id, true); out != nil {
			return out, nil
		}
		interrupted = true
		if s.calls.wasCancelled(cl) {
			return errorResult(fmt.Sprintf("call cancelled: run %s is being cancelled", id), mcp.Meta{MetaRunID: id, MetaErrorType: "cancelled"}), nil
		}
		return interruptedResult(wctx, id), nil
	}
}

// interruptedResult answers a call whose wait ended before its run: the
// answer may not reach anyone, but a client shut out by the server learns
// where its run is.
func interruptedResult(ctx context.Context, id string) *mcp.CallToolResult {
	cause := context.Cause(ctx)
	if cause == nil || errors.Is(cause, context.Canceled) {
		cause = errDisconnected
	}
	return errorResult(fmt.Sprintf("%v before run %s finished; the run goes on: read it with %s", cause, id, ToolRunResult),
		mcp.Meta{MetaRunID: id})
}

// waited is how a wait for a run ended.
type waited struct {
	// done: the run closed, and res or err is its outcome, or err says
	// why it could not be read.
	done bool
	res  *troupe.RunResult
	err  error
	// waiting, when set, are the calls that wait for a decision, which
	// the client must take (troupe_run_approve): the wait ended for them.
	waiting []troupeclient.Approval
}

// wait waits for run id to close, following its events into p (when not
// nil), for at most limit (0: no limit). With approvals w, the calls of
// the run's tree that wait for a decision are asked about or end the wait
// (see approvalWatch). done is false when ctx ended, limit passed or
// calls wait first.
func (s *Server) wait(ctx context.Context, p *progress, id string, limit time.Duration, w *approvalWatch) waited {
	gctx := ctx
	if limit > 0 {
		var cancel context.CancelFunc
		gctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	rctx, stopResult := context.WithCancelCause(gctx)
	defer stopResult(nil)
	var followed chan struct{}
	fctx, stopFollow := context.WithCancel(context.Background())
	if p != nil || w != nil {
		var opts []troupeclient.FollowOption
		if p != nil {
			opts = append(opts, troupeclient.WithDeltas())
		}
		followed = make(chan struct{})
		go func() {
			defer close(followed)
			_ = s.runs.Run(id).Follow(fctx, func(e troupeclient.Event) { p.event(e); w.event(e) }, opts...)
		}()
	}
	var waiting []troupeclient.Approval
	watched := make(chan struct{})
	if w != nil {
		// The watch's context keeps the request's values: they route
		// its elicitations to the request's stream.
		wctx, stopWatch := context.WithCancel(ctx)
		go func() {
			defer close(watched)
			w.run(wctx, func(list []troupeclient.Approval) { waiting = list; stopResult(errAwaitingApproval) })
		}()
		defer func() { stopWatch(); <-watched }()
	} else {
		close(watched)
	}
	out, err := s.runs.Run(id).Result(rctx)
	if err != nil && rctx.Err() != nil {
		// Nobody waits for the rest of the events: stop sending them
		// and leave Follow's last poll behind.
		p.stop()
		stopFollow()
		if errors.Is(context.Cause(rctx), errAwaitingApproval) && gctx.Err() == nil {
			<-watched // waiting is set
			p.settle()
			return waited{waiting: waiting}
		}
		return waited{}
	}
	// Follow's last poll delivers the events up to the end before the
	// result goes out.
	stopFollow()
	if followed != nil {
		<-followed
	}
	p.settle()
	return waited{done: true, res: out, err: err}
}

// outcome is a call's answer for a closed run: its output, or why there
// is none.
func (s *Server) outcome(id string, res *troupe.RunResult, runErr error) *mcp.CallToolResult {
	if runErr != nil {
		return runErrorResult(id, runErr)
	}
	doc := structured(res.Output)
	return &mcp.CallToolResult{
		Meta:              mcp.Meta{MetaRunID: id},
		Content:           []mcp.Content{&mcp.TextContent{Text: pretty(doc)}},
		StructuredContent: doc,
	}
}

// structured is a run's output as a JSON object: the output itself when
// it is one (an agent with an output type), else {"output": text}.
func structured(out json.RawMessage) json.RawMessage {
	t := bytes.TrimSpace(out)
	if len(t) > 0 && t[0] == '{' {
		return t
	}
	var text string
	if json.Unmarshal(t, &text) != nil {
		text = string(t)
	}
	doc, _ := json.Marshal(map[string]string{"output": text})
	return doc
}

func pretty(doc json.RawMessage) string {
	var buf bytes.Buffer
	if json.Indent(&buf, doc, "", "  ") != nil {
		return string(doc)
	}
	return buf.String()
}

// runErrorResult says why run id closed without an output, or why its
// outcome could not be read.
func runErrorResult(id string, err error) *mcp.CallToolResult {
	var (
		wfErr      *temporal.WorkflowExecutionError
		canceled   *temporal.CanceledError
		terminated *temporal.TerminatedError
		timeout    *temporal.TimeoutError
	)
	meta := mcp.Meta{MetaRunID: id}
	var text string
	switch typ := troupe.ErrorType(err); {
	case typ != "":
		meta[MetaErrorType] = typ
		text = fmt.Sprintf("run %s failed: %s: %s", id, typ, appMessage(err))
	case errors.As(err, &canceled):
		meta[MetaErrorType] = "cancelled"
		text = fmt.Sprintf("run %s was cancelled", id)
	case errors.As(err, &terminated):
		meta[MetaErrorType] = "terminated"
		text = fmt.Sprintf("run %s was terminated", id)
	case errors.As(err, &timeout):
		meta[MetaErrorType] = "timed_out"
		text = fmt.Sprintf("run %s timed out: %v", id, err)
	case errors.As(err, &wfErr):
		text = fmt.Sprintf("run %s failed: %v", id, err)
	default:
		text = fmt.Sprintf("could not read the outcome of run %s: %v; the run may go on: read it with %s", id, err, ToolRunResult)
	}
	return errorResult(text, meta)
}

// appMessage is the message of the first application error in err's
// chain: what the activity or workflow said, without Temporal's wrapping.
func appMessage(err error) string {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return ae.Message()
	}
	return err.Error()
}

// prepareVars is vars as Config.PrepareVars readies them for the run or
// session id of graph: a copy, so that the hook never changes what the
// call's arguments made; vars themselves without a hook.
func (s *Server) prepareVars(ctx context.Context, graph, id string, vars map[string]string) (map[string]string, error) {
	if s.cfg.PrepareVars == nil {
		return vars, nil
	}
	vars = maps.Clone(vars)
	if vars == nil {
		vars = map[string]string{}
	}
	if err := s.cfg.PrepareVars(ctx, graph, id, vars); err != nil {
		return nil, err
	}
	return vars, nil
}

// refusedVars answers a call whose variables Config.PrepareVars refused:
// what cannot start, and the hook's line (its message alone for a typed
// error, whose type goes under MetaErrorType).
func refusedVars(what string, err error) *mcp.CallToolResult {
	if typ := troupe.ErrorType(err); typ != "" {
		return errorResult(fmt.Sprintf("%s: %s", what, appMessage(err)), mcp.Meta{MetaErrorType: typ})
	}
	return errorResult(fmt.Sprintf("%s: %v", what, err), nil)
}

// unserved is the answer of a call that Config.Workers says no worker
// would serve, or nil when one would (or nothing was asked).
func (s *Server) unserved(ctx context.Context) *mcp.CallToolResult {
	if s.cfg.Workers == nil {
		return nil
	}
	if err := s.cfg.Workers(ctx); err != nil {
		return errorResult(err.Error(), mcp.Meta{MetaErrorType: troupe.ErrNoWorker})
	}
	return nil
}

func errorResult(text string, meta mcp.Meta) *mcp.CallToolResult {
	return &mcp.CallToolResult{Meta: meta, IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

func sessionID(req *mcp.CallToolRequest) string {
	if req.Session == nil {
		return ""
	}
	return req.Session.ID()
}
