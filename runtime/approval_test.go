package runtime

import (
	"errors"
	"testing"
)

func TestApprovalDesk(t *testing.T) {
	req := func(wf, call, tool, args string) ApprovalRequest {
		return ApprovalRequest{ID: ApprovalID(wf, call), Workflow: wf, Agent: "ops", Tool: tool, CallID: call, Arguments: args}
	}
	a := req("run/0-ops", "c1", "deploy", `{"env": "eu"}`)
	b := req("run/0-ops", "c2", "deploy", `{"env":"us"}`)
	c := req("run/0-ops/t1.0/0-ops", "c1", "deploy", `{"env":"eu"}`)
	other := req("run/0-ops", "c3", "wipe", `{}`)

	if a.ID == c.ID {
		t.Fatalf("two workflows' calls c1 share the id %s", a.ID)
	}
	tests := []struct {
		name       string
		dec        ApprovalDecision
		wantErr    error
		wantRouted []string // call ids routed, in order
		wantLeft   int
		wantRules  int
		next       ApprovalRequest // a later request: decided at once?
		nextRouted bool
	}{
		{name: "approve one", dec: ApprovalDecision{ID: a.ID, Approve: true}, wantRouted: []string{"c1"}, wantLeft: 3, next: req("x", "c9", "deploy", `{"env":"eu"}`)},
		{name: "remember the tool", dec: ApprovalDecision{ID: a.ID, Approve: true, Remember: RememberTool}, wantRouted: []string{"c1", "c2", "c1"}, wantLeft: 1, wantRules: 1,
			next: req("x", "c9", "deploy", `{}`), nextRouted: true},
		{name: "remember the arguments", dec: ApprovalDecision{ID: a.ID, Approve: false, Remember: RememberArguments}, wantRouted: []string{"c1", "c1"}, wantLeft: 2, wantRules: 1,
			next: req("x", "c9", "deploy", `{ "env" : "eu" }`), nextRouted: true},
		{name: "unknown id", dec: ApprovalDecision{ID: "a00000000", Approve: true}, wantErr: ErrNoApproval, wantLeft: 4},
		{name: "bad remember", dec: ApprovalDecision{ID: a.ID, Approve: true, Remember: "always"}, wantErr: ErrBadDecision, wantLeft: 4},
		{name: "arguments not an object", dec: ApprovalDecision{ID: a.ID, Approve: true, Arguments: `[1]`}, wantErr: ErrBadDecision, wantLeft: 4},
		{name: "arguments for a rejection", dec: ApprovalDecision{ID: a.ID, Arguments: `{}`}, wantErr: ErrBadDecision, wantLeft: 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var d ApprovalDesk
			for _, r := range []ApprovalRequest{a, b, c, other} {
				if routed := d.Request(r); routed != nil {
					t.Fatalf("request %s routed at once with no rule: %+v", r.ID, routed)
				}
			}
			d.Request(a) // asked again: no change
			routed, err := d.Decide(tc.dec)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			var ids []string
			for _, r := range routed {
				ids = append(ids, r.Decision.CallID)
				if r.Decision.By == "" || r.Workflow == "" {
					t.Errorf("routed %+v without who decided or where to", r)
				}
			}
			if len(ids) != len(tc.wantRouted) {
				t.Fatalf("routed %v, want %v", ids, tc.wantRouted)
			}
			for i := range ids {
				if ids[i] != tc.wantRouted[i] {
					t.Errorf("routed %v, want %v", ids, tc.wantRouted)
				}
			}
			if len(d.Pending) != tc.wantLeft || len(d.Rules) != tc.wantRules {
				t.Errorf("left %d waiting and %d rules, want %d and %d", len(d.Pending), len(d.Rules), tc.wantLeft, tc.wantRules)
			}
			if tc.next.ID != "" {
				if got := d.Request(tc.next) != nil; got != tc.nextRouted {
					t.Errorf("a later call decided at once: %v, want %v", got, tc.nextRouted)
				}
			}
		})
	}
}

func TestApprovalDeskSettleAndForget(t *testing.T) {
	var d ApprovalDesk
	for _, wf := range []string{"s/t1/0-a", "s/t1/0-a/t1.0/0-b", "s/t2/0-a"} {
		d.Request(ApprovalRequest{ID: ApprovalID(wf, "c"), Workflow: wf, CallID: "c"})
	}
	d.Settle(ApprovalID("s/t2/0-a", "c"))
	d.Settle("a-unknown")
	if len(d.Pending) != 2 {
		t.Fatalf("after a settle, waiting %+v", d.Pending)
	}
	d.Forget("s/t1/")
	if len(d.Pending) != 0 {
		t.Errorf("after the turn was forgotten, waiting %+v", d.Pending)
	}
}
