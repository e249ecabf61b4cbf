package docker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/client"
	"github.com/docker/go-connections/nat"

	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/host"
)

// Backend is the name of this backend in sandbox.State.Backend.
const Backend = "docker"

// Labels every sandbox container carries.
const (
	// LabelSession holds the Spec.ID.
	LabelSession = "troupe.session"
	// LabelBackend is always "docker"; Orphans lists containers by it.
	LabelBackend = "troupe.backend"
	// LabelWorkspace holds the workspace directory on the host.
	LabelWorkspace = "troupe.workspace"
)

// Defaults, used where sandbox.Limits or Config leave a field zero.
const (
	// DefaultPIDs bounds the processes in a container.
	DefaultPIDs = 512
	// DefaultMemoryBytes bounds a container's memory; swap is not added.
	DefaultMemoryBytes = 2 << 30
	// DefaultCPUs is a container's CPU share (Config.CPUs).
	DefaultCPUs = 1.0
	// DefaultTmpfsBytes is the size of the tmpfs at /tmp, the one
	// writable place besides /workspace (Limits.TmpBytes).
	DefaultTmpfsBytes = 256 << 20
	// DefaultDiskBytes bounds a workspace (Limits.DiskBytes).
	DefaultDiskBytes = 8 << 30
)

// Config configures a Client. The zero value works against the local
// Docker Engine (DOCKER_HOST or its unix socket) with DefaultImage.
type Config struct {
	// Host is the Docker Engine's address ("unix:///var/run/docker.sock",
	// "tcp://..."); empty means DOCKER_HOST, else the default socket. The
	// workspaces are bind-mounted from Root, so the engine must run on the
	// machine that holds Root.
	Host string
	// Image is the sandbox image when a spec's Options.Image is empty;
	// empty means DefaultImage. `troupe sandbox image build` makes it.
	Image string
	// Root is the host directory that holds the workspaces, one
	// subdirectory per session; empty means $TROUPE_HOME/docker-sandboxes
	// when TROUPE_HOME is set, else troupe-docker-sandboxes in
	// os.TempDir.
	Root string
	// Policy bounds the manifests' host sources (local_file, local_dir,
	// git_repo).
	Policy sandbox.Policy
	// HostName names this machine in sessions' State.Host; empty means
	// os.Hostname(). Resume answers ErrGone for a state of another host.
	HostName string
	// User is the "uid:gid" commands run as; empty means the worker's own
	// uid and gid, so that the files the sandbox writes belong to the
	// worker and the host side can read, snapshot and remove them. (A
	// worker running as root gets uid 0 inside, with every capability
	// dropped.)
	User string
	// CPUs bounds the container's CPU share; zero means DefaultCPUs.
	CPUs float64
	// NoDisk turns bounded workspaces off: Limits.DiskBytes is then not
	// in force.
	NoDisk bool
}

// Client is the docker sandbox backend: one container per session, kept
// running, with the workspace bind-mounted at /workspace.
type Client struct {
	api  *client.Client
	cfg  Config
	root string
	host string
	user string

	disksOnce sync.Once
	disks     *host.Disks // nil with Config.NoDisk; see workspaceDisks.

	reportsOnce sync.Once
	reports     []sandbox.LimitReport
}

var (
	_ sandbox.Client       = (*Client)(nil)
	_ sandbox.PolicyHolder = (*Client)(nil)
)

// New returns a Client. It does not contact the engine; Ping does.
func New(cfg Config) (*Client, error) {
	opts := []client.Opt{client.FromEnv, client.WithAPIVersionNegotiation()}
	if cfg.Host != "" {
		opts = append(opts, client.WithHost(cfg.Host))
	}
	api, err := client.NewClientWithOpts(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker: client: %w", err)
	}
	c := &Client{api: api, cfg: cfg, root: cfg.Root, host: cfg.HostName, user: cfg.User}
	if c.cfg.Image == "" {
		c.cfg.Image = DefaultImage
	}
	if c.cfg.CPUs == 0 {
		c.cfg.CPUs = DefaultCPUs
	}
	if c.root == "" {
		if home := os.Getenv("TROUPE_HOME"); home != "" {
			c.root = filepath.Join(home, "docker-sandboxes")
		} else {
			c.root = filepath.Join(os.TempDir(), "troupe-docker-sandboxes")
		}
	}
	if c.root, err = filepath.Abs(c.root); err != nil {
		return nil, err
	}
	if c.host == "" {
		if c.host, err = os.Hostname(); err != nil {
			return nil, err
		}
	}
	if c.user == "" {
		c.user = fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid())
	}
	return c, nil
}

// Ping checks that the engine answers; its error says how to start it.
func (c *Client) Ping(ctx context.Context) error {
	if _, err := c.api.Ping(ctx); err != nil {
		return fmt.Errorf("docker: the Docker Engine at %s does not answer (run scripts/setup.sh to install and start dockerd): %w", c.api.DaemonHost(), err)
	}
	return nil
}

