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
	var rs handoff.State
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
		rs = handoff.State{Current: start, Input: troupe.AgentInput{Graph: in.Graph, RunID: wfID, Vars: in.Vars, Pending: []agents.Item{agents.UserMessage(in.Input)}}}
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
	cont := func(rs handoff.State) error {
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
	rr, err := (&handoff.Route{Spec: spec, Events: rec, Prefix: wfID, Continue: cont, Budget: tb}).From(ctx, rs)
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

// runDetails is a run's current details in the Web UI: its summary and
// the agent at work.
func runDetails(in troupe.RunInput, agent string) string {
	return in.Summary() + "\n\nagent at work: " + agent
}
