// Package bwrap is the sandbox backend that runs each command in fresh
// bubblewrap (bwrap) namespaces over a persistent workspace directory on
// the host. A bare bwrap starts in about 10 ms, so a namespace per command
// costs little, and nothing runs between commands.
//
// What a command gets (measured by this package's tests):
//
//  1. Its own user, mount, PID, IPC, UTS, cgroup and network namespaces
//     (--unshare-all --unshare-user), with every capability dropped
//     (--cap-drop ALL) and further user namespaces disabled
//     (--disable-userns, with bwrap 0.8 or later). Its uid inside is the worker's (0 for a root
//     worker), mapped to the worker's uid outside.
//  2. A read-only view of the host's system: /usr, and /bin, /sbin, /lib,
//     /lib64 (as symlinks into /usr on merged-/usr hosts, bind mounts
//     otherwise), plus from /etc only ld.so.cache, ld.so.conf(.d),
//     alternatives and localtime. /etc/passwd, /etc/group, /etc/hosts,
//     /etc/hostname and /etc/nsswitch.conf are small files this package
//     writes itself. Nothing else of the host is visible: no /home, /root,
//     /var, /run, /sys, no host /tmp, no other /etc file (so no host
//     secrets). The root is read-only.
//  3. A writable workspace at /workspace (a bind mount of the host
//     directory), a private tmpfs at /tmp (one per command), and private
//     /proc and /dev.
//  4. No network: the network namespace has only a loopback interface of
//     its own, so even the host's 127.0.0.1 is unreachable. With
//     Options.Network the host's network namespace is shared, and
//     /etc/resolv.conf and /etc/ssl/certs are bound read-only.
//  5. An environment that is exactly the manifest's plus PATH
//     (host.DefaultPATH) and HOME=/workspace when it does not set them
//     (--clearenv, then --setenv, passed on a pipe with --args so values
//     do not show in the host's process list).
//  6. The session's limits (below), applied before the command starts:
//     bwrap is started with --block-fd and --info-fd, and while it waits
//     the worker moves the sandbox's PID 1 (which every process of the
//     command descends from) into the session's cgroups and sets its
//     rlimits, RLIMIT_CORE 0 among them.
//  7. A timeout or a cancelled context kills bwrap's process group and the
//     sandbox's PID 1 (through a pidfd) with SIGKILL; the PID namespace
//     goes with PID 1, so no process survives. The same holds when the
//     command ends normally: background processes do not outlive it, and
//     --die-with-parent ties the sandbox to the worker.
//
// Limits (Options.Limits, defaults in DefaultLimits) hold per session:
// all of its processes, of all its concurrent commands, share them.
//
//   - MemoryBytes: a memory cgroup per session (v1 memory.limit_in_bytes
//     and memory.memsw.limit_in_bytes, or v2 memory.max and
//     memory.swap.max=0); its /tmp's pages count too. Past it the kernel
//     kills one of the session's processes (SIGKILL: exit 137). Each
//     process also has an RLIMIT_AS of Config.AddressSpaceBytes (8 GiB).
//   - PIDs: a pids cgroup per session (pids.max).
//   - CPUSeconds: RLIMIT_CPU per process: SIGXCPU at the limit, SIGKILL a
//     second later.
//   - TmpBytes: the size of /tmp's tmpfs (bwrap --size, 0.5 or later).
//   - DiskBytes: the workspace is a file system of its own of that size
//     (host.Disks: a sparse ext4 image, loop-mounted on the workspace
//     directory), so a write past it fails with ENOSPC, whether the
//     sandbox or the host writes.
//
// The cgroups are made under one named troupe-bwrap-<hash of Root> under the worker's own
// cgroup, in each controller's v1 hierarchy when mounted and else in v2,
// or under Config.CgroupParent. Where the host lacks the means the client
// degrades rather than fails, and Client.Enforced says which limit is not
// in force and why: without a memory controller the worker may use (none
// mounted; on v2, none delegated to the worker's cgroup), MemoryBytes
// bounds each process's address space (RLIMIT_AS) instead of the session;
// without a pids controller, PIDs is RLIMIT_NPROC per command, which the
// kernel does not apply to uid 0; without root, loop devices or
// mkfs.ext4, DiskBytes is RLIMIT_FSIZE per file; with a bwrap before 0.5,
// /tmp has the kernel's default size (half of RAM). A limit above the
// worker's own hard rlimit (a worker in a container, or under ulimit) is
// clamped to it, since only CAP_SYS_RESOURCE may raise a hard limit, and
// Enforced says so.
//
// A session is its workspace directory: Resume and Alive succeed while it
// exists (Resume mounts a bounded workspace's file system again after the
// host restarted); Stop kills running commands (and the session's
// cgroups) and removes it, its file system with it. A Create for the id of a session a killed worker left
// replaces its cgroup and workspace; Reap removes those whose owner is
// gone (host.HostReaper). File operations and snapshots are host.Workspace's, on
// the host side.
//
// Not provided: a seccomp filter (the kernel's full syscall surface is
// reachable, minus what the dropped capabilities forbid), and processes
// that outlive a command (so a server for PortURL must run within one
// command).
package bwrap

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/host"
)

