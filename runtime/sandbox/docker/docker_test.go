package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// These tests need a real Docker Engine: `make test` starts one through
// scripts/setup.sh. Without it they fail (never skip) and say so.

var (
	testClient *Client
	dockerErr  error
)

func TestMain(m *testing.M) {
	testClient, dockerErr = setupDocker()
	code := m.Run()
	if testClient != nil {
		testClient.Close()
		os.RemoveAll(testClient.Root())
	}
	os.Exit(code)
}

func setupDocker() (*Client, error) {
	root, err := os.MkdirTemp("", "troupe-docker-test-")
	if err != nil {
		return nil, err
	}
	c, err := New(Config{Image: BusyboxImage, Root: root})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.Ping(ctx); err != nil {
		return nil, err
	}
	if err := c.BuildImage(ctx, BuildOptions{Kind: KindBusybox, Name: BusyboxImage}); err != nil {
		return nil, fmt.Errorf("building %s: %w", BusyboxImage, err)
	}
	reapCrashedRuns(ctx, c)
	return c, nil
}

// reapCrashedRuns removes what an earlier run of these tests left when it
// died before its cleanups (a panic, a kill): containers whose workspace
// is under a test root and that are older than any run lasts.
func reapCrashedRuns(ctx context.Context, c *Client) {
	prefix := filepath.Join(os.TempDir(), "troupe-docker-test-")
	list, err := c.api.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", LabelBackend+"="+Backend))})
	if err != nil {
		return
	}
	for _, ct := range list {
		ws := ct.Labels[LabelWorkspace]
		if strings.HasPrefix(ws, prefix) && time.Since(time.Unix(ct.Created, 0)) > 10*time.Minute {
			c.api.ContainerRemove(ctx, ct.ID, container.RemoveOptions{Force: true})
			os.RemoveAll(filepath.Dir(ws))
		}
	}
}

// dockerClient returns the shared test client, failing the test when the
// engine is not reachable.
func dockerClient(t *testing.T) *Client {
	t.Helper()
	if dockerErr != nil {
		t.Fatalf("the docker backend's tests need a running Docker Engine; run scripts/setup.sh (as root) to install and start dockerd: %v", dockerErr)
	}
	return testClient
}

// newSession creates a session that the test stops at its end.
func newSession(t *testing.T, spec sandbox.Spec) sandbox.Session {
	t.Helper()
	c := dockerClient(t)
	if spec.ID == "" {
		spec.ID = "test-" + strings.NewReplacer("/", "-", "#", "-").Replace(t.Name()) + fmt.Sprintf("-%d", time.Now().UnixNano()%1e6)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := c.Create(ctx, spec)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	return s
}

func run(t *testing.T, s sandbox.Session, cmd string) sandbox.ExecResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.Exec(ctx, sandbox.ExecRequest{Cmd: cmd, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatalf("Exec(%q): %v", cmd, err)
	}
	return res
}

func inspect(t *testing.T, s sandbox.Session) container.InspectResponse {
	t.Helper()
	info, err := dockerClient(t).api.ContainerInspect(context.Background(), s.State().Data["container"])
	if err != nil {
		t.Fatalf("ContainerInspect: %v", err)
	}
	return info
}

func TestExec(t *testing.T) {
	t.Parallel()
	s := newSession(t, sandbox.Spec{Manifest: sandbox.Manifest{
		Entries: []sandbox.Entry{{Kind: sandbox.EntryFile, Path: "sub/a.txt", Content: "hello"}},
	}})
	tests := []struct {
		name   string
		req    sandbox.ExecRequest
		code   int
		output string
	}{
		{"exit code and both streams in order", sandbox.ExecRequest{Cmd: "for i in 1 2 3; do echo o$i; echo e$i >&2; done; exit 3"}, 3, "o1\ne1\no2\ne2\no3\ne3\n"},
		{"workspace is the cwd", sandbox.ExecRequest{Cmd: "pwd; cat sub/a.txt"}, 0, "/workspace\nhello"},
		{"workdir", sandbox.ExecRequest{Cmd: "pwd", Workdir: "sub"}, 0, "/workspace/sub\n"},
		{"stdin is empty", sandbox.ExecRequest{Cmd: "cat; echo done"}, 0, "done\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := s.Exec(context.Background(), tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != tt.code || res.Output != tt.output || res.TimedOut || res.Truncated {
				t.Errorf("got %+v, want exit %d output %q", res, tt.code, tt.output)
			}
		})
	}
	t.Run("workdir escape", func(t *testing.T) {
		_, err := s.Exec(context.Background(), sandbox.ExecRequest{Cmd: "pwd", Workdir: "../etc"})
		if !errors.Is(err, sandbox.ErrPathEscape) {
			t.Errorf("err = %v, want ErrPathEscape", err)
		}
	})
	t.Run("output cap keeps head and tail", func(t *testing.T) {
		res, err := s.Exec(context.Background(), sandbox.ExecRequest{
			Cmd:            "echo HEAD; head -c 300000 /dev/zero | tr '\\0' x; echo; echo TAIL",
			MaxOutputBytes: 1000,
		})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Truncated || res.OriginalBytes != 300000+len("HEAD\n\nTAIL\n") ||
			!strings.HasPrefix(res.Output, "HEAD") || !strings.HasSuffix(res.Output, "TAIL\n") || len(res.Output) > 1200 {
			t.Errorf("got truncated=%v original=%d len=%d head=%q tail=%q", res.Truncated, res.OriginalBytes, len(res.Output),
				res.Output[:min(10, len(res.Output))], res.Output[max(0, len(res.Output)-10):])
		}
	})
}

