// Package lease is the sandbox lease: the workflow side of a sandbox's
// life, for an agent workflow (Life) and for a session that keeps its
// agents' sandboxes across turns (Keeper), and the sandbox activities a
// worker serves (Activities), which create, run tools on, snapshot and
// stop the sandboxes of its store.
//
// Where a sandbox stands is its lease (runtime.SandboxLease): plain data
// that its owner carries through continue-as-new, whose transitions
// refuse what its state does not allow. Life carries out the effects that
// move it:
//
//  1. New. An agent workflow starts with a new lease, or takes up the one
//     its session lent it or its previous run carried (Take). Before its
//     first model call, ReadGuidance asks a local activity
//     (WorkspaceGuidance) for the AGENTS.md the manifest would put in the
//     workspace, once per lease, so the model sees it before the
//     workspace is made (Guidance).
//  2. Provisioned. The first turn that calls a sandbox tool provisions the
//     sandbox (Ensure): SandboxCreate makes the workspace from the agent's
//     manifest on the worker that takes it, restores the last snapshot
//     if there is one, materialises the agent's memory (Activities.Memory)
//     and reads its guidance again. The sandbox's state names the
//     worker's sandbox store by its identity (OpenStoreIdentity: a random
//     id kept on the store's disk, never a hostname or a path), and the
//     sandbox answers with the store's task queue (IdentityQueue, or one
//     named by hand), where every later activity of the sandbox goes, so
//     it reaches a worker that sees the workspace. A worker of another
//     store refuses it (troupe.ErrSandboxMisrouted), and the workflow
//     sends it on to the identity queue of the store the state names
//     (event sandbox_rerouted; versioned troupe.sandbox-reroute), where
//     the lease routes from then on; a store that no worker serves does
//     not take it, and the sandbox is lost after HostTimeout (6). Event:
//     sandbox_provisioned, or sandbox_restored from a snapshot. The
//     sandbox's state goes into the history with its environment sealed
//     for its host alone (env.go): a resolved secret never leaves the
//     worker in clear.
//  3. Live. Each sandbox tool call is a SandboxTool activity on the
//     store's queue (Call), with the session and the call's RunContext
//     (its idempotency key: TROUPE_IDEMPOTENCY_KEY in exec_command's
//     environment) in the tool's context; a call finds the lease in use
//     until it ends. A call whose worker died runs again on the same
//     workspace (at least once), with the same key; one of a tool that
//     is not idempotent (agents.NotIdempotent) is answered as in doubt
//     instead (transcript.Begin).
//  4. Idle. After a turn that used it the sandbox is snapshotted
//     (SandboxSnapshot: the agent's memory edits written back first, then
//     the workspace archived under its content hash in the run's
//     snapshots/) and its idle timer starts (AfterTurn). A snapshot whose
//     worker stopped heartbeating is taken again, twice at most.
//  5. Suspended. When the idle timer (Settings.IdleTimeout) fires with no
//     call running, or when a paused session suspends it (Suspend), the
//     sandbox is snapshotted, then stopped. Event: sandbox_suspended. The
//     next need restores it from its snapshot (2), that one and no other:
//     a snapshot the store lacks fails the create (troupe.ErrBlobMissing)
//     rather than make the workspace from an older one, or empty. No
//     sandbox is stopped, suspended, switched or forked without a good
//     snapshot of its current state. A snapshot that fails (a file the
//     host will not archive, such as a sparse file of more than 65,536
//     data runs, which the activity refuses as troupe.ErrSnapshotFailed
//     naming it; a full disk; the blob store down) stops nothing: the
//     sandbox stays up, idle, with its files (SandboxLease.SuspendFailed),
//     and an event (sandbox_snapshot_failed) says what needed the
//     snapshot, why it failed and what to do. After a turn the idle timer
//     starts all the same; an idle suspension tries again after the idle
//     timeout, doubled at each failure up to an hour, and says so; a
//     pause, a switch or a fork that needed it fails with
//     troupe.ErrSnapshotFailed and changes nothing. A snapshot that lost
//     the sandbox (its host gone) marks the lease lost (6). Only the end
//     (8) stops a sandbox without a snapshot: nothing restores it then.
//  6. Lost, and re-provisioned. A call whose worker stopped heartbeating
//     (the worker died, the host may live) runs again on the same host
//     and workspace, twice more at most (event sandbox_call_retry): the
//     host's next worker resumes the sandbox (Client.Resume) and runs the
//     tool again from its start, at least once as any activity (a command
//     runs again whole; a file write writes again). A call that finds the
//     sandbox gone (troupe.ErrSandboxGone), or that its host did not take
//     within Settings.HostTimeout, marks the lease lost
//     (event sandbox_lost), clears what is left of the sandbox on its
//     host when it can, and tells the model the sandbox was lost and what
//     the loss took (the calls since the last snapshot); the next call
//     re-provisions it from the last snapshot, as a new generation with a
//     new id (2). A host that died whole is found out once (hostgone.go):
//     after a heartbeat timeout the workflow asks whether another worker
//     serves the store (StoreServed); if none does, or nobody took a task
//     within HostTimeout, the host is taken as gone and sent nothing more
//     (no retry, snapshot or stop), and its reaper removes what is left
//     when it comes back (KeepOwned).
//  7. Released to a session. A session's agent gives the lease back as it
//     stands when it ends (Release), or as its failure left it
//     (KeepsFailedWorkspace). The session's Keeper lends each agent's lease
//     to the agent workflow of a turn (Lend) and takes it back (Back, or
//     Unlend for an agent that never started); between turns it runs the
//     idle timers, suspends on pause and before a switch of backend
//     (SuspendEach; a pause and a switch wait for it, and fail with it),
//     snapshots for a fork (SnapshotEach), takes
//     the workspaces back to a rolled-back turn's start (Restore), and
//     carries the leases through continue-as-new (Settle).
//  8. Stopped. An agent that ends, however it ends (output, handoff,
//     failure, cancellation), stops its sandbox on a disconnected context
//     (End), unless its session keeps it; a session stops its sandboxes
//     when it stops (StopAll). A stop whose worker died (its heartbeats
//     stopped) goes again on the host's next worker, twice more at most
//     (event sandbox_stop_retry), so the workspace does not wait for a
//     reaper. Event: sandbox_stopped.
//
// Life and Keeper are workflow code: deterministic, touching sandboxes
// only through the activities. Every change of the commands they issue is
// versioned (troupe.clear-lost-sandbox, troupe.snapshot-retry, troupe.host-gone, troupe.host-back,
// troupe.sandbox-call-retry, troupe.sandbox-stop-retry, troupe.sandbox-reroute,
// troupe.manifest-guidance, troupe.keep-failed-workspace,
// troupe.snapshot-before-stop) and proven by
// the replay sets of package workflows. The activities' names and
// payloads (SandboxCreateInput, SandboxInfo, SandboxToolInput,
// WorkspaceGuidanceInput) are stable: histories hold them.
//
// Crashes: a worker killed at any point of a sandbox's life stalls the
// run for a bounded time and leaves nothing for good. Every sandbox
// activity heartbeats, with Settings.HostTimeout (the worker's
// Config.HostTimeout, 30 s by default) as its heartbeat and
// schedule-to-start timeout, so the server notices a dead worker within
// HostTimeout:
//
//	killed during       the run goes on after              what is left, and what removes it
//	create, restore     HostTimeout, then the retry        on the retry's host: replaced by the retry (a Create
//	(SandboxCreate)     (3 attempts, 1 s and 2 s apart)    for the same id replaces a leftover); elsewhere: reaped
//	                    on any worker                      once the workflow closes
//	a command           HostTimeout: the model sees        bwrap: the command dies with its worker; docker: the
//	(SandboxTool)       "sandbox lost"; the next call      container runs on; local: the command runs on (no
//	                    re-provisions from the last        isolation). The workspace or container: reaped once
//	                    snapshot                           the workflow closes
//	snapshot            HostTimeout: the sandbox is lost,  as for a command
//	                    the previous snapshot stands
//	stop                HostTimeout (not retried): the     reaped once the workflow closes
//	                    agent goes on or ends all the same
//	(no worker on the   HostTimeout (schedule-to-start):   as for a command
//	sandbox's host)     the sandbox is lost
//
// "Reaped" means by StartReaping, which a worker runs at start and every
// ReapInterval (5 min): a sandbox (workspace, bwrap cgroup, container)
// whose workflow has closed is removed within ReapInterval of the close,
// while a worker with the same sandbox roots (or Docker Engine) runs on
// its host. It never touches the sandboxes of other Temporal clusters or
// namespaces (KeepOpen). A live worker's create is bounded by a 30 min
// start-to-close timeout, for big manifests and restores.
package lease
