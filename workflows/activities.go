package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/capabilities"
	"github.com/troupe-dev/troupe/internal/heartbeat"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/sandbox/gitbundle"
	"github.com/troupe-dev/troupe/runtime/transcript"
	"github.com/troupe-dev/troupe/telemetry"
	"github.com/troupe-dev/troupe/workflows/budget"
	"github.com/troupe-dev/troupe/workflows/gate"
	"github.com/troupe-dev/troupe/workflows/throttle"
)

// Activities are the parts of a run that touch the world: the model, the
// blob store, and the agents' Go funcs.
type Activities struct {
	r *Runner
	// budgets tell the root of a run with a budget what each model call
	// used.
	budgets *budget.Activities
}

// Model runs one model turn: it loads the transcript, calls the model,
// appends the pending items and the turn's output as one segment, and
// decides the next step.
func (a *Activities) Model(ctx context.Context, in ModelInput) (*ModelOutput, error) {
	g, agent, err := a.r.agent(in.Graph, in.Agent)
	if err != nil {
		return nil, err
	}
	req, view, err := a.modelRequest(ctx, g, agent, in)
	if err != nil {
		return nil, err
	}
	resp, err := a.callModel(ctx, in, agent.Name, req)
	if err != nil {
		return nil, err
	}
	return a.endTurn(ctx, in, agent, req, resp, view)
}

// modelRequest builds the turn's request to the model: the agent's
// instructions, the view of its transcript (returned too, for the
// transcript's reference) and the tools it is offered.
func (a *Activities) modelRequest(ctx context.Context, g *agents.Graph, agent *agents.Agent, in ModelInput) (model.Request, *runtime.TranscriptView, error) {
	instructions, err := a.instructions(ctx, agent, in)
	if err != nil {
		return model.Request{}, nil, err
	}
	input, view, err := a.modelView(ctx, agent, in.Transcript, in.Pending)
	if err != nil {
		return model.Request{}, nil, err
	}
	input = capabilities.ExpandImages(input)
	mcpSpecs, err := a.r.mcp.ToolSpecs(ctx, in.MCPTools)
	if err != nil {
		return model.Request{}, nil, err
	}
	req := model.Request{
		Model:        agent.Model,
		Instructions: instructions,
		Input:        input,
		Tools:        append(offered(g.ToolSpecs(agent.Name), in), mcpSpecs...),
		Settings:     agent.Settings,
	}
	if req.Model == "" {
		req.Model = a.r.cfg.DefaultModel
	}
	if agent.Output != nil {
		spec := agent.Output.Spec()
		req.Output = &spec
	}
	return req, view, nil
}

// instructions are the agent's instructions for the turn: its own, then
// its capabilities', the workspace guidance, and what memory recalls.
func (a *Activities) instructions(ctx context.Context, agent *agents.Agent, in ModelInput) (string, error) {
	// Instructions that check a repository a run names in the blob store
	// open it through the worker's spool.
	ctx = gitbundle.WithSpool(ctx, a.r.repos)
	instructions, err := agent.ResolveInstructions(ctx, in.Run)
	if err != nil {
		return "", temporal.NewNonRetryableApplicationError(err.Error(), troupe.ErrInstructions, err)
	}
	for _, c := range agent.Capabilities {
		extra := c.Instructions()
		if dc, ok := c.(agents.DynamicCapability); ok {
			if extra, err = dc.DynamicInstructions(ctx, in.Run); err != nil {
				return "", fmt.Errorf("instructions of capability %s: %w", c.Name(), err)
			}
		}
		if extra != "" {
			instructions += "\n\n" + extra
		}
	}
	guidance, err := a.guidance(ctx, in.Guidance)
	if err != nil {
		return "", err
	}
	if guidance != "" {
		instructions += "\n\n" + guidance
	}
	if agent.Memory.Reads() {
		extra, err := a.r.memory.Instructions(ctx, agent, in.Run)
		if err != nil {
			return "", err
		}
		instructions += extra
	}
	return instructions, nil
}