// Backend is the name of this backend in sandbox.State.
const Backend = "bwrap"

// DefaultLimits are the limits of a session whose Options.Limits and
// Config.Limits leave a field zero.
var DefaultLimits = sandbox.Limits{
	PIDs:        512,
	MemoryBytes: 2 << 30,
	CPUSeconds:  600,
	TmpBytes:    256 << 20,
	DiskBytes:   8 << 30,
}

// DefaultAddressSpaceBytes is the RLIMIT_AS of every process of a
// sandbox whose memory a cgroup bounds: generous, as runtimes reserve
// much address space they never touch.
const DefaultAddressSpaceBytes = 8 << 30

// Config configures a Client. Its zero value works on a host with bwrap
// in PATH.
type Config struct {
	// Root is the host directory that holds the workspaces. Empty means
	// host.DefaultRoot("bwrap").
	Root string
	// Policy says which host paths manifests may copy from; the zero
	// Policy allows none.
	Policy sandbox.Policy
	// Bwrap is the bwrap executable; empty means "bwrap" from PATH.
	Bwrap string
	// Limits are the defaults for zero fields of a session's
	// Options.Limits; their own zero fields mean DefaultLimits'.
	Limits sandbox.Limits
	// CgroupParent is the cgroup directory under which each session gets
	// its cgroup (pids and memory). Empty means one named troupe-bwrap-<hash of Root>
	// under the worker's own cgroup in each hierarchy of the two
	// controllers (v1 when mounted, otherwise v2), when the worker may
	// create it.
	CgroupParent string
	// NoCgroup turns session cgroups off: PIDs is then only RLIMIT_NPROC,
	// and MemoryBytes only RLIMIT_AS per process.
	NoCgroup bool
	// AddressSpaceBytes is every sandboxed process's RLIMIT_AS where a
	// memory cgroup bounds the session (where none does, MemoryBytes is,
	// when lower); zero means DefaultAddressSpaceBytes.
	AddressSpaceBytes int64
	// NoDisk turns bounded workspaces off: DiskBytes is then only
	// RLIMIT_FSIZE per file.
	NoDisk bool
}

// Client creates bwrap sessions.
type Client struct {
	root   string
	policy sandbox.Policy
	bwrap  string
	host   string
	limits sandbox.Limits
	cgroup *cgroupParent // nil: RLIMIT_NPROC only.
	mech   string
	// disks bounds workspaces; nil with Config.NoDisk, and unusable (Err)
	// where the host does not let the worker mount them.
	disks        *host.Disks
	hard         workerHard
	addressSpace uint64
	reports      []sandbox.LimitReport
	// tmpSize is whether this bwrap has --size (0.5+).
	tmpSize bool
	etcDir  string
	sysArgs []string // System binds, the same for every command.
	// disableUserns is whether this bwrap has --disable-userns (0.8+).
	disableUserns bool
}

var (
	_ sandbox.Client       = (*Client)(nil)
	_ sandbox.PolicyHolder = (*Client)(nil)
)