func TestExecTimeoutKillsTheWholeCommand(t *testing.T) {
	t.Parallel()
	s := newSession(t, sandbox.Spec{})
	start := time.Now()
	res, err := s.Exec(context.Background(), sandbox.ExecRequest{
		Cmd:     "echo started; sleep 60 & (sleep 70; echo child) & sleep 80; echo never",
		Timeout: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.ExitCode != -1 || !strings.Contains(res.Output, "started") || strings.Contains(res.Output, "never") {
		t.Errorf("got %+v", res)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("timeout took %s", d)
	}
	// Nothing of the command is left: only docker-init and its sleep.
	ps := run(t, s, "ps -o comm,args | grep -c '[s]leep [678]0' || true")
	if strings.TrimSpace(ps.Output) != "0" {
		t.Errorf("processes survived the timeout: %q", run(t, s, "ps -o pid,args").Output)
	}

	t.Run("cancelled context", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err := s.Exec(ctx, sandbox.ExecRequest{Cmd: "sleep 90"})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v, want context.DeadlineExceeded", err)
		}
		ps := run(t, s, "ps -o args | grep -c '[s]leep 90' || true")
		if strings.TrimSpace(ps.Output) != "0" {
			t.Errorf("the cancelled command survived")
		}
	})
}

func TestCPUSecondsLimit(t *testing.T) {
	t.Parallel()
	s := newSession(t, sandbox.Spec{Options: sandbox.Options{Limits: sandbox.Limits{CPUSeconds: 1}}})
	start := time.Now()
	res, err := s.Exec(context.Background(), sandbox.ExecRequest{Cmd: "while :; do :; done", Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.TimedOut || res.ExitCode == 0 || time.Since(start) > 10*time.Second {
		t.Errorf("a busy loop with a 1 s CPU limit: %+v after %s", res, time.Since(start))
	}
}

func TestIsolation(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-host-secret-do-not-leak")
	s := newSession(t, sandbox.Spec{
		Manifest: sandbox.Manifest{Env: map[string]string{"GREETING": "hi"}},
		Options:  sandbox.Options{Limits: sandbox.Limits{PIDs: 64, MemoryBytes: 256 << 20}},
	})

	t.Run("environment is the manifest's", func(t *testing.T) {
		out := run(t, s, "env; echo ---; tr '\\0' '\\n' </proc/1/environ").Output
		if strings.Contains(out, "OPENAI_API_KEY") || strings.Contains(out, "sk-host-secret") {
			t.Errorf("the host's OPENAI_API_KEY is visible inside:\n%s", out)
		}
		cmdEnv, _, _ := strings.Cut(out, "---")
		for _, want := range []string{"GREETING=hi", "HOME=/workspace", "PATH="} {
			if !strings.Contains(cmdEnv, want) {
				t.Errorf("env lacks %s:\n%s", want, cmdEnv)
			}
		}
		if strings.Contains(cmdEnv, "HOSTNAME=") {
			t.Errorf("env has the engine's HOSTNAME:\n%s", cmdEnv)
		}
	})

	t.Run("host paths are not writable", func(t *testing.T) {
		hostDir := t.TempDir()
		probe := filepath.Join(hostDir, "escaped")
		res := run(t, s, fmt.Sprintf("echo x > %s; echo x > /etc/escaped; echo x > /escaped; mkdir -p /usr/escaped; echo x > /tmp/inside && echo tmp-ok", probe))
		for _, p := range []string{probe, "/etc/escaped", "/escaped", "/usr/escaped"} {
			if _, err := os.Stat(p); err == nil {
				os.RemoveAll(p)
				t.Errorf("a command wrote the host path %s", p)
			}
		}
		if strings.Count(res.Output, "Read-only file system")+strings.Count(res.Output, "nonexistent directory") < 3 {
			t.Errorf("writes outside /workspace did not fail clearly:\n%s", res.Output)
		}
		if !strings.Contains(res.Output, "tmp-ok") {
			t.Errorf("/tmp should be a writable tmpfs:\n%s", res.Output)
		}
	})

	t.Run("container settings", func(t *testing.T) {
		info := inspect(t, s)
		hc := info.HostConfig
		if hc.NetworkMode != "none" || !hc.ReadonlyRootfs || hc.Init == nil || !*hc.Init ||
			!slices.Equal([]string(hc.CapDrop), []string{"ALL"}) || !slices.Contains(hc.SecurityOpt, "no-new-privileges") ||
			hc.PidsLimit == nil || *hc.PidsLimit != 64 || hc.Memory != 256<<20 || hc.NanoCPUs == 0 {
			t.Errorf("host config: network=%s ro=%v init=%v capdrop=%v secopt=%v pids=%v mem=%d cpus=%d",
				hc.NetworkMode, hc.ReadonlyRootfs, hc.Init, hc.CapDrop, hc.SecurityOpt, hc.PidsLimit, hc.Memory, hc.NanoCPUs)
		}
		if slices.ContainsFunc(info.Config.Env, func(e string) bool { return strings.HasPrefix(e, "OPENAI_API_KEY=") }) {
			t.Errorf("container env: %v", info.Config.Env)
		}
	})

	t.Run("pids limit holds", func(t *testing.T) {
		res := run(t, s, "for i in $(seq 1 100); do sleep 1 & done; wait; echo all-started")
		if strings.Contains(res.Output, "all-started") || !strings.Contains(res.Output, "fork") {
			t.Errorf("100 processes under a limit of 64: %+v", res)
		}
		time.Sleep(1500 * time.Millisecond) // the sleeps end; the sandbox works again
		if out := run(t, s, "echo alive").Output; out != "alive\n" {
			t.Errorf("after the limit: %q", out)
		}
	})
}

func TestNetwork(t *testing.T) {
	t.Parallel()
	// A listener on the host, at the docker bridge's gateway: the one host
	// address a container with network can reach.
	c := dockerClient(t)
	gw := bridgeGateway(t, c)
	ln, err := net.Listen("tcp", net.JoinHostPort(gw, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "reached-host") })}
	go srv.Serve(ln)
	defer srv.Close()
	// busybox-static's wget crashes in an empty rootfs; nc does not.
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	fetch := fmt.Sprintf("printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 %s %s 2>&1; echo; ls /sys/class/net", host, port)

	t.Run("none by default", func(t *testing.T) {
		s := newSession(t, sandbox.Spec{})
		out := run(t, s, fetch).Output
		if strings.Contains(out, "reached-host") {
			t.Errorf("a sandbox without network reached the host listener:\n%s", out)
		}
		if ifs := strings.Fields(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]); !slices.Equal(ifs, []string{"lo"}) {
			t.Errorf("interfaces = %v, want only lo\n%s", ifs, out)
		}
	})
	t.Run("granted", func(t *testing.T) {
		s := newSession(t, sandbox.Spec{Options: sandbox.Options{Network: true}})
		if out := run(t, s, fetch).Output; !strings.Contains(out, "reached-host") {
			t.Errorf("a sandbox with network did not reach the host listener:\n%s", out)
		}
	})
}