// callModel sends req to the model, streaming its text deltas to
// followers and tracing the call, and classifies its failure onto
// Temporal's retry rules: retried only when the model says a retry can
// help.
func (a *Activities) callModel(ctx context.Context, in ModelInput, agent string, req model.Request) (*model.Response, error) {
	dctx, deltasDone := a.withDeltas(ctx, in, agent)
	dctx, chat := startChat(dctx, req, in)
	resp, err := a.respond(dctx, req)
	telemetry.EndResponse(chat, resp, err)
	deltasDone()
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		if source, ok := model.ScenarioNoMatch(err); ok {
			return nil, troupe.ScenarioNoMatch(source, err)
		}
		if wait, ok := model.RateLimited(err); ok {
			return nil, rateLimited(model.ErrorMessage(err), wait, err)
		}
		if errors.Is(err, throttle.ErrBusy) || errors.Is(err, throttle.ErrLapsed) {
			return nil, rateLimited(err.Error(), 0, err)
		}
		if !model.IsRetryable(err) {
			return nil, temporal.NewNonRetryableApplicationError(err.Error(), troupe.ErrModel, err)
		}
		// The innermost cause ("connection refused") goes along as the
		// error's details, for the retry events.
		return nil, temporal.NewApplicationErrorWithCause(model.ErrorMessage(err), troupe.ErrModelRetryable, err, model.Innermost(err))
	}
	return resp, nil
}

// rateLimited is the failure of a model call turned away for a rate
// limit: retryable, after wait when the provider said (NextRetryDelay,
// which Temporal's own retries honour and the agent workflow reads), and
// with the message as its details, for the retry events.
func rateLimited(msg string, wait time.Duration, cause error) error {
	return temporal.NewApplicationErrorWithOptions(msg, troupe.ErrModelRateLimited, temporal.ApplicationErrorOptions{
		Cause: cause, NextRetryDelay: wait, Details: []any{msg},
	})
}

// endTurn decides the next step from the model's response, tells the
// run's root what the call used, appends the pending items and the
// response to the transcript as one segment, and returns the turn's
// output, refused when it is too big to cross Temporal.
func (a *Activities) endTurn(ctx context.Context, in ModelInput, agent *agents.Agent, req model.Request, resp *model.Response, view *runtime.TranscriptView) (*ModelOutput, error) {
	for i := range resp.Output {
		resp.Output[i].Agent = agent.Name
	}
	uniqueCallIDs(resp.Output)
	resp.Usage.Requests = max(resp.Usage.Requests, 1)
	step := runtime.Decide(agent, resp.Output)
	// The root hears of the call while its output is stored.
	told := a.budgets.TellRoot(ctx, in.Budget, in.Run, req.Model, resp.Usage, step)
	segment := append(append([]agents.Item(nil), in.Pending...), resp.Output...)
	ref, err := a.r.transcripts.Append(ctx, in.Transcript, segment)
	if err != nil {
		<-told
		return nil, err
	}
	ref.View = view
	out := &ModelOutput{Transcript: ref, Step: step, Usage: resp.Usage, Model: req.Model, Told: <-told}
	if in.Precheck != nil && len(step.Calls) > 0 {
		out.Prechecked = a.precheck(ctx, in, step.Calls)
	}
	for _, it := range resp.Output {
		if it.Type == agents.ItemMessage {
			out.Text = troupe.Preview(it.Content, 200)
		}
	}
	size := len(out.Step.Final) + len(out.Step.OutputError)
	for _, c := range out.Step.Calls {
		size += len(c.Arguments)
	}
	if err := troupe.CheckPayload("the model turn's output (tool arguments and final output)", size); err != nil {
		return nil, err
	}
	return out, nil
}

