package workflows

import (
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/memory"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/workflows/approval"
	"github.com/troupe-dev/troupe/workflows/budget"
	"github.com/troupe-dev/troupe/workflows/events"
	"github.com/troupe-dev/troupe/workflows/lease"
)

// OrchestratorWorkflow routes a run: it starts the active agent's child
// workflow and, on each handoff, the target's, until an agent gives the
// final output. Before a child, when its history has reached the run's
// bound (GraphSpec.ContinueAfterEvents) or the server suggests it, it
// continues as new with its routing state and recent events (RunCarry),
// so a run of any number of handoffs keeps a bounded history.
func (r *Runner) OrchestratorWorkflow(ctx workflow.Context, in OrchestratorInput) (*troupe.RunResult, error) {
	traceRun(ctx, in.Graph)
	carry := in.Carry
	var (
		spec     *runtime.GraphSpec
		isPinned bool
		err      error
	)
	if carry != nil {
		spec, isPinned = carry.Spec, carry.Spec != nil
		if spec == nil {
			return nil, troupe.NonRetryable(troupe.ErrInternal, "run %s continued without its graph's spec", workflow.GetInfo(ctx).WorkflowExecution.ID)
		}
	} else if spec, isPinned, err = r.pin(ctx, in.RunInput); err != nil {
		return nil, err
	}
	// Runs recorded before orchestrators continued as new never do.
	canContinue := isPinned && workflow.GetVersion(ctx, versionRunContinueAsNew, workflow.DefaultVersion, 1) == 1
	wfID := workflow.GetInfo(ctx).WorkflowExecution.ID
	var rec *events.Recorder
	var rs routeState
	if carry != nil {
		if rec, err = events.NewRecorder(ctx, carry.Events, carry.NextEvent, carry.Pages, r.cfg.Events); err != nil {
			return nil, err
		}
		rs = carry.Route
	} else {
		start := in.Agent
		if start == "" {
			start = spec.Entry
		}
		if spec.Agent(start) == nil {
			return nil, troupe.NonRetryable(troupe.ErrUnknownAgent, "%v %q in graph %s", agents.ErrUnknownAgent, start, in.Graph)
		}
		if err := troupe.CheckPayload("the run input", len(in.Input)); err != nil {
			return nil, err
		}
		if rec, err = events.NewRecorder(ctx, nil, 1, nil, r.cfg.Events); err != nil {
			return nil, err
		}
		rec.Add(ctx, troupe.Event{Kind: troupe.EventRunStarted, Agent: start, Detail: troupe.Preview(in.Input, 200)})
		rs = routeState{Current: start, Input: troupe.AgentInput{Graph: in.Graph, RunID: wfID, Vars: in.Vars, Pending: []agents.Item{agents.UserMessage(in.Input)}}}
		if isPinned {
			rs.Input.Spec = spec
		}
	}
	desk := &runtime.ApprovalDesk{}
	if carry != nil && carry.Approvals != nil {
		desk = carry.Approvals
	}
	approvals, err := approval.NewDesk(ctx, desk, nil)
	if err != nil {
		return nil, err
	}
	var carried *runtime.BudgetLedger
	if carry != nil {
		carried = carry.Budget
	}
	tb, err := budget.NewRunTree(ctx, spec, carried, rec)
	if err != nil {
		return nil, err
	}
	// The Web UI's current details show the run's message and the agent at
	// work; each run sets them, as continue-as-new keeps no static summary.
	workflow.SetCurrentDetails(ctx, runDetails(in.RunInput, rs.Current))
	cont := func(rs routeState) error {
		workflow.SetCurrentDetails(ctx, runDetails(in.RunInput, rs.Current))
		if !canContinue {
			return nil
		}
		info := workflow.GetInfo(ctx)
		if !(spec.ContinueAfterEvents > 0 && info.GetCurrentHistoryLength() >= spec.ContinueAfterEvents || info.GetContinueAsNewSuggested()) {
			return nil
		}
		if ctx.Err() != nil {
			// A cancellation does not pass to the next run: end here.
			return temporal.NewCanceledError()
		}
		if err := rec.SavePage(ctx); err != nil {
			return err // Cancelled while the page was saved.
		}
		rec.Add(ctx, troupe.Event{Kind: troupe.EventContinued, Agent: rs.Current,
			Detail: fmt.Sprintf("history of %d events: continuing as new before agent %d", info.GetCurrentHistoryLength(), rs.Next)})
		next := in
		next.Carry = &RunCarry{Spec: spec, Route: rs}
		next.Carry.Events, next.Carry.NextEvent, next.Carry.Pages = rec.Carry()
		approvals.Drain(ctx)
		if len(desk.Rules) > 0 {
			next.Carry.Approvals = &runtime.ApprovalDesk{Rules: desk.Rules}
		}
		tb.Settle(ctx)
		next.Carry.Budget = tb.Ledger()
		return workflow.NewContinueAsNewError(ctx, troupe.OrchestratorWorkflowName, next)
	}
	rr, err := r.routeFrom(ctx, rec, spec, rs, wfID, cont, nil, nil, tb)
	if err != nil {
		if _, ok := err.(*workflow.ContinueAsNewError); ok {
			return nil, err
		}
		err = tb.Exceeded(ctx, err)
		rec.Add(ctx, troupe.Event{Kind: troupe.EventFailed, Detail: troupe.FailureText(err)})
		memory.RecordRun(ctx, spec, in.RunInput, wfID, nil, err)
		return nil, err
	}
	rec.Add(ctx, troupe.Event{Kind: troupe.EventFinal, Agent: rr.Agent, Detail: troupe.Preview(string(rr.Output), 200)})
	memory.RecordRun(ctx, spec, in.RunInput, wfID, &memory.RunEnd{Agent: rr.Agent, Output: rr.Output, Path: rr.Path, Transcript: rr.Transcript}, nil)
	tb.Drain(ctx)
	return &troupe.RunResult{
		WorkflowID: wfID, Graph: in.Graph, Agent: rr.Agent, Output: rr.Output, Path: rr.Path,
		Turns: rr.Turns, ToolCalls: rr.ToolCalls, Handoffs: rr.Handoffs, Usage: rr.Usage,
		Agents: rr.Agents, Cost: rr.Agents.Cost(), Budget: tb.Ledger().Report(),
	}, nil
}