// Close releases the client's connections to the engine, after dropping
// the workspace file systems kept ready for new sessions and waiting for
// the teardown of stopped sessions' ones, which Stop leaves to the
// background.
func (c *Client) Close() error {
	c.disksOnce.Do(func() {}) // None made after Close.
	err := c.disks.Close()
	host.WaitDetached()
	return errors.Join(err, c.api.Close())
}

// Backend returns "docker".
func (c *Client) Backend() string { return Backend }

// Policy is the policy that bounds the manifests' host sources
// (sandbox.PolicyHolder).
func (c *Client) Policy() sandbox.Policy { return c.cfg.Policy }

// Root returns the directory that holds the workspaces.
func (c *Client) Root() string { return c.root }

// containerName is the container of session id: "troupe-" and the id
// when the id is a plain name, else "troupe_" and the workspace's hashed
// directory name, so distinct ids never share a container.
func containerName(id string) string {
	name := host.DirName(id)
	if i := strings.IndexByte(name, '~'); i >= 0 {
		return "troupe_" + name[:i] + "-" + name[i+1:]
	}
	return "troupe-" + name
}

func (c *Client) workspaceDir(id string) string { return filepath.Join(c.root, host.DirName(id)) }

func (c *Client) image(opts sandbox.Options) string {
	if opts.Image != "" {
		return opts.Image
	}
	return c.cfg.Image
}

// Create provisions a session: it validates the manifest, materialises it
// into a fresh workspace directory, then creates and starts the container.
// A container or a workspace left over by an earlier session with the same
// ID, running or not, is replaced: a Create whose worker was killed never
// returned it, so nobody holds it (Create is idempotent under retry).
func (c *Client) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Session, error) {
	if spec.ID == "" {
		return nil, errors.New("docker: spec has no ID")
	}
	if err := spec.Manifest.Validate(c.cfg.Policy); err != nil {
		return nil, err
	}
	if len(spec.Options.Ports) > 0 && !spec.Options.Network {
		return nil, errors.New("docker: exposing ports needs Options.Network (a container without network has only loopback)")
	}
	for _, p := range spec.Options.Ports {
		if p <= 0 || p > 65535 {
			return nil, fmt.Errorf("docker: port %d out of range", p)
		}
	}
	img := c.image(spec.Options)
	if _, err := c.api.ImageInspect(ctx, img); err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, fmt.Errorf("docker: image %s not found; build it with `troupe sandbox image build --name %s`", img, img)
		}
		return nil, c.engineErr("inspect image "+img, err)
	}
	name := containerName(spec.ID)
	if old, err := c.api.ContainerInspect(ctx, name); err == nil {
		if err := c.api.ContainerRemove(ctx, old.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
			return nil, c.engineErr("remove stale container "+name, err)
		}
	} else if !cerrdefs.IsNotFound(err) {
		return nil, c.engineErr("inspect container "+name, err)
	}

	dir := c.workspaceDir(spec.ID)
	labels := map[string]string{}
	maps.Copy(labels, spec.Labels)
	labels[LabelSession] = spec.ID
	labels[LabelBackend] = Backend
	labels[LabelWorkspace] = dir
	// The workspace's sidecar carries the container's labels, so Reap
	// judges a workspace whose container was never made as it would the
	// container. Provision replaces a stale workspace.
	spec.Labels = labels
	ws, err := host.ProvisionBounded(ctx, c.root, spec, c.cfg.Policy, c.workspaceDisks(), c.diskBytes(spec.Options.Limits))
	if err != nil {
		return nil, err
	}
	cleanup := func() { ws.Destroy() }

	env := host.CommandEnv(spec.Manifest.Env, "/workspace")

	cfg, hc := c.containerConfig(img, env, labels, dir, spec.Options)
	created, err := c.api.ContainerCreate(ctx, cfg, hc, nil, nil, name)
	if err != nil {
		cleanup()
		return nil, c.engineErr("create container", err)
	}
	cleanup = func() {
		c.api.ContainerRemove(context.WithoutCancel(ctx), created.ID, container.RemoveOptions{Force: true})
		ws.Destroy()
	}
	if err := c.api.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		cleanup()
		return nil, c.engineErr("start container", err)
	}
	opts := spec.Options
	opts.Image = img
	s := &session{
		c:   c,
		cid: created.ID,
		ws:  ws,
		env: env,
		state: sandbox.State{
			Backend:   Backend,
			Host:      c.host,
			ID:        spec.ID,
			Workspace: dir,
			Env:       maps.Clone(spec.Manifest.Env),
			Ephemeral: slices.Clone(ws.Ephemeral),
			Options:   opts,
			Data:      map[string]string{"container": created.ID, "image": img},
		},
	}
	return s, nil
}