// New returns a Client for cfg. It fails when bwrap is missing or cannot
// create namespaces on this host (it runs `bwrap ... true` to find out).
func New(cfg Config) (*Client, error) {
	bin := cfg.Bwrap
	if bin == "" {
		bin = "bwrap"
	}
	bin, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("bwrap: %w (Debian: apt-get install bubblewrap)", err)
	}
	root := cfg.Root
	if root == "" {
		root = host.DefaultRoot(Backend)
	}
	if root, err = filepath.Abs(root); err != nil {
		return nil, err
	}
	hostname, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("bwrap: hostname: %w", err)
	}
	c := &Client{root: root, policy: cfg.Policy, bwrap: bin, host: hostname, limits: withDefaults(cfg.Limits, DefaultLimits)}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("bwrap: workspace root: %w", err)
	}
	if c.etcDir, err = writeEtc(root); err != nil {
		return nil, fmt.Errorf("bwrap: %w", err)
	}
	c.sysArgs = systemArgs()
	c.mech = "rlimit: RLIMIT_NPROC per command"
	if os.Geteuid() == 0 {
		c.mech += " (not enforced: the worker runs as root)"
	}
	cgWhy := "turned off (Config.NoCgroup)"
	if !cfg.NoCgroup {
		if cg, err := detectCgroup(cfg.CgroupParent, parentFor(root)); err == nil {
			c.cgroup = cg
		} else {
			cgWhy = err.Error()
		}
	}
	switch {
	case c.cgroup.has(ctlPids):
		c.mech = "cgroup: pids.max per session under " + c.cgroup.dir
	case c.cgroup != nil:
		c.mech += "; no pids cgroup: " + c.cgroup.pidsWhy
	default:
		c.mech += "; no pids cgroup: " + cgWhy
	}
	c.disableUserns, c.tmpSize = true, true
	for {
		err := c.probe()
		if err == nil {
			break
		}
		switch {
		case c.disableUserns && strings.Contains(err.Error(), "disable-userns"):
			c.disableUserns = false // bwrap before 0.8.
		case c.tmpSize && strings.Contains(err.Error(), "--size"):
			c.tmpSize = false // bwrap before 0.5.
		default:
			return nil, err
		}
	}
	if !cfg.NoDisk {
		c.disks = host.NewDisks(root)
	}
	c.hard = readWorkerHard()
	c.addressSpace = uint64(cmp.Or(cfg.AddressSpaceBytes, DefaultAddressSpaceBytes))
	c.reports = c.report(cgWhy)
	return c, nil
}

func withDefaults(l, def sandbox.Limits) sandbox.Limits { return l.Or(def) }