func TestPorts(t *testing.T) {
	t.Parallel()
	s := newSession(t, sandbox.Spec{
		Manifest: sandbox.Manifest{Entries: []sandbox.Entry{{Kind: sandbox.EntryFile, Path: "www/index.html", Content: "served-from-sandbox"}}},
		Options:  sandbox.Options{Network: true, Ports: []int{8080}},
	})
	// The server runs within a command (in the foreground), since a
	// command's processes end with it.
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		_, err := s.Exec(ctx, sandbox.ExecRequest{Cmd: "exec httpd -f -p 8080 -h /workspace/www", Timeout: 30 * time.Second})
		served <- err
	}()
	defer func() {
		cancel()
		<-served
	}()
	u, err := s.PortURL(context.Background(), 8080)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(u, "http://127.0.0.1:") {
		t.Fatalf("PortURL = %q, want http://127.0.0.1:PORT", u)
	}
	var body string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get(u + "/index.html")
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		break
	}
	if body != "served-from-sandbox" {
		t.Errorf("GET %s = %q", u, body)
	}
	for port, bindings := range inspect(t, s).NetworkSettings.Ports {
		for _, b := range bindings {
			if b.HostIP != "127.0.0.1" {
				t.Errorf("port %s published on %s:%s, want 127.0.0.1 only", port, b.HostIP, b.HostPort)
			}
		}
	}
	if _, err := s.PortURL(context.Background(), 9999); err == nil {
		t.Error("PortURL of a port not exposed: no error")
	}

	t.Run("ports need network", func(t *testing.T) {
		_, err := dockerClient(t).Create(context.Background(), sandbox.Spec{ID: "test-ports-no-net", Options: sandbox.Options{Ports: []int{8080}}})
		if err == nil {
			t.Error("Create with ports and no network: no error")
		}
	})
}