// guidance renders the workspace guidance stored under key for the
// instructions. A guidance the store no longer holds (its run's data
// swept while a session kept the sandbox) is left out: the workspace
// still has the file.
func (a *Activities) guidance(ctx context.Context, key string) (string, error) {
	if key == "" {
		return "", nil
	}
	text, err := a.r.cfg.Store.Get(ctx, key)
	if errors.Is(err, blob.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return capabilities.GuidanceInstructions(string(text)), nil
}

// withDeltas has the model's text deltas go to the worker's bus, when it
// has one, as EventTextDelta events of the agent's workflow and turn; the
// func it returns, called once the model has answered, marks the end of
// the call's deltas. They go nowhere else: not to the workflow, not to its
// history.
func (a *Activities) withDeltas(ctx context.Context, in ModelInput, agent string) (context.Context, func()) {
	bus := a.r.cfg.Events
	if bus == nil {
		return ctx, func() {}
	}
	base := troupe.Event{WorkflowID: in.Run.WorkflowID, Agent: agent, Turn: in.Run.Turn}
	if base.WorkflowID == "" && activity.IsActivity(ctx) {
		base.WorkflowID = activity.GetInfo(ctx).WorkflowExecution.ID
	}
	var sent atomic.Bool
	ctx = model.WithDeltas(ctx, func(d model.Delta) {
		sent.Store(true)
		e := base
		e.Kind, e.Detail, e.Time = troupe.EventTextDelta, d.Text, time.Now()
		bus.PublishDelta(e)
	})
	return ctx, func() {
		if sent.Load() {
			end := base
			end.Kind, end.Time = troupe.EventTextEnd, time.Now()
			bus.PublishDelta(end)
		}
	}
}

// offered is what the model is offered of the agent's tools in the graph
// served now: for a run that keeps its graph, those its spec holds (a tool
// gained since the run started is not the run's). A tool the run holds
// that the graph served now has lost is still offered, as a stand-in that
// says so (lostTool), and a call of it is answered with an error
// (troupe.ToolInput.Gone): it never disappears quietly from the model's
// view, where a model would carry on as if it had never had it.
func offered(specs []agents.ToolSpec, in ModelInput) []agents.ToolSpec {
	if !in.Pinned {
		return slices.Clip(specs)
	}
	var out []agents.ToolSpec
	for _, s := range specs {
		if slices.Contains(in.Tools, s.Name) {
			out = append(out, s)
		}
	}
	for _, name := range in.Tools {
		if !slices.ContainsFunc(specs, func(s agents.ToolSpec) bool { return s.Name == name }) {
			out = append(out, lostTool(name))
		}
	}
	return slices.Clip(out)
}

// lostTool is the stand-in offered for tool name, which the run holds and
// the worker serving it no longer has: any arguments, and a description
// that tells the model a call will fail and why.
func lostTool(name string) agents.ToolSpec {
	return agents.ToolSpec{Name: name, Parameters: json.RawMessage(`{"type":"object","properties":{}}`),
		Description: "Unavailable: the worker serving this run no longer has this tool (its graph changed since the run " +
			"started), so a call returns an error. Do without it."}
}

// modelView is what the model sees this turn of the transcript and the
// pending items, and the window on the transcript that the next turn
// starts from. An agent with a single compactor that keeps a window
// (agents.WindowCompactor) is given the window its last trim left, so a
// turn's cost does not grow with the conversation; other compactors trim
// the whole conversation every turn, and an agent handed a transcript
// trimmed by another starts from the whole of it.
func (a *Activities) modelView(ctx context.Context, agent *agents.Agent, ref runtime.TranscriptRef, pending []agents.Item) ([]agents.Item, *runtime.TranscriptView, error) {
	var compactors []agents.Compactor
	for _, c := range agent.Capabilities {
		if cp, ok := c.(agents.Compactor); ok {
			compactors = append(compactors, cp)
		}
	}
	if ref.View != nil && ref.View.Agent != agent.Name {
		ref.View = nil // the window of the agent that handed off
	}
	if wc, ok := onlyWindow(compactors); ok {
		items, at, err := a.r.transcripts.LoadView(ctx, ref, pending)
		if err != nil {
			return nil, nil, err
		}
		out, head, from, trimmed := wc.Window(items)
		if !trimmed {
			return out, ref.View, nil
		}
		if len(head) >= len(out) {
			return nil, nil, fmt.Errorf("workflows: compactor of %s kept no note after its head", agent.Name)
		}
		view, err := runtime.Window(at, head, from, out[len(head)].Content)
		if err != nil {
			return nil, nil, err
		}
		view.Agent = agent.Name
		return out, view, nil
	}
	// Without a windowing compactor, the whole conversation, whatever
	// window an earlier deploy left.
	items, err := a.conversation(ctx, ref, pending)
	if err != nil {
		return nil, nil, err
	}
	for _, cp := range compactors {
		items = cp.Trim(items)
	}
	return items, nil, nil
}

func onlyWindow(compactors []agents.Compactor) (agents.WindowCompactor, bool) {
	if len(compactors) != 1 {
		return nil, false
	}
	wc, ok := compactors[0].(agents.WindowCompactor)
	return wc, ok
}

// conversation is the whole transcript (whatever its view) followed by
// the pending items, with every output reference resolved.
func (a *Activities) conversation(ctx context.Context, ref runtime.TranscriptRef, pending []agents.Item) ([]agents.Item, error) {
	ref.View = nil
	items, _, err := a.r.transcripts.LoadView(ctx, ref, pending)
	return items, err
}

// respond calls the model, heartbeating meanwhile so that a call on a dead
// worker is retried after HeartbeatTimeout rather than ModelTimeout.
// It waits first for room within the endpoint's limit (Config.ModelLimits),
// at most half of the call's timeout.
func (a *Activities) respond(ctx context.Context, req model.Request) (*model.Response, error) {
	return heartbeat.While(ctx, func() (*model.Response, error) {
		endpoint := throttle.Endpoint(model.BaseURL(a.r.cfg.Model), req.Model)
		cctx, done, err := a.r.throttle.Acquire(ctx, endpoint, a.r.modelLimit(req.Model), a.r.cfg.ModelTimeout/2)
		if err != nil {
			return nil, err
		}
		defer done()
		resp, err := a.r.cfg.Model.Respond(cctx, req)
		if err != nil && ctx.Err() == nil && errors.Is(context.Cause(cctx), throttle.ErrLapsed) {
			return nil, fmt.Errorf("model call to %s cut short: %w", endpoint, throttle.ErrLapsed)
		}
		return resp, err
	})
}

// FunctionTool runs a function tool, its call's RunContext (and so its
// idempotency key) in the tool's context. Errors of the tool, including
// invalid arguments and panics, become the tool's output so the model can
// recover; only infrastructure failures fail the activity. A tool that is
// not idempotent runs only if no attempt before started the call
// (transcript.Begin); otherwise the output says the call is in doubt.
func (a *Activities) FunctionTool(ctx context.Context, in troupe.ToolInput) (agents.Item, error) {
	g, _, err := a.r.agent(in.Graph, in.Agent)
	if err != nil {
		return agents.Item{}, err
	}
	ref := g.Tool(in.Agent, in.Call.Name)
	if ref.Kind != agents.ToolFunction || ref.Function.NeedsSandbox() {
		return in.Gone(), nil
	}
	rc := in.CallContext()
	if !ref.Function.Idempotent() {
		// At most once: an attempt that finds the call started tells the
		// model rather than run it again.
		if err := transcript.Begin(ctx, a.r.cfg.Store, rc, in.Call.Name); errors.Is(err, transcript.ErrStarted) {
			return in.InDoubt(), nil
		} else if err != nil {
			return agents.Item{}, err
		}
	}
	tctx, span := telemetry.StartToolCall(gitbundle.WithSpool(ctx, a.r.repos), in, gate.KindFunction)
	output := ref.Function.Answer(agents.WithRunContext(tctx, rc), in.Call.Arguments)
	telemetry.EndTool(span, output)
	item := agents.FunctionCallOutput(in.Call.CallID, output)
	item.Agent = in.Agent
	return transcript.Offload(ctx, a.r.cfg.Store, in.OutputKey, item)
}

// Extract runs an agent tool's output extractor.
func (a *Activities) Extract(ctx context.Context, in ExtractInput) (string, error) {
	g, err := a.r.servedGraph(in.Graph)
	if err != nil {
		return "", err
	}
	ref := g.Tool(in.Agent, in.Tool)
	if ref.Kind != agents.ToolAgent || ref.Agent.Extractor == nil {
		// The run started with an extractor on this tool (the agent asks
		// only then), and this worker's graph has none: the model is told,
		// rather than read the tool agent's raw output as if extracted.
		return "", troupe.NonRetryable(troupe.ErrGraphChanged, "the extractor of agent tool %s is no longer in graph %q as this worker serves it; the run started with it", in.Tool, in.Graph)
	}
	out, err := ref.Agent.Extractor(ctx, in.Result)
	if err != nil {
		return "Error: " + err.Error(), nil
	}
	return out, nil
}

// uniqueCallIDs gives each function call of a model's answer a call id of
// its own: some OpenAI-compatible servers leave it empty, or repeat one,
// and the runtime keys a call's output, approval and guardrail workflows
// by it. A missing or repeated id becomes call_<index>, unused in the
// answer (call_<index>_<n> if the answer has that too); the transcript
// keeps it, so the model reads its outputs under the ids it is shown.
func uniqueCallIDs(items []agents.Item) {
	seen := map[string]bool{}
	for _, it := range items {
		if it.Type == agents.ItemFunctionCall && it.CallID != "" {
			seen[it.CallID] = false
		}
	}
	for i := range items {
		it := &items[i]
		if it.Type != agents.ItemFunctionCall {
			continue
		}
		if taken, known := seen[it.CallID]; it.CallID != "" && known && !taken {
			seen[it.CallID] = true
			continue
		}
		id := fmt.Sprintf("call_%d", i)
		for n := 2; ; n++ {
			if _, used := seen[id]; !used {
				break
			}
			id = fmt.Sprintf("call_%d_%d", i, n)
		}
		it.CallID, seen[id] = id, true
	}
}