// probe runs `true` in a sandbox like a command's.
func (c *Client) probe() error {
	args := append(c.namespaceArgs(false, c.limits.TmpBytes), "--", "/bin/sh", "-c", "true")
	out, err := exec.Command(c.bwrap, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("bwrap cannot create a sandbox on this host (are unprivileged user namespaces enabled?): %v: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// Backend returns "bwrap".
func (c *Client) Backend() string { return Backend }

// Policy is the policy that bounds the manifests' host sources
// (sandbox.PolicyHolder).
func (c *Client) Policy() sandbox.Policy { return c.policy }

// Root returns the host directory that holds the workspaces.
func (c *Client) Root() string { return c.root }

// Create provisions a workspace for spec. What an earlier session of the
// same id left (a Create whose worker was killed) is replaced: its pids
// cgroup, with anything still in it, and its workspace.
func (c *Client) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Session, error) {
	if spec.ID != "" {
		if err := c.releaseCgroup(host.DirName(spec.ID)); err != nil {
			return nil, fmt.Errorf("bwrap: the cgroup of an earlier session %q: %w", spec.ID, err)
		}
	}
	limits := withDefaults(spec.Options.Limits, c.limits)
	ws, err := host.ProvisionBounded(ctx, c.root, spec, c.policy, c.disks, c.diskBytes(limits))
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
	// After the host restarted, the workspace's file system is mounted
	// again; if it cannot be, the session is re-provisioned from its
	// snapshot.
	if err := c.disks.Reattach(ws.Dir); err != nil {
		return nil, fmt.Errorf("bwrap: session %q: %w: %v", state.ID, sandbox.ErrGone, err)
	}
	return c.session(ws, state), nil
}

func (c *Client) session(ws host.Workspace, st sandbox.State) *Session {
	st.Ephemeral = slices.Clone(st.Ephemeral)
	return &Session{Workspace: ws, c: c, state: st, limits: withDefaults(st.Options.Limits, c.limits), running: make(map[uint64]context.CancelFunc)}
}

// Session is a bwrap workspace. Its file operations and snapshots are the
// embedded host.Workspace's.
type Session struct {
	host.Workspace
	c      *Client
	state  sandbox.State
	limits sandbox.Limits

	mu      sync.Mutex
	running map[uint64]context.CancelFunc
	next    uint64
	stopped bool
	wg      sync.WaitGroup

	// cgroupReady: this process has made the session's cgroups.
	cgroupReady atomic.Bool
}

var _ sandbox.Session = (*Session)(nil)

// State returns the session's serialisable state.
func (s *Session) State() sandbox.State { return s.state }

// Limits returns the limits the session's commands run under.
func (s *Session) Limits() sandbox.Limits { return s.limits }

// Exec runs `/bin/sh -c req.Cmd` in a new sandbox over the workspace, as
// the package doc describes. The exit code is the shell's; a shell killed
// by a signal (a limit, say) exits with 128+signal. A timeout is not an
// error: the result has TimedOut set and ExitCode -1. A cancelled ctx
// kills the command too, and returns the result so far with ctx's error.
func (s *Session) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	req, err := req.Normalize()
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	workdir, err := s.ResolveWorkdir(ctx, req.Workdir)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	runCtx, cancel := context.WithTimeout(ctx, req.Timeout)
	defer cancel()
	id, ok := s.track(cancel)
	if !ok {
		return sandbox.ExecResult{}, fmt.Errorf("%w: session %q is stopped", sandbox.ErrGone, s.state.ID)
	}
	defer s.untrack(id)
	r, err := s.start(workdir, req.Cmd, req.CommandEnv(s.state.Env), sandbox.NewCappedOutput(req.MaxOutputBytes))
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	defer r.release()
	if err := r.limit(runCtx, s); err != nil {
		r.kill()
		r.wait()
		return sandbox.ExecResult{}, fmt.Errorf("bwrap: %w", err)
	}

	var waitErr error
	select {
	case waitErr = <-r.waited:
	case <-runCtx.Done():
		r.kill()
		waitErr = <-r.waited
	}
	r.kill() // Nothing of the command outlives it.
	r.drain()

	res := sandbox.ExecResult{Duration: time.Since(r.started), ExitCode: -1}
	res.Output, res.Truncated, res.OriginalBytes = r.out.Result()
	var exitErr *exec.ExitError
	switch {
	case waitErr == nil:
		res.ExitCode = 0
	case errors.As(waitErr, &exitErr):
		res.ExitCode = exitErr.ExitCode() // bwrap reports a signalled command as 128+signal.
	default:
		return res, fmt.Errorf("bwrap: wait: %w", waitErr)
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if runCtx.Err() != nil {
		res.TimedOut, res.ExitCode = true, -1
	}
	return res, nil
}

// run is one bwrap process, started and blocked before the command.
type run struct {
	cmd     *exec.Cmd
	out     *sandbox.CappedOutput
	outR    *os.File
	copied  chan struct{}
	waited  chan error
	blockW  *os.File
	infoR   *os.File
	pidfd   int
	started time.Time
	// entered receives the outcome of moving bwrap into the session's
	// cgroups (nil without cgroups); enteredDone says it was received.
	entered     chan error
	enteredDone bool
}

// start starts bwrap for cmd in the clean workspace directory workdir,
// with the environment cmdEnv (and PATH and HOME, host.CommandEnv),
// blocked on --block-fd until limit releases it.
func (s *Session) start(workdir, command string, cmdEnv map[string]string, out *sandbox.CappedOutput) (*run, error) {
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	pipe := func() (*os.File, *os.File, error) {
		r, w, err := os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	outR, outW, err1 := pipe()
	blockR, blockW, err2 := pipe()
	infoR, infoW, err3 := pipe()
	argsR, argsW, err4 := pipe()
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		closeAll()
		return nil, err
	}
	// The sandbox's fds: 3 = --block-fd, 4 = --info-fd, 5 = --args.
	args := append(s.c.namespaceArgs(s.state.Options.Network, s.limits.TmpBytes),
		"--bind", s.Dir, "/workspace",
		"--remount-ro", "/",
		"--chdir", path.Join("/workspace", workdir),
		"--block-fd", "3",
		"--info-fd", "4",
		"--args", "5",
		"--", "/bin/sh", "-c", command)
	cmd := exec.Command(s.c.bwrap, args...)
	cmd.Env = []string{}
	cmd.Stdout, cmd.Stderr = outW, outW
	cmd.ExtraFiles = []*os.File{blockR, infoW, argsR}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	r := &run{cmd: cmd, out: out, outR: outR, blockW: blockW, infoR: infoR, pidfd: -1,
		copied: make(chan struct{}), waited: make(chan error, 1), started: time.Now()}
	if err := cmd.Start(); err != nil {
		closeAll()
		return nil, fmt.Errorf("bwrap: start: %w", err)
	}
	for _, f := range []*os.File{outW, blockR, infoW, argsR} {
		f.Close()
	}
	if s.c.cgroup != nil {
		r.entered = make(chan error, 1)
		go func() { r.entered <- s.enterCgroup(cmd.Process.Pid) }()
	}
	// The environment goes on a pipe, not on the command line.
	var env bytes.Buffer
	env.WriteString("--clearenv\x00")
	for _, kv := range host.CommandEnv(cmdEnv, "/workspace") {
		k, v, _ := strings.Cut(kv, "=")
		env.WriteString("--setenv\x00" + k + "\x00" + v + "\x00")
	}
	go func() {
		argsW.Write(env.Bytes())
		argsW.Close()
	}()
	go func() {
		io.Copy(out, outR)
		close(r.copied)
	}()
	go func() { r.waited <- cmd.Wait() }()
	return r, nil
}

// enterCgroup moves pid into the session's cgroups, making them on the
// first command of the session in this process.
func (s *Session) enterCgroup(pid int) error {
	cg, name := s.c.cgroup, host.DirName(s.state.ID)
	if !s.cgroupReady.Load() {
		if err := cg.prepare(name, s.limits); err != nil {
			return err
		}
		s.cgroupReady.Store(true)
	}
	return cg.attach(name, s.limits, pid)
}

// limit reads the sandbox's PID 1 from --info-fd, applies the limits to it
// (and its cgroup), then lets the command run. If bwrap exits before it
// reports, the command never runs and the error shows in the output.
func (r *run) limit(ctx context.Context, s *Session) error {
	type info struct {
		ChildPID int `json:"child-pid"`
	}
	got := make(chan info, 1)
	go func() {
		var i info
		json.NewDecoder(r.infoR).Decode(&i)
		got <- i
	}()
	var i info
	select {
	case i = <-got:
	case <-ctx.Done():
		return nil // The caller sees the timeout.
	}
	if i.ChildPID <= 0 {
		return nil // bwrap failed; its exit status and message follow.
	}
	if fd, err := unix.PidfdOpen(i.ChildPID, 0); err == nil {
		r.pidfd = fd
	}
	if err := setRlimits(i.ChildPID, s.c.rlimits(s.limits)); err != nil {
		return fmt.Errorf("set limits: %w", err)
	}
	if r.entered != nil {
		// bwrap itself went into the session's cgroup as it started, which
		// costs an RCU grace period (milliseconds) after a quiet spell. Its
		// PID 1 may have been forked before, so it goes in now too, at
		// once while the grace period is fresh.
		err := <-r.entered
		r.enteredDone = true
		if err != nil {
			return fmt.Errorf("session cgroup: %w", err)
		}
		if err := s.c.cgroup.attach(host.DirName(s.state.ID), s.limits, i.ChildPID); err != nil {
			return fmt.Errorf("session cgroup: %w", err)
		}
	}
	if _, err := r.blockW.Write([]byte{1}); err != nil {
		return fmt.Errorf("release the sandbox: %w", err)
	}
	return nil
}

// kill kills bwrap's process group and the sandbox's PID 1, and with it
// the PID namespace.
func (r *run) kill() {
	syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
	if r.pidfd >= 0 {
		unix.PidfdSendSignal(r.pidfd, unix.SIGKILL, nil, 0)
	}
}

func (r *run) wait() {
	<-r.waited
	r.drain()
}

// drain waits for the output pipe to close, or a little while after the
// process is gone.
func (r *run) drain() {
	r.outR.SetReadDeadline(time.Now().Add(250 * time.Millisecond))
	<-r.copied
}

func (r *run) release() {
	if r.entered != nil && !r.enteredDone {
		<-r.entered // The move into the cgroups ends before the command does.
	}
	r.blockW.Close()
	r.infoR.Close()
	r.outR.Close()
	if r.pidfd >= 0 {
		unix.Close(r.pidfd)
	}
}

// namespaceArgs are the bwrap options every command shares: namespaces,
// capabilities, the read-only system view, and a /tmp of tmpBytes (when
// this bwrap can size it). network shares the host's network namespace.
func (c *Client) namespaceArgs(network bool, tmpBytes int64) []string {
	args := []string{
		"--unshare-all", "--unshare-user",
		"--die-with-parent", "--new-session",
		"--cap-drop", "ALL",
		"--hostname", "sandbox",
	}
	if c.disableUserns {
		args = append(args, "--disable-userns")
	}
	if network {
		args = append(args, "--share-net")
	}
	args = append(args, c.sysArgs...)
	for _, f := range []string{"passwd", "group", "hosts", "hostname", "nsswitch.conf"} {
		args = append(args, "--ro-bind", filepath.Join(c.etcDir, f), "/etc/"+f)
	}
	if network {
		args = append(args,
			"--ro-bind-try", "/etc/resolv.conf", "/etc/resolv.conf",
			"--ro-bind-try", "/etc/ssl/certs", "/etc/ssl/certs")
	}
	args = append(args, "--proc", "/proc", "--dev", "/dev")
	if c.tmpSize {
		args = append(args, "--size", strconv.FormatInt(tmpBytes, 10))
	}
	return append(args, "--tmpfs", "/tmp")
}

// systemArgs binds the host's system directories read-only, keeping the
// symlinks of a merged-/usr host as symlinks.
func systemArgs() []string {
	var args []string
	for _, p := range []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		fi, err := os.Lstat(p)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(p); err == nil {
				args = append(args, "--symlink", target, p)
			}
		case fi.IsDir():
			args = append(args, "--ro-bind", p, p)
		}
	}
	for _, p := range []string{"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives", "/etc/localtime"} {
		args = append(args, "--ro-bind-try", p, p)
	}
	return args
}

