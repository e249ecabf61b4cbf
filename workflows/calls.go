package workflows

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/handoff"
	"github.com/troupe-dev/troupe/mcp"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/workflows/budget"
	"github.com/troupe-dev/troupe/workflows/events"
	"github.com/troupe-dev/troupe/workflows/gate"
	"github.com/troupe-dev/troupe/workflows/guardrail"
	"github.com/troupe-dev/troupe/workflows/lease"
)

// This file carries out a turn's tool calls: one executor per kind of call
// (function, sandbox, MCP, agent-as-tool, handoff), each call through the
// agent's gate chain first (package workflows/gate).
//
// State the coroutines share: the agent tools of a turn run each in a
// workflow coroutine (workflow.Go), which writes its output into the
// turn's outputs map and adds its usage to the turn's usage; sandbox and
// MCP calls set their futures from coroutines too, and mark the sandbox or
// the MCP process lost. This is safe because workflow coroutines never run
// at the same time: the SDK runs one at a time, switching only where one
// blocks (a Get, Await or Wait), in an order fixed by the history, so
// every write happens between two such points and every replay makes the
// same writes in the same order. The main coroutine reads the outputs only
// after wg.Wait, once every agent tool's coroutine has written.

// turnCalls carries out an agent's calls, turn after turn.
type turnCalls struct {
	// chain is the agent's gates, and turn what they know of it; tree is
	// the agent's usage per agent, which its agent tools' add to.
	chain *gate.Chain
	turn  *gate.Turn
	tree  *runtime.Usages
	// budget is the agent's share of its run's budget (nil without one),
	// a gate of the chain that also carries the root's ledger, when lent,
	// back in the agent's result and through continue-as-new.
	budget *budget.Agent

	r     *Runner
	rec   *events.Recorder
	spec  *runtime.GraphSpec
	agent *runtime.AgentSpec
	in    troupe.AgentInput
	sb    *lease.Life // nil for an agent without a sandbox
	mt    *mcp.Tools  // nil for an agent without MCP servers
	ctl   *control    // the session's controls, passed to agent tools
	// slots bound the calls of the turn under way that run at once (nil
	// when it has no more calls than its bound).
	slots *slots
}

// pendingCall is a call running, and the future of its output.
type pendingCall struct {
	call   agents.Item
	future workflow.Future
}

