package approval

import (
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/telemetry"
	"github.com/troupe-dev/troupe/workflows/gate"
)

// versionApprovals marks the change of calls that need approval from
// refused (MCP tools whose server required it, the only ones then) to
// waiting for a decision. The marker is written only when a call needs
// approval.
const versionApprovals = "troupe.approvals"

// Gate makes the calls of a turn that need approval wait for their
// decisions before any call of the turn starts (see the package doc).
// New returns nil for an agent whose calls never need approval, which
// then pays nothing for approvals.
type Gate struct{}

// New is the approvals' gate of agent: nil when it has no approval policy
// and no MCP server (whose tools may require approval).
func New(agent *runtime.AgentSpec) *Gate {
	if len(agent.Approvals) == 0 && len(agent.MCPServers) == 0 {
		return nil
	}
	return &Gate{}
}

// Name names the gate.
func (ap *Gate) Name() string { return "approvals" }

// AroundCalls makes the calls that need approval wait for their
// decisions, applies them (a rejected call is answered with its
// rejection; an approved one runs with the arguments its decision gave),
// then lets the inner gates see the calls that run.
func (ap *Gate) AroundCalls(ctx workflow.Context, t *gate.Turn, calls *gate.Calls, next func(workflow.Context) error) error {
	if err := ap.approve(ctx, t, calls.Dispatch, calls.Done); err != nil {
		return err
	}
	return next(ctx)
}

// traceApproval starts the span of a call's wait at the gate for a
// human's decision; call the func it returns with the decision
// ("approved", "rejected", "timed out", ...) and the wait's error, if
// any, once there is one. It is deterministic and issues no command: call
// it where the wait starts, on every replay alike.
func traceApproval(ctx workflow.Context, agent, kind, tool, callID string) func(decision string, err error) {
	_, s := telemetry.StartWorkflowSpan(ctx, "approval "+tool, "approval/"+callID, telemetry.WithAttributes(
		append(telemetry.ToolAttributes(tool, callID), telemetry.AttrAgentName.String(agent), telemetry.AttrToolKind.String(kind))...))
	return func(decision string, err error) {
		s.SetAttributes(attribute.String("troupe.approval.decision", decision))
		s.End(ctx, err)
	}
}

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
func (ap *Gate) approve(ctx workflow.Context, t *gate.Turn, d *runtime.Dispatch, done map[string]agents.Item) error {
	cands, asks := candidates(t, d)
	if len(cands) == 0 {
		return nil
	}
	need := checkPolicies(ctx, t, asks)
	waits := waitingCalls(ctx, t, cands, need)
	if len(waits) == 0 {
		return nil
	}
	if workflow.GetVersion(ctx, versionApprovals, workflow.DefaultVersion, 1) == workflow.DefaultVersion || t.Input.RunID == "" {
		// Recorded when only MCP calls needed approval, and were refused;
		// or an agent with no root to ask.
		refuseAll(t, waits, done)
		dropRejected(d, done)
		return nil
	}
	askRoot(ctx, t, waits)
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("agent %s, turn %d: waiting for approval of %d call(s)", t.Agent.Name, t.Run.Turn, len(waits)))
	if err := ap.awaitDecisions(ctx, t, waits); err != nil {
		settleCancelled(ctx, t, waits, err)
		return err
	}
	for _, w := range waits {
		applyDecision(ctx, t, w, done)
	}
	dropRejected(d, done)
	return nil
}

// candidate is a call of a turn that an approval policy (or its MCP
// server) names: it needs approval, or its policy decides per call.
type candidate struct {
	list   *[]agents.Item
	i      int
	kind   string
	policy runtime.ApprovalSpec
}

