package sandboxtest

// RunLimits: the session limits a confining backend keeps. Not part of Run,
// since the local backend bounds nothing.

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// RunLimits checks that c keeps sandbox.Limits per session: all of a
// session's processes together cannot pass MemoryBytes, /tmp cannot grow
// past TmpBytes, and the workspace cannot grow past DiskBytes, whoever
// writes it. A limit that c reports (sandbox.LimitReporter) as not in
// force on this host is skipped with the report's reason. The commands
// need a POSIX sh with yes, head, tr, touch, rm, cat, ls and wc.
func RunLimits(t *testing.T, c sandbox.Client, opts Options) {
	s := &suite{c: c, opts: opts}
	if r, ok := c.(sandbox.LimitReporter); ok {
		t.Logf("%s limits on this host:\n%s", c.Backend(), sandbox.FormatLimits(r.Enforced(), "  "))
	}
	t.Run("SessionMemory", s.testSessionMemory)
	t.Run("Tmp", s.testTmp)
	t.Run("Disk", s.testDisk)
}

// NotInForce skips a test of a limit that is not wholly in force on this
// host when the host is declared to lack the means
// (TROUPE_TEST_DEGRADED_LIMITS=1), and fails it otherwise: where the
// project's machines have every mechanism, a limit reported not in force
// is a bug, not a reason to skip.
func NotInForce(t *testing.T, rep sandbox.LimitReport) {
	t.Helper()
	if os.Getenv("TROUPE_TEST_DEGRADED_LIMITS") == "1" {
		t.Skipf("not in force on this host (TROUPE_TEST_DEGRADED_LIMITS=1): %s", rep)
	}
	t.Fatalf("not in force on this host: %s (set TROUPE_TEST_DEGRADED_LIMITS=1 on a host that lacks the mechanism)", rep)
}

// needInForce stops the test of a limit that c says is not wholly in
// force here (NotInForce).
func (s *suite) needInForce(t *testing.T, limit string) {
	r, ok := s.c.(sandbox.LimitReporter)
	if !ok {
		return
	}
	for _, rep := range r.Enforced() {
		if rep.Limit == limit && !rep.InForce() {
			NotInForce(t, rep)
		}
	}
}