// run carries out one turn's calls concurrently and returns their outputs
// in the model's order, the handoff taken (if any), and the model usage of
// agents-as-tools and of the agents the gates ran for the calls.
func (t *turnCalls) run(ctx workflow.Context, rc agents.RunContext, calls []agents.Item) ([]agents.Item, *agents.Item, model.Usage, error) {
	d := runtime.Sort(t.agent, calls, t.mt.Names())
	done := map[string]agents.Item{}
	for _, o := range d.Outputs {
		done[o.CallID] = o
	}
	var usage model.Usage
	var fatal error // a failure that ends this agent too: an agent tool's, a gate's
	t.turn.Run, t.turn.CallUsage = rc, &usage
	if err := t.chain.BeforeCalls(ctx, &gate.Calls{Dispatch: &d, Done: done}, &fatal); err != nil {
		return nil, nil, usage, err
	}
	// What the gate answers each function call instead of running it,
	// known before the sandbox is provisioned for the ones that run.
	fnCalls := make([]gate.Call, len(d.Functions))
	answers := make([]string, len(d.Functions))
	usedSandbox := false
	for i, c := range d.Functions {
		fnCalls[i] = t.functionCall(rc, c)
		answers[i] = t.chain.BeforeCall(ctx, fnCalls[i])
		if fnCalls[i].Kind == gate.KindSandbox && !usedSandbox && answers[i] == "" {
			usedSandbox = true
			if err := t.sb.Ensure(ctx); err != nil {
				return nil, nil, usage, err
			}
		}
	}
	t.slots = newSlots(t.spec.CallLimit(t.agent), len(d.Functions)+len(d.MCP)+len(d.AgentTools), t.ctl, &fatal)
	defer func() { t.slots = nil }()
	var fns []pendingCall
	for i, c := range d.Functions {
		why, took := answers[i], false
		if why == "" {
			why = t.slots.take(ctx)
			took = why == ""
		}
		f := t.chain.CheckOutput(ctx, fnCalls[i], t.function(ctx, rc, fnCalls[i], why))
		if took {
			t.slots.holdUntil(ctx, f)
		}
		fns = append(fns, pendingCall{c, f})
	}
	for _, c := range d.MCP {
		t.called(ctx, rc, c)
		call := t.mcpCall(rc, c)
		if why := t.chain.BeforeCall(ctx, call); why != "" {
			fns = append(fns, pendingCall{c, t.answered(ctx, c, "Error: "+why)})
			continue
		}
		if why := t.slots.take(ctx); why != "" {
			fns = append(fns, pendingCall{c, t.answered(ctx, c, "Error: "+why)})
			continue
		}
		f := t.chain.CheckOutput(ctx, call, t.mt.Call(ctx, c, t.outputKey(rc, c)))
		t.slots.holdUntil(ctx, f)
		fns = append(fns, pendingCall{c, f})
	}
	if len(d.AgentTools) > 0 {
		// The agent is no longer alone in its tree: its root decides.
		t.chain.Spawning(ctx)
	}
	wg := workflow.NewWaitGroup(ctx)
	for i, c := range d.AgentTools {
		t.agentTool(ctx, rc, wg, i, c, done, &usage, &fatal)
	}
	for _, p := range fns {
		var item agents.Item
		if err := p.future.Get(ctx, &item); err != nil {
			item = t.output(p.call, fmt.Sprintf("Error: tool %s failed: %v", p.call.Name, err))
		}
		done[p.call.CallID] = item
		if strings.HasPrefix(item.Output, agents.InDoubtPrefix) {
			// A call of a tool that is not idempotent, not run again.
			t.rec.Add(ctx, troupe.Event{Kind: troupe.EventToolInDoubt, Agent: t.agent.Name, Turn: rc.Turn, Tool: p.call.Name, CallID: p.call.CallID,
				Detail: "not run again: an earlier attempt started it and did not finish; idempotency key " + rc.ForCall(p.call.CallID).IdempotencyKey()})
		}
		detail := item.Output
		if item.OutputRef != "" {
			detail = "(large output stored at " + item.OutputRef + ")"
		}
		t.rec.Add(ctx, troupe.Event{Kind: troupe.EventToolResult, Agent: t.agent.Name, Turn: rc.Turn, Tool: p.call.Name, CallID: p.call.CallID, Detail: troupe.Preview(detail, 200)})
	}
	wg.Wait(ctx)
	if fatal != nil {
		return nil, nil, usage, fatal
	}
	if usedSandbox {
		t.sb.AfterTurn(ctx)
	}
	handoff := t.handoff(ctx, rc, d.Handoff, done)
	outputs := make([]agents.Item, 0, len(calls))
	for _, c := range calls {
		if o, ok := done[c.CallID]; ok {
			outputs = append(outputs, o)
		}
	}
	return outputs, handoff, usage, nil
}

// slots bound the calls of a turn that run at once (the agent's
// CallLimit): a call takes a slot before it starts and gives it back once
// its output is in, and the calls that find none wait, in the order they
// come. A nil *slots bounds nothing: a turn with no more calls than its
// bound (or in a run recorded before bounds) starts them all at once, with
// the same commands as before bounds.
//
// A call waiting for a slot does not start while its session is paused
// (the calls running finish), and never starts once the turn is
// interrupted, cancelled or failed: it is answered why instead.
type slots struct {
	free  int
	ctl   *control
	fatal *error // the turn's failure, once it has one
}

// newSlots returns the slots of a turn of n calls, limit of them at once
// (0: all), or nil when all of them can run at once.
func newSlots(limit, n int, ctl *control, fatal *error) *slots {
	if limit == 0 || n <= limit {
		return nil
	}
	return &slots{free: limit, ctl: ctl, fatal: fatal}
}

// take waits for a free slot and takes it, or returns why the call does
// not start.
func (s *slots) take(ctx workflow.Context) string {
	if s == nil {
		return ""
	}
	paused := func() bool { return s.ctl != nil && s.ctl.paused }
	err := workflow.Await(ctx, func() bool { return s.ctl.stopping() || *s.fatal != nil || s.free > 0 && !paused() })
	switch {
	case err != nil:
		return "not run: the turn was cancelled before this call started"
	case s.ctl.stopping():
		return "not run: the user interrupted the turn before this call started"
	case *s.fatal != nil:
		return "not run: the turn failed before this call started: " + troupe.FailureText(*s.fatal)
	}
	s.free--
	return ""
}

// give gives a slot back.
func (s *slots) give() {
	if s != nil {
		s.free++
	}
}

// holdUntil gives the slot a call took back once f, its output, is ready.
func (s *slots) holdUntil(ctx workflow.Context, f workflow.Future) {
	if s == nil {
		return
	}
	workflow.Go(ctx, func(gctx workflow.Context) {
		_ = f.Get(gctx, nil)
		s.give()
	})
}

