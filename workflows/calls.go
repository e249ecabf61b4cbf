package workflows

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/workflows/events"
	"github.com/troupe-dev/troupe/workflows/lease"
)

// This file carries out a turn's tool calls: one executor per kind of call
// (function, sandbox, MCP, agent-as-tool, handoff), each call through the
// gate first.
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

// Kinds of calls at the gate.
const (
	callFunction = "function"
	callSandbox  = "sandbox"
	callMCP      = "mcp"
	callAgent    = "agent"
	callHandoff  = "handoff"
)

// gateCall is a call at the gate: whose, what, and what it would run.
type gateCall struct {
	Agent string
	Kind  string
	Call  agents.Item
	// Tool is the agent's tool it calls (not for MCP calls).
	Tool runtime.ToolSpec
	// MCP is the MCP tool it calls (MCP calls).
	MCP *MCPToolRef
	// Guard is the tool guardrail that rejected the call, if one did
	// (screen).
	Guard *runtime.GuardrailOutcome
}

// gate is the one place that decides whether a tool call runs, after
// its approval: it answers the calls a tool guardrail rejected. It returns
// "" to let the call run, or why it does not, which the model gets as the
// call's output. Approvals come before it (approve, in approvals.go): a
// call waits for its decision before any call of the turn starts, and
// only an approved call reaches the gate. Budgets are checked before each
// model call (budget.go), where spending happens.
func (r *Runner) gate(_ workflow.Context, g gateCall) string {
	if g.Guard != nil {
		return rejection(g.Guard)
	}
	return ""
}

// turnCalls carries out an agent's calls, turn after turn.
type turnCalls struct {
	// budget asks the root before each model call (nil without a
	// budget); tree is the agent's usage per agent, which its agent
	// tools' add to.
	budget *agentBudget
	tree   *runtime.Usages

	r     *Runner
	rec   *events.Recorder
	spec  *runtime.GraphSpec
	agent *runtime.AgentSpec
	in    troupe.AgentInput
	// continued says this run of the agent's workflow continued an
	// earlier one (it was given a carry).
	continued bool
	sb        *lease.Life // nil for an agent without a sandbox
	mt        *mcpTools   // nil for an agent without MCP servers
	ctl       *control    // the session's controls, passed to agent tools
	// screened are the calls of the turn a tool guardrail rejected.
	screened map[string]*runtime.GuardrailOutcome
}

// pendingCall is a call running, and the future of its output.
type pendingCall struct {
	call   agents.Item
	future workflow.Future
}