// limited creates a session with limits over the suite's options.
func (s *suite) limited(t *testing.T, l sandbox.Limits) sandbox.Session {
	t.Helper()
	opts := s.opts.SandboxOptions
	opts.Limits = l.Or(opts.Limits)
	sess, err := s.c.Create(ctxFor(t), sandbox.Spec{ID: newID(t), Options: opts})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() {
		if err := sess.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return sess
}

// exec runs cmd and returns its result, whatever its exit code.
func tryExec(t *testing.T, sess sandbox.Session, cmd string) sandbox.ExecResult {
	t.Helper()
	res, err := sess.Exec(ctxFor(t), sandbox.ExecRequest{Cmd: cmd, Timeout: 90 * time.Second})
	if err != nil {
		t.Fatalf("Exec(%q): %v", cmd, err)
	}
	t.Logf("%q: exit %d:\n%s", cmd, res.ExitCode, res.Output)
	return res
}

// memoryHogs starts n processes that each take about mib MiB and hold
// it until all n hold theirs (or died trying), then reports how many got
// there and each one's exit status: 137 for one the kernel killed.
func memoryHogs(n, mib int) string {
	return fmt.Sprintf(`rm -f ready.* status.* go
n=%d
i=1
while [ $i -le $n ]; do
	( sh -c 'x=$(yes | head -c %d); touch ready.'$i'; until [ -e go ]; do sleep 0.1; done; [ ${#x} -gt 0 ]'; echo $? > status.$i ) &
	i=$((i+1))
done
i=1
while [ $i -le $n ]; do
	until [ -e ready.$i ] || [ -e status.$i ]; do sleep 0.1; done
	i=$((i+1))
done
echo ready: $(ls ready.* 2>/dev/null | wc -l)
touch go
wait
echo status: $(cat status.*)
`, n, mib<<20)
}

// testSessionMemory: six processes of 64 MiB each, under a session limit
// of 256 MiB, where each alone fits (and far below any per-process
// limit): they cannot all hold their memory at once, and the kernel
// kills one or more.
func (s *suite) testSessionMemory(t *testing.T) {
	s.needInForce(t, sandbox.LimitMemory)
	const n, mib = 6, 64
	sess := s.limited(t, sandbox.Limits{MemoryBytes: 256 << 20})

	// The control: one of them alone runs.
	if res := tryExec(t, sess, memoryHogs(1, mib)); res.ExitCode != 0 || !strings.Contains(res.Output, "ready: 1") || !strings.Contains(res.Output, "status: 0") {
		t.Fatalf("one process of %d MiB under a session limit of 256 MiB: exit %d", mib, res.ExitCode)
	}
	res := tryExec(t, sess, memoryHogs(n, mib))
	r := regexp.MustCompile(`(?m)^ready: (\d+)$`).FindStringSubmatch(res.Output)
	st := regexp.MustCompile(`(?m)^status: ([0-9 ]+)$`).FindStringSubmatch(res.Output)
	if res.ExitCode != 0 || r == nil || st == nil {
		t.Fatalf("the hogs' script: exit %d", res.ExitCode)
	}
	ready, _ := strconv.Atoi(r[1])
	killed := 0
	for _, st := range strings.Fields(st[1]) {
		switch st {
		case "0":
		case strconv.Itoa(128 + int(syscall.SIGKILL)):
			killed++
		default:
			t.Errorf("a process ended with status %s, want 0 or killed", st)
		}
	}
	if ready == n || killed == 0 {
		t.Errorf("%d processes of %d MiB under a session limit of 256 MiB: %d held their memory at once, %d were killed; want the kernel to kill one or more", n, mib, ready, killed)
	}
	// The session goes on.
	if out := run(t, sess, "echo ok"); out != "ok\n" {
		t.Errorf("after the kill: %q", out)
	}
}

// testTmp: /tmp stops at TmpBytes.
func (s *suite) testTmp(t *testing.T) {
	s.needInForce(t, sandbox.LimitTmp)
	const limit = 32 << 20
	sess := s.limited(t, sandbox.Limits{TmpBytes: limit})
	// One command: a backend may give each command a /tmp of its own.
	res := tryExec(t, sess, fmt.Sprintf("head -c %d /dev/zero > /tmp/big; echo rc=$?; wc -c < /tmp/big; rm /tmp/big && echo x > /tmp/small && echo room again", 2*limit))
	m := regexp.MustCompile(`rc=(\d+)\s+(\d+)\s`).FindStringSubmatch(res.Output)
	if m == nil {
		t.Fatalf("unexpected output %q", res.Output)
	}
	if size, _ := strconv.ParseInt(m[2], 10, 64); m[1] == "0" || size > limit {
		t.Errorf("writing %d bytes to /tmp under a limit of %d: exit %s, %d bytes written; want the write to fail at the limit", 2*limit, limit, m[1], size)
	}
	if !strings.Contains(res.Output, "room again") {
		t.Errorf("/tmp has no room once the big file is gone")
	}
}

// testDisk: the workspace stops at DiskBytes, for one big file, for many
// small ones, and for the host's own writes.
func (s *suite) testDisk(t *testing.T) {
	s.needInForce(t, sandbox.LimitDisk)
	const limit = 64 << 20
	sess := s.limited(t, sandbox.Limits{DiskBytes: limit})
	if res := tryExec(t, sess, fmt.Sprintf("head -c %d /dev/zero > big", 2*limit)); res.ExitCode == 0 {
		t.Errorf("writing %d bytes into a workspace of %d succeeded", 2*limit, limit)
	}
	used := func() int64 {
		var n int64
		filepath.WalkDir(sess.State().Workspace, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if fi, err := d.Info(); err == nil {
				if st, ok := fi.Sys().(*syscall.Stat_t); ok {
					n += st.Blocks * 512
				}
			}
			return nil
		})
		return n
	}
	if n := used(); n > limit {
		t.Errorf("the workspace holds %d bytes, over its limit of %d", n, limit)
	}
	res := tryExec(t, sess, `rm -f big; i=0; while [ $i -lt 128 ]; do head -c 1048576 /dev/zero > f$i || break; i=$((i+1)); done; echo files: $i`)
	if !strings.Contains(res.Output, "files: ") || strings.Contains(res.Output, "files: 128") {
		t.Errorf("wrote 128 files of 1 MiB into a workspace of 64 MiB")
	}
	if n := used(); n > limit {
		t.Errorf("the workspace holds %d bytes, over its limit of %d", n, limit)
	}
	// The host's writes are bounded too.
	run(t, sess, "rm -f f*")
	if err := sess.WriteFile(ctxFor(t), "host.bin", bytes.Repeat([]byte{1}, 2*limit), 0o644); err == nil {
		t.Errorf("the host wrote %d bytes into a workspace of %d", 2*limit, limit)
	}
	sess.Remove(ctxFor(t), "host.bin")
	if out := run(t, sess, "echo ok > small && cat small"); out != "ok\n" {
		t.Errorf("after emptying the workspace: %q", out)
	}
}