// functionCall and mcpCall are call c, of a function tool or of an MCP
// tool, as the gate sees it: its kind, the tool it calls, and where its
// output goes when too large to inline.
func (t *turnCalls) functionCall(rc agents.RunContext, c agents.Item) gate.Call {
	call := gate.Call{Item: c, Kind: gate.KindFunction, Tool: t.agent.Tool(c.Name), OutputKey: t.outputKey(rc, c)}
	if call.Tool.Sandbox {
		call.Kind = gate.KindSandbox
	}
	return call
}

func (t *turnCalls) mcpCall(rc agents.RunContext, c agents.Item) gate.Call {
	ref, _ := t.mt.Ref(c.Name)
	return gate.Call{Item: c, Kind: gate.KindMCP, MCP: &ref, OutputKey: t.outputKey(rc, c)}
}

func (t *turnCalls) called(ctx workflow.Context, rc agents.RunContext, c agents.Item) {
	t.rec.Add(ctx, troupe.Event{Kind: troupe.EventToolCalled, Agent: t.agent.Name, Turn: rc.Turn, Tool: c.Name, CallID: c.CallID, Detail: troupe.Preview(c.Arguments, 200)})
}

func (t *turnCalls) outputKey(rc agents.RunContext, c agents.Item) string {
	return "outputs/" + rc.WorkflowID + "/" + strconv.Itoa(rc.Turn) + "-" + c.CallID
}

// output is the agent's output item for call c.
func (t *turnCalls) output(c agents.Item, text string) agents.Item {
	item := agents.FunctionCallOutput(c.CallID, text)
	item.Agent = t.agent.Name
	return item
}

// answered is a future already set to the output text for call c.
func (t *turnCalls) answered(ctx workflow.Context, c agents.Item, text string) workflow.Future {
	f, set := workflow.NewFuture(ctx)
	set.Set(t.output(c, text), nil)
	return f
}

// function runs a function tool call: on the agent's sandbox, as an
// activity, or as a local activity, as the run's spec says; or answers it
// with why, the gate's answer, when there is one.
func (t *turnCalls) function(ctx workflow.Context, rc agents.RunContext, call gate.Call, why string) workflow.Future {
	c, tool := call.Item, call.Tool
	t.called(ctx, rc, c)
	if why != "" {
		return t.answered(ctx, c, "Error: "+why)
	}
	ti := troupe.ToolInput{Graph: t.in.Graph, Agent: t.in.Agent, Run: rc, Call: c, OutputKey: call.OutputKey}
	switch {
	case tool.Sandbox:
		return t.sb.Call(ctx, ti, tool.Timeout, callSummary(c))
	case tool.Activity:
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: tool.Timeout,
			RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
			Summary:             callSummary(c),
		})
		return workflow.ExecuteActivity(actx, ToolActivityName, ti)
	default:
		lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
			StartToCloseTimeout: tool.Timeout,
			RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
			Summary:             callSummary(c),
		})
		return workflow.ExecuteLocalActivity(lctx, ToolActivityName, ti)
	}
}