func TestLabelsAndOrphans(t *testing.T) {
	t.Parallel()
	c := dockerClient(t)
	nonce := fmt.Sprint(time.Now().UnixNano())
	// The containers name a cluster of their own, as a worker's do: the
	// reapers of other workers on this engine (the e2e tests', running
	// beside these) leave other clusters' containers alone.
	cluster := "docker-test-" + nonce
	live := newSession(t, sandbox.Spec{Labels: map[string]string{"troupe.workflow": "wf-live", "troupe.test": nonce, "troupe.cluster": cluster}})
	dead := newSession(t, sandbox.Spec{Labels: map[string]string{"troupe.workflow": "wf-dead", "troupe.test": nonce, "troupe.cluster": cluster}})

	labels := inspect(t, live).Config.Labels
	for k, v := range map[string]string{LabelSession: live.State().ID, LabelBackend: "docker", "troupe.workflow": "wf-live", LabelWorkspace: live.State().Workspace} {
		if labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, labels[k], v)
		}
	}

	// Only this test's containers are candidates: other tests may run.
	keep := func(l map[string]string) bool { return l["troupe.test"] != nonce || l["troupe.workflow"] == "wf-live" }
	orphans, err := c.Orphans(context.Background(), keep)
	if err != nil {
		t.Fatal(err)
	}
	if len(orphans) != 1 || orphans[0].Session != dead.State().ID {
		t.Fatalf("orphans = %+v, want only %s", orphans, dead.State().ID)
	}
	reaped, err := c.Reap(context.Background(), keep)
	if err != nil || len(reaped) != 1 {
		t.Fatalf("Reap = %v, %v", reaped, err)
	}
	if err := dead.Alive(context.Background()); !errors.Is(err, sandbox.ErrGone) {
		t.Errorf("reaped session Alive = %v, want ErrGone", err)
	}
	if _, err := os.Stat(dead.State().Workspace); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("reaped workspace still there: %v", err)
	}
	if err := live.Alive(context.Background()); err != nil {
		t.Errorf("kept session: %v", err)
	}
}

