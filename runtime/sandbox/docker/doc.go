// Package docker is the docker sandbox backend: one container per session,
// driven through the Docker Engine API (github.com/docker/docker/client,
// with API version negotiation, so Debian's Engine 20.10 and API 1.41
// serve).
//
// What a session is:
//
//  1. Create validates the manifest, then materialises it into a host
//     directory under Config.Root (host.Provision), then creates and
//     starts a container named after the session with that directory
//     bind-mounted at /workspace. The container stays up between commands
//     (docker-init as PID 1 reaping what commands leave, `sleep infinity`
//     as its child). A container or workspace left by an earlier session
//     of the same id (a Create whose worker was killed), running or not,
//     is replaced.
//  2. Exec is an exec into that container: `sh -c CMD` in /workspace (or
//     the request's workdir), with exactly the manifest's environment plus
//     PATH and HOME=/workspace, stdout and stderr interleaved into one
//     capped buffer, the exit code from the engine. A timeout or a
//     cancelled context kills the command's whole process group (see
//     exec.go) and reports TimedOut with ExitCode -1.
//  3. File operations, Snapshot and Restore work on the host side of the
//     bind mount through host.Workspace, so they match every other
//     backend and a snapshot restores anywhere.
//  4. State carries the container id (Data["container"]); Resume reattaches
//     on the same host, or answers sandbox.ErrGone when the container is
//     missing or not running (after removing what is left of it).
//  5. Stop removes the container (force) and the workspace; it is
//     idempotent.
//
// Isolation, by default: network mode "none" (only loopback) unless
// Options.Network, which puts the container on the engine's default bridge;
// Options.Ports are published on 127.0.0.1 only, with a host port the
// engine picks (PortURL reads it) and need Options.Network; read-only root
// file system with a tmpfs /tmp, so writes outside /workspace and /tmp
// fail; all capabilities dropped and no-new-privileges; commands run as
// the worker's uid:gid (Config.User).
//
// Limits (Options.Limits; defaults DefaultPIDs, DefaultMemoryBytes,
// DefaultTmpfsBytes, DefaultDiskBytes) hold per session, that is per
// container: MemoryBytes is the container's memory cgroup limit
// (HostConfig.Memory, with MemorySwap equal to it, so no swap on top),
// which /tmp's pages count toward too, and past which the kernel kills one
// of the session's processes; PIDs is its pids cgroup limit; TmpBytes is
// the size of its /tmp tmpfs; DiskBytes is the size of the workspace's own
// file system (host.Disks: a sparse ext4 image loop-mounted on the
// workspace directory before it is bind-mounted, so writes past it fail
// with ENOSPC, from the container or the host); CPUSeconds is RLIMIT_CPU
// per command through `ulimit -t` (none by default), besides the
// container's CPU share (Config.CPUs). Where the engine lacks a cgroup
// controller (its Info says so) that limit is not in force; where the
// worker cannot mount file systems (not root, no loop devices, no
// mkfs.ext4) workspaces are unbounded; Client.Enforced reports both. The
// engine must share the worker's mount namespace, so that it bind-mounts
// the workspace's file system and not the directory under it.
//
// Labels: every container carries troupe.session=<Spec.ID>,
// troupe.backend=docker and troupe.workspace=<host dir>, plus Spec.Labels
// (the worker adds troupe.workflow=<workflow id>, troupe.agent, and the
// workflow's troupe.cluster and troupe.namespace). Client.Orphans and
// Client.Reap find and remove the containers a policy no longer wants
// (Reap also the workspaces whose container was never made, by the labels
// in their sidecar files); KeepOpen of package workflows/lease is the
// worker's, and leaves other clusters' and namespaces' containers alone.
//
// Images: no registry is assumed. Client.BuildImage (and `troupe sandbox
// image build`) makes KindDebian, a debootstrap minbase rootfs with bash,
// coreutils, git, python3 and ca-certificates tagged DefaultImage, from
// the mirror of the host's own apt sources; or KindBusybox, Debian's
// busybox-static in an empty rootfs tagged BusyboxImage, which the tests
// use. Both are imported with the Engine API's ImageImport.
//
// The tests need a running Docker Engine; scripts/setup.sh installs
// docker.io and starts dockerd (as `make test` does first).
package docker