// agentTool runs an agent-as-tool call (the i-th of the turn) in a
// coroutine of its own, as a child workflow (and the handoffs it takes),
// writing its output into done and its usage into usage.
func (t *turnCalls) agentTool(ctx workflow.Context, rc agents.RunContext, wg workflow.WaitGroup, i int, c agents.Item, done map[string]agents.Item, usage *model.Usage, fatal *error) {
	tool := t.agent.Tool(c.Name)
	var args agents.AgentToolInput
	if err := json.Unmarshal([]byte(c.Arguments), &args); err != nil {
		done[c.CallID] = agents.FunctionCallOutput(c.CallID, fmt.Sprintf("Error: invalid arguments for %s: %v", c.Name, err))
		return
	}
	if t.in.Depth+1 > t.spec.MaxToolDepth {
		done[c.CallID] = agents.FunctionCallOutput(c.CallID, fmt.Sprintf("Error: agents-as-tools nest deeper than %d", t.spec.MaxToolDepth))
		return
	}
	call := gate.Call{Item: c, Kind: gate.KindAgent, Tool: tool}
	if why := t.chain.BeforeCall(ctx, call); why != "" {
		done[c.CallID] = t.output(c, "Error: "+why)
		return
	}
	if why := t.slots.take(ctx); why != "" {
		done[c.CallID] = t.output(c, "Error: "+why)
		return
	}
	prefix := fmt.Sprintf("%s/t%d.%d", rc.WorkflowID, rc.Turn, i)
	t.rec.Add(ctx, troupe.Event{Kind: troupe.EventAgentToolStarted, Agent: t.agent.Name, Turn: rc.Turn, Tool: c.Name, CallID: c.CallID,
		Detail: troupe.Preview(args.Input, 200), Child: fmt.Sprintf("%s/0-%s", prefix, tool.Target)})
	wg.Add(1)
	slots := t.slots
	workflow.Go(ctx, func(gctx workflow.Context) {
		defer wg.Done()
		defer slots.give()
		child := troupe.AgentInput{Graph: t.in.Graph, RunID: t.in.RunID, Vars: t.in.Vars, Depth: t.in.Depth + 1,
			Pending: []agents.Item{agents.UserMessage(args.Input)}, Spec: t.in.Spec, Backend: t.in.SandboxBackend()}
		sctx, span := traceAgentTool(gctx, t.agent.Name, c)
		rr, err := (&handoff.Route{Spec: t.spec, Events: t.rec, Prefix: prefix, Control: t.ctl}).Run(sctx, tool.Target, child)
		span.End(gctx, err)
		t.countTool(rr, err, usage, fatal)
		var output string
		switch {
		case err == nil && rr.Interrupted:
			*usage = usage.Add(rr.Usage)
			output = fmt.Sprintf("Error: agent tool %s was interrupted by the user before it finished", c.Name)
		case err != nil && guardrail.Ends(err):
			// A guardrail of the tool's agents ended the run.
			*fatal = err
			output = fmt.Sprintf("Error: agent tool %s failed: %s", c.Name, troupe.FailureText(err))
		case err != nil && workerFault(err) && workflow.GetVersion(gctx, versionWorkerFaults, workflow.DefaultVersion, 1) == 1,
			err != nil && troupe.ErrorType(err) == troupe.ErrSourceNotAllowed && workflow.GetVersion(gctx, versionSourceNotAllowed, workflow.DefaultVersion, 1) == 1:
			// Not the model's to work around: the worker is wired wrong,
			// or set up without the host path the run's sandbox needs.
			*fatal = err
			output = fmt.Sprintf("Error: agent tool %s failed: %s", c.Name, troupe.FailureText(err))
		case err != nil:
			output = fmt.Sprintf("Error: agent tool %s failed: %s", c.Name, troupe.FailureText(err))
		case tool.Extractor:
			*usage = usage.Add(rr.Usage)
			lctx := workflow.WithLocalActivityOptions(gctx, workflow.LocalActivityOptions{StartToCloseTimeout: time.Minute, Summary: "extract the output of " + c.Name})
			ex := ExtractInput{Graph: t.in.Graph, Agent: t.in.Agent, Tool: c.Name, Result: agents.ToolRunResult{Agent: rr.Agent, Output: rr.Output}}
			if err := workflow.ExecuteLocalActivity(lctx, ExtractActivityName, ex).Get(gctx, &output); err != nil {
				output = fmt.Sprintf("Error: output extractor of %s failed: %s", c.Name, troupe.FailureText(err))
			}
		default:
			*usage = usage.Add(rr.Usage)
			output = runtime.OutputText(rr.Output)
		}
		if err == nil && !rr.Interrupted && t.chain.Checks(call) {
			output = t.chain.AfterCall(gctx, call, t.output(c, output)).Output
		}
		done[c.CallID] = t.output(c, output)
		t.rec.Add(gctx, troupe.Event{Kind: troupe.EventAgentToolFinished, Agent: t.agent.Name, Turn: rc.Turn, Tool: c.Name, CallID: c.CallID, Detail: troupe.Preview(output, 200)})
	})
}

// runAgent runs agent as a child agent workflow for a gate (a guardrail
// agent: its chain's ids under prefix) on in, which says what it reads,
// and returns its structured output. What it used is added to usage and
// to the agent's usage per agent, as an agent tool's is; a spent budget
// is its error.
func (t *turnCalls) runAgent(ctx workflow.Context, agent, prefix string, in troupe.AgentInput, usage *model.Usage) (json.RawMessage, error) {
	in.Graph, in.RunID, in.Vars, in.Depth, in.Spec, in.Backend = t.in.Graph, t.in.RunID, t.in.Vars, t.in.Depth+1, t.in.Spec, t.in.SandboxBackend()
	rr, err := (&handoff.Route{Spec: t.spec, Events: t.rec, Prefix: prefix}).Run(ctx, agent, in)
	var failed model.Usage
	var spent error // A spent budget is err itself, which the gate passes on.
	t.countTool(rr, err, &failed, &spent)
	if err != nil {
		*usage = usage.Add(failed)
		return nil, err
	}
	*usage = usage.Add(rr.Usage)
	return rr.Output, nil
}