// versionRunContinueAsNew marks the change to orchestrators that continue
// as new (a version marker in each run that pins its graph).
const versionRunContinueAsNew = "troupe.run-continue-as-new"

// routeResult is the end of a chain of agents joined by handoffs, or the
// chain so far.
type routeResult struct {
	Agent     string          `json:"agent,omitempty"`
	Output    json.RawMessage `json:"output,omitempty"`
	Path      []string        `json:"path,omitempty"`
	Turns     int             `json:"turns,omitempty"`
	ToolCalls int             `json:"tool_calls,omitempty"`
	Handoffs  int             `json:"handoffs,omitempty"`
	Usage     model.Usage     `json:"usage"`
	// Agents is the chain's usage per agent, its agents-as-tools' and
	// failed agents' included.
	Agents runtime.Usages `json:"agents,omitempty"`
	// Transcript is the conversation at the chain's end.
	Transcript *runtime.TranscriptRef `json:"transcript,omitempty"`
	// Interrupted says the chain stopped on an interrupt (a session's):
	// Agent is the agent at work then, and Transcript and Pending the
	// conversation so far.
	Interrupted bool          `json:"interrupted,omitempty"`
	Pending     []agents.Item `json:"pending,omitempty"`
}

// routeState is where a chain of agents stands between two of them: the
// agent to start next (its child is the Next-th of the chain) with its
// input, and what the chain did so far. It is all an orchestrator carries
// through continue-as-new.
type routeState struct {
	Current string            `json:"current"`
	Next    int               `json:"next"`
	Input   troupe.AgentInput `json:"input"`
	Done    routeResult       `json:"done"`
}

// route runs agent start as a child workflow, then each handoff target in
// turn, until one gives a final output, on the run's spec. Child ids are
// prefix/<n>-<agent>. An agent routes each of its agent-tool calls with
// it.
func (r *Runner) route(ctx workflow.Context, rec *events.Recorder, spec *runtime.GraphSpec, start string, in troupe.AgentInput, prefix string, ctl *control) (*routeResult, error) {
	return r.routeFrom(ctx, rec, spec, routeState{Current: start, Input: in}, prefix, nil, nil, ctl, nil)
}

