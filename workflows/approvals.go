package workflows

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
)

// Approvals: a call that needs a human's decision waits in its agent's
// workflow, durably and at no cost, until the decision comes.
//
//  1. Before a turn's calls start, the agent workflow sees which of them
//     a policy makes wait: the run's spec says which tools have one; a
//     policy that decides per call (agents.Approval.When) runs in a local
//     activity, whose answer the history keeps.
//  2. For each call that waits it records approval_requested and asks the
//     root of its tree (the run's orchestrator or the session, whose id
//     every agent input carries as RunID) with ApprovalRequestSignal.
//  3. The root keeps the calls waiting on its runtime.ApprovalDesk, lists
//     them (ApprovalsQuery) and takes decisions (DecideUpdate), each
//     routed to the workflow that waits with ApprovalDecisionSignal; a
//     decision it remembers answers later requests at once.
//  4. The agent workflow waits until every call of the turn that waits is
//     decided (or its policy's timeout decides it, which it tells the
//     root with ApprovalSettledSignal), then runs the approved calls, with
//     the arguments a decision gave, and answers the rejected ones with
//     the rejection, which the model sees. Its sandbox is not provisioned
//     for the wait, and one it has is suspended by its idle timer.

// ApprovalCheckActivityName runs the approval policies that decide per
// call.
const ApprovalCheckActivityName = "troupe.ApprovalCheck"

// versionApprovals marks the change of calls that need approval from
// refused (MCP tools whose server required it, the only ones then) to
// waiting for a decision. The marker is written only when a call needs
// approval.
const versionApprovals = "troupe.approvals"

// ApprovalCheckInput asks which calls of an agent wait under its policies.
type ApprovalCheckInput struct {
	Graph string        `json:"graph"`
	Agent string        `json:"agent"`
	Calls []agents.Item `json:"calls"`
}

// ApprovalCheck runs the agent's approval policies on each call: true
// for a call that waits. A policy that fails makes its call wait.
func (a *Activities) ApprovalCheck(ctx context.Context, in ApprovalCheckInput) ([]bool, error) {
	_, agent, err := a.r.agent(in.Graph, in.Agent)
	if err != nil {
		return nil, err
	}
	need := make([]bool, len(in.Calls))
	for i, c := range in.Calls {
		args := c.Arguments
		if args == "" {
			args = "{}"
		}
		need[i], _ = agent.NeedsApproval(ctx, c.Name, json.RawMessage(args))
	}
	return need, nil
}

// treeApprovals is the approval desk of a root (a run's orchestrator or a
// session) with the messages it takes.
type treeApprovals struct {
	desk     *runtime.ApprovalDesk
	requests workflow.ReceiveChannel
	settled  workflow.ReceiveChannel
	// changed, when set, is told that the calls waiting changed.
	changed func(workflow.Context)
}

// newTreeApprovals sets the root's approval handlers up on desk.
func newTreeApprovals(ctx workflow.Context, desk *runtime.ApprovalDesk, changed func(workflow.Context)) (*treeApprovals, error) {
	a := &treeApprovals{desk: desk, changed: changed,
		requests: workflow.GetSignalChannel(ctx, troupe.ApprovalRequestSignal),
		settled:  workflow.GetSignalChannel(ctx, troupe.ApprovalSettledSignal)}
	if err := workflow.SetQueryHandler(ctx, troupe.ApprovalsQuery, func() ([]runtime.ApprovalRequest, error) {
		return slices.Clone(a.desk.Pending), nil
	}); err != nil {
		return nil, err
	}
	err := workflow.SetUpdateHandlerWithOptions(ctx, troupe.DecideUpdate, a.decide, workflow.UpdateHandlerOptions{
		Validator: func(_ workflow.Context, dec runtime.ApprovalDecision) error {
			if err := a.desk.Check(dec); err != nil {
				return temporal.NewNonRetryableApplicationError(err.Error(), troupe.ErrBadDecision, nil)
			}
			return nil
		},
	})
	if err != nil {
		return nil, err
	}
	workflow.Go(ctx, func(gctx workflow.Context) {
		for gctx.Err() == nil {
			workflow.NewSelector(gctx).
				AddReceive(a.requests, func(c workflow.ReceiveChannel, _ bool) { a.takeRequest(gctx) }).
				AddReceive(a.settled, func(c workflow.ReceiveChannel, _ bool) { a.takeSettled(gctx) }).
				Select(gctx)
		}
	})
	return a, nil
}