func TestKilledContainerIsGone(t *testing.T) {
	t.Parallel()
	c := dockerClient(t)
	s := newSession(t, sandbox.Spec{})
	ctx := context.Background()
	state := s.State()
	if err := c.api.ContainerKill(ctx, state.Data["container"], "KILL"); err != nil {
		t.Fatal(err)
	}
	if err := s.Alive(ctx); !errors.Is(err, sandbox.ErrGone) {
		t.Errorf("Alive = %v, want ErrGone", err)
	}
	if _, err := s.Exec(ctx, sandbox.ExecRequest{Cmd: "true"}); !errors.Is(err, sandbox.ErrGone) {
		t.Errorf("Exec = %v, want ErrGone", err)
	}
	if _, err := c.Resume(ctx, state); !errors.Is(err, sandbox.ErrGone) {
		t.Errorf("Resume = %v, want ErrGone", err)
	}
	if err := s.Stop(ctx); err != nil {
		t.Errorf("Stop after kill: %v", err)
	}
	assertNoContainer(t, state.ID)
}

func TestResumeAndStop(t *testing.T) {
	t.Parallel()
	c := dockerClient(t)
	ctx := context.Background()
	s := newSession(t, sandbox.Spec{Manifest: sandbox.Manifest{Env: map[string]string{"K": "v"}}})
	run(t, s, "echo kept > note.txt")

	b, err := json.Marshal(s.State())
	if err != nil {
		t.Fatal(err)
	}
	var state sandbox.State
	if err := json.Unmarshal(b, &state); err != nil {
		t.Fatal(err)
	}
	r, err := c.Resume(ctx, state)
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if out := run(t, r, "cat note.txt; echo $K").Output; out != "kept\nv\n" {
		t.Errorf("resumed session: %q", out)
	}

	other := state
	other.Host = "some-other-host"
	if _, err := c.Resume(ctx, other); !errors.Is(err, sandbox.ErrGone) {
		t.Errorf("Resume of another host's state = %v, want ErrGone", err)
	}
	forged := state
	forged.Workspace = "/etc"
	if _, err := c.Resume(ctx, forged); !errors.Is(err, sandbox.ErrGone) {
		t.Errorf("Resume with a workspace outside Root = %v, want ErrGone", err)
	}

	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Stop(ctx); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if err := s.Stop(ctx); err != nil {
		t.Errorf("Stop through the other handle: %v", err)
	}
	assertNoContainer(t, state.ID)
	if _, err := os.Stat(state.Workspace); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("workspace left after Stop: %v", err)
	}
	if _, err := c.Resume(ctx, state); !errors.Is(err, sandbox.ErrGone) {
		t.Errorf("Resume after Stop = %v, want ErrGone", err)
	}
}

func TestCreateReplacesAStaleSandbox(t *testing.T) {
	t.Parallel()
	c := dockerClient(t)
	ctx := context.Background()
	id := "test-stale-" + fmt.Sprint(time.Now().UnixNano())
	first := newSession(t, sandbox.Spec{ID: id})
	run(t, first, "echo first > mark")
	// A Create of a running session's ID (a retry whose first attempt's
	// worker died) replaces it.
	second := newSession(t, sandbox.Spec{ID: id})
	if err := first.Alive(ctx); !errors.Is(err, sandbox.ErrGone) {
		t.Errorf("the replaced session: Alive = %v, want ErrGone", err)
	}
	if out := run(t, second, "ls; echo ok").Output; out != "ok\n" {
		t.Errorf("second session: %q, want a fresh workspace", out)
	}
	// So does a Create of a killed session's ID.
	c.api.ContainerKill(ctx, second.State().Data["container"], "KILL")
	third := newSession(t, sandbox.Spec{ID: id})
	if out := run(t, third, "echo ok").Output; out != "ok\n" {
		t.Errorf("third session: %q", out)
	}
}

