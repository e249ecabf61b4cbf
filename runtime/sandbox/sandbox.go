// Package sandbox is the contract of Troupe's workspaces: the Manifest
// that describes a fresh workspace and the rules its paths and host
// sources obey (CleanPath, Manifest.Check and Validate, Policy); the
// Client and Session interfaces that backends (local, bwrap, docker;
// hosted providers alike) implement, with the optional ones a client may
// add (LimitReporter, PolicyHolder, Reaper); a session's serialisable
// State; a command's request and result, with the output cap that keeps
// its head and tail (CapOutput); Limits and how a client reports them; and
// the errors callers branch on.
//
// It is data, interfaces and checks, with nothing heavy beneath it: no
// go-git, no archive code, no backend. Agents, capabilities and the agent
// loop speak of sandboxes through it alone. What runs on a worker's host
// (materialising a manifest, git clones with go-git, workspace
// directories, snapshots, bounded disks, reaping what a killed worker
// left) is package host beside it, which the backends use to keep this
// contract.
//
// The contract every implementation keeps, checked by sandboxtest.Run:
//
//  1. Create materialises the manifest before the first command; paths are
//     workspace-relative, and escapes are rejected before anything is
//     written.
//  2. Exec runs `sh -c CMD` in the workspace with exactly the manifest's
//     environment (never the host's), a timeout, and an output cap that
//     keeps the head and the tail.
//  3. Session state serialises to JSON; Client.Resume turns it back into a
//     live session, or fails with ErrGone.
//  4. Stop is idempotent and leaves nothing running.
//  5. Create is idempotent under retry: a Create for an ID whose sandbox
//     exists (left by a Create whose worker was killed before it
//     returned, so that nobody holds it) removes it and provisions afresh.
//
// What a killed worker leaves is removed by a Reaper (the local, bwrap and
// docker clients are ones) once its owner is gone: the sandbox's labels
// say whose it is, on the container for docker and in a sidecar file
// beside the workspace for the host-directory backends (host.HostReaper).
// StartReaping of package workflows/lease runs the reapers of a worker;
// that package's doc has the bounds on what a crash at any point leaves.
package sandbox

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"maps"
	"time"
)

// Errors callers branch on.
var (
	// ErrPathEscape reports a path that leaves the workspace: absolute,
	// with "..", or through a symlink pointing outside.
	ErrPathEscape = errors.New("sandbox: path escapes the workspace")
	// ErrSourceNotAllowed reports a host source outside the allowed roots.
	ErrSourceNotAllowed = errors.New("sandbox: host source outside the allowed roots")
	// ErrGone reports a sandbox that no longer exists (stopped, killed, or
	// its host is gone); re-provision it from a snapshot.
	ErrGone = errors.New("sandbox: gone")
	// ErrUnsupported reports an optional operation a backend lacks.
	ErrUnsupported = errors.ErrUnsupported
)

// MaxReadBytes bounds what ReadFile reads from a workspace: a larger file
// fails with ErrTooLarge, before any of it is read.
const MaxReadBytes = 16 << 20

// Errors of reads from a workspace, which callers (and the model) can
// act on.
var (
	// ErrTooLarge reports a workspace file or archive over a bound.
	ErrTooLarge = errors.New("sandbox: too large")
	// ErrNotRegular reports a workspace path that is a FIFO, a socket, a
	// device or a directory where a regular file is needed.
	ErrNotRegular = errors.New("sandbox: not a regular file")
)

// Client creates and resumes sessions of one backend.
type Client interface {
	// Backend names the backend: "local", "bwrap", "docker".
	Backend() string
	// Create provisions a new workspace from spec.
	Create(ctx context.Context, spec Spec) (Session, error)
	// Resume reattaches to a session from its State, or fails with ErrGone.
	Resume(ctx context.Context, state State) (Session, error)
}

// Spec says what to provision.
type Spec struct {
	// ID identifies the session; it must be unique on the host. Workflows
	// use their workflow id and a generation. A Create with the ID of a
	// sandbox that exists replaces it (contract point 5).
	ID string `json:"id"`
	// Manifest is the fresh workspace's contents and environment.
	Manifest Manifest `json:"manifest"`
	// Options are the isolation and resource settings.
	Options Options `json:"options"`
	// Labels tag the sandbox (docker labels; a sidecar file beside a host
	// workspace) so that Reapers can tell whose it is.
	Labels map[string]string `json:"labels,omitempty"`
}

// Options are a sandbox's isolation and resource settings. The zero value
// is the safe default: no network, the backend's default limits.
type Options struct {
	// Network grants network access; off by default.
	Network bool `json:"network,omitempty"`
	// Ports are workspace ports to expose (published on 127.0.0.1 only).
	Ports []int `json:"ports,omitempty"`
	// Limits bound the sandbox's resources.
	Limits Limits `json:"limits,omitempty"`
	// Image is the container image, for backends that use one.
	Image string `json:"image,omitempty"`
}

// Limits bound a sandbox's resources; zero fields mean the backend's
// default. Each is per session: all of a session's processes, from all of
// its commands, share it. Each backend's package doc says how it enforces
// them and what it does where the host lacks the means; its client's
// Enforced (LimitReporter) says which are in force on this host. The
// local backend bounds nothing.
type Limits struct {
	// PIDs bounds the number of processes.
	PIDs int `json:"pids,omitempty"`
	// MemoryBytes bounds the memory of the session's processes together,
	// its /tmp included; past it the kernel kills one of them.
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	// CPUSeconds bounds the CPU time of one command.
	CPUSeconds int `json:"cpu_seconds,omitempty"`
	// TmpBytes bounds the size of /tmp, a file system in memory.
	TmpBytes int64 `json:"tmp_bytes,omitempty"`
	// DiskBytes bounds the size of the workspace: what its files take on
	// disk, the file system's own metadata included. Writes past it fail
	// (ENOSPC).
	DiskBytes int64 `json:"disk_bytes,omitempty"`
}