// drain takes the messages that came in and were not taken yet, before
// the root continues as new.
func (a *treeApprovals) drain(ctx workflow.Context) {
	for a.takeRequest(ctx) || a.takeSettled(ctx) {
	}
}

func (a *treeApprovals) takeRequest(ctx workflow.Context) bool {
	var req runtime.ApprovalRequest
	if !a.requests.ReceiveAsync(&req) {
		return false
	}
	if r := a.desk.Request(req); r != nil {
		a.route(ctx, *r)
	} else {
		a.notify(ctx)
	}
	return true
}

func (a *treeApprovals) takeSettled(ctx workflow.Context) bool {
	var req runtime.ApprovalRequest
	if !a.settled.ReceiveAsync(&req) {
		return false
	}
	a.desk.Settle(req.ID)
	a.notify(ctx)
	return true
}

// decide takes a decision (DecideUpdate).
func (a *treeApprovals) decide(ctx workflow.Context, dec runtime.ApprovalDecision) ([]runtime.ApprovalDecision, error) {
	routed, err := a.desk.Decide(dec)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), troupe.ErrBadDecision, nil)
	}
	a.notify(ctx)
	out := make([]runtime.ApprovalDecision, 0, len(routed))
	for _, r := range routed {
		a.route(ctx, r)
		out = append(out, r.Decision)
	}
	return out, nil
}

// route brings a decision to the workflow that waits. One that ended
// meanwhile (its turn was cancelled) needs it no more.
func (a *treeApprovals) route(ctx workflow.Context, r runtime.Routed) {
	_ = workflow.SignalExternalWorkflow(ctx, r.Workflow, "", troupe.ApprovalDecisionSignal, r.Decision).Get(ctx, nil)
}

func (a *treeApprovals) notify(ctx workflow.Context) {
	if a.changed != nil {
		a.changed(ctx)
	}
}

// waiting reports whether a call of the tree waits for a decision.
func (a *treeApprovals) waiting() bool { return a != nil && len(a.desk.Pending) > 0 }

// waitingCall is a call of a turn that waits for a decision.
type waitingCall struct {
	req runtime.ApprovalRequest
	// span ends the wait's trace span (traceApproval).
	span     func(decision string, err error)
	list     *[]agents.Item // the dispatch list that holds it
	decided  *runtime.ApprovalDecision
	deadline time.Time
	policy   runtime.ApprovalSpec
}

