package agents_test

import (
	"context"
	"regexp"
	"testing"

	"github.com/troupe-dev/troupe/agents"
)

// TestIdempotencyKey: a call's key is the same whatever carries it (the
// same inputs give the same key), and differs for every other call: any
// field changed gives another key, and no two fields' texts run together.
func TestIdempotencyKey(t *testing.T) {
	base := agents.RunContext{WorkflowID: "run-1/0-triage", RunID: "run-1", Execution: "a1b2", Agent: "triage", Turn: 2, CallID: "call_1",
		Vars: map[string]string{"tenant": "acme"}, MemoryScope: "acme"}
	key := base.IdempotencyKey()
	if !regexp.MustCompile(`^troupe-[0-9a-f]{32}$`).MatchString(key) {
		t.Fatalf("key %q, want troupe- and 32 hex digits", key)
	}
	// What does not name the call leaves the key as it is: the run's
	// variables, the memory scope.
	same := base
	same.Vars, same.MemoryScope = nil, ""
	if got := same.IdempotencyKey(); got != key {
		t.Errorf("the key changed with the run's variables: %q, want %q", got, key)
	}
	if got := (agents.RunContext{WorkflowID: "run-1/0-triage", RunID: "run-1", Execution: "a1b2", Agent: "triage", Turn: 2}).ForCall("call_1").IdempotencyKey(); got != key {
		t.Errorf("ForCall gives %q, want %q", got, key)
	}
	for _, tc := range []struct {
		name   string
		change func(*agents.RunContext)
	}{
		{"another call", func(rc *agents.RunContext) { rc.CallID = "call_2" }},
		{"another turn", func(rc *agents.RunContext) { rc.Turn = 3 }},
		{"another agent", func(rc *agents.RunContext) { rc.Agent = "pricing" }},
		// A later agent of the chain, an agent-as-tool, a session's next
		// turn, a fork: each its own workflow.
		{"another agent workflow", func(rc *agents.RunContext) { rc.WorkflowID = "run-1/2-triage" }},
		{"an agent tool's workflow", func(rc *agents.RunContext) { rc.WorkflowID = "run-1/0-triage/t2.0/0-triage" }},
		{"a forked session's workflow", func(rc *agents.RunContext) {
			rc.RunID, rc.WorkflowID = "fork-1", "fork-1/t4/0-triage"
		}},
		{"another run", func(rc *agents.RunContext) { rc.RunID = "run-2" }},
		{"another execution of the workflow id", func(rc *agents.RunContext) { rc.Execution = "c3d4" }},
		// Fields whose texts run together differently.
		{"fields run together", func(rc *agents.RunContext) { rc.Agent, rc.CallID = "triage2", "call_1" }},
		{"a call id that ends another field", func(rc *agents.RunContext) { rc.Execution, rc.Agent = "a1b2triage", "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := base
			tc.change(&rc)
			if got := rc.IdempotencyKey(); got == key || got == "" {
				t.Errorf("key %q, want one other than %q", got, key)
			}
		})
	}
	if got := (agents.RunContext{WorkflowID: "run-1/0-triage", Turn: 2}).IdempotencyKey(); got != "" {
		t.Errorf("a RunContext of no call has the key %q, want none", got)
	}
	if got := agents.IdempotencyKey(context.Background()); got != "" {
		t.Errorf("a context of no call has the key %q", got)
	}
	if got := agents.IdempotencyKey(agents.WithRunContext(context.Background(), base)); got != key {
		t.Errorf("IdempotencyKey(ctx) = %q, want %q", got, key)
	}
}

// TestNotIdempotent: a tool is idempotent unless it says otherwise.
func TestNotIdempotent(t *testing.T) {
	fn := func(context.Context, struct{}) (string, error) { return "", nil }
	if !agents.MustFunctionTool("read", "Reads.", fn).Idempotent() {
		t.Error("a tool is not idempotent by default")
	}
	if agents.MustFunctionTool("charge", "Charges.", fn, agents.NotIdempotent()).Idempotent() {
		t.Error("a NotIdempotent tool says it is idempotent")
	}
}