// versionWorkerFaults marks runs in which an agent tool's worker fault
// (workerFault) fails its caller rather than becoming the tool's output.
// The marker is written only when such a fault happens.
const versionWorkerFaults = "troupe.worker-faults-fail-callers"

// versionSourceNotAllowed marks runs in which an agent tool whose sandbox
// needs a host path its worker does not allow (troupe.SourceNotAllowed)
// fails its caller too, and so the run, rather than being answered as a
// tool error the model cannot act on. Runs recorded before answered it.
const versionSourceNotAllowed = "troupe.source-not-allowed-fails-callers"

// workerFault reports whether err is a fault of the worker's wiring, which
// a model cannot work around: it fails every agent up the chain.
func workerFault(err error) bool {
	return troupe.ErrorType(err) == troupe.ErrStoreNotServed
}

// handoff takes the turn's handoff call, if any and the gate lets it: its
// output names the target, and the caller routes it (the orchestrator's
// route, or an agent tool's).
func (t *turnCalls) handoff(ctx workflow.Context, rc agents.RunContext, h *agents.Item, done map[string]agents.Item) *agents.Item {
	if h == nil {
		return nil
	}
	tool := t.agent.Tool(h.Name)
	if why := t.chain.BeforeCall(ctx, gate.Call{Item: *h, Kind: gate.KindHandoff, Tool: tool}); why != "" {
		done[h.CallID] = t.output(*h, "Error: "+why)
		return nil
	}
	done[h.CallID] = runtime.HandoffOutput(h.CallID, tool.Target)
	return h
}

// callSummary is what the Web UI shows of a tool call: the tool's name,
// and for a command the command ("exec_command: go test ./...").
func callSummary(c agents.Item) string {
	if !mayNameCmd(c.Arguments) {
		return c.Name // Not decoded: no member of its arguments is cmd.
	}
	var args struct {
		Cmd string `json:"cmd"`
	}
	if json.Unmarshal([]byte(c.Arguments), &args) == nil && args.Cmd != "" {
		return c.Name + ": " + troupe.Preview(strings.Join(strings.Fields(args.Cmd), " "), 200)
	}
	return c.Name
}

// mayNameCmd reports whether JSON arguments may have a member that
// encoding/json takes for a field named cmd: a name of c, m and d in any
// case (no other runes fold to those), or one with an escape.
func mayNameCmd(args string) bool {
	if strings.IndexByte(args, '\\') >= 0 {
		return true
	}
	for i := 0; i+3 <= len(args); i++ {
		if args[i]|0x20 == 'c' && args[i+1]|0x20 == 'm' && args[i+2]|0x20 == 'd' {
			return true
		}
	}
	return false
}

// count takes what the agent's model call of turn used: in the agent's
// usage per agent, priced by the run's prices, and hands it to the gates
// (a budget's, which tells the root).
func (t *turnCalls) count(ctx workflow.Context, st *runtime.AgentState, turn int, mo *ModelOutput) error {
	cost, priced := runtime.CallCost(t.spec.Prices, mo.Model, mo.Usage)
	if !priced && len(t.spec.Prices) > 0 {
		// A model the run's graph did not use when it started (an
		// edited graph): its calls count no cost.
		workflow.GetLogger(ctx).Warn("a model call has no price: its cost is not counted", "agent", t.agent.Name, "model", mo.Model)
	}
	u := runtime.AgentUsage{Agent: t.agent.Name, Usage: mo.Usage, Cost: cost}
	st.Count(u)
	return t.chain.AfterModel(ctx, &gate.ModelCall{Turn: turn, Usage: u, Told: mo.Told})
}

// countTool counts what an agent tool's chain of agents used, failed or
// not (the result of a chain that failed holds the failed agent's
// usage), and has a spent budget stop the caller too.
func (t *turnCalls) countTool(rr *handoff.Result, err error, usage *model.Usage, fatal *error) {
	if rr != nil {
		if t.tree != nil {
			*t.tree = t.tree.Add(rr.Agents...)
		}
		if err != nil {
			*usage = usage.Add(rr.Usage) // Those that succeeded add theirs below.
		}
	}
	if troupe.ErrorType(err) == troupe.ErrBudgetExceeded {
		*fatal = err
	}
}