// State is a session's serialisable state: enough to resume it.
type State struct {
	// Backend is the Client.Backend that made the session.
	Backend string `json:"backend"`
	// Host names the machine that holds the workspace, as the backend
	// knows it (its hostname): for people to read. Two machines may share
	// a name; Store tells their stores apart.
	Host string `json:"host"`
	// Store is the identity of the sandbox store that made the session
	// (a worker's, by which its calls are routed); empty for a session
	// made before stores had one, or by a client outside a worker.
	Store string `json:"store,omitempty"`
	// ID is the Spec's ID.
	ID string `json:"id"`
	// Workspace is the workspace directory on Host.
	Workspace string `json:"workspace"`
	// Env is the commands' environment (the manifest's).
	Env map[string]string `json:"env,omitempty"`
	// Ephemeral lists workspace paths left out of snapshots.
	Ephemeral []string `json:"ephemeral,omitempty"`
	// Options are the spec's options.
	Options Options `json:"options"`
	// Backend-specific data, e.g. a container id.
	Data map[string]string `json:"data,omitempty"`
}

// Session is a live workspace.
type Session interface {
	// State returns the session's serialisable state.
	State() State
	// Exec runs a command in the workspace.
	Exec(ctx context.Context, req ExecRequest) (ExecResult, error)
	// ReadFile reads a workspace file.
	ReadFile(ctx context.Context, path string) ([]byte, error)
	// WriteFile writes a workspace file, creating parent directories.
	WriteFile(ctx context.Context, path string, data []byte, mode fs.FileMode) error
	// Remove removes a workspace file or empty directory.
	Remove(ctx context.Context, path string) error
	// List lists a workspace directory.
	List(ctx context.Context, path string) ([]FileInfo, error)
	// Snapshot writes a tar+zstd archive of the workspace, without the
	// ephemeral entries, to w.
	Snapshot(ctx context.Context, w io.Writer) error
	// Restore replaces the workspace's contents with a snapshot's.
	Restore(ctx context.Context, r io.Reader) error
	// PortURL returns the host URL of an exposed workspace port.
	PortURL(ctx context.Context, port int) (string, error)
	// Alive reports ErrGone when the sandbox no longer exists.
	Alive(ctx context.Context) error
	// Stop stops the sandbox and removes its workspace; it is idempotent.
	Stop(ctx context.Context) error
}

// ExecRequest is one command.
type ExecRequest struct {
	// Cmd is run as `sh -c Cmd`.
	Cmd string `json:"cmd"`
	// Workdir is workspace-relative; empty means the workspace root.
	Workdir string `json:"workdir,omitempty"`
	// Timeout bounds the command; zero means one minute.
	Timeout time.Duration `json:"timeout,omitempty"`
	// MaxOutputBytes caps the combined output kept, head and tail; zero
	// means 64 KiB.
	MaxOutputBytes int `json:"max_output_bytes,omitempty"`
	// Env adds variables to this command's environment, over the
	// manifest's (State.Env): the call's TROUPE_IDEMPOTENCY_KEY, say. A
	// name must be non-empty, not begin with '-' and hold no '=' and no
	// NUL; a value no NUL (Normalize checks).
	Env map[string]string `json:"env,omitempty"`
}

// CommandEnv is the environment of req's command in a sandbox whose
// manifest's environment is base: base, then req.Env over it.
func (req ExecRequest) CommandEnv(base map[string]string) map[string]string {
	if len(req.Env) == 0 {
		return base
	}
	env := make(map[string]string, len(base)+len(req.Env))
	maps.Copy(env, base)
	maps.Copy(env, req.Env)
	return env
}

// ExecResult is a finished command.
type ExecResult struct {
	// ExitCode is the command's exit status; -1 when it was killed.
	ExitCode int `json:"exit_code"`
	// Output is stdout and stderr interleaved, capped.
	Output string `json:"output"`
	// Truncated reports that the middle of the output was cut.
	Truncated bool `json:"truncated,omitempty"`
	// OriginalBytes is the output's size before the cut.
	OriginalBytes int `json:"original_bytes"`
	// TimedOut reports that the timeout killed the command.
	TimedOut bool `json:"timed_out,omitempty"`
	// Duration is the command's wall time.
	Duration time.Duration `json:"duration"`
}

// FileInfo describes a workspace entry.
type FileInfo struct {
	Name  string      `json:"name"`
	Size  int64       `json:"size"`
	Mode  fs.FileMode `json:"mode"`
	IsDir bool        `json:"is_dir"`
}

type sessionKey struct{}

// WithSession returns ctx carrying s, for tools that act on the agent's
// sandbox: the worker puts the agent's live session in the context of
// every sandbox tool call.
func WithSession(ctx context.Context, s Session) context.Context {
	return context.WithValue(ctx, sessionKey{}, s)
}

// SessionFrom returns the session of a sandbox tool call's ctx.
func SessionFrom(ctx context.Context) (Session, bool) {
	s, ok := ctx.Value(sessionKey{}).(Session)
	return s, ok
}

// Reaper is a Client that can find and remove the sandboxes their owners
// no longer want: those a worker killed before it could stop them left
// behind. The local, bwrap and docker clients are Reapers.
type Reaper interface {
	// Reap removes the sandboxes for which keep(labels) answers false,
	// where labels are the Spec.Labels they were created with, and
	// returns what it removed (ids of sessions or containers).
	Reap(ctx context.Context, keep func(labels map[string]string) bool) ([]string, error)
}
