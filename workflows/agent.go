package workflows

import (
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/model"
)

// AgentWorkflow runs one agent until it gives a final output or hands off:
// model turn, then the turn's tool calls in parallel, then the next turn.
func (r *Runner) AgentWorkflow(ctx workflow.Context, in AgentInput) (*AgentResult, error) {
	spec, agent, err := r.agentSpec(in)
	if err != nil {
		return nil, err
	}
	rec, err := newRecorder(ctx)
	if err != nil {
		return nil, err
	}
	wfID := workflow.GetInfo(ctx).WorkflowExecution.ID
	rc := agents.RunContext{WorkflowID: wfID, RunID: in.RunID, Agent: agent.Name, Vars: in.Vars}
	res := &AgentResult{Agent: agent.Name}
	transcript, pending := in.Transcript, in.Pending
	if transcript.Key == "" {
		transcript.Key = "transcripts/" + wfID
	}
	rec.add(ctx, Event{Kind: EventAgentStarted, Agent: agent.Name})
	var sb *sandboxLife
	if agent.Sandbox {
		sb = &sandboxLife{r: r, rec: rec, graph: in.Graph, agent: agent.Name, wfID: wfID, run: rc}
	}
	var mt *mcpTools
	if len(agent.MCPServers) > 0 {
		mt = &mcpTools{r: r, agent: agent, in: in, rc: &rc}
	}
	// finish ends the agent however it ends (output, handoff, failure,
	// cancellation): its sandbox is stopped first, so the last event is
	// the agent's own and a follower that stops there misses nothing.
	finish := func(e Event, res *AgentResult, err error) (*AgentResult, error) {
		if sb != nil {
			sb.end(ctx)
		}
		e.Agent = agent.Name
		rec.add(ctx, e)
		return res, err
	}
	fail := func(err error) (*AgentResult, error) {
		return finish(Event{Kind: EventFailed, Detail: err.Error()}, nil, err)
	}
	corrections := 0
	for turn := 1; ; turn++ {
		if turn > agent.MaxTurns {
			return fail(nonRetryable(ErrMaxTurns, "agent %s used its %d turns without a final output", agent.Name, agent.MaxTurns))
		}
		rc.Turn = turn
		if err := mt.refresh(ctx); err != nil {
			return fail(err)
		}
		var mo ModelOutput
		if err := r.callModel(ctx, spec, ModelInput{Graph: in.Graph, Agent: agent.Name, Run: rc, Transcript: transcript, Pending: pending,
			MCPTools: mt.specs(), Pinned: in.Spec != nil, Tools: agent.ToolNames()}, &mo); err != nil {
			return fail(err)
		}
		res.Turns++
		res.Usage = res.Usage.Add(mo.Usage)
		transcript, pending = mo.Transcript, nil
		step := mo.Step
		detail := mo.Text
		if len(step.Calls) > 0 {
			detail = fmt.Sprintf("%d tool call(s)", len(step.Calls))
		}
		rec.add(ctx, Event{Kind: EventTurn, Agent: agent.Name, Turn: turn, Detail: detail})
		switch {
		case step.Final != nil:
			res.Output, res.Transcript = step.Final, transcript
			return finish(Event{Kind: EventFinal, Turn: turn, Detail: preview(string(step.Final), 200)}, res, nil)
		case step.OutputError != "":
			rec.add(ctx, Event{Kind: EventOutputInvalid, Agent: agent.Name, Turn: turn, Detail: step.OutputError})
			if corrections >= agent.MaxOutputRetries {
				return fail(nonRetryable(ErrOutputInvalid, "agent %s gave an invalid final output %d time(s); last error: %s",
					agent.Name, corrections+1, step.OutputError))
			}
			corrections++
			pending = []agents.Item{runtime.Correction(step.OutputError)}
			continue
		}
		res.ToolCalls += len(step.Calls)
		outputs, handoff, usage, err := r.runTools(ctx, rec, spec, agent, in, rc, step.Calls, sb, mt)
		if err != nil {
			return fail(err)
		}
		res.Usage = res.Usage.Add(usage)
		pending = outputs
		if handoff != nil {
			res.Handoff, res.Transcript, res.Pending = handoff, transcript, pending
			return finish(Event{Kind: EventHandoff, Turn: turn, Tool: handoff.Name,
				Detail: agent.Name + " → " + agent.Tool(handoff.Name).Target}, res, nil)
		}
	}
}

