package runtime_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/sandbox"
)

var leased = runtime.LeasedSandbox{State: sandbox.State{Backend: "bwrap", Host: "h", ID: "s-1"}, Queue: "troupe-sandbox-h-1234"}

// leaseIn drives a new lease to state by a path of valid transitions.
func leaseIn(t *testing.T, state runtime.LeaseState) *runtime.SandboxLease {
	t.Helper()
	l := runtime.NewSandboxLease()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("driving to %s: %v", state, err)
		}
	}
	provision := func() {
		_, _, err := l.Provision()
		must(err)
		must(l.Provisioned(leased))
	}
	switch state {
	case runtime.LeaseNew:
	case runtime.LeaseProvisioning:
		_, _, err := l.Provision()
		must(err)
	case runtime.LeaseProvisioned:
		provision()
	case runtime.LeaseInUse:
		provision()
		must(l.CallStarted())
	case runtime.LeaseIdle:
		provision()
		must(l.Snapshotted("snap-1"))
		must(l.Idle())
	case runtime.LeaseSuspending:
		provision()
		must(l.Idle())
		if !l.Suspend() {
			t.Fatal("Suspend refused")
		}
	case runtime.LeaseSuspended:
		provision()
		must(l.Snapshotted("snap-1"))
		must(l.Idle())
		l.Suspend()
		must(l.Stopped())
	case runtime.LeaseLost:
		provision()
		must(l.Lost())
	case runtime.LeaseStopped:
		provision()
		must(l.Stopped())
	}
	if l.State != state {
		t.Fatalf("drove to %s, got %s", state, l.State)
	}
	return l
}

// Every transition from every state: where it leads, or that it is
// refused (leaving the lease as it was).
func TestSandboxLeaseTransitions(t *testing.T) {
	all := []runtime.LeaseState{runtime.LeaseNew, runtime.LeaseProvisioning, runtime.LeaseProvisioned, runtime.LeaseInUse,
		runtime.LeaseIdle, runtime.LeaseSuspending, runtime.LeaseSuspended, runtime.LeaseLost, runtime.LeaseStopped}
	type transition struct {
		name string
		do   func(l *runtime.SandboxLease) error
		// to maps each state the transition is valid from to where it
		// leads; from any other state it is refused.
		to map[runtime.LeaseState]runtime.LeaseState
	}
	suspend := func(l *runtime.SandboxLease) error {
		if !l.Suspend() {
			return errRefused
		}
		return nil
	}
	for _, tr := range []transition{
		{"Provision", func(l *runtime.SandboxLease) error { _, _, err := l.Provision(); return err },
			map[runtime.LeaseState]runtime.LeaseState{runtime.LeaseNew: runtime.LeaseProvisioning, runtime.LeaseSuspended: runtime.LeaseProvisioning, runtime.LeaseLost: runtime.LeaseProvisioning}},
		{"Provisioned", func(l *runtime.SandboxLease) error { return l.Provisioned(leased) },
			map[runtime.LeaseState]runtime.LeaseState{runtime.LeaseProvisioning: runtime.LeaseProvisioned}},
		{"ProvisionFailed", (*runtime.SandboxLease).ProvisionFailed,
			map[runtime.LeaseState]runtime.LeaseState{runtime.LeaseProvisioning: runtime.LeaseNew}},
		{"CallStarted", (*runtime.SandboxLease).CallStarted,
			map[runtime.LeaseState]runtime.LeaseState{runtime.LeaseProvisioned: runtime.LeaseInUse, runtime.LeaseInUse: runtime.LeaseInUse, runtime.LeaseIdle: runtime.LeaseInUse}},
		{"CallEnded", (*runtime.SandboxLease).CallEnded,
			map[runtime.LeaseState]runtime.LeaseState{runtime.LeaseInUse: runtime.LeaseProvisioned}},
		{"Idle", (*runtime.SandboxLease).Idle,
			map[runtime.LeaseState]runtime.LeaseState{runtime.LeaseProvisioned: runtime.LeaseIdle, runtime.LeaseIdle: runtime.LeaseIdle}},
		{"Suspend", suspend,
			map[runtime.LeaseState]runtime.LeaseState{runtime.LeaseProvisioned: runtime.LeaseSuspending, runtime.LeaseIdle: runtime.LeaseSuspending}},
		{"SuspendFailed", (*runtime.SandboxLease).SuspendFailed,
			map[runtime.LeaseState]runtime.LeaseState{runtime.LeaseSuspending: runtime.LeaseIdle}},
		{"Stopped", (*runtime.SandboxLease).Stopped,
			map[runtime.LeaseState]runtime.LeaseState{runtime.LeaseSuspending: runtime.LeaseSuspended, runtime.LeaseProvisioned: runtime.LeaseStopped,
				runtime.LeaseInUse: runtime.LeaseStopped, runtime.LeaseIdle: runtime.LeaseStopped}},
		{"Lost", (*runtime.SandboxLease).Lost,
			map[runtime.LeaseState]runtime.LeaseState{runtime.LeaseProvisioned: runtime.LeaseLost, runtime.LeaseInUse: runtime.LeaseLost,
				runtime.LeaseIdle: runtime.LeaseLost, runtime.LeaseSuspending: runtime.LeaseLost}},
		{"End", (*runtime.SandboxLease).End,
			map[runtime.LeaseState]runtime.LeaseState{runtime.LeaseNew: runtime.LeaseStopped, runtime.LeaseProvisioning: runtime.LeaseStopped,
				runtime.LeaseSuspended: runtime.LeaseStopped, runtime.LeaseLost: runtime.LeaseStopped, runtime.LeaseStopped: runtime.LeaseStopped}},
	} {
		for _, from := range all {
			t.Run(tr.name+"/"+string(from), func(t *testing.T) {
				l := leaseIn(t, from)
				before := *l
				err := tr.do(l)
				to, valid := tr.to[from]
				switch {
				case valid && err != nil:
					t.Fatalf("refused: %v", err)
				case valid && l.State != to:
					t.Fatalf("led to %s, want %s", l.State, to)
				case !valid && err == nil:
					t.Fatalf("allowed, to %s; want it refused", l.State)
				case !valid && !reflect.DeepEqual(*l, before):
					t.Fatalf("a refused transition changed the lease: %+v, was %+v", *l, before)
				}
				if live := l.State == runtime.LeaseProvisioned || l.State == runtime.LeaseInUse || l.State == runtime.LeaseIdle || l.State == runtime.LeaseSuspending; live != l.Live() {
					t.Errorf("in %s, Live() = %v", l.State, l.Live())
				}
			})
		}
	}
}