// containerConfig is the whole isolation story of a sandbox container.
func (c *Client) containerConfig(img string, env []string, labels map[string]string, dir string, opts sandbox.Options) (*container.Config, *container.HostConfig) {
	yes := true
	pids := int64(opts.Limits.PIDs)
	if pids <= 0 {
		pids = DefaultPIDs
	}
	mem := opts.Limits.MemoryBytes
	if mem <= 0 {
		mem = DefaultMemoryBytes
	}
	cfg := &container.Config{
		Image: img,
		// docker-init (HostConfig.Init) is PID 1 and reaps what commands
		// leave behind; sleep keeps the container up between commands.
		// An entrypoint, not a command, so an image's own is overridden.
		Entrypoint: []string{"sleep", "infinity"},
		Env:        env,
		WorkingDir: "/workspace",
		User:       c.user,
		Hostname:   "sandbox",
		Labels:     labels,
	}
	hc := &container.HostConfig{
		NetworkMode:    "none",
		Init:           &yes,
		ReadonlyRootfs: true,
		Tmpfs:          map[string]string{"/tmp": fmt.Sprintf("rw,nosuid,nodev,exec,size=%d,mode=1777", cmp.Or(max(opts.Limits.TmpBytes, 0), DefaultTmpfsBytes))},
		Mounts:         []mount.Mount{{Type: mount.TypeBind, Source: dir, Target: "/workspace"}},
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		LogConfig:      container.LogConfig{Type: "none"},
		Resources: container.Resources{
			PidsLimit:  &pids,
			Memory:     mem,
			MemorySwap: mem, // no swap on top of the memory limit
			NanoCPUs:   int64(c.cfg.CPUs * 1e9),
		},
	}
	if opts.Network {
		hc.NetworkMode = "bridge"
	}
	if len(opts.Ports) > 0 {
		cfg.ExposedPorts = nat.PortSet{}
		hc.PortBindings = nat.PortMap{}
		for _, p := range opts.Ports {
			port := nat.Port(strconv.Itoa(p) + "/tcp")
			cfg.ExposedPorts[port] = struct{}{}
			// Host port 0: the engine picks a free one; PortURL reads it.
			hc.PortBindings[port] = []nat.PortBinding{{HostIP: "127.0.0.1", HostPort: ""}}
		}
	}
	return cfg, hc
}

// Resume reattaches to a session's running container. It answers ErrGone
// when the state is of another host, or the container is missing or no
// longer running; a dead container and its workspace are removed then,
// since the caller re-provisions from a snapshot.
func (c *Client) Resume(ctx context.Context, state sandbox.State) (sandbox.Session, error) {
	if state.Backend != Backend {
		return nil, fmt.Errorf("docker: cannot resume a %q session", state.Backend)
	}
	if state.Host != c.host {
		return nil, fmt.Errorf("docker: session %q lives on host %q, not %q: %w", state.ID, state.Host, c.host, sandbox.ErrGone)
	}
	ws, err := host.OpenWorkspace(c.root, state)
	if err != nil {
		return nil, fmt.Errorf("docker: session %q: %w", state.ID, err)
	}
	cid := state.Data["container"]
	if cid == "" {
		return nil, fmt.Errorf("docker: session %q: state has no container: %w", state.ID, sandbox.ErrGone)
	}
	info, err := c.api.ContainerInspect(ctx, cid)
	switch {
	case cerrdefs.IsNotFound(err):
		ws.Destroy()
		return nil, fmt.Errorf("docker: session %q: container %.12s is gone: %w", state.ID, cid, sandbox.ErrGone)
	case err != nil:
		return nil, c.engineErr("inspect container", err)
	case info.Config == nil || info.Config.Labels[LabelSession] != state.ID:
		return nil, fmt.Errorf("docker: session %q: container %.12s belongs to another session: %w", state.ID, cid, sandbox.ErrGone)
	case info.State == nil || !info.State.Running:
		c.api.ContainerRemove(ctx, cid, container.RemoveOptions{Force: true})
		ws.Destroy()
		return nil, fmt.Errorf("docker: session %q: container %.12s is not running: %w", state.ID, cid, sandbox.ErrGone)
	}
	st := state
	st.Env = maps.Clone(state.Env)
	st.Ephemeral = slices.Clone(state.Ephemeral)
	st.Data = maps.Clone(state.Data)
	return &session{
		c:     c,
		cid:   cid,
		ws:    ws,
		env:   host.CommandEnv(state.Env, "/workspace"),
		state: st,
	}, nil
}

