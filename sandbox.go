package troupe

import (
	"fmt"
	"os"
	"strings"
)

// Labels a sandbox carries besides troupe.workflow and troupe.agent: the
// Temporal cluster and namespace of the workflow that made it, so a
// reaper answering to another server (a second installation, a test's own
// server) never takes a live sandbox for an orphan.
const (
	LabelCluster   = "troupe.cluster"
	LabelNamespace = "troupe.namespace"
	// LabelGeneration is the generation of the sandbox in its owner's
	// lease (runtime.SandboxLease.Generation): a reaper asks the owner
	// whether it has moved past it (a sandbox lost and restored
	// elsewhere), and reaps it if so.
	LabelGeneration = "troupe.generation"
)

// Event kinds of a sandbox's life.
const (
	EventSandboxProvisioned = "sandbox_provisioned"
	EventSandboxRestored    = "sandbox_restored"
	EventSandboxSuspended   = "sandbox_suspended"
	EventSandboxLost        = "sandbox_lost"
	EventSandboxStopped     = "sandbox_stopped"
	// EventSandboxSnapshotRetry: a snapshot is taken again, its worker
	// having died.
	EventSandboxSnapshotRetry = "sandbox_snapshot_retry"
	// EventSandboxStopRetry: a sandbox is stopped again, the worker that
	// stopped it having died.
	EventSandboxStopRetry = "sandbox_stop_retry"
	// EventSandboxCallRetry: a sandbox tool call runs again on the same
	// workspace, the worker that ran it having died (at least once).
	EventSandboxCallRetry = "sandbox_call_retry"
	// EventSandboxSnapshotFailed: a snapshot of a live sandbox failed (a
	// file it cannot archive, a full disk, a blob store down). The
	// sandbox stays up with its files and its last good snapshot stands;
	// the detail says what needed the snapshot (the end of a turn, an
	// idle suspension, which is tried again later, a pause, a switch, a
	// fork), why it failed and what to do.
	EventSandboxSnapshotFailed = "sandbox_snapshot_failed"
	// EventSandboxRerouted: a sandbox activity reached a worker of
	// another sandbox store (ErrSandboxMisrouted) and goes on to the
	// queue of the store that holds the sandbox, as its state names it.
	EventSandboxRerouted = "sandbox_rerouted"
)

// storeField marks, in a worker's identity, the identity of its sandbox
// store. It goes right after the identity's first word (PID@HOST), where
// readers of the identity before it took it for part of the worker's
// name.
const storeField = " store="

// WithStore is identity (or, when empty, the SDK's default, PID@HOST@)
// saying that its worker's sandbox store is store (StoreOf); an empty
// store leaves it as it is.
func WithStore(identity, store string) string {
	if store == "" {
		return identity
	}
	if identity == "" {
		host, _ := os.Hostname()
		identity = fmt.Sprintf("%d@%s@", os.Getpid(), host)
	}
	if _, rest := StoreOf(identity); rest != identity {
		identity = rest
	}
	who, rest, _ := strings.Cut(identity, " ")
	if rest != "" {
		rest = " " + rest
	}
	return who + storeField + store + rest
}

// StoreOf returns the sandbox store a worker identity names (WithStore),
// "" for none, and the identity without it.
func StoreOf(identity string) (store, rest string) {
	i := strings.Index(identity, storeField)
	if i < 0 {
		return "", identity
	}
	store, after, _ := strings.Cut(identity[i+len(storeField):], " ")
	if after != "" {
		after = " " + after
	}
	return store, identity[:i] + after
}

// Sandbox application error types.
const (
	// ErrSandbox is a sandbox that cannot be provisioned as declared (an
	// invalid manifest, an unknown backend).
	ErrSandbox = "troupe.SandboxError"
	// ErrSourceNotAllowed is a sandbox whose manifest copies a host path
	// (a local file or directory, a local git repository) from outside the
	// roots its worker allows: the worker is set up wrong for the run, so
	// the run fails saying which path to allow and how, rather than its
	// agents going on without the sandbox.
	ErrSourceNotAllowed = "troupe.SourceNotAllowed"
	// ErrSandboxGone is a sandbox that died; the workflow re-provisions it
	// from its last snapshot.
	ErrSandboxGone = "troupe.SandboxGone"
	// ErrSandboxMisrouted is a sandbox activity that reached a worker
	// whose store does not hold the sandbox (workers with different
	// sandbox stores sharing a sandbox queue). The sandbox is not taken as
	// lost: its workflow sends the call on to the queue of the store its
	// state names (event sandbox_rerouted); a sandbox of before stores had
	// identities has none to send it to, and the call fails.
	ErrSandboxMisrouted = "troupe.SandboxMisrouted"
	// ErrHostGone is a sandbox whose host is known to be gone (no worker
	// of its store polls, and the one that ran its last call stopped
	// answering): the sandbox is taken as lost at once, and nothing more
	// is sent to that host.
	ErrHostGone = "troupe.HostGone"
	// ErrSnapshotFailed is a command that needed a snapshot of a live
	// sandbox's current state (pause, switch, fork) and could not take
	// one: the sandbox stays up with its files, and the command did not
	// happen. The message says why (a file the snapshot refuses, such as
	// a sparse file of too many data runs; a full disk; the blob store)
	// and what to do; once that is done, the command succeeds. It is
	// also the type of a snapshot activity that refused a workspace file.
	ErrSnapshotFailed = "troupe.SnapshotFailed"
)

// BackendLabel names a sandbox backend wherever a sandbox is shown (events,
// a worker's start-up lines): the unconfined local backend says so.
func BackendLabel(backend string) string {
	if backend == "local" {
		return "local (UNCONFINED: no isolation)"
	}
	return backend
}
