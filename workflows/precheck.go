package workflows

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/internal/heartbeat"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/workflows/approval"
	"github.com/troupe-dev/troupe/workflows/gate"
	"github.com/troupe-dev/troupe/workflows/guardrail"
)

// precheck runs, on the calls the model answered with, the gates' checks
// that in.Precheck names (gate.Precheck): the approval policies that
// decide per call and the tool guardrail funcs that check a call before it
// runs, with the very activities the gates would start, called here. A
// check that fails or panics leaves its verdicts out, so that its gate
// runs its activity and fails there, with its retries, as it would have;
// the model call itself never fails for a check.
func (a *Activities) precheck(ctx context.Context, in ModelInput, calls []agents.Item) *gate.Prechecked {
	// The checks get what their own activities would (a minute), and never
	// more than half of what is left of the model call's timeout: past
	// it, they are left out (the gates ask their activities), so a slow or
	// hung check neither times the model call out nor stops its
	// heartbeats (ModelActivities).
	bound := precheckBound
	if dl, ok := ctx.Deadline(); ok {
		bound = min(bound, time.Until(dl)/2)
	}
	cctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	done := make(chan *gate.Prechecked, 1)
	go func() { done <- a.runPrechecks(cctx, in, calls) }()
	out, _ := heartbeat.While(ctx, func() (*gate.Prechecked, error) {
		select {
		case p := <-done:
			return p, nil
		case <-cctx.Done():
			return nil, cctx.Err()
		}
	})
	return out
}

// precheckBound bounds the checks of a model call, as the gates' own
// activities' StartToCloseTimeout does theirs.
const precheckBound = time.Minute

// runPrechecks runs the checks of precheck.
func (a *Activities) runPrechecks(ctx context.Context, in ModelInput, calls []agents.Item) *gate.Prechecked {
	p := in.Precheck
	checked := make([]gate.CheckedCall, len(calls))
	var asks []agents.Item
	var askedAt []int
	var guarded []guardrail.GuardrailCall
	var guardedAt []int
	for i, c := range calls {
		checked[i] = gate.CheckedCall{CallID: c.CallID, ArgumentsHash: gate.HashArguments(c.Arguments)}
		if slices.Contains(p.Approvals, c.Name) {
			asks, askedAt = append(asks, c), append(askedAt, i)
		}
		if names := p.GuardrailsOf(c.Name); len(names) > 0 {
			guarded, guardedAt = append(guarded, guardrail.GuardrailCall{Call: c, Guardrails: names}), append(guardedAt, i)
		}
	}
	if len(asks) > 0 {
		var need []bool
		err := recovered(func() (err error) {
			need, err = a.r.approvals.ApprovalCheck(ctx, approval.ApprovalCheckInput{Graph: in.Graph, Agent: in.Agent, Calls: asks})
			return err
		})
		if err == nil && len(need) == len(asks) {
			for j, i := range askedAt {
				checked[i].Approval = &need[j]
			}
		}
	}
	if len(guarded) > 0 {
		var res *guardrail.GuardrailOutput
		err := recovered(func() (err error) {
			res, err = a.r.guardrails.Guardrails(ctx, guardrail.GuardrailInput{Graph: in.Graph, Agent: in.Agent, Run: in.Run,
				Kind: agents.GuardrailToolBefore, Calls: guarded})
			return err
		})
		// A trip makes the activity succeed whatever failed beside it; the
		// trip may be on a call the gate does not screen (a handoff, an
		// unknown tool), so a call with no outcome may be one whose check
		// failed: leave them all to the gate's activity.
		if err == nil && res != nil && !slices.ContainsFunc(res.Outcomes, func(o runtime.GuardrailOutcome) bool { return o.Action == runtime.GuardrailTrip }) {
			for j, i := range guardedAt {
				checked[i].Guardrails = guarded[j].Guardrails
				for _, o := range res.Outcomes {
					if o.CallID == calls[i].CallID {
						checked[i].Outcomes = append(checked[i].Outcomes, o)
					}
				}
			}
		}
	}
	// Only the calls a check decided on: the others' gates ask as before.
	out := &gate.Prechecked{}
	for _, c := range checked {
		if c.Approval != nil || c.Guardrails != nil {
			out.Calls = append(out.Calls, c)
		}
	}
	if len(out.Calls) == 0 {
		return nil
	}
	return out
}

// recovered runs f, turning a panic into an error.
func recovered(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return f()
}