// candidates lists d's calls that a policy names, in the order functions,
// MCP, agent tools (the order of the asks and waits that follow), and
// apart those whose policy decides per call (asks), for one local
// activity to check at once.
func candidates(t *gate.Turn, d *runtime.Dispatch) (cands []candidate, asks []agents.Item) {
	add := func(list *[]agents.Item, kind string) {
		for i, c := range *list {
			p, ok := t.Agent.Approval(c.Name)
			if kind == gate.KindMCP && !ok {
				if ref, found := t.MCPTool(c.Name); found && ref.Approval {
					p, ok = runtime.ApprovalSpec{Tool: c.Name}, true
				}
			}
			if !ok {
				continue
			}
			k := kind
			if k == gate.KindFunction && t.Agent.Tool(c.Name).Sandbox {
				k = gate.KindSandbox
			}
			cands = append(cands, candidate{list, i, k, p})
			if p.When {
				asks = append(asks, c)
			}
		}
	}
	add(&d.Functions, gate.KindFunction)
	add(&d.MCP, gate.KindMCP)
	add(&d.AgentTools, gate.KindAgent)
	return cands, asks
}

// checkPolicies asks the agent's policies, in one local activity, which of
// asks need approval, unless the turn's model call asked them already
// (Precheck); nil (every call waits) when there are none to ask or the
// policies cannot decide, so that a doubt asks a human.
func checkPolicies(ctx workflow.Context, t *gate.Turn, asks []agents.Item) []bool {
	if need, ok := prechecked(t, asks); ok {
		return need
	}
	var need []bool
	if len(asks) > 0 {
		lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
			StartToCloseTimeout: time.Minute, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3},
			Summary: "approval policies of " + t.Agent.Name,
		})
		if err := workflow.ExecuteLocalActivity(lctx, ApprovalCheckActivityName, ApprovalCheckInput{Graph: t.Input.Graph, Agent: t.Agent.Name, Calls: asks}).Get(ctx, &need); err != nil {
			need = nil // Policies that cannot decide ask a human.
		}
	}
	return need
}

// Precheck has the model call ask the policies that decide per call
// (gate.Precheck).
func (ap *Gate) Precheck(t *gate.Turn, p *gate.Precheck) {
	for _, pol := range t.Agent.Approvals {
		if pol.When {
			p.Approvals = append(p.Approvals, pol.Tool)
		}
	}
}

// prechecked is what the policies said of asks when the turn's model call
// asked them of every one, on its arguments now; false when it did not.
func prechecked(t *gate.Turn, asks []agents.Item) ([]bool, bool) {
	if len(asks) == 0 {
		return nil, false
	}
	need := make([]bool, len(asks))
	for i, c := range asks {
		cc := t.Prechecked.Call(c.CallID, c.Arguments)
		if cc == nil || cc.Approval == nil {
			return nil, false
		}
		need[i] = *cc.Approval
	}
	return need, true
}

// waitingCalls are the candidates that wait for a decision (need answers
// the asks in their order), each with its request to the root, stamped
// with the workflow's time now, and its deadline when its policy has a
// timeout.
func waitingCalls(ctx workflow.Context, t *gate.Turn, cands []candidate, need []bool) []*waitingCall {
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
			ID: runtime.ApprovalID(wfID, call.CallID), Workflow: wfID, Agent: t.Agent.Name, Tool: call.Name, Kind: c.kind,
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
	return waits
}

// refuseAll answers every waiting call with a refusal, for a run that
// cannot ask a human (see approve).
func refuseAll(t *gate.Turn, waits []*waitingCall, done map[string]agents.Item) {
	for _, w := range waits {
		reject(t, w, fmt.Sprintf("calling %s needs a human's approval, and this run cannot ask for it; the call was not made. Do without it or tell the user.", w.req.Tool), done)
	}
}

// askRoot starts each waiting call's trace span, records that it was
// requested, and sends its request to the root, which holds the approvals
// a human sees.
func askRoot(ctx workflow.Context, t *gate.Turn, waits []*waitingCall) {
	for _, w := range waits {
		w.span = traceApproval(ctx, t.Agent.Name, w.req.Kind, w.req.Tool, w.req.CallID)
		t.Events.Add(ctx, troupe.Event{Kind: troupe.EventApprovalRequested, Agent: t.Agent.Name, Turn: t.Run.Turn, Tool: w.req.Tool, CallID: w.req.CallID,
			Approval: w.req.ID, Detail: troupe.Preview(w.req.Arguments, 300)})
		_ = workflow.SignalExternalWorkflow(ctx, t.Input.RunID, "", troupe.ApprovalRequestSignal, w.req).Get(ctx, nil)
	}
}

