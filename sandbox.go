package troupe

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
)

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
	// sandbox roots sharing a sandbox queue). The call fails; the sandbox
	// is not taken as lost.
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
