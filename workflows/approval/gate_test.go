package approval_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/workflows/gate/gatetest"
	"github.com/troupe-dev/troupe/workflows/workflowstest"
)

// Approvals pass the gate chain's conformance suite: a policy that never
// matches lets the call through; one that always does holds the call
// until a decision, sent to the root (troupe.DecideUpdate), rejects it,
// approves it with other arguments, or approves it an hour later.
func TestGateConformance(t *testing.T) {
	always := func(a *agents.Agent) { a.Approvals = []agents.Approval{agents.Always(gatetest.Tool)} }
	// decide decides on the one call that waits, taking what dec says.
	decide := func(dec runtime.ApprovalDecision) func(*testing.T, *testsuite.TestWorkflowEnvironment) {
		return func(t *testing.T, env *testsuite.TestWorkflowEnvironment) {
			ps := workflowstest.Pending(t, env)
			if len(ps) != 1 {
				t.Fatalf("waiting: %+v, want the call of %s", ps, gatetest.Tool)
			}
			dec.ID = ps[0].ID
			workflowstest.Decide(env, dec)
		}
	}
	gatetest.Run(t, gatetest.Suite{
		Passes: &gatetest.Case{Gate: func(a *agents.Agent) {
			a.Approvals = []agents.Approval{agents.When(gatetest.Tool, func(context.Context, json.RawMessage) (bool, error) { return false, nil })}
		}},
		Rejects: &gatetest.Case{Gate: always, Release: decide(runtime.ApprovalDecision{Message: "not now"})},
		Edits:   &gatetest.Case{Gate: always, Release: decide(runtime.ApprovalDecision{Approve: true, Arguments: `{"input":"as edited"}`})},
		Delays:  &gatetest.Case{Gate: always, Release: decide(runtime.ApprovalDecision{Approve: true}), At: time.Hour},
	})
}