// run carries out one turn's calls concurrently and returns their outputs
// in the model's order, the handoff taken (if any), and the model usage of
// agents-as-tools and of tool guardrail agents.
func (t *turnCalls) run(ctx workflow.Context, rc agents.RunContext, calls []agents.Item) ([]agents.Item, *agents.Item, model.Usage, error) {
	d := runtime.Sort(t.agent, calls, t.mt.names())
	done := map[string]agents.Item{}
	for _, o := range d.Outputs {
		done[o.CallID] = o
	}
	var usage model.Usage
	if t.guardedByAgents(d) {
		// The agent is no longer alone in its tree (its tool guardrail
		// agents ask the root too): its root decides, before any starts.
		t.budget.release(ctx)
	}
	screening := t.startScreen(ctx, rc, d, &usage)
	if err := t.approve(ctx, rc, &d, done); err != nil {
		return nil, nil, usage, err
	}
	if err := t.screen(ctx, rc, d, screening, &usage); err != nil {
		return nil, nil, usage, err
	}
	usedSandbox := false
	for _, c := range d.Functions {
		if t.agent.Tool(c.Name).Sandbox && !usedSandbox && t.rejected(c) == nil {
			usedSandbox = true
			if err := t.sb.Ensure(ctx); err != nil {
				return nil, nil, usage, err
			}
		}
	}
	var fatal error // a failure that ends this agent too: an agent tool's, a guardrail's
	var fns []pendingCall
	for _, c := range d.Functions {
		fns = append(fns, pendingCall{c, t.checkOutput(ctx, rc, c, t.function(ctx, rc, c), &fatal, &usage)})
	}
	for _, c := range d.MCP {
		t.called(ctx, rc, c)
		ref, _ := t.mt.ref(c.Name)
		if why := t.r.gate(ctx, gateCall{Agent: t.agent.Name, Kind: callMCP, Call: c, MCP: &ref, Guard: t.rejected(c)}); why != "" {
			fns = append(fns, pendingCall{c, t.answered(ctx, c, "Error: "+why)})
			continue
		}
		fns = append(fns, pendingCall{c, t.checkOutput(ctx, rc, c, t.mt.call(ctx, c, t.outputKey(rc, c)), &fatal, &usage)})
	}
	if len(d.AgentTools) > 0 {
		// The agent is no longer alone in its tree: its root decides.
		t.budget.release(ctx)
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
	handoff := t.handoff(ctx, d.Handoff, done)
	outputs := make([]agents.Item, 0, len(calls))
	for _, c := range calls {
		if o, ok := done[c.CallID]; ok {
			outputs = append(outputs, o)
		}
	}
	return outputs, handoff, usage, nil
}

func (t *turnCalls) called(ctx workflow.Context, rc agents.RunContext, c agents.Item) {
	t.rec.Add(ctx, troupe.Event{Kind: troupe.EventToolCalled, Agent: t.agent.Name, Turn: rc.Turn, Tool: c.Name, CallID: c.CallID, Detail: troupe.Preview(c.Arguments, 200)})
}

func (t *turnCalls) outputKey(rc agents.RunContext, c agents.Item) string {
	return fmt.Sprintf("outputs/%s/%d-%s", rc.WorkflowID, rc.Turn, c.CallID)
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
// activity, or as a local activity, as the run's spec says.
func (t *turnCalls) function(ctx workflow.Context, rc agents.RunContext, c agents.Item) workflow.Future {
	t.called(ctx, rc, c)
	tool := t.agent.Tool(c.Name)
	kind := callFunction
	if tool.Sandbox {
		kind = callSandbox
	}
	if why := t.r.gate(ctx, gateCall{Agent: t.agent.Name, Kind: kind, Call: c, Tool: tool, Guard: t.rejected(c)}); why != "" {
		return t.answered(ctx, c, "Error: "+why)
	}
	ti := troupe.ToolInput{Graph: t.in.Graph, Agent: t.in.Agent, Run: rc, Call: c, OutputKey: t.outputKey(rc, c)}
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
	if why := t.r.gate(ctx, gateCall{Agent: t.agent.Name, Kind: callAgent, Call: c, Tool: tool, Guard: t.rejected(c)}); why != "" {
		done[c.CallID] = t.output(c, "Error: "+why)
		return
	}
	prefix := fmt.Sprintf("%s/t%d.%d", rc.WorkflowID, rc.Turn, i)
	t.rec.Add(ctx, troupe.Event{Kind: troupe.EventAgentToolStarted, Agent: t.agent.Name, Turn: rc.Turn, Tool: c.Name, CallID: c.CallID,
		Detail: troupe.Preview(args.Input, 200), Child: fmt.Sprintf("%s/0-%s", prefix, tool.Target)})
	wg.Add(1)
	workflow.Go(ctx, func(gctx workflow.Context) {
		defer wg.Done()
		child := troupe.AgentInput{Graph: t.in.Graph, RunID: t.in.RunID, Vars: t.in.Vars, Depth: t.in.Depth + 1,
			Pending: []agents.Item{agents.UserMessage(args.Input)}, Spec: t.in.Spec}
		sctx, span := traceAgentTool(gctx, t.agent.Name, c)
		rr, err := t.r.route(sctx, t.rec, t.spec, tool.Target, child, prefix, t.ctl)
		span.End(gctx, err)
		t.countTool(rr, err, usage, fatal)
		var output string
		switch {
		case err == nil && rr.Interrupted:
			*usage = usage.Add(rr.Usage)
			output = fmt.Sprintf("Error: agent tool %s was interrupted by the user before it finished", c.Name)
		case err != nil && guardrailEnds(err):
			// A guardrail of the tool's agents ended the run.
			*fatal = err
			output = fmt.Sprintf("Error: agent tool %s failed: %s", c.Name, troupe.FailureText(err))
		case err != nil && workerFault(err) && workflow.GetVersion(gctx, versionWorkerFaults, workflow.DefaultVersion, 1) == 1:
			// Not the model's to work around: the worker is wired wrong.
			*fatal = err
			output = fmt.Sprintf("Error: agent tool %s failed: %s", c.Name, troupe.FailureText(err))
		case err != nil:
			output = fmt.Sprintf("Error: agent tool %s failed: %s", c.Name, troupe.FailureText(err))
		case tool.Extractor:
			*usage = usage.Add(rr.Usage)
			lctx := workflow.WithLocalActivityOptions(gctx, workflow.LocalActivityOptions{StartToCloseTimeout: time.Minute, Summary: "extract the output of " + c.Name})
			ex := ExtractInput{Graph: t.in.Graph, Agent: t.in.Agent, Tool: c.Name, Result: agents.ToolRunResult{Agent: rr.Agent, Output: rr.Output}}
			if err := workflow.ExecuteLocalActivity(lctx, ExtractActivityName, ex).Get(gctx, &output); err != nil {
				output = fmt.Sprintf("Error: output extractor of %s failed: %v", c.Name, err)
			}
		default:
			*usage = usage.Add(rr.Usage)
			output = toolOutputText(rr.Output)
		}
		if err == nil && !rr.Interrupted {
			output = t.checkAgentOutput(gctx, rc, c, output, fatal, usage)
		}
		done[c.CallID] = t.output(c, output)
		t.rec.Add(gctx, troupe.Event{Kind: troupe.EventAgentToolFinished, Agent: t.agent.Name, Turn: rc.Turn, Tool: c.Name, CallID: c.CallID, Detail: troupe.Preview(output, 200)})
	})
}

// versionWorkerFaults marks runs in which an agent tool's worker fault
// (workerFault) fails its caller rather than becoming the tool's output.
// The marker is written only when such a fault happens.
const versionWorkerFaults = "troupe.worker-faults-fail-callers"

// workerFault reports whether err is a fault of the worker's wiring, which
// a model cannot work around: it fails every agent up the chain.
func workerFault(err error) bool {
	return troupe.ErrorType(err) == troupe.ErrStoreNotServed
}

// handoff takes the turn's handoff call, if any and the gate lets it: its
// output names the target, and the caller routes it (the orchestrator's
// route, or an agent tool's).
func (t *turnCalls) handoff(ctx workflow.Context, h *agents.Item, done map[string]agents.Item) *agents.Item {
	if h == nil {
		return nil
	}
	tool := t.agent.Tool(h.Name)
	if why := t.r.gate(ctx, gateCall{Agent: t.agent.Name, Kind: callHandoff, Call: *h, Tool: tool}); why != "" {
		done[h.CallID] = t.output(*h, "Error: "+why)
		return nil
	}
	done[h.CallID] = runtime.HandoffOutput(h.CallID, tool.Target)
	return h
}

// callSummary is what the Web UI shows of a tool call: the tool's name,
// and for a command the command ("exec_command: go test ./...").
func callSummary(c agents.Item) string {
	var args struct {
		Cmd string `json:"cmd"`
	}
	if json.Unmarshal([]byte(c.Arguments), &args) == nil && args.Cmd != "" {
		return c.Name + ": " + troupe.Preview(strings.Join(strings.Fields(args.Cmd), " "), 200)
	}
	return c.Name
}
