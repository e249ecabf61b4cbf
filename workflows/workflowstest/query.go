package workflowstest

import (
	"testing"

	"go.temporal.io/sdk/testsuite"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/runtime"
)

// Recorded returns the events that env's workflow recorded after the
// one numbered after, as the events query answers.
func Recorded(t testing.TB, env *testsuite.TestWorkflowEnvironment, after int) []troupe.Event {
	t.Helper()
	q, err := env.QueryWorkflow(troupe.EventsQuery, after)
	if err != nil {
		t.Fatal(err)
	}
	var evs []troupe.Event
	if err := q.Get(&evs); err != nil {
		t.Fatal(err)
	}
	return evs
}

// RecordedBy returns the events the workflow id (a child of env's
// workflow) recorded, as the events query answers.
func RecordedBy(t testing.TB, env *testsuite.TestWorkflowEnvironment, id string) []troupe.Event {
	t.Helper()
	q, err := env.QueryWorkflowByID(id, troupe.EventsQuery, 0)
	if err != nil {
		t.Fatalf("events of %s: %v", id, err)
	}
	var evs []troupe.Event
	if err := q.Get(&evs); err != nil {
		t.Fatal(err)
	}
	return evs
}

// Kinds counts the events of each kind.
func Kinds(evs []troupe.Event) map[string]int {
	n := map[string]int{}
	for _, e := range evs {
		n[e.Kind]++
	}
	return n
}

// SessionInfo reads env's session query.
func SessionInfo(t testing.TB, env *testsuite.TestWorkflowEnvironment) troupe.SessionInfo {
	t.Helper()
	q, err := env.QueryWorkflow(troupe.SessionQuery)
	if err != nil {
		t.Fatal(err)
	}
	var info troupe.SessionInfo
	if err := q.Get(&info); err != nil {
		t.Fatal(err)
	}
	return info
}

// Pending is what env's workflow, the root of a tree, lists as waiting for
// a decision (troupe.ApprovalsQuery); decide on one with SendUpdate and
// troupe.DecideUpdate.
func Pending(t testing.TB, env *testsuite.TestWorkflowEnvironment) []runtime.ApprovalRequest {
	t.Helper()
	v, err := env.QueryWorkflow(troupe.ApprovalsQuery)
	if err != nil {
		t.Fatal(err)
	}
	var ps []runtime.ApprovalRequest
	if err := v.Get(&ps); err != nil {
		t.Fatal(err)
	}
	return ps
}
