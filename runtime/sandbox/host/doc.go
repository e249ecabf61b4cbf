// Package host is the host side of a sandbox: a workspace kept as a
// directory on the worker's host, over which every backend of this module
// runs its commands (directly for local, in bubblewrap namespaces for
// bwrap, bind-mounted at /workspace in a container for docker). The
// backends share it to keep package sandbox's contract, so that file
// operations and snapshots are the same for all of them and a snapshot
// from one restores into any other.
//
// A workspace's life on a host:
//
//  1. Provision (ProvisionBounded, with a file system of its own from
//     Disks for Limits.DiskBytes) makes the directory DirName(spec.ID)
//     under a root, after writing a sidecar with the sandbox's id and
//     labels beside it, and materialises the manifest in it (Materialize:
//     inline files and directories, host files and directories under the
//     Policy, git repositories cloned with go-git on the host). The
//     manifest is validated first; if materialising fails, the directory
//     is removed.
//  2. The session's file operations are a Workspace's (ReadFile,
//     WriteFile, Remove, List): each goes through os.Root, so no path, not
//     even through a symlink a command planted, reaches outside the
//     directory; what the worker reads from it is bounded and never waits
//     on a FIFO. Commands get CommandEnv: the manifest's environment, with
//     HOME and PATH when it sets none.
//  3. Snapshot writes the workspace as tar+zstd, ephemeral paths left out
//     and sparse files kept sparse; Restore checks a whole archive before
//     it clears the workspace and extracts it.
//  4. HostState is the session's sandbox.State; ReopenHostWorkspace takes
//     one back on Resume, or fails with sandbox.ErrGone when the workspace
//     is on another host or gone.
//  5. Destroy removes the workspace, its file system and its sidecar; a
//     HostReaper removes those a killed worker left, once their owner is
//     gone.
//
// ManifestFile reads what a workspace made from a manifest would hold at
// one path, without making it: the worker shows an agent its AGENTS.md so
// before any sandbox exists.
//
// This package links go-git and the archive code; the contract does not,
// so that agents, capabilities and the agent loop, which only speak of
// sandboxes, do not link them either.
package host