func (r *Runner) callModel(ctx workflow.Context, spec *runtime.GraphSpec, in ModelInput, out *ModelOutput) error {
	retry := &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: 10}
	// Runs recorded before model calls became local activities by default
	// replay on the regular-activity path.
	local := workflow.GetVersion(ctx, versionLocalModelCalls, workflow.DefaultVersion, 1) == 1 && !spec.ModelActivities
	if local {
		lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
			StartToCloseTimeout: r.cfg.ModelTimeout, RetryPolicy: retry,
		})
		return workflow.ExecuteLocalActivity(lctx, ModelActivityName, in).Get(ctx, out)
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: r.cfg.ModelTimeout,
		HeartbeatTimeout:    r.cfg.HeartbeatTimeout,
		RetryPolicy:         retry,
	})
	return workflow.ExecuteActivity(actx, ModelActivityName, in).Get(ctx, out)
}

// versionLocalModelCalls marks the change of model calls from regular to
// local activities by default.
const versionLocalModelCalls = "troupe.local-model-calls"

// runTools carries out one turn's calls concurrently and returns their
// outputs in the model's order, the handoff taken (if any), and the model
// usage of agents-as-tools.
func (r *Runner) runTools(ctx workflow.Context, rec *recorder, spec *runtime.GraphSpec, agent *runtime.AgentSpec, in AgentInput, rc agents.RunContext, calls []agents.Item, sb *sandboxLife, mt *mcpTools) ([]agents.Item, *agents.Item, model.Usage, error) {
	d := runtime.Sort(agent, calls, mt.names())
	done := map[string]agents.Item{}
	for _, o := range d.Outputs {
		done[o.CallID] = o
	}
	wfID := rc.WorkflowID
	var usage model.Usage

	type pendingCall struct {
		call   agents.Item
		future workflow.Future
	}
	var fns []pendingCall
	usedSandbox := false
	for _, c := range d.Functions {
		if agent.Tool(c.Name).Sandbox && !usedSandbox {
			usedSandbox = true
			if err := sb.ensure(ctx); err != nil {
				return nil, nil, usage, err
			}
		}
	}
	for _, c := range d.Functions {
		rec.add(ctx, Event{Kind: EventToolCalled, Agent: in.Agent, Turn: rc.Turn, Tool: c.Name, CallID: c.CallID, Detail: preview(c.Arguments, 200)})
		t := agent.Tool(c.Name)
		ti := ToolInput{Graph: in.Graph, Agent: in.Agent, Run: rc, Call: c,
			OutputKey: fmt.Sprintf("outputs/%s/%d-%s", wfID, rc.Turn, c.CallID)}
		var f workflow.Future
		switch {
		case t.Sandbox:
			f = sb.call(ctx, ti, t.Timeout)
		case t.Activity:
			actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
				StartToCloseTimeout: t.Timeout,
				RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
			})
			f = workflow.ExecuteActivity(actx, ToolActivityName, ti)
		default:
			lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
				StartToCloseTimeout: t.Timeout,
				RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
			})
			f = workflow.ExecuteLocalActivity(lctx, ToolActivityName, ti)
		}
		fns = append(fns, pendingCall{c, f})
	}
	for _, c := range d.MCP {
		rec.add(ctx, Event{Kind: EventToolCalled, Agent: in.Agent, Turn: rc.Turn, Tool: c.Name, CallID: c.CallID, Detail: preview(c.Arguments, 200)})
		fns = append(fns, pendingCall{c, mt.call(ctx, c, fmt.Sprintf("outputs/%s/%d-%s", wfID, rc.Turn, c.CallID))})
	}

	wg := workflow.NewWaitGroup(ctx)
	for i, c := range d.AgentTools {
		tool := agent.Tool(c.Name)
		var args agents.AgentToolInput
		if err := json.Unmarshal([]byte(c.Arguments), &args); err != nil {
			done[c.CallID] = agents.FunctionCallOutput(c.CallID, fmt.Sprintf("Error: invalid arguments for %s: %v", c.Name, err))
			continue
		}
		if in.Depth+1 > spec.MaxToolDepth {
			done[c.CallID] = agents.FunctionCallOutput(c.CallID, fmt.Sprintf("Error: agents-as-tools nest deeper than %d", spec.MaxToolDepth))
			continue
		}
		prefix := fmt.Sprintf("%s/t%d.%d", wfID, rc.Turn, i)
		rec.add(ctx, Event{Kind: EventAgentToolStarted, Agent: in.Agent, Turn: rc.Turn, Tool: c.Name, CallID: c.CallID,
			Detail: preview(args.Input, 200), Child: fmt.Sprintf("%s/0-%s", prefix, tool.Target)})
		wg.Add(1)
		workflow.Go(ctx, func(gctx workflow.Context) {
			defer wg.Done()
			child := AgentInput{Graph: in.Graph, RunID: in.RunID, Vars: in.Vars, Depth: in.Depth + 1,
				Pending: []agents.Item{agents.UserMessage(args.Input)}, Spec: in.Spec}
			rr, err := r.route(gctx, rec, spec, tool.Target, child, prefix)
			var output string
			switch {
			case err != nil:
				output = fmt.Sprintf("Error: agent tool %s failed: %v", c.Name, err)
			case tool.Extractor:
				usage = usage.Add(rr.Usage)
				lctx := workflow.WithLocalActivityOptions(gctx, workflow.LocalActivityOptions{StartToCloseTimeout: time.Minute})
				ex := ExtractInput{Graph: in.Graph, Agent: in.Agent, Tool: c.Name, Result: agents.ToolRunResult{Agent: rr.Agent, Output: rr.Output}}
				if err := workflow.ExecuteLocalActivity(lctx, ExtractActivityName, ex).Get(gctx, &output); err != nil {
					output = fmt.Sprintf("Error: output extractor of %s failed: %v", c.Name, err)
				}
			default:
				usage = usage.Add(rr.Usage)
				output = toolOutputText(rr.Output)
			}
			item := agents.FunctionCallOutput(c.CallID, output)
			item.Agent = in.Agent
			done[c.CallID] = item
			rec.add(gctx, Event{Kind: EventAgentToolFinished, Agent: in.Agent, Turn: rc.Turn, Tool: c.Name, CallID: c.CallID, Detail: preview(output, 200)})
		})
	}

	for _, p := range fns {
		var item agents.Item
		if err := p.future.Get(ctx, &item); err != nil {
			item = agents.FunctionCallOutput(p.call.CallID, fmt.Sprintf("Error: tool %s failed: %v", p.call.Name, err))
			item.Agent = in.Agent
		}
		done[p.call.CallID] = item
		detail := item.Output
		if item.OutputRef != "" {
			detail = "(large output stored at " + item.OutputRef + ")"
		}
		rec.add(ctx, Event{Kind: EventToolResult, Agent: in.Agent, Turn: rc.Turn, Tool: p.call.Name, CallID: p.call.CallID, Detail: preview(detail, 200)})
	}
	wg.Wait(ctx)
	if usedSandbox {
		sb.afterTurn(ctx)
	}

	if d.Handoff != nil {
		target := agent.Tool(d.Handoff.Name).Target
		done[d.Handoff.CallID] = runtime.HandoffOutput(d.Handoff.CallID, target)
	}
	outputs := make([]agents.Item, 0, len(calls))
	for _, c := range calls {
		if o, ok := done[c.CallID]; ok {
			outputs = append(outputs, o)
		}
	}
	return outputs, d.Handoff, usage, nil
}