// writeEtc writes the sandbox's own /etc files into root/.bwrap-etc (a
// name no workspace gets: host.DirName never starts with a dot).
func writeEtc(root string) (string, error) {
	dir := filepath.Join(root, ".bwrap-etc")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	uid, gid := os.Getuid(), os.Getgid()
	passwd := "root:x:0:0:root:/workspace:/bin/sh\n"
	group := "root:x:0:\n"
	if uid != 0 {
		passwd += fmt.Sprintf("sandbox:x:%d:%d:sandbox:/workspace:/bin/sh\n", uid, gid)
		group += fmt.Sprintf("sandbox:x:%d:\n", gid)
	}
	passwd += "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
	group += "nogroup:x:65534:\n"
	files := map[string]string{
		"passwd":        passwd,
		"group":         group,
		"hosts":         "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n",
		"hostname":      "sandbox\n",
		"nsswitch.conf": "passwd: files\ngroup: files\nhosts: files dns\n",
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if b, err := os.ReadFile(p); err == nil && string(b) == content {
			continue
		}
		tmp := p + ".tmp-" + strconv.Itoa(os.Getpid())
		if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
			return "", err
		}
		if err := os.Rename(tmp, p); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// track registers a running command so Stop can cancel it; it fails once
// the session is stopped.
func (s *Session) track(cancel context.CancelFunc) (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return 0, false
	}
	s.next++
	s.running[s.next] = cancel
	s.wg.Add(1)
	return s.next, true
}

