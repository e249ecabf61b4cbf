package workflows

import (
	"context"
	"fmt"
	"slices"

	"github.com/troupe-dev/troupe/agents"
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
	p := in.Precheck
	out := &gate.Prechecked{Calls: make([]gate.CheckedCall, len(calls))}
	var asks []agents.Item
	var askedAt []int
	var guarded []guardrail.GuardrailCall
	var guardedAt []int
	for i, c := range calls {
		out.Calls[i] = gate.CheckedCall{CallID: c.CallID, Arguments: c.Arguments}
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
				out.Calls[i].Approval = &need[j]
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
		if err == nil && res != nil {
			for j, i := range guardedAt {
				out.Calls[i].Guardrails = guarded[j].Guardrails
				for _, o := range res.Outcomes {
					if o.CallID == calls[i].CallID {
						out.Calls[i].Outcomes = append(out.Calls[i].Outcomes, o)
					}
				}
			}
		}
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
