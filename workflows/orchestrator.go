package workflows

import (
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/handoff"
	"github.com/troupe-dev/troupe/memory"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/workflows/approval"
	"github.com/troupe-dev/troupe/workflows/budget"
	"github.com/troupe-dev/troupe/workflows/events"
)

// OrchestratorWorkflow routes a run: it starts the active agent's child
// workflow and, on each handoff, the target's, until an agent gives the
// final output. Before a child, when its history has reached the run's
// bound (GraphSpec.ContinueAfterEvents) or the server suggests it, it
// continues as new with its routing state and recent events (RunCarry),
// so a run of any number of handoffs keeps a bounded history.
func (r *Runner) OrchestratorWorkflow(ctx workflow.Context, in OrchestratorInput) (*troupe.RunResult, error) {
	o, rs, err := r.startOrchestrator(ctx, in)
	if err != nil {
		return nil, err
	}
	// The Web UI's current details show the run's message and the agent at
	// work; each run sets them, as continue-as-new keeps no static summary.
	workflow.SetCurrentDetails(ctx, runDetails(in.RunInput, rs.Current))
	cont := func(rs handoff.State) error { return o.beforeAgent(ctx, rs) }
	rr, err := (&handoff.Route{Spec: o.spec, Events: o.rec, Prefix: o.wfID, Continue: cont, Budget: o.tb}).From(ctx, rs)
	if err != nil {
		return nil, o.fail(ctx, err)
	}
	return o.finish(ctx, rr), nil
}

// orchestratorRun is one run of a run's orchestrator: the graph's spec it
// routes, the recorder of its events, its approvals and its budget.
type orchestratorRun struct {
	r    *Runner
	in   OrchestratorInput
	spec *runtime.GraphSpec
	wfID string
	// canContinue is whether the run may continue as new: runs recorded
	// before orchestrators continued as new never do.
	canContinue bool
	rec         *events.Recorder
	// desk is the run's approval desk, which approvals serves; its rules
	// are carried to the next run.
	desk      *runtime.ApprovalDesk
	approvals *approval.Desk
	tb        *budget.Tree
}

// startOrchestrator sets up a run of the orchestrator: its spec, its event
// recorder and routing state (new, or carried from the previous run), its
// approval desk and its budget tree; it returns the routing state to start
// from.
func (r *Runner) startOrchestrator(ctx workflow.Context, in OrchestratorInput) (*orchestratorRun, handoff.State, error) {
	traceRun(ctx, in.Graph)
	spec, isPinned, err := r.runSpec(ctx, in)
	if err != nil {
		return nil, handoff.State{}, err
	}
	o := &orchestratorRun{r: r, in: in, spec: spec}
	// Runs recorded before orchestrators continued as new never do.
	o.canContinue = isPinned && workflow.GetVersion(ctx, versionRunContinueAsNew, workflow.DefaultVersion, 1) == 1
	o.wfID = workflow.GetInfo(ctx).WorkflowExecution.ID
	rs, err := o.startRoute(ctx, isPinned)
	if err != nil {
		return nil, handoff.State{}, err
	}
	carry := in.Carry
	o.desk = &runtime.ApprovalDesk{}
	if carry != nil && carry.Approvals != nil {
		o.desk = carry.Approvals
	}
	if o.approvals, err = approval.NewDesk(ctx, o.desk, nil); err != nil {
		return nil, handoff.State{}, err
	}
	var carried *runtime.BudgetLedger
	if carry != nil {
		carried = carry.Budget
	}
	if o.tb, err = budget.NewRunTree(ctx, spec, carried, o.rec); err != nil {
		return nil, handoff.State{}, err
	}
	return o, rs, nil
}

// runSpec returns the graph's spec the run routes, and whether it is
// pinned: the one its previous run carried, or the one pinned at its start.
func (r *Runner) runSpec(ctx workflow.Context, in OrchestratorInput) (*runtime.GraphSpec, bool, error) {
	if in.Carry == nil {
		return r.pin(ctx, in.RunInput)
	}
	if in.Carry.Spec == nil {
		return nil, false, troupe.NonRetryable(troupe.ErrInternal, "run %s continued without its graph's spec", workflow.GetInfo(ctx).WorkflowExecution.ID)
	}
	return in.Carry.Spec, true, nil
}