// approve makes the turn's calls that need approval wait for their
// decisions (see the top of this file), and applies them to d: an approved
// call stays, with the arguments its decision gave; a rejected one leaves
// d, its output (the rejection) in done.
func (t *turnCalls) approve(ctx workflow.Context, rc agents.RunContext, d *runtime.Dispatch, done map[string]agents.Item) error {
	type candidate struct {
		list   *[]agents.Item
		i      int
		kind   string
		policy runtime.ApprovalSpec
	}
	var cands []candidate
	var asks []agents.Item // calls whose policy decides per call
	add := func(list *[]agents.Item, kind string) {
		for i, c := range *list {
			p, ok := t.agent.Approval(c.Name)
			if kind == callMCP && !ok {
				if ref, found := t.mt.ref(c.Name); found && ref.Approval {
					p, ok = runtime.ApprovalSpec{Tool: c.Name}, true
				}
			}
			if !ok {
				continue
			}
			k := kind
			if k == callFunction && t.agent.Tool(c.Name).Sandbox {
				k = callSandbox
			}
			cands = append(cands, candidate{list, i, k, p})
			if p.When {
				asks = append(asks, c)
			}
		}
	}
	add(&d.Functions, callFunction)
	add(&d.MCP, callMCP)
	add(&d.AgentTools, callAgent)
	if len(cands) == 0 {
		return nil
	}
	var need []bool
	if len(asks) > 0 {
		lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
			StartToCloseTimeout: time.Minute, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3},
			Summary: "approval policies of " + t.agent.Name,
		})
		if err := workflow.ExecuteLocalActivity(lctx, ApprovalCheckActivityName, ApprovalCheckInput{Graph: t.in.Graph, Agent: t.agent.Name, Calls: asks}).Get(ctx, &need); err != nil {
			need = nil // Policies that cannot decide ask a human.
		}
	}
	wfID := workflow.GetInfo(ctx).WorkflowExecution.ID
	now := workflow.Now(ctx)
	var waits []*waitingCall
	asked := 0
	for _, c := range cands {
		if c.policy.When {
			wait := asked >= len(need) || need[asked]
			asked++
			if !wait {
				continue
			}
		}
		call := (*c.list)[c.i]
		w := &waitingCall{list: c.list, policy: c.policy, req: runtime.ApprovalRequest{
			ID: runtime.ApprovalID(wfID, call.CallID), Workflow: wfID, Agent: t.agent.Name, Tool: call.Name, Kind: c.kind,
			CallID: call.CallID, Arguments: call.Arguments, Since: now,
		}}
		if c.policy.Timeout > 0 {
			w.deadline = now.Add(c.policy.Timeout)
			w.req.Deadline = &w.deadline
			w.req.OnTimeout = "reject"
			if c.policy.ApproveOnTimeout {
				w.req.OnTimeout = "approve"
			}
		}
		waits = append(waits, w)
	}
	if len(waits) == 0 {
		return nil
	}
	if workflow.GetVersion(ctx, versionApprovals, workflow.DefaultVersion, 1) == workflow.DefaultVersion || t.in.RunID == "" {
		// Recorded when only MCP calls needed approval, and were refused;
		// or an agent with no root to ask.
		for _, w := range waits {
			t.reject(w, fmt.Sprintf("calling %s needs a human's approval, and this run cannot ask for it; the call was not made. Do without it or tell the user.", w.req.Tool), done)
		}
		t.dropRejected(d, done)
		return nil
	}
	for _, w := range waits {
		w.span = traceApproval(ctx, gateCall{Agent: t.agent.Name, Kind: w.req.Kind, Call: agents.FunctionCall(w.req.CallID, w.req.Tool, w.req.Arguments)})
		t.rec.Add(ctx, troupe.Event{Kind: troupe.EventApprovalRequested, Agent: t.agent.Name, Turn: rc.Turn, Tool: w.req.Tool, CallID: w.req.CallID,
			Approval: w.req.ID, Detail: troupe.Preview(w.req.Arguments, 300)})
		_ = workflow.SignalExternalWorkflow(ctx, t.in.RunID, "", troupe.ApprovalRequestSignal, w.req).Get(ctx, nil)
	}
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("agent %s, turn %d: waiting for approval of %d call(s)", t.agent.Name, rc.Turn, len(waits)))
	if err := t.awaitDecisions(ctx, waits); err != nil {
		// Cancelled: the root forgets the calls, which wait no more.
		dctx, cancel := workflow.NewDisconnectedContext(ctx)
		defer cancel()
		for _, w := range waits {
			if w.decided == nil {
				_ = workflow.SignalExternalWorkflow(dctx, t.in.RunID, "", troupe.ApprovalSettledSignal, w.req).Get(dctx, nil)
			}
			w.span("cancelled", err)
		}
		return err
	}
	for _, w := range waits {
		dec := *w.decided
		detail := "approved"
		if !dec.Approve {
			detail = "rejected"
		}
		detail += " by " + dec.By
		w.span(detail, nil)
		if dec.Message != "" {
			detail += ": " + dec.Message
		}
		t.rec.Add(ctx, troupe.Event{Kind: troupe.EventApprovalDecided, Agent: t.agent.Name, Turn: rc.Turn, Tool: w.req.Tool, CallID: w.req.CallID, Approval: w.req.ID, Detail: troupe.Preview(detail, 300)})
		switch {
		case !dec.Approve:
			t.reject(w, t.rejection(dec), done)
		case dec.Arguments != "":
			for i := range *w.list {
				if (*w.list)[i].CallID == w.req.CallID {
					(*w.list)[i].Arguments = dec.Arguments
				}
			}
		}
	}
	t.dropRejected(d, done)
	return nil
}

