package workflowstest

import (
	"encoding/json"
	"sync"
	"testing"

	"github.com/google/uuid"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/runtime"
)

// Update is the outcome of an update a test sent, as the environment's
// callbacks report it; it is safe to read from the test while the
// workflow runs.
type Update struct {
	mu       sync.Mutex
	accepted bool
	done     bool
	err      error
	value    any
}

// callbacks are the environment's callbacks that fill u in.
func (u *Update) callbacks() *testsuite.TestUpdateCallback {
	return &testsuite.TestUpdateCallback{
		OnAccept: func() { u.mu.Lock(); u.accepted = true; u.mu.Unlock() },
		OnReject: func(err error) { u.mu.Lock(); u.err, u.done = err, true; u.mu.Unlock() },
		OnComplete: func(v any, err error) {
			u.mu.Lock()
			u.value, u.err, u.done = v, err, true
			u.mu.Unlock()
		},
	}
}

// Accepted reports whether the workflow accepted the update.
func (u *Update) Accepted() bool { u.mu.Lock(); defer u.mu.Unlock(); return u.accepted }

// Done reports whether the update was rejected or completed.
func (u *Update) Done() bool { u.mu.Lock(); defer u.mu.Unlock(); return u.done }

// Err is why the update was rejected, or the error it completed with.
func (u *Update) Err() error { u.mu.Lock(); defer u.mu.Unlock(); return u.err }

// Decode decodes the update's result into v; it fails t if it cannot.
func (u *Update) Decode(t testing.TB, v any) {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if ev, ok := u.value.(converter.EncodedValue); ok {
		if err := ev.Get(v); err != nil {
			t.Fatal(err)
		}
		return
	}
	data, err := json.Marshal(u.value)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatal(err)
	}
}

// Completed fails t unless the update completed without error.
func (u *Update) Completed(t testing.TB) {
	t.Helper()
	if done, err := u.Done(), u.Err(); !done || err != nil {
		t.Errorf("update: done %v, err %v", done, err)
	}
}

// Output is the answer of a session's turn the update waited for
// (troupe.SendInput.Wait), as JSON; it fails t when there is none.
func (u *Update) Output(t testing.TB) string {
	t.Helper()
	var r troupe.SendResult
	u.Decode(t, &r)
	if r.Record == nil {
		t.Fatalf("no answer: %+v, err %v", r, u.Err())
	}
	return string(r.Record.Output)
}

// Text is the answer of a session's turn the update waited for, as text.
func (u *Update) Text(t testing.TB) string {
	t.Helper()
	var s string
	if err := json.Unmarshal([]byte(u.Output(t)), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// SendUpdate sends the update name with arg to env's workflow and
// returns what will hold its outcome. Call it from a delayed callback, or
// the workflow has not started.
func SendUpdate(env *testsuite.TestWorkflowEnvironment, name string, arg any) *Update {
	u := &Update{}
	env.UpdateWorkflow(name, "", u.callbacks(), arg)
	return u
}

// SendUpdateWithID is SendUpdate with the update id given, as a client
// that sends one update again (after a timeout) gives it.
func SendUpdateWithID(env *testsuite.TestWorkflowEnvironment, name, id string, arg any) *Update {
	u := &Update{}
	env.UpdateWorkflow(name, id, u.callbacks(), arg)
	return u
}

// Decide sends env's workflow, the root of a tree, the decision dec on a
// call that waits for approval (troupe.DecideUpdate), as a client would;
// the root answers when the workflow next runs. The update's result is
// the decisions the root took ([]runtime.ApprovalDecision): dec's, and
// those of later requests a remembered decision answered. Call it from a
// delayed callback.
func Decide(env *testsuite.TestWorkflowEnvironment, dec runtime.ApprovalDecision) *Update {
	return SendUpdate(env, troupe.DecideUpdate, dec)
}

// AskSession sends session id (a workflow the environment started, as a
// session manager does) the message text, waiting for the turn's answer,
// and returns what will hold it. Call it from a delayed callback.
func AskSession(t testing.TB, env *testsuite.TestWorkflowEnvironment, id, text string) *Update {
	u := &Update{}
	// Update ids must differ: the environment answers a repeated one as
	// the first.
	err := env.UpdateWorkflowByID(id, troupe.SendUpdate, "ask-"+uuid.NewString(), u.callbacks(), troupe.SendInput{Message: text, Wait: true})
	if err != nil {
		t.Errorf("send to %s: %v", id, err)
	}
	return u
}