func (s *Session) untrack(id uint64) {
	s.mu.Lock()
	delete(s.running, id)
	s.mu.Unlock()
	s.wg.Done()
}

// PortURL returns http://127.0.0.1:PORT for a port listed in
// Options.Ports of a session with Options.Network: such a sandbox shares
// the host's network namespace. Without Network the sandbox's ports are
// unreachable from the host and PortURL fails with sandbox.ErrUnsupported.
// The server must run within a command, since a command's processes end
// with it.
func (s *Session) PortURL(ctx context.Context, port int) (string, error) {
	if !s.state.Options.Network {
		return "", fmt.Errorf("bwrap: port %d: ports need Options.Network: %w", port, sandbox.ErrUnsupported)
	}
	if !slices.Contains(s.state.Options.Ports, port) {
		return "", fmt.Errorf("bwrap: port %d is not among the session's Options.Ports", port)
	}
	return "http://127.0.0.1:" + strconv.Itoa(port), nil
}

// Alive reports sandbox.ErrGone once the workspace is gone.
func (s *Session) Alive(ctx context.Context) error {
	return s.Workspace.Alive()
}

// Stop kills the session's running commands (every process in its pids
// cgroup, when there is one, and those started through this Session
// value), waits for them, and removes the workspace. It is idempotent.
func (s *Session) Stop(ctx context.Context) error {
	s.mu.Lock()
	s.stopped = true
	for _, cancel := range s.running {
		cancel()
	}
	s.mu.Unlock()
	// Every command has returned, its move into the cgroups done, before
	// the cgroups go (a late move would make them again); they go while
	// the workspace does, each taking a millisecond or more.
	s.wg.Wait()
	removed := make(chan error, 1)
	if cg := s.c.cgroup; cg != nil {
		go func() { removed <- cg.remove(host.DirName(s.state.ID)) }()
	} else {
		removed <- nil
	}
	err := s.Destroy()
	return errors.Join(<-removed, err)
}