// startRoute sets up the run's event recorder and returns the routing
// state to start from: the one the previous run carried, or, at the run's
// start, its input (checked) for the agent it starts with.
func (o *orchestratorRun) startRoute(ctx workflow.Context, isPinned bool) (handoff.State, error) {
	in, carry := o.in, o.in.Carry
	var err error
	if carry != nil {
		if o.rec, err = events.NewRecorder(ctx, carry.Events, carry.NextEvent, carry.Pages, o.r.cfg.Events); err != nil {
			return handoff.State{}, err
		}
		return carry.Route, nil
	}
	start := in.Agent
	if start == "" {
		start = o.spec.Entry
	}
	if o.spec.Agent(start) == nil {
		return handoff.State{}, troupe.NonRetryable(troupe.ErrUnknownAgent, "%v %q in graph %s", agents.ErrUnknownAgent, start, in.Graph)
	}
	if err := troupe.CheckPayload("the run input", len(in.Input)); err != nil {
		return handoff.State{}, err
	}
	if o.rec, err = events.NewRecorder(ctx, nil, 1, nil, o.r.cfg.Events); err != nil {
		return handoff.State{}, err
	}
	o.rec.Add(ctx, troupe.Event{Kind: troupe.EventRunStarted, Agent: start, Detail: troupe.Preview(in.Input, 200)})
	msg := agents.UserMessage(in.Input)
	if in.InputRef != nil {
		// Stored apart (Input is its start): the agents read it.
		msg = agents.UserMessageRef(in.InputRef.Key)
	}
	rs := handoff.State{Current: start, Input: troupe.AgentInput{Graph: in.Graph, RunID: o.wfID, Vars: in.Vars, Pending: []agents.Item{msg}}}
	if isPinned {
		rs.Input.Spec = o.spec
	}
	return rs, nil
}

// beforeAgent is the route's step before each child: it shows the agent
// at work and, when the run's history has reached its bound, continues as
// new with its routing state, recent events, approval rules and budget.
func (o *orchestratorRun) beforeAgent(ctx workflow.Context, rs handoff.State) error {
	workflow.SetCurrentDetails(ctx, runDetails(o.in.RunInput, rs.Current))
	if !o.canContinue {
		return nil
	}
	info := workflow.GetInfo(ctx)
	if !(o.spec.ContinueAfterEvents > 0 && info.GetCurrentHistoryLength() >= o.spec.ContinueAfterEvents || info.GetContinueAsNewSuggested()) {
		return nil
	}
	if ctx.Err() != nil {
		// A cancellation does not pass to the next run: end here.
		return temporal.NewCanceledError()
	}
	if err := o.rec.SavePage(ctx); err != nil {
		return err // Cancelled while the page was saved.
	}
	o.rec.Add(ctx, troupe.Event{Kind: troupe.EventContinued, Agent: rs.Current,
		Detail: fmt.Sprintf("history of %d events: continuing as new before agent %d", info.GetCurrentHistoryLength(), rs.Next)})
	next := o.in
	next.Carry = &RunCarry{Spec: o.spec, Route: rs}
	next.Carry.Events, next.Carry.NextEvent, next.Carry.Pages = o.rec.Carry()
	o.approvals.Drain(ctx)
	if len(o.desk.Rules) > 0 {
		next.Carry.Approvals = &runtime.ApprovalDesk{Rules: o.desk.Rules}
	}
	o.tb.Settle(ctx)
	next.Carry.Budget = o.tb.Ledger()
	return workflow.NewContinueAsNewError(ctx, troupe.OrchestratorWorkflowName, next)
}

// fail returns the error that ends the run: a continue-as-new as it is;
// any other failure (the budget's, when it was exceeded) recorded as the
// run's event and in memory.
func (o *orchestratorRun) fail(ctx workflow.Context, err error) error {
	if _, ok := err.(*workflow.ContinueAsNewError); ok {
		return err
	}
	err = o.tb.Exceeded(ctx, err)
	o.rec.Add(ctx, troupe.Event{Kind: troupe.EventFailed, Detail: troupe.FailureText(err)})
	memory.RecordRun(ctx, o.spec, o.in.RunInput, o.wfID, nil, err)
	return err
}

// finish records the run's final output, in its events and in memory,
// settles its budget, and returns its result.
func (o *orchestratorRun) finish(ctx workflow.Context, rr *handoff.Result) *troupe.RunResult {
	in := o.in
	o.rec.Add(ctx, troupe.Event{Kind: troupe.EventFinal, Agent: rr.Agent, Detail: troupe.Preview(string(rr.Output), 200)})
	memory.RecordRun(ctx, o.spec, in.RunInput, o.wfID, &memory.RunEnd{Agent: rr.Agent, Output: rr.Output, Path: rr.Path, Transcript: rr.Transcript}, nil)
	o.tb.Drain(ctx)
	return &troupe.RunResult{
		WorkflowID: o.wfID, Graph: in.Graph, Agent: rr.Agent, Output: rr.Output, Path: rr.Path,
		Turns: rr.Turns, ToolCalls: rr.ToolCalls, Handoffs: rr.Handoffs, Usage: rr.Usage,
		Agents: rr.Agents, Cost: rr.Agents.Cost(), Budget: o.tb.Ledger().Report(),
	}
}

// versionRunContinueAsNew marks the change to orchestrators that continue
// as new (a version marker in each run that pins its graph).
const versionRunContinueAsNew = "troupe.run-continue-as-new"

// runDetails is a run's current details in the Web UI: its summary and
// the agent at work.
func runDetails(in troupe.RunInput, agent string) string {
	return in.Summary() + "\n\nagent at work: " + agent
}