var errRefused = errorString("refused")

type errorString string

func (e errorString) Error() string { return string(e) }

// What a lease carries across its life: generations, the snapshot the
// next provisioning restores, calls counted; and it survives JSON.
func TestSandboxLeaseLife(t *testing.T) {
	l := runtime.NewSandboxLease()
	gen, snap, err := l.Provision()
	if err != nil || gen != 1 || snap != "" {
		t.Fatalf("first Provision = %d, %q, %v", gen, snap, err)
	}
	if err := l.Provisioned(leased); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := l.CallStarted(); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.CallEnded(); err != nil || l.State != runtime.LeaseInUse || l.Calls != 1 {
		t.Fatalf("one of two calls ended: %s, %d calls, %v", l.State, l.Calls, err)
	}
	// The sandbox is lost during the other call; the call still ends.
	if err := l.Lost(); err != nil {
		t.Fatal(err)
	}
	if err := l.CallEnded(); err != nil || l.State != runtime.LeaseLost || l.Calls != 0 {
		t.Fatalf("the last call ended after the loss: %s, %d calls, %v", l.State, l.Calls, err)
	}
	if err := l.CallEnded(); err == nil {
		t.Fatal("CallEnded with no call running was allowed")
	}
	// Re-provisioned: a new generation, from no snapshot yet; a failed
	// create goes back to lost.
	if gen, _, _ := l.Provision(); gen != 2 {
		t.Fatalf("generation %d, want 2", gen)
	}
	if err := l.ProvisionFailed(); err != nil || l.State != runtime.LeaseLost {
		t.Fatalf("ProvisionFailed: %s, %v", l.State, err)
	}
	if _, _, err := l.Provision(); err != nil {
		t.Fatal(err)
	}
	if err := l.Provisioned(leased); err != nil {
		t.Fatal(err)
	}
	if err := l.Snapshotted("snap-3"); err != nil {
		t.Fatal(err)
	}
	if err := l.Idle(); err != nil || !l.Suspend() {
		t.Fatalf("idle, then suspend: %s, %v", l.State, err)
	}
	if err := l.Stopped(); err != nil || l.State != runtime.LeaseSuspended || l.Live() {
		t.Fatalf("suspended: %s, live %v, %v", l.State, l.Live(), err)
	}
	data, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	var back runtime.SandboxLease
	if err := json.Unmarshal(data, &back); err != nil || !reflect.DeepEqual(&back, l) {
		t.Fatalf("JSON round trip: %+v, %v", back, err)
	}
	if gen, snap, err := back.Provision(); gen != 4 || snap != "snap-3" || err != nil {
		t.Fatalf("Provision after the round trip = %d, %q, %v; want 4, snap-3", gen, snap, err)
	}
}

// TestSandboxLeaseUnsaved: the calls since the last snapshot are what a
// loss takes; a snapshot or a new sandbox clears them, and they are
// bounded.
func TestSandboxLeaseUnsaved(t *testing.T) {
	l := runtime.NewSandboxLease()
	if _, _, err := l.Provision(); err != nil {
		t.Fatal(err)
	}
	if err := l.Provisioned(runtime.LeasedSandbox{Queue: "q"}); err != nil {
		t.Fatal(err)
	}
	l.CallMade("exec_command c1")
	l.CallMade("write_file w1")
	if len(l.Unsaved) != 2 {
		t.Fatalf("unsaved = %v, want two calls", l.Unsaved)
	}
	if err := l.Snapshotted("snap"); err != nil || l.Unsaved != nil {
		t.Fatalf("after a snapshot: unsaved = %v (%v), want none", l.Unsaved, err)
	}
	for range runtime.MaxUnsaved + 5 {
		l.CallMade("exec_command c")
	}
	if len(l.Unsaved) != runtime.MaxUnsaved {
		t.Errorf("unsaved holds %d calls, want the bound %d", len(l.Unsaved), runtime.MaxUnsaved)
	}
	if err := l.Lost(); err != nil || len(l.Unsaved) != runtime.MaxUnsaved {
		t.Fatalf("lost: unsaved = %d calls (%v), want them kept for the model's note", len(l.Unsaved), err)
	}
	if _, _, err := l.Provision(); err != nil {
		t.Fatal(err)
	}
	if err := l.Provisioned(runtime.LeasedSandbox{Queue: "q2"}); err != nil || l.Unsaved != nil {
		t.Errorf("restored: unsaved = %v (%v), want none", l.Unsaved, err)
	}
}