// routeFrom goes on with a chain of agents from rs. Before each child but
// the first of this call, cont (when not nil) may end the workflow by
// returning a *workflow.ContinueAsNewError carrying the state. A session's
// turn gives its sandboxes (boxes): each sandbox agent of the chain is
// lent its lease and gives it back, and a cancelled turn waits for its
// agents to have ended. A session's controls (ctl, nil outside sessions)
// hold the chain while paused, stop it before its next agent when
// interrupted, and reach each agent workflow it starts. The root of the
// tree (a run's orchestrator, a session) gives its budget (tb, nil
// elsewhere): it lends its ledger to each agent of the chain, the one
// agent of the tree at work, and takes it back when the agent ends.
func (r *Runner) routeFrom(ctx workflow.Context, rec *events.Recorder, spec *runtime.GraphSpec, rs routeState, prefix string, cont func(routeState) error, boxes *lease.Keeper, ctl *control, tb *budget.Tree) (*routeResult, error) {
	maxHandoffs := spec.MaxHandoffs
	res := &rs.Done
	current, in := rs.Current, rs.Input
	for n := rs.Next; ; n++ {
		if cont != nil && n > rs.Next {
			if err := cont(routeState{Current: current, Next: n, Input: in, Done: *res}); err != nil {
				return nil, err
			}
		}
		if err := ctl.hold(ctx, nil); err != nil {
			return res, err
		}
		if ctl.stopping() {
			res.Agent, res.Transcript, res.Pending, res.Interrupted = current, &in.Transcript, in.Pending, true
			return res, nil
		}
		childID := fmt.Sprintf("%s/%d-%s", prefix, n, current)
		in.Agent = current
		if in.Transcript.Key == "" {
			in.Transcript.Key = "transcripts/" + childID
		}
		res.Path = append(res.Path, current)
		rec.Add(ctx, troupe.Event{Kind: troupe.EventAgentStarted, Agent: current, Child: childID})
		in.Session = nil
		in.CheckInput = n == 0 && len(spec.Agent(current).GuardrailsOf(agents.GuardrailInput)) > 0
		if a := spec.Agent(current); boxes != nil && a != nil && a.Sandbox {
			link, err := boxes.Lend(ctx, current)
			if err != nil {
				return res, err
			}
			in.Session = link
		}
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: childID, WorkflowTaskTimeout: agentTaskTimeout,
			StaticSummary: "agent " + current, WaitForCancellation: boxes != nil})
		var ar troupe.AgentResult
		in.Budget = tb.Lend(ctx, childID)
		child := workflow.ExecuteChildWorkflow(cctx, troupe.AgentWorkflowName, in)
		in.Budget = nil
		if in.Session != nil {
			// A child that never started got nothing: the lease goes back
			// as lent (a live sandbox is no one's otherwise).
			if err := child.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
				boxes.Unlend(current)
				tb.Ended(ctx, childID, nil, err)
				return res, err
			}
		}
		ctl.track(ctx, childID, child)
		err := child.Get(ctx, &ar)
		tb.Ended(ctx, childID, &ar, err)
		if in.Session != nil {
			given := ar.Lease
			if err != nil {
				given = leaseFrom(err) // A failed agent may give its workspace back.
			}
			boxes.Back(current, given)
		}
		if err != nil {
			res.countFailed(err) // A failed agent's usage still counts.
			return res, err
		}
		res.Turns += ar.Turns
		res.ToolCalls += ar.ToolCalls
		res.Usage = res.Usage.Add(ar.Usage)
		res.Agents = res.Agents.Add(ar.Agents...)
		if ar.Interrupted {
			res.Agent, res.Transcript, res.Pending, res.Interrupted = current, &ar.Transcript, ar.Pending, true
			return res, nil
		}
		if ar.Handoff == nil {
			res.Agent, res.Output, res.Transcript = current, ar.Output, &ar.Transcript
			return res, nil
		}
		if res.Handoffs >= maxHandoffs {
			return res, troupe.NonRetryable(troupe.ErrMaxHandoffs, "the run exceeded %d handoffs (last: %s → %s)", maxHandoffs, current, ar.Handoff.Name)
		}
		var h runtime.ToolSpec
		if a := spec.Agent(current); a != nil {
			h = a.Tool(ar.Handoff.Name)
		}
		if h.Kind != agents.ToolHandoff {
			return res, troupe.NonRetryable(troupe.ErrGraphChanged, "agent %s handed off with %q, which is not one of its handoffs in graph %s", current, ar.Handoff.Name, in.Graph)
		}
		res.Handoffs++
		rec.Add(ctx, troupe.Event{Kind: troupe.EventHandoff, Agent: current, Tool: h.Name, Detail: current + " → " + h.Target})
		in.Transcript, in.Pending = ar.Transcript, ar.Pending
		hctx, hspan := traceHandoff(ctx, current, childID, h)
		if h.Hooks {
			lctx := workflow.WithLocalActivityOptions(hctx, workflow.LocalActivityOptions{
				StartToCloseTimeout: time.Minute, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3},
				Summary: "handoff " + current + " → " + h.Target,
			})
			hi := HandoffInput{Graph: spec.Graph, From: current, Tool: h.Name, Transcript: ar.Transcript, Pending: ar.Pending,
				Run:    agents.RunContext{WorkflowID: childID, RunID: in.RunID, Agent: current, Turn: ar.Turns, Vars: in.Vars},
				NewKey: fmt.Sprintf("transcripts/%s/%d-%s", prefix, n+1, h.Target)}
			var ho HandoffOutput
			if err := workflow.ExecuteLocalActivity(lctx, HandoffActivityName, hi).Get(ctx, &ho); err != nil {
				hspan.End(ctx, err)
				return res, err
			}
			in.Transcript, in.Pending = ho.Transcript, ho.Pending
		}
		hspan.End(ctx, nil)
		current = h.Target
	}
}

// agentTaskTimeout is the workflow task timeout of agent workflows. While
// a model call runs as a local activity, the SDK holds the workflow task
// and extends it at 80% of this timeout; a cancellation or a signal waits
// for that extension, up to 2.4 s. A query (the events that MCP progress
// and `troupe run` show) rides on the task the extension opens and is
// answered when that task ends, so it can wait two extensions, up to
// 4.8 s. The server's default of 10 s made them wait up to 8 and 16 s; 3 s
// costs three more history events per 2.4 s of model call.
const agentTaskTimeout = 3 * time.Second

// runDetails is a run's current details in the Web UI: its summary and
// the agent at work.
func runDetails(in troupe.RunInput, agent string) string {
	return in.Summary() + "\n\nagent at work: " + agent
}

// leaseFrom is the lease a failed agent's error carries back, or nil.
func leaseFrom(err error) *runtime.SandboxLease { return troupe.FailureOf(err).Lease }
