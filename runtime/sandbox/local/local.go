// Package local is the sandbox backend with no sandbox: a workspace is a
// directory on the host and commands run as host processes in it.
//
// THERE IS NO ISOLATION. A command runs as the worker's user, sees the
// whole host file system, the network and every process the user can see,
// and can write anywhere the user can: a symlink, an absolute path or `cd
// ..` takes it out of the workspace. Only the file operations (ReadFile,
// WriteFile, List, Remove, Snapshot, Restore) are confined to the
// workspace, by os.Root. Use it for development and tests, with trusted
// agents; use the bwrap or docker backend for anything else.
//
// What it does give:
//
//  1. Create makes the workspace directory under Config.Root and
//     materialises the manifest (host.Provision), replacing what an
//     earlier session of the same id left. Reap removes the workspaces
//     whose owner is gone (host.HostReaper); a command a killed worker
//     left running is not found, as nothing ties it to its workspace.
//  2. Exec runs `/bin/sh -c CMD` in the workspace (or its Workdir) with an
//     environment that is exactly the manifest's, plus PATH
//     (host.DefaultPATH) and HOME (the workspace's host path) when the
//     manifest does not set them (host.CommandEnv). The command runs in
//     its own process group; when it ends, times out, or its context is
//     cancelled, the whole group is killed with SIGKILL, so background
//     processes do not outlive the command (a process that leaves the
//     group, with setsid, can).
//  3. Options.Network, Options.Limits and Options.Image are ignored: the
//     host's network is always there and no limits are applied.
//  4. State records os.Hostname(); Resume on another host, or after the
//     workspace is gone, fails with sandbox.ErrGone.
package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/host"
)

// Backend is the name of this backend in sandbox.State.
const Backend = "local"

// Config configures a Client. Its zero value works.
type Config struct {
	// Root is the host directory that holds the workspaces, one directory
	// per session. Empty means host.DefaultRoot("local"):
	// $TROUPE_HOME/sandboxes/local, or a directory in os.TempDir when
	// TROUPE_HOME is unset.
	Root string
	// Policy says which host paths manifests may copy from; the zero
	// Policy allows none.
	Policy sandbox.Policy
}

// Client creates local sessions.
type Client struct {
	root   string
	policy sandbox.Policy
	host   string
}

var (
	_ sandbox.Client       = (*Client)(nil)
	_ sandbox.PolicyHolder = (*Client)(nil)
)

// New returns a Client for cfg.
func New(cfg Config) (*Client, error) {
	root := cfg.Root
	if root == "" {
		root = host.DefaultRoot(Backend)
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("local: hostname: %w", err)
	}
	return &Client{root: root, policy: cfg.Policy, host: host}, nil
}

// Backend returns "local".
func (c *Client) Backend() string { return Backend }

// Policy is the policy that bounds the manifests' host sources
// (sandbox.PolicyHolder).
func (c *Client) Policy() sandbox.Policy { return c.policy }

// Root returns the host directory that holds the workspaces.
func (c *Client) Root() string { return c.root }

// Create provisions a workspace for spec.
func (c *Client) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Session, error) {
	ws, err := host.Provision(ctx, c.root, spec, c.policy)
	if err != nil {
		return nil, err
	}
	return c.session(ws, host.HostState(Backend, c.host, spec, ws)), nil
}

// Resume reattaches to the session of state while its workspace exists on
// this host, and fails with sandbox.ErrGone otherwise.
func (c *Client) Resume(ctx context.Context, state sandbox.State) (sandbox.Session, error) {
	ws, err := host.ReopenHostWorkspace(c.root, Backend, c.host, state)
	if err != nil {
		return nil, err
	}
	return c.session(ws, state), nil
}

func (c *Client) session(ws host.Workspace, st sandbox.State) *Session {
	st.Ephemeral = slices.Clone(st.Ephemeral)
	return &Session{Workspace: ws, state: st, running: make(map[*exec.Cmd]context.CancelFunc)}
}

// Session is a local workspace. Its file operations and snapshots are the
// embedded host.Workspace's.
type Session struct {
	host.Workspace
	state sandbox.State

	mu      sync.Mutex
	running map[*exec.Cmd]context.CancelFunc
	stopped bool
	wg      sync.WaitGroup
}