// settleCancelled tells the root, on a context that outlives the
// cancellation, to forget the calls still waiting, so that they wait no
// more, and ends every wait's span with err.
func settleCancelled(ctx workflow.Context, t *gate.Turn, waits []*waitingCall, err error) {
	// Cancelled: the root forgets the calls, which wait no more.
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	for _, w := range waits {
		if w.decided == nil {
			_ = workflow.SignalExternalWorkflow(dctx, t.Input.RunID, "", troupe.ApprovalSettledSignal, w.req).Get(dctx, nil)
		}
		w.span("cancelled", err)
	}
}

// applyDecision ends w's span, records its decision, and applies it: a
// rejected call is answered in done with its rejection; an approved one
// takes the arguments its decision gave, if any.
func applyDecision(ctx workflow.Context, t *gate.Turn, w *waitingCall, done map[string]agents.Item) {
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
	t.Events.Add(ctx, troupe.Event{Kind: troupe.EventApprovalDecided, Agent: t.Agent.Name, Turn: t.Run.Turn, Tool: w.req.Tool, CallID: w.req.CallID, Approval: w.req.ID, Detail: troupe.Preview(detail, 300)})
	switch {
	case !dec.Approve:
		reject(t, w, rejection(dec), done)
	case dec.Arguments != "":
		for i := range *w.list {
			if (*w.list)[i].CallID == w.req.CallID {
				(*w.list)[i].Arguments = dec.Arguments
			}
		}
	}
}

// awaitDecisions waits until every call of waits is decided: by the root,
// or by its policy's timeout.
func (ap *Gate) awaitDecisions(ctx workflow.Context, t *gate.Turn, waits []*waitingCall) error {
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
		arrived := func() bool { return ch.Len() > 0 || t.Stopping() }
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
			if w.decided == nil && t.Stopping() {
				// The session's user interrupted the turn: the calls that
				// wait are not run, as a turn's calls are not once
				// interrupted.
				w.decided = &runtime.ApprovalDecision{ID: w.req.ID, CallID: w.req.CallID, By: runtime.DecidedByInterrupt}
				_ = workflow.SignalExternalWorkflow(ctx, t.Input.RunID, "", troupe.ApprovalSettledSignal, w.req).Get(ctx, nil)
				continue
			}
			if w.decided == nil && !w.deadline.IsZero() && !now.Before(w.deadline) {
				w.decided = &runtime.ApprovalDecision{ID: w.req.ID, CallID: w.req.CallID, Approve: w.policy.ApproveOnTimeout, By: runtime.DecidedByTimeout,
					Message: fmt.Sprintf("no one decided within %s", w.policy.Timeout)}
				_ = workflow.SignalExternalWorkflow(ctx, t.Input.RunID, "", troupe.ApprovalSettledSignal, w.req).Get(ctx, nil)
			}
		}
	}
	return nil
}

// rejection is what the model sees of a rejected call.
func rejection(dec runtime.ApprovalDecision) string {
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
func reject(t *gate.Turn, w *waitingCall, text string, done map[string]agents.Item) {
	done[w.req.CallID] = t.Output(agents.Item{CallID: w.req.CallID}, text)
}

// dropRejected takes the calls answered in done out of d's lists.
func dropRejected(d *runtime.Dispatch, done map[string]agents.Item) {
	gone := func(c agents.Item) bool { _, ok := done[c.CallID]; return ok }
	d.Functions = slices.DeleteFunc(d.Functions, gone)
	d.MCP = slices.DeleteFunc(d.MCP, gone)
	d.AgentTools = slices.DeleteFunc(d.AgentTools, gone)
}
