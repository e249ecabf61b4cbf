package approval

import (
	"slices"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/runtime"
)

// Desk is the approval desk of a root (a run's orchestrator or a
// session) with the messages it takes.
type Desk struct {
	desk     *runtime.ApprovalDesk
	requests workflow.ReceiveChannel
	settled  workflow.ReceiveChannel
	// changed, when set, is told that the calls waiting changed.
	changed func(workflow.Context)
}

// NewDesk sets the root's approval handlers up on desk.
func NewDesk(ctx workflow.Context, desk *runtime.ApprovalDesk, changed func(workflow.Context)) (*Desk, error) {
	a := &Desk{desk: desk, changed: changed,
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

// Drain takes the messages that came in and were not taken yet, before
// the root continues as new.
func (a *Desk) Drain(ctx workflow.Context) {
	for a.takeRequest(ctx) || a.takeSettled(ctx) {
	}
}

func (a *Desk) takeRequest(ctx workflow.Context) bool {
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

func (a *Desk) takeSettled(ctx workflow.Context) bool {
	var req runtime.ApprovalRequest
	if !a.settled.ReceiveAsync(&req) {
		return false
	}
	a.desk.Settle(req.ID)
	a.notify(ctx)
	return true
}

// decide takes a decision (DecideUpdate).
func (a *Desk) decide(ctx workflow.Context, dec runtime.ApprovalDecision) ([]runtime.ApprovalDecision, error) {
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
func (a *Desk) route(ctx workflow.Context, r runtime.Routed) {
	_ = workflow.SignalExternalWorkflow(ctx, r.Workflow, "", troupe.ApprovalDecisionSignal, r.Decision).Get(ctx, nil)
}

func (a *Desk) notify(ctx workflow.Context) {
	if a.changed != nil {
		a.changed(ctx)
	}
}

// Waiting reports whether a call of the tree waits for a decision.
func (a *Desk) Waiting() bool { return a != nil && len(a.desk.Pending) > 0 }
