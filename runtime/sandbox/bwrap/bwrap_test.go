package bwrap_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/bwrap"
	"github.com/troupe-dev/troupe/runtime/sandbox/sandboxtest"
)

// newClient returns a client over a temporary root, or fails the test
// where bubblewrap is not installed (scripts/setup.sh installs it).
func newClient(t *testing.T, cfg bwrap.Config) *bwrap.Client {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatal("bwrap is not installed; run scripts/setup.sh (apt-get install bubblewrap)")
	}
	if cfg.Root == "" {
		cfg.Root = t.TempDir()
	}
	c, err := bwrap.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	t.Logf("limits:\n%s", sandbox.FormatLimits(c.Enforced(), "  "))
	return c
}

func TestConformance(t *testing.T) {
	src := t.TempDir()
	c := newClient(t, bwrap.Config{Policy: sandbox.Policy{AllowedRoots: []string{src}}})
	sandboxtest.Run(t, c, sandboxtest.Options{SourceRoot: src})
}

var sessions int

// session creates a session with opts and stops it when the test ends.
func session(t *testing.T, c *bwrap.Client, opts sandbox.Options, m sandbox.Manifest) sandbox.Session {
	t.Helper()
	sessions++
	id := fmt.Sprintf("%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), sessions)
	s, err := c.Create(context.Background(), sandbox.Spec{ID: id, Options: opts, Manifest: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return s
}

func exec1(t *testing.T, s sandbox.Session, cmd string, timeout time.Duration) sandbox.ExecResult {
	t.Helper()
	res, err := s.Exec(context.Background(), sandbox.ExecRequest{Cmd: cmd, Timeout: timeout})
	if err != nil {
		t.Fatalf("Exec(%q): %v", cmd, err)
	}
	t.Logf("%q: exit %d in %v, timed out %v:\n%s", cmd, res.ExitCode, res.Duration.Round(time.Millisecond), res.TimedOut, res.Output)
	return res
}

func needPython(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
}

func TestNoNetworkUnlessGranted(t *testing.T) {
	needPython(t)
	c := newClient(t, bwrap.Config{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 10)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			conn.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	connect := fmt.Sprintf(`python3 -c 'import socket; print(sorted(n for _, n in socket.if_nameindex())); socket.create_connection(("127.0.0.1", %d), timeout=2); print("connected")'`, port)

	off := session(t, c, sandbox.Options{}, sandbox.Manifest{})
	res := exec1(t, off, connect, 20*time.Second)
	if res.ExitCode == 0 || strings.Contains(res.Output, "connected") || !strings.Contains(res.Output, "['lo']") {
		t.Errorf("without Options.Network the sandbox reached the host's 127.0.0.1 or has interfaces beyond lo")
	}
	if len(accepted) != 0 {
		t.Errorf("the host listener accepted a connection from a sandbox without network")
	}
	if _, err := off.PortURL(context.Background(), 8080); !errors.Is(err, sandbox.ErrUnsupported) {
		t.Errorf("PortURL without network: %v, want ErrUnsupported", err)
	}

	// The control: with Network the same command connects.
	on := session(t, c, sandbox.Options{Network: true, Ports: []int{port}}, sandbox.Manifest{})
	if res := exec1(t, on, connect, 20*time.Second); res.ExitCode != 0 || !strings.Contains(res.Output, "connected") {
		t.Errorf("with Options.Network the sandbox could not reach the host listener")
	}
	if u, err := on.PortURL(context.Background(), port); err != nil || u != "http://127.0.0.1:"+strconv.Itoa(port) {
		t.Errorf("PortURL = %q, %v", u, err)
	}
}

func TestHostIsReadOnlyAndHidden(t *testing.T) {
	c := newClient(t, bwrap.Config{})
	hostDir := t.TempDir()
	hostTmp := fmt.Sprintf("/tmp/troupe-bwrap-pwned-%d", time.Now().UnixNano())
	// A host directory outside /tmp (whose sandbox copy is a tmpfs).
	varDir, err := os.MkdirTemp("/var/tmp", "troupe-bwrap-test-")
	if err != nil {
		varDir = t.TempDir()
	} else {
		t.Cleanup(func() { os.RemoveAll(varDir) })
	}
	s := session(t, c, sandbox.Options{}, sandbox.Manifest{})
	other := session(t, c, sandbox.Options{}, sandbox.Manifest{Entries: []sandbox.Entry{{Kind: sandbox.EntryFile, Path: "theirs", Content: "other session"}}})
	for _, cmd := range []string{
		"echo x > " + varDir + "/pwned",
		"cat " + other.State().Workspace + "/theirs",
		"echo x > " + other.State().Workspace + "/pwned",
		"cat " + s.State().Workspace + "/../" + filepath.Base(other.State().Workspace) + "/theirs",
		"echo x > /usr/pwned",
		"echo x > /bin/pwned",
		"echo x > /pwned",
		"mkdir /pwned",
		"echo x > /etc/pwned",
		"echo x > /etc/passwd",
		"mkdir -p " + hostDir + " && echo x > " + hostDir + "/pwned && ls " + hostDir + " && false",
		"cat /etc/shadow",
		"ls /root /home /var /run /sys /proc/1/root/root",
		"mount -t tmpfs none /usr",
		"unshare -U true",
	} {
		if res := exec1(t, s, cmd, 10*time.Second); res.ExitCode == 0 {
			t.Errorf("%q succeeded in the sandbox", cmd)
		}
	}
	// /tmp is the sandbox's own.
	if res := exec1(t, s, "echo x > "+hostTmp+" && cat "+hostTmp, 10*time.Second); res.ExitCode != 0 {
		t.Errorf("writing the sandbox's /tmp failed")
	}
	for _, p := range []string{"/usr/pwned", "/pwned", hostTmp, filepath.Join(hostDir, "pwned"), filepath.Join(varDir, "pwned"), filepath.Join(other.State().Workspace, "pwned")} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists on the host: %v", p, err)
		}
	}
	// What the sandbox sees of /etc and of the root.
	res := exec1(t, s, "ls -A /etc; echo --; ls -A /; echo --; pwd; grep CapEff /proc/self/status; echo $$; ls /proc | grep -c '^[0-9]'", 10*time.Second)
	parts := strings.Split(res.Output, "--\n")
	if len(parts) != 3 {
		t.Fatalf("unexpected output %q", res.Output)
	}
	allowedEtc := []string{"alternatives", "group", "hostname", "hosts", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "nsswitch.conf", "passwd"}
	for _, f := range strings.Fields(parts[0]) {
		if !slices.Contains(allowedEtc, f) {
			t.Errorf("the sandbox sees /etc/%s", f)
		}
	}
	allowedRoot := []string{"bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "sbin", "tmp", "usr", "workspace"}
	for _, f := range strings.Fields(parts[1]) {
		if !slices.Contains(allowedRoot, f) {
			t.Errorf("the sandbox sees /%s", f)
		}
	}
	lines := strings.Split(strings.TrimSpace(parts[2]), "\n")
	if len(lines) != 4 || lines[0] != "/workspace" || !strings.HasSuffix(lines[1], "0000000000000000") {
		t.Errorf("pwd, capabilities: %q", lines)
	}
	if pid, _ := strconv.Atoi(lines[2]); pid <= 0 || pid > 3 {
		t.Errorf("the shell is pid %q: want its own PID namespace", lines[2])
	}
	if n, _ := strconv.Atoi(lines[3]); n <= 0 || n > 5 {
		t.Errorf("the sandbox sees %q processes: want only its own", lines[3])
	}
	// Files a command writes belong to the worker on the host.
	exec1(t, s, "echo mine > owned", 10*time.Second)
	fi, err := os.Stat(filepath.Join(s.State().Workspace, "owned"))
	if err != nil {
		t.Fatal(err)
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; int(uid) != os.Getuid() {
		t.Errorf("a file written in the sandbox has uid %d on the host, want %d", uid, os.Getuid())
	}
}

func TestHostEnvironmentInvisible(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-host-secret-must-not-leak")
	c := newClient(t, bwrap.Config{})
	s := session(t, c, sandbox.Options{}, sandbox.Manifest{Env: map[string]string{"SECRET_FOR_SANDBOX": "given"}})
	res := exec1(t, s, "env; cat /proc/*/environ | tr '\\0' '\\n'; echo ${OPENAI_API_KEY:-unset}", 10*time.Second)
	if strings.Contains(res.Output, "sk-host-secret") || !strings.Contains(res.Output, "unset") {
		t.Errorf("OPENAI_API_KEY is visible in the sandbox")
	}
	if !strings.Contains(res.Output, "SECRET_FOR_SANDBOX=given") {
		t.Errorf("the manifest's variable is missing")
	}
	// The environment is not on bwrap's command line either (other host
	// users could read it there).
	done := make(chan struct{})
	go func() {
		exec1(t, s, "sleep 1", 10*time.Second)
		close(done)
	}()
	time.Sleep(300 * time.Millisecond)
	found := false
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, _ := os.ReadFile(p)
		if bytes.Contains(b, []byte("bwrap")) && bytes.Contains(b, []byte("sleep 1")) {
			found = true
			if bytes.Contains(b, []byte("given")) {
				t.Errorf("a manifest value is on bwrap's command line: %q", b)
			}
		}
	}
	if !found {
		t.Errorf("did not find the running bwrap")
	}
	<-done
}

func TestForkBombBounded(t *testing.T) {
	c := newClient(t, bwrap.Config{})
	if os.Geteuid() == 0 {
		requireInForce(t, c, sandbox.LimitPIDs) // RLIMIT_NPROC does not bind root.
	}
	const pids = 32
	s := session(t, c, sandbox.Options{Limits: sandbox.Limits{PIDs: pids}}, sandbox.Manifest{})
	res := exec1(t, s, `i=0; while [ $i -lt 200 ]; do sleep 30 & i=$((i+1)); echo $i; done`, 20*time.Second)
	lines := strings.Fields(res.Output)
	n := 0
	for _, l := range lines {
		if v, err := strconv.Atoi(l); err == nil {
			n = v
		}
	}
	if res.ExitCode == 0 || n >= pids || n < pids/2 || !strings.Contains(strings.ToLower(res.Output), "fork") {
		t.Errorf("started %d background processes under a limit of %d (exit %d)", n, pids, res.ExitCode)
	}
	if res.Duration > 10*time.Second || res.TimedOut {
		t.Errorf("took %v", res.Duration)
	}
	start := time.Now()
	res = exec1(t, s, `b() { b | b & }; b; sleep 2; echo survived`, 5*time.Second)
	if time.Since(start) > 15*time.Second {
		t.Errorf("a fork bomb held the session for %v", time.Since(start))
	}
	// The session (and its pids budget) is intact afterwards.
	if res := exec1(t, s, "echo ok", 10*time.Second); res.ExitCode != 0 || res.Output != "ok\n" {
		t.Errorf("after a fork bomb: exit %d, %q", res.ExitCode, res.Output)
	}
}

func TestCPUTimeLimit(t *testing.T) {
	c := newClient(t, bwrap.Config{})
	s := session(t, c, sandbox.Options{Limits: sandbox.Limits{CPUSeconds: 1}}, sandbox.Manifest{})
	res := exec1(t, s, "while :; do :; done", 30*time.Second)
	if res.TimedOut || res.ExitCode != 128+int(syscall.SIGXCPU) && res.ExitCode != 128+int(syscall.SIGKILL) {
		t.Errorf("a busy loop under a 1 s CPU limit: exit %d, timed out %v; want killed by SIGXCPU", res.ExitCode, res.TimedOut)
	}
	if res.Duration > 5*time.Second {
		t.Errorf("a busy loop under a 1 s CPU limit ran %v", res.Duration)
	}
}

// TestMemoryLimit: one process past MemoryBytes fails, killed by the
// session's memory cgroup or, without one (NoCgroup), refused by
// RLIMIT_AS.
func TestMemoryLimit(t *testing.T) {
	needPython(t)
	for _, tc := range []struct {
		name string
		cfg  bwrap.Config
		want string // What the 512 MiB process gets.
	}{
		{"cgroup", bwrap.Config{}, "killed"},
		{"rlimit", bwrap.Config{NoCgroup: true}, "MemoryError"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, tc.cfg)
			if tc.want == "killed" {
				requireInForce(t, c, sandbox.LimitMemory)
			}
			s := session(t, c, sandbox.Options{Limits: sandbox.Limits{MemoryBytes: 256 << 20}}, sandbox.Manifest{})
			if res := exec1(t, s, `python3 -c 'b = bytearray(64 << 20); print("ok")'`, 20*time.Second); res.ExitCode != 0 {
				t.Errorf("64 MiB under a 256 MiB limit failed")
			}
			res := exec1(t, s, `python3 -c 'b = bytearray(512 << 20); print("ok")'`, 20*time.Second)
			got := "MemoryError"
			if res.ExitCode == 128+int(syscall.SIGKILL) {
				got = "killed"
			}
			if res.ExitCode == 0 || got != tc.want || tc.want == "MemoryError" && !strings.Contains(res.Output, "MemoryError") {
				t.Errorf("512 MiB under a 256 MiB limit: exit %d, want %s", res.ExitCode, tc.want)
			}
		})
	}
}

// inForce reports whether c enforces limit wholly on this host.
func inForce(c *bwrap.Client, limit string) bool {
	for _, r := range c.Enforced() {
		if r.Limit == limit {
			return r.InForce()
		}
	}
	return false
}

// requireInForce stops a test of a limit that is not in force on this
// host (sandboxtest.NotInForce: a failure unless the host is declared to
// lack the means).
func requireInForce(t *testing.T, c *bwrap.Client, limit string) {
	t.Helper()
	for _, r := range c.Enforced() {
		if r.Limit == limit && !r.InForce() {
			sandboxtest.NotInForce(t, r)
		}
	}
}

func TestTimeoutKillsEverything(t *testing.T) {
	c := newClient(t, bwrap.Config{})
	s := session(t, c, sandbox.Options{}, sandbox.Manifest{})
	marker := fmt.Sprintf("%d.5", 1000+time.Now().UnixNano()%1000)
	res := exec1(t, s, fmt.Sprintf("sleep %s & (sleep %s &) ; setsid sleep %s & sleep %s", marker, marker, marker, marker), 500*time.Millisecond)
	if !res.TimedOut {
		t.Errorf("not timed out")
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		left := sleepers(marker)
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sandboxed processes outlived the timeout", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sleepers counts host processes running `sleep arg`.
func sleepers(arg string) int {
	n := 0
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, _ := os.ReadFile(p); string(b) == "sleep\x00"+arg+"\x00" {
			n++
		}
	}
	return n
}

func TestNewFailsWithoutBwrap(t *testing.T) {
	if _, err := bwrap.New(bwrap.Config{Bwrap: "/nonexistent/bwrap", Root: t.TempDir()}); err == nil {
		t.Errorf("New with a missing bwrap succeeded")
	}
}

func TestLimits(t *testing.T) {
	c := newClient(t, bwrap.Config{})
	sandboxtest.RunLimits(t, c, sandboxtest.Options{})
}

// TestDegraded: with session cgroups and bounded workspaces off (as on a
// host without the controllers, or without root for loop mounts), the
// client says which limits are not in force, and the weaker mechanisms
// stand in: RLIMIT_AS per process, RLIMIT_FSIZE per file.
func TestDegraded(t *testing.T) {
	c := newClient(t, bwrap.Config{NoCgroup: true, NoDisk: true})
	for _, limit := range []string{sandbox.LimitMemory, sandbox.LimitDisk} {
		if inForce(c, limit) {
			t.Errorf("%s reported in force without a cgroup or a file system of its own: %v", limit, c.Enforced())
		}
	}
	if !inForce(c, sandbox.LimitTmp) || !inForce(c, sandbox.LimitCPU) {
		t.Errorf("tmp and cpu do not need a cgroup: %v", c.Enforced())
	}
	const limit = 16 << 20
	s := session(t, c, sandbox.Options{Limits: sandbox.Limits{DiskBytes: limit}}, sandbox.Manifest{})
	res := exec1(t, s, fmt.Sprintf("head -c %d /dev/zero > big; echo rc=$?; wc -c < big", 2*limit), 20*time.Second)
	if strings.Contains(res.Output, "rc=0") || !strings.Contains(res.Output, strconv.Itoa(limit)) {
		t.Errorf("a file of %d bytes under RLIMIT_FSIZE %d: %q", 2*limit, limit, res.Output)
	}
}

// TestWorkspacePersists: a bounded workspace outlives its worker (a new
// client resumes it, its file system still mounted) and its host (the
// mount gone, Resume mounts the image again), and Stop removes all of it.
func TestWorkspacePersists(t *testing.T) {
	root := t.TempDir()
	c := newClient(t, bwrap.Config{Root: root})
	requireInForce(t, c, sandbox.LimitDisk)
	s := session(t, c, sandbox.Options{Limits: sandbox.Limits{DiskBytes: 32 << 20}}, sandbox.Manifest{})
	exec1(t, s, "echo kept > note", 10*time.Second)
	dir := s.State().Workspace

	restarted := newClient(t, bwrap.Config{Root: root}) // The worker restarted.
	r, err := restarted.Resume(context.Background(), s.State())
	if err != nil {
		t.Fatal(err)
	}
	if res := exec1(t, r, "cat note", 10*time.Second); res.Output != "kept\n" {
		t.Errorf("after a worker restart: %q", res.Output)
	}

	// The mount gone while the file system is still in use elsewhere (a
	// bind mount here; a mount namespace that outlived the worker, say):
	// mounting its image again would corrupt it, so Resume answers
	// ErrGone.
	img := filepath.Join(root, ".disks", filepath.Base(dir)+".img")
	other := t.TempDir()
	if err := syscall.Mount(dir, other, "", syscall.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Unmount(dir, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := restarted.Resume(context.Background(), s.State()); !errors.Is(err, sandbox.ErrGone) {
		t.Errorf("Resume while the workspace's file system is mounted elsewhere: %v, want ErrGone", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("the workspace directory holds %d entries of its own", len(entries))
	}

	// The host restarted: the file system is gone, its image stays.
	if err := syscall.Unmount(other, 0); err != nil {
		t.Fatal(err)
	}
	// Its loop device frees itself once the file system is released.
	for deadline := time.Now().Add(time.Minute); loopBound(img); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s is still bound to a loop device", img)
		}
	}
	r, err = restarted.Resume(context.Background(), s.State())
	if err != nil {
		t.Fatal(err)
	}
	if res := exec1(t, r, "cat note; head -c 64000000 /dev/zero > big", 10*time.Second); res.ExitCode == 0 || !strings.HasPrefix(res.Output, "kept\n") {
		t.Errorf("after a host restart: exit %d, %q; want the note, and the limit in force", res.ExitCode, res.Output)
	}
	if err := r.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	restarted.Close()
	images, _ := filepath.Glob(filepath.Join(root, ".disks", "*.img*"))
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) || len(images) != 0 {
		t.Errorf("after Stop: workspace %v, images %v; want both gone", err, images)
	}
}

// loopBound reports whether a loop device is bound to the file img.
func loopBound(img string) bool {
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && strings.TrimSuffix(strings.TrimSpace(string(b)), " (deleted)") == img {
			return true
		}
	}
	return false
}

// TestLowWorkerRlimits: a worker whose own hard limits are below the
// defaults (RLIMIT_AS under 8 GiB, as a container or a systemd unit may
// set) still runs commands, with the limits clamped to its own, and says
// so. The worker is this test binary run again, its limits lowered
// before the client is made.
func TestLowWorkerRlimits(t *testing.T) {
	const env = "TROUPE_BWRAP_TEST_LOW_RLIMITS"
	lowered := map[int]uint64{
		unix.RLIMIT_AS:    3 << 30,
		unix.RLIMIT_CPU:   300,
		unix.RLIMIT_NPROC: 4096,
	}
	if os.Getenv(env) == "" {
		if _, err := exec.LookPath("bwrap"); err != nil {
			t.Fatal("bwrap is not installed; run scripts/setup.sh (apt-get install bubblewrap)")
		}
		args := []string{os.Args[0], "-test.run=^TestLowWorkerRlimits$", "-test.v", "-test.count=1"}
		// Without CAP_SYS_RESOURCE (a container's root lacks it), so that
		// limits above the worker's own cannot be set on the sandbox.
		if setpriv, err := exec.LookPath("setpriv"); err == nil && os.Geteuid() == 0 {
			args = append([]string{setpriv, "--bounding-set", "-sys_resource"}, args...)
		}
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(os.Environ(), env+"=1")
		out, err := cmd.CombinedOutput()
		t.Logf("the worker under low rlimits:\n%s", out)
		if err != nil {
			t.Fatalf("the worker under low rlimits: %v", err)
		}
		return
	}
	for r, v := range lowered {
		var l unix.Rlimit
		unix.Getrlimit(r, &l)
		if l.Max > v {
			l.Max = v
		}
		l.Cur = min(l.Cur, l.Max)
		if err := unix.Setrlimit(r, &l); err != nil {
			t.Fatal(err)
		}
	}
	c := newClient(t, bwrap.Config{})
	var mem sandbox.LimitReport
	for _, r := range c.Enforced() {
		if r.Limit == sandbox.LimitMemory {
			mem = r
		}
	}
	if !strings.Contains(mem.Mechanism, "clamped") {
		t.Errorf("the memory report does not say RLIMIT_AS is clamped: %s", mem)
	}
	s := session(t, c, sandbox.Options{}, sandbox.Manifest{})
	res := exec1(t, s, "echo ok; ulimit -v; ulimit -t", 10*time.Second)
	want := fmt.Sprintf("ok\n%d\n300\n", (3<<30)/1024)
	if res.ExitCode != 0 || res.Output != want {
		t.Errorf("under a worker's RLIMIT_AS of 3 GiB: exit %d, %q; want %q", res.ExitCode, res.Output, want)
	}
}

// TestCgroupParentPerRoot: workers with different sandbox roots (two
// TROUPE_HOMEs in one cgroup) put their sessions' cgroups under parents
// of their own, so one never kills or removes the other's, even for a
// session of the same id.
func TestCgroupParentPerRoot(t *testing.T) {
	mech := func(c *bwrap.Client) string {
		requireInForce(t, c, sandbox.LimitPIDs)
		for _, r := range c.Enforced() {
			if r.Limit == sandbox.LimitPIDs {
				return r.Mechanism
			}
		}
		return ""
	}
	root := t.TempDir()
	a, again, b := mech(newClient(t, bwrap.Config{Root: root})), mech(newClient(t, bwrap.Config{Root: root})), mech(newClient(t, bwrap.Config{}))
	if !strings.Contains(a, "/troupe-bwrap-") {
		t.Errorf("pids mechanism %q names no troupe-bwrap-<root> parent", a)
	}
	if a != again {
		t.Errorf("one root, two parents: %q and %q", a, again)
	}
	if a == b {
		t.Errorf("two roots share the parent: %q", a)
	}
}

// TestCloseRemovesCgroupParent: a client that closes removes its parent
// cgroup when no session is left in it, so clients of short-lived roots
// leave no cgroup behind; a client of the same root that goes on makes
// it again on its next command.
func TestCloseRemovesCgroupParent(t *testing.T) {
	root := t.TempDir()
	closing, staying := newClient(t, bwrap.Config{Root: root}), newClient(t, bwrap.Config{Root: root})
	requireInForce(t, closing, sandbox.LimitPIDs)
	parent := ""
	for _, r := range closing.Enforced() {
		if r.Limit == sandbox.LimitPIDs {
			parent = r.Mechanism[strings.LastIndex(r.Mechanism, " ")+1:]
		}
	}
	if _, err := os.Stat(parent); err != nil {
		t.Fatalf("parent cgroup %q: %v", parent, err)
	}
	if err := closing.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(parent); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("parent cgroup %s after Close: %v, want it gone", parent, err)
	}
	s := session(t, staying, sandbox.Options{}, sandbox.Manifest{})
	if res := exec1(t, s, "echo ok", 10*time.Second); res.ExitCode != 0 || res.Output != "ok\n" {
		t.Errorf("a command after the parent was removed: %+v", res)
	}
	if _, err := os.Stat(parent); err != nil {
		t.Errorf("parent cgroup not made again: %v", err)
	}
}
