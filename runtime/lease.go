package runtime

import (
	"fmt"

	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// A SandboxLease is an owner's hold on a sandbox across its life: an agent
// workflow owns one today, a session will tomorrow. It is plain data (the
// owner carries it through continue-as-new); its methods are the
// transitions, each refusing what its state does not allow, and the owner
// carries out the effects (create, snapshot, stop) that lead to them.
//
//	state         the sandbox            next
//	new           none yet               provisioning (first need)
//	provisioning  being created          provisioned (created), or back where it
//	                                     was (the create failed)
//	provisioned   live, no call running  in_use (a call), idle (after a turn's
//	                                     snapshot), lost, stopped
//	in_use        live, calls running    provisioned (the last call ended), lost,
//	                                     stopped
//	idle          live, unused since its idle timer started
//	                                     in_use, suspending (the timer fired with
//	                                     no call running; also from provisioned),
//	                                     lost, stopped
//	suspending    being snapshotted and stopped
//	                                     suspended, or idle (the snapshot
//	                                     failed: the sandbox stays up)
//	suspended     none; its last snapshot holds the workspace
//	                                     provisioning (the next need), stopped
//	lost          none: its host or the sandbox died; the last snapshot holds
//	                                     the workspace
//	                                     provisioning (the next need), stopped
//	stopped       none, for good         (none)
//
// Each provisioning is a new generation: the sandbox's id changes, so a
// create retried after a crash adopts what its own attempt left, never an
// older generation's.
type SandboxLease struct {
	State LeaseState `json:"state"`
	// Sandbox is the live sandbox: set in provisioned, in_use, idle and
	// suspending.
	Sandbox *LeasedSandbox `json:"sandbox,omitempty"`
	// Snapshot is the blob key of the last snapshot: what the next
	// provisioning restores.
	Snapshot string `json:"snapshot,omitempty"`
	// Generation counts the provisionings.
	Generation int `json:"generation"`
	// Calls counts the calls running (in_use).
	Calls int `json:"calls,omitempty"`
	// Before is the state a provisioning started from, to go back to if it
	// fails.
	Before LeaseState `json:"before,omitempty"`
	// Guidance is the blob key of the guidance (AGENTS.md) read from the
	// workspace when it was last provisioned; empty when it had none. It
	// outlives the sandbox (suspended, lost), so the model keeps seeing
	// it until the next provisioning reads it again.
	Guidance string `json:"guidance,omitempty"`
	// GuidanceRead is set once the guidance of the workspace the lease
	// will make was read from its manifest, before any provisioning.
	GuidanceRead bool `json:"guidance_read,omitempty"`
	// Unsaved names the calls made on the live sandbox since its last
	// snapshot (or since it was made), the first MaxUnsaved of them: what
	// a loss of the sandbox takes with it. A snapshot clears it.
	Unsaved []string `json:"unsaved,omitempty"`
	// Notice is what the model has yet to hear of a loss that happened
	// outside a call (a snapshot or a suspension that found the host
	// gone) and took unsaved work with it; the next call's output says
	// it first.
	Notice string `json:"notice,omitempty"`
}

// MaxUnsaved bounds SandboxLease.Unsaved: past it, a loss says "at least"
// that many calls.
const MaxUnsaved = 16

// CallMade records call (a tool's name and call id, as the model knows
// it) as made on the live sandbox since its last snapshot.
func (l *SandboxLease) CallMade(call string) {
	if len(l.Unsaved) < MaxUnsaved {
		l.Unsaved = append(l.Unsaved, call)
	}
}

// LeasedSandbox is a live sandbox of a lease.
type LeasedSandbox struct {
	State sandbox.State `json:"state"`
	// Queue is the task queue of the store that holds it.
	Queue string `json:"queue"`
}

// LeaseState is where a lease stands.
type LeaseState string

// The lease states.
const (
	LeaseNew          LeaseState = "new"
	LeaseProvisioning LeaseState = "provisioning"
	LeaseProvisioned  LeaseState = "provisioned"
	LeaseInUse        LeaseState = "in_use"
	LeaseIdle         LeaseState = "idle"
	LeaseSuspending   LeaseState = "suspending"
	LeaseSuspended    LeaseState = "suspended"
	LeaseLost         LeaseState = "lost"
	LeaseStopped      LeaseState = "stopped"
)

// NewSandboxLease is a lease with no sandbox yet.
func NewSandboxLease() *SandboxLease { return &SandboxLease{State: LeaseNew} }

// Live reports whether the lease holds a live sandbox.
func (l *SandboxLease) Live() bool { return l.Sandbox != nil }

func (l *SandboxLease) refuse(what string) error {
	return fmt.Errorf("runtime: sandbox lease: cannot %s in state %s", what, l.State)
}

// Provision starts a provisioning, from new, suspended or lost: it returns
// the new generation and the snapshot to restore ("" for a fresh
// workspace).
func (l *SandboxLease) Provision() (generation int, snapshot string, err error) {
	switch l.State {
	case LeaseNew, LeaseSuspended, LeaseLost:
	default:
		return 0, "", l.refuse("provision")
	}
	l.Before, l.State = l.State, LeaseProvisioning
	l.Generation++
	return l.Generation, l.Snapshot, nil
}

// Provisioned ends a provisioning with the sandbox created.
func (l *SandboxLease) Provisioned(sb LeasedSandbox) error {
	if l.State != LeaseProvisioning {
		return l.refuse("take a provisioned sandbox")
	}
	l.State, l.Sandbox, l.Before, l.Unsaved = LeaseProvisioned, &sb, "", nil
	return nil
}

// ProvisionFailed ends a provisioning that made no sandbox: the lease is
// back where it was.
func (l *SandboxLease) ProvisionFailed() error {
	if l.State != LeaseProvisioning {
		return l.refuse("fail a provisioning")
	}
	l.State, l.Before = l.Before, ""
	return nil
}

// CallStarted takes a call on the live sandbox.
func (l *SandboxLease) CallStarted() error {
	switch l.State {
	case LeaseProvisioned, LeaseInUse, LeaseIdle:
	default:
		return l.refuse("start a call")
	}
	l.State = LeaseInUse
	l.Calls++
	return nil
}

// CallEnded ends a call (one that lost the sandbox too: Lost may come
// before it).
func (l *SandboxLease) CallEnded() error {
	if l.Calls == 0 {
		return l.refuse("end a call with none running")
	}
	l.Calls--
	if l.Calls == 0 && l.State == LeaseInUse {
		l.State = LeaseProvisioned
	}
	return nil
}

// Snapshotted records the key of a snapshot of the live sandbox.
func (l *SandboxLease) Snapshotted(key string) error {
	if !l.Live() {
		return l.refuse("record a snapshot")
	}
	l.Snapshot, l.Unsaved = key, nil
	return nil
}

// Idle starts the idle spell after a turn: the idle timer runs.
func (l *SandboxLease) Idle() error {
	switch l.State {
	case LeaseProvisioned, LeaseIdle:
	default:
		return l.refuse("go idle")
	}
	l.State = LeaseIdle
	return nil
}

// Suspend starts suspending a sandbox whose idle timer fired; it reports
// false, changing nothing, when no live sandbox is there to suspend or a
// call is running on it, so the owner leaves it be.
func (l *SandboxLease) Suspend() bool {
	if l.State != LeaseIdle && l.State != LeaseProvisioned {
		return false
	}
	l.State = LeaseSuspending
	return true
}

// SuspendFailed ends a suspension whose snapshot failed: the sandbox is
// not stopped, since nothing would hold its current state, and the lease
// is idle again, its last good snapshot unchanged.
func (l *SandboxLease) SuspendFailed() error {
	if l.State != LeaseSuspending || !l.Live() {
		return l.refuse("fail a suspension")
	}
	l.State = LeaseIdle
	return nil
}

// Stopped records the live sandbox stopped: suspended when it was being
// suspended, stopped for good otherwise.
func (l *SandboxLease) Stopped() error {
	switch l.State {
	case LeaseSuspending:
		l.State = LeaseSuspended
	case LeaseProvisioned, LeaseInUse, LeaseIdle:
		l.State = LeaseStopped
	default:
		return l.refuse("stop")
	}
	l.Sandbox = nil
	return nil
}

// Lost records the live sandbox lost (its host or the sandbox died).
func (l *SandboxLease) Lost() error {
	switch l.State {
	case LeaseProvisioned, LeaseInUse, LeaseIdle, LeaseSuspending:
	default:
		return l.refuse("lose the sandbox")
	}
	l.State, l.Sandbox = LeaseLost, nil
	return nil
}

// End ends the lease with no live sandbox left (the owner stopped it
// first, or there was none).
func (l *SandboxLease) End() error {
	if l.Live() {
		return l.refuse("end with a live sandbox")
	}
	l.State = LeaseStopped
	return nil
}

// Forfeit records that the lease's holder let go of it with no word of
// its sandbox: a session lent the lease to a turn that failed or was
// cancelled, whose agent stopped the sandbox it held. The lease keeps
// the last snapshot it knew of, which the next provisioning restores.
func (l *SandboxLease) Forfeit() {
	switch l.State {
	case LeaseNew, LeaseStopped:
		return
	}
	l.State, l.Sandbox, l.Calls, l.Before = LeaseLost, nil, 0, ""
}
