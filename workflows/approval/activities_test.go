package approval_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/workflows/approval"
)

// ApprovalCheck answers, per call, whether it waits: as the agent's
// policy decides, waiting when the policy fails, and waiting when the
// worker's graph lost the policy the run pinned (a redeploy never lets a
// call run unasked).
func TestApprovalCheck(t *testing.T) {
	big := agents.When("pay", func(_ context.Context, args json.RawMessage) (bool, error) {
		var a struct{ Amount int }
		if err := json.Unmarshal(args, &a); err != nil {
			return false, err
		}
		if a.Amount < 0 {
			return false, errors.New("a negative amount")
		}
		return a.Amount > 100, nil
	})
	agent := &agents.Agent{Name: "clerk", Instructions: "pays", Approvals: []agents.Approval{big, agents.Never("refund")}}
	a := &approval.Activities{Agent: func(string, string) (*agents.Graph, *agents.Agent, error) { return nil, agent, nil }}
	calls := []agents.Item{
		{Type: agents.ItemFunctionCall, Name: "pay", Arguments: `{"amount":5}`},
		{Type: agents.ItemFunctionCall, Name: "pay", Arguments: `{"amount":500}`},
		{Type: agents.ItemFunctionCall, Name: "pay", Arguments: `{"amount":-1}`},
		{Type: agents.ItemFunctionCall, Name: "refund", Arguments: `{}`},
		{Type: agents.ItemFunctionCall, Name: "transfer", Arguments: `{}`},
	}
	need, err := a.ApprovalCheck(context.Background(), approval.ApprovalCheckInput{Graph: "g", Agent: "clerk", Calls: calls})
	if err != nil {
		t.Fatal(err)
	}
	if want := []bool{false, true, true, true, true}; !slices.Equal(need, want) {
		t.Errorf("need = %v, want %v (small, big, failing policy, policy now never, policy now gone)", need, want)
	}
}