// engineErr wraps an Engine API error; an unreachable engine gets the
// hint to run scripts/setup.sh.
func (c *Client) engineErr(what string, err error) error {
	if client.IsErrConnectionFailed(err) {
		return fmt.Errorf("docker: %s: the Docker Engine at %s does not answer (run scripts/setup.sh): %w", what, c.api.DaemonHost(), err)
	}
	return fmt.Errorf("docker: %s: %w", what, err)
}

// session is one running container over a host workspace directory.
type session struct {
	c     *Client
	cid   string
	ws    host.Workspace
	env   []string
	state sandbox.State
}

var _ sandbox.Session = (*session)(nil)

func (s *session) State() sandbox.State {
	st := s.state
	st.Env = maps.Clone(s.state.Env)
	st.Ephemeral = slices.Clone(s.state.Ephemeral)
	st.Data = maps.Clone(s.state.Data)
	return st
}

// File operations and snapshots go through the host side of the bind
// mount, confined by host.Workspace; they answer ErrGone once the
// workspace is removed.

func (s *session) ReadFile(ctx context.Context, path string) ([]byte, error) {
	return s.ws.ReadFile(ctx, path)
}

func (s *session) WriteFile(ctx context.Context, path string, data []byte, mode fs.FileMode) error {
	return s.ws.WriteFile(ctx, path, data, mode)
}

func (s *session) Remove(ctx context.Context, path string) error {
	return s.ws.Remove(ctx, path)
}

func (s *session) List(ctx context.Context, path string) ([]sandbox.FileInfo, error) {
	return s.ws.List(ctx, path)
}

func (s *session) Snapshot(ctx context.Context, w io.Writer) error {
	return s.ws.Snapshot(ctx, w)
}

// Restore replaces the workspace's contents in place (the directory itself
// stays, as the running container has it bind-mounted).
func (s *session) Restore(ctx context.Context, r io.Reader) error {
	return s.ws.Restore(ctx, r)
}

// PortURL returns http://127.0.0.1:HOSTPORT for an exposed port.
func (s *session) PortURL(ctx context.Context, port int) (string, error) {
	if !slices.Contains(s.state.Options.Ports, port) {
		return "", fmt.Errorf("docker: port %d is not exposed (Options.Ports: %v)", port, s.state.Options.Ports)
	}
	info, err := s.c.api.ContainerInspect(ctx, s.cid)
	if err != nil {
		return "", s.containerErr("inspect container", err)
	}
	if info.State == nil || !info.State.Running {
		return "", fmt.Errorf("docker: session %q: container not running: %w", s.state.ID, sandbox.ErrGone)
	}
	if info.NetworkSettings != nil {
		for _, b := range info.NetworkSettings.Ports[nat.Port(strconv.Itoa(port)+"/tcp")] {
			if b.HostIP == "127.0.0.1" && b.HostPort != "" {
				return "http://127.0.0.1:" + b.HostPort, nil
			}
		}
	}
	return "", fmt.Errorf("docker: port %d has no binding on 127.0.0.1", port)
}

// Alive answers ErrGone unless the container runs and the workspace exists.
func (s *session) Alive(ctx context.Context) error {
	info, err := s.c.api.ContainerInspect(ctx, s.cid)
	if err != nil {
		return s.containerErr("inspect container", err)
	}
	if info.State == nil || !info.State.Running {
		status := "unknown"
		if info.State != nil {
			status = info.State.Status
		}
		return fmt.Errorf("docker: session %q: container %.12s is %s: %w", s.state.ID, s.cid, status, sandbox.ErrGone)
	}
	return s.ws.Alive()
}

// Stop removes the container (killing what runs in it) and the
// workspace directory. It is idempotent, and it works on a cancelled ctx,
// since a workflow cleans up after cancellation.
func (s *session) Stop(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var errs []error
	err := s.c.api.ContainerRemove(ctx, s.cid, container.RemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrdefs.IsNotFound(err) && !isRemovalInProgress(err) {
		errs = append(errs, s.c.engineErr("remove container", err))
	}
	if err := s.ws.Destroy(); err != nil {
		errs = append(errs, fmt.Errorf("docker: remove workspace: %w", err))
	}
	return errors.Join(errs...)
}

func isRemovalInProgress(err error) bool {
	return cerrdefs.IsConflict(err) && strings.Contains(err.Error(), "already in progress")
}

// containerErr maps a missing or stopped container to ErrGone.
func (s *session) containerErr(what string, err error) error {
	if cerrdefs.IsNotFound(err) {
		return fmt.Errorf("docker: session %q: container %.12s is gone: %w", s.state.ID, s.cid, sandbox.ErrGone)
	}
	if cerrdefs.IsConflict(err) && strings.Contains(err.Error(), "not running") {
		return fmt.Errorf("docker: session %q: container %.12s is not running: %w", s.state.ID, s.cid, sandbox.ErrGone)
	}
	return s.c.engineErr(what, err)
}