func TestImageBuildIsIdempotent(t *testing.T) {
	t.Parallel()
	c := dockerClient(t)
	var log strings.Builder
	if err := c.BuildImage(context.Background(), BuildOptions{Kind: KindBusybox, Name: BusyboxImage, Log: &log}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "exists") {
		t.Errorf("second build did not skip: %q", log.String())
	}
	if err := c.BuildImage(context.Background(), BuildOptions{Kind: "alpine"}); err == nil {
		t.Error("unknown kind: no error")
	}
	if _, err := c.Create(context.Background(), sandbox.Spec{ID: "test-no-image", Options: sandbox.Options{Image: "troupe-sandbox:does-not-exist"}}); err == nil ||
		!strings.Contains(err.Error(), "troupe sandbox image build") {
		t.Errorf("Create with a missing image: %v", err)
	}
}

// TestTimings logs the figures the design cares about: a session's
// create+start, first exec and stop, and an exec's round trip.
func TestTimings(t *testing.T) {
	c := dockerClient(t)
	ctx := context.Background()
	t0 := time.Now()
	s, err := c.Create(ctx, sandbox.Spec{ID: "test-timings-" + fmt.Sprint(time.Now().UnixNano())})
	if err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	if _, err := s.Exec(ctx, sandbox.ExecRequest{Cmd: "true"}); err != nil {
		t.Fatal(err)
	}
	t2 := time.Now()
	const n = 10
	for range n {
		if _, err := s.Exec(ctx, sandbox.ExecRequest{Cmd: "true"}); err != nil {
			t.Fatal(err)
		}
	}
	t3 := time.Now()
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	t4 := time.Now()
	t.Logf("create+start %s, first exec %s, stop %s, total %s; exec round trip %s (mean of %d)",
		t1.Sub(t0).Round(time.Millisecond), t2.Sub(t1).Round(time.Millisecond), t4.Sub(t3).Round(time.Millisecond),
		(t2.Sub(t0) + t4.Sub(t3)).Round(time.Millisecond), (t3.Sub(t2) / n).Round(time.Millisecond), n)
}

// bridgeGateway returns the host's IPv4 address on the engine's default
// bridge (docker0): a host address that containers with network reach.
func bridgeGateway(t *testing.T, c *Client) string {
	t.Helper()
	br, err := c.api.NetworkInspect(context.Background(), "bridge", network.InspectOptions{})
	if err != nil {
		t.Fatalf("inspect the bridge network: %v", err)
	}
	for _, cfg := range br.IPAM.Config {
		if ip := net.ParseIP(cfg.Gateway); ip != nil && ip.To4() != nil {
			return cfg.Gateway
		}
	}
	name := br.Options["com.docker.network.bridge.name"]
	if name == "" {
		name = "docker0"
	}
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		t.Fatalf("bridge interface %s: %v", name, err)
	}
	addrs, _ := ifc.Addrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
			return ipn.IP.String()
		}
	}
	t.Fatalf("bridge interface %s has no IPv4 address", name)
	return ""
}

func assertNoContainer(t *testing.T, id string) {
	t.Helper()
	list, err := dockerClient(t).api.ContainerList(context.Background(), container.ListOptions{
		All: true, Filters: filters.NewArgs(filters.Arg("label", LabelSession+"="+id)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 0 {
		t.Errorf("containers left for session %s: %d", id, len(list))
	}
}

func TestExecBackgroundProcesses(t *testing.T) {
	t.Parallel()
	s := newSession(t, sandbox.Spec{})
	t.Run("die with the command", func(t *testing.T) {
		run(t, s, "sleep 77 & echo started")
		if out := run(t, s, "ps -o args | grep -c '[s]leep 77' || true").Output; strings.TrimSpace(out) != "0" {
			t.Errorf("a background process outlived its command")
		}
	})
	t.Run("one that leaves the group does not hold Exec", func(t *testing.T) {
		start := time.Now()
		res, err := s.Exec(context.Background(), sandbox.ExecRequest{Cmd: "setsid sleep 30 & echo bye", Timeout: 20 * time.Second})
		if err != nil || res.TimedOut || res.ExitCode != 0 || res.Output != "bye\n" {
			t.Errorf("got %+v, %v", res, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("Exec waited %s for an escaped process", d)
		}
	})
}
