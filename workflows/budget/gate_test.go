package budget_test

import (
	"testing"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/workflows/gate/gatetest"
)

// Budgets pass the gate chain's conformance suite: a budget the run does
// not reach lets the call through; one of a single model call ends the
// run with troupe.ErrBudgetExceeded before the model call that would read
// the call's output.
func TestGateConformance(t *testing.T) {
	gatetest.Run(t, gatetest.Suite{
		Passes: &gatetest.Case{Budget: &agents.Budget{ModelCalls: 10}},
		Trips:  &gatetest.Case{Budget: &agents.Budget{ModelCalls: 1}, ErrorType: troupe.ErrBudgetExceeded},
	})
}