var _ sandbox.Session = (*Session)(nil)

// State returns the session's serialisable state.
func (s *Session) State() sandbox.State { return s.state }

// Exec runs req.Cmd with /bin/sh in the workspace, as the package doc
// describes. A shell killed by a signal exits with 128+signal, as a shell
// reports it. A timeout is not an error: the result has TimedOut set and
// ExitCode -1. A cancelled ctx kills the command too, and returns the
// result so far with ctx's error.
func (s *Session) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	req, err := req.Normalize()
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	workdir, err := s.ResolveWorkdir(ctx, req.Workdir)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	out := sandbox.NewCappedOutput(req.MaxOutputBytes)
	pr, pw, err := os.Pipe()
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	defer pr.Close()
	cmd := exec.Command("/bin/sh", "-c", req.Cmd)
	cmd.Dir = filepath.Join(s.Dir, filepath.FromSlash(workdir))
	cmd.Env = host.CommandEnv(req.CommandEnv(s.state.Env), s.Dir)
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}

	runCtx, cancel := context.WithTimeout(ctx, req.Timeout)
	defer cancel()
	if !s.track(cmd, cancel) {
		pw.Close()
		return sandbox.ExecResult{}, fmt.Errorf("%w: session %q is stopped", sandbox.ErrGone, s.state.ID)
	}
	defer s.untrack(cmd)

	start := time.Now()
	err = cmd.Start()
	pw.Close()
	if err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("local: start: %w", err)
	}
	copied := make(chan struct{})
	go func() {
		io.Copy(out, pr)
		close(copied)
	}()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()

	var waitErr error
	select {
	case waitErr = <-waited:
	case <-runCtx.Done():
		killGroup(cmd.Process.Pid)
		waitErr = <-waited
	}
	// Background processes die with the command.
	killGroup(cmd.Process.Pid)
	// The pipe closes when the last writer is gone; one that left the
	// process group may hold it open, so stop reading shortly after.
	pr.SetReadDeadline(time.Now().Add(250 * time.Millisecond))
	<-copied

	res := sandbox.ExecResult{Duration: time.Since(start), ExitCode: -1}
	res.Output, res.Truncated, res.OriginalBytes = out.Result()
	var exitErr *exec.ExitError
	switch {
	case waitErr == nil:
		res.ExitCode = 0
	case errors.As(waitErr, &exitErr):
		res.ExitCode = exitErr.ExitCode()
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.ExitCode = 128 + int(ws.Signal()) // As a shell reports it.
		}
	default:
		return res, fmt.Errorf("local: wait: %w", waitErr)
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if runCtx.Err() != nil {
		res.TimedOut, res.ExitCode = true, -1
	}
	return res, nil
}

func killGroup(pid int) {
	syscall.Kill(-pid, syscall.SIGKILL)
}

// track registers a command so Stop can kill it; it fails once the session
// is stopped.
func (s *Session) track(cmd *exec.Cmd, cancel context.CancelFunc) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false
	}
	s.running[cmd] = cancel
	s.wg.Add(1)
	return true
}

func (s *Session) untrack(cmd *exec.Cmd) {
	s.mu.Lock()
	delete(s.running, cmd)
	s.mu.Unlock()
	s.wg.Done()
}

// PortURL returns http://127.0.0.1:PORT for a port listed in
// Options.Ports: a local command listens on the host itself. The server
// must run within a command, since a command's processes end with it.
func (s *Session) PortURL(ctx context.Context, port int) (string, error) {
	if !slices.Contains(s.state.Options.Ports, port) {
		return "", fmt.Errorf("local: port %d is not among the session's Options.Ports", port)
	}
	return "http://127.0.0.1:" + strconv.Itoa(port), nil
}

// Alive reports sandbox.ErrGone once the workspace is gone.
func (s *Session) Alive(ctx context.Context) error {
	return s.Workspace.Alive()
}

// Stop kills the session's running commands (those started through this
// Session value), waits for them, and removes the workspace. It is
// idempotent.
func (s *Session) Stop(ctx context.Context) error {
	s.mu.Lock()
	s.stopped = true
	for _, cancel := range s.running {
		cancel()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return s.Destroy()
}
