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

// OrchestratorWorkflow routes a run: it starts the active agent's child
// workflow and, on each handoff, the target's, until an agent gives the
// final output.
func (r *Runner) OrchestratorWorkflow(ctx workflow.Context, in RunInput) (*RunResult, error) {
	spec, isPinned, err := r.pin(ctx, in)
	if err != nil {
		return nil, err
	}
	start := in.Agent
	if start == "" {
		start = spec.Entry
	}
	if spec.Agent(start) == nil {
		return nil, nonRetryable(ErrUnknownAgent, "%v %q in graph %s", agents.ErrUnknownAgent, start, in.Graph)
	}
	if err := checkPayload("the run input", len(in.Input)); err != nil {
		return nil, err
	}
	rec, err := newRecorder(ctx, nil, 1, r.cfg.Events)
	if err != nil {
		return nil, err
	}
	wfID := workflow.GetInfo(ctx).WorkflowExecution.ID
	rec.add(ctx, Event{Kind: EventRunStarted, Agent: start, Detail: preview(in.Input, 200)})
	first := AgentInput{Graph: in.Graph, RunID: wfID, Vars: in.Vars, Pending: []agents.Item{agents.UserMessage(in.Input)}}
	if isPinned {
		first.Spec = spec
	}
	rr, err := r.route(ctx, rec, spec, start, first, wfID)
	if err != nil {
		rec.add(ctx, Event{Kind: EventFailed, Detail: err.Error()})
		return nil, err
	}
	rec.add(ctx, Event{Kind: EventFinal, Agent: rr.Agent, Detail: preview(string(rr.Output), 200)})
	return &RunResult{
		WorkflowID: wfID, Graph: in.Graph, Agent: rr.Agent, Output: rr.Output, Path: rr.Path,
		Turns: rr.Turns, ToolCalls: rr.ToolCalls, Handoffs: rr.Handoffs, Usage: rr.Usage,
	}, nil
}

// routeResult is the end of a chain of agents joined by handoffs.
type routeResult struct {
	Agent     string
	Output    json.RawMessage
	Path      []string
	Turns     int
	ToolCalls int
	Handoffs  int
	Usage     model.Usage
}

// route runs agent start as a child workflow, then each handoff target in
// turn, until one gives a final output, on the run's spec. Child ids are
// prefix/<n>-<agent>. The orchestrator routes a whole run with it; an
// agent routes each of its agent-tool calls with it.
func (r *Runner) route(ctx workflow.Context, rec *recorder, spec *runtime.GraphSpec, start string, in AgentInput, prefix string) (*routeResult, error) {
	maxHandoffs := spec.MaxHandoffs
	res := &routeResult{}
	current := start
	for n := 0; ; n++ {
		childID := fmt.Sprintf("%s/%d-%s", prefix, n, current)
		in.Agent = current
		if in.Transcript.Key == "" {
			in.Transcript.Key = "transcripts/" + childID
		}
		res.Path = append(res.Path, current)
		rec.add(ctx, Event{Kind: EventAgentStarted, Agent: current, Child: childID})
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: childID, WorkflowTaskTimeout: agentTaskTimeout,
			StaticSummary: "agent " + current})
		var ar AgentResult
		if err := workflow.ExecuteChildWorkflow(cctx, AgentWorkflowName, in).Get(ctx, &ar); err != nil {
			return nil, err
		}
		res.Turns += ar.Turns
		res.ToolCalls += ar.ToolCalls
		res.Usage = res.Usage.Add(ar.Usage)
		if ar.Handoff == nil {
			res.Agent, res.Output = current, ar.Output
			return res, nil
		}
		if res.Handoffs >= maxHandoffs {
			return nil, nonRetryable(ErrMaxHandoffs, "the run exceeded %d handoffs (last: %s → %s)", maxHandoffs, current, ar.Handoff.Name)
		}
		var h runtime.ToolSpec
		if a := spec.Agent(current); a != nil {
			h = a.Tool(ar.Handoff.Name)
		}
		if h.Kind != agents.ToolHandoff {
			return nil, nonRetryable(ErrGraphChanged, "agent %s handed off with %q, which is not one of its handoffs in graph %s", current, ar.Handoff.Name, in.Graph)
		}
		res.Handoffs++
		rec.add(ctx, Event{Kind: EventHandoff, Agent: current, Tool: h.Name, Detail: current + " → " + h.Target})
		in.Transcript, in.Pending = ar.Transcript, ar.Pending
		if h.Hooks {
			lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
				StartToCloseTimeout: time.Minute, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3},
				Summary: "handoff " + current + " → " + h.Target,
			})
			hi := HandoffInput{Graph: spec.Graph, From: current, Tool: h.Name, Transcript: ar.Transcript, Pending: ar.Pending,
				Run:    agents.RunContext{WorkflowID: childID, RunID: in.RunID, Agent: current, Turn: ar.Turns, Vars: in.Vars},
				NewKey: fmt.Sprintf("transcripts/%s/%d-%s", prefix, n+1, h.Target)}
			var ho HandoffOutput
			if err := workflow.ExecuteLocalActivity(lctx, HandoffActivityName, hi).Get(ctx, &ho); err != nil {
				return nil, err
			}
			in.Transcript, in.Pending = ho.Transcript, ho.Pending
		}
		current = h.Target
	}
}

// agentTaskTimeout is the workflow task timeout of agent workflows. While
// a model call runs as a local activity, the SDK holds the workflow task
// and extends it at 80% of this timeout; a query (the events that MCP
// progress and `troupe run` show) or a cancellation waits for that. The
// server's default of 10 s made them wait up to 8 s during a model call;
// 3 s bounds the wait near 2.4 s, for three more history events per 2.4 s
// of model call.
const agentTaskTimeout = 3 * time.Second