// awaitDecisions waits until every call of waits is decided: by the root,
// or by its policy's timeout.
func (t *turnCalls) awaitDecisions(ctx workflow.Context, waits []*waitingCall) error {
	ch := workflow.GetSignalChannel(ctx, troupe.ApprovalDecisionSignal)
	open := func() []*waitingCall {
		var out []*waitingCall
		for _, w := range waits {
			if w.decided == nil {
				out = append(out, w)
			}
		}
		return out
	}
	for left := open(); len(left) > 0; left = open() {
		var next time.Time
		for _, w := range left {
			if !w.deadline.IsZero() && (next.IsZero() || w.deadline.Before(next)) {
				next = w.deadline
			}
		}
		arrived := func() bool { return ch.Len() > 0 || t.ctl.stopping() }
		if next.IsZero() {
			if err := workflow.Await(ctx, arrived); err != nil {
				return err
			}
		} else if wait := next.Sub(workflow.Now(ctx)); wait > 0 {
			if _, err := workflow.AwaitWithTimeout(ctx, wait, arrived); err != nil {
				return err
			}
		}
		var dec runtime.ApprovalDecision
		for ch.ReceiveAsync(&dec) {
			for _, w := range left {
				if w.decided == nil && w.req.CallID == dec.CallID && w.req.ID == dec.ID {
					d := dec
					w.decided = &d
				}
			}
		}
		now := workflow.Now(ctx)
		for _, w := range left {
			if w.decided == nil && t.ctl.stopping() {
				// The session's user interrupted the turn: the calls that
				// wait are not run, as a turn's calls are not once
				// interrupted.
				w.decided = &runtime.ApprovalDecision{ID: w.req.ID, CallID: w.req.CallID, By: runtime.DecidedByInterrupt}
				_ = workflow.SignalExternalWorkflow(ctx, t.in.RunID, "", troupe.ApprovalSettledSignal, w.req).Get(ctx, nil)
				continue
			}
			if w.decided == nil && !w.deadline.IsZero() && !now.Before(w.deadline) {
				w.decided = &runtime.ApprovalDecision{ID: w.req.ID, CallID: w.req.CallID, Approve: w.policy.ApproveOnTimeout, By: runtime.DecidedByTimeout,
					Message: fmt.Sprintf("no one decided within %s", w.policy.Timeout)}
				_ = workflow.SignalExternalWorkflow(ctx, t.in.RunID, "", troupe.ApprovalSettledSignal, w.req).Get(ctx, nil)
			}
		}
	}
	return nil
}

// rejection is what the model sees of a rejected call.
func (t *turnCalls) rejection(dec runtime.ApprovalDecision) string {
	who := "the user"
	switch dec.By {
	case runtime.DecidedByInterrupt:
		return "Error: not run: the user interrupted the turn while this call waited for approval"
	case runtime.DecidedByTimeout:
		return "Error: this call needed approval and " + dec.Message + "; it was not run."
	case runtime.DecidedByRule:
		who = "the user (a decision remembered for calls like this)"
	}
	text := "Error: " + who + " rejected this call; it was not run."
	if dec.Message != "" {
		text += " Their message: " + dec.Message
	}
	return text
}

// reject answers the waiting call w with text.
func (t *turnCalls) reject(w *waitingCall, text string, done map[string]agents.Item) {
	done[w.req.CallID] = t.output(agents.Item{CallID: w.req.CallID}, text)
}

// dropRejected takes the calls answered in done out of d's lists.
func (t *turnCalls) dropRejected(d *runtime.Dispatch, done map[string]agents.Item) {
	gone := func(c agents.Item) bool { _, ok := done[c.CallID]; return ok }
	d.Functions = slices.DeleteFunc(d.Functions, gone)
	d.MCP = slices.DeleteFunc(d.MCP, gone)
	d.AgentTools = slices.DeleteFunc(d.AgentTools, gone)
}
