package docker

// Running one command: an exec in the session's container.
//
// The exec runs a small wrapper (execWrapper) under `env -i` with exactly
// the session's environment (the engine would otherwise add HOSTNAME).
// The wrapper starts `sh -c CMD` as the leader of a new session (setsid),
// with stderr into stdout so the two keep their order, records that
// leader's pid in a file under /tmp, and applies Limits.CPUSeconds with
// `ulimit -t`. When the command ends, the wrapper kills what is left of
// its process group, as the other backends do. On timeout or cancellation
// a second exec (execKiller) kills the whole group with SIGKILL, so
// commands that fork (pipelines, `sh -c`, background jobs) die too. A
// process that deliberately starts yet another session escapes both
// kills, though not the container; if it holds the output open, Exec
// stops reading shortly after the command itself has ended.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// killGrace is how long Exec waits for the output to end after the kill
// before it gives up on processes that escaped it.
const killGrace = 2 * time.Second

// execWrapper runs $4 in the directory $2 with CPU seconds $3 (0: none)
// as the leader of a new session, records the leader's pid in $1, and
// exits with the command's status (128+N for a signal, as a shell reports
// it). The command's stderr goes into its stdout, one pipe, so the two
// keep their order (the engine multiplexes separate streams without it). A background job of a shell without job control is never a process
// group leader, so setsid(1) needs no fork and $! is the new session's id.
// When the command ends, what it left running in its group is killed, as
// on the other backends. The wrapper's own messages ("Killed") are
// silenced; `kill -9 -PGID` is the spelling dash, bash and busybox share.
const execWrapper = `pidfile=$1 wd=$2 cpu=$3
cd "$wd" || exit 1
if [ "$cpu" -gt 0 ]; then ulimit -t "$cpu" || exit 1; fi
setsid /bin/sh -c "$4" 2>&1 &
pid=$!
echo $pid >"$pidfile"
wait $pid 2>/dev/null
status=$?
kill -9 -$pid 2>/dev/null
rm -f "$pidfile"
exit $status`

// execKiller kills the process group recorded in $1, waiting briefly for
// the wrapper to write it.
const execKiller = `i=0
while [ ! -s "$1" ] && [ $i -lt 20 ]; do sleep 0.05; i=$((i+1)); done
pid=$(cat "$1" 2>/dev/null) || exit 0
[ -n "$pid" ] && kill -9 -$pid 2>/dev/null
exit 0`

func (s *session) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	req, err := req.Normalize()
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	// The container sees nothing but the workspace at /workspace, yet the
	// workdir is resolved on the host side so that a missing directory or
	// a symlink out of the workspace fails clearly, as on every backend.
	rel, err := s.ws.ResolveWorkdir(ctx, req.Workdir)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	wd := path.Join("/workspace", rel)
	var nonce [8]byte
	rand.Read(nonce[:])
	pidfile := "/tmp/.troupe-exec-" + hex.EncodeToString(nonce[:]) + ".pid"

	argv := append([]string{"/usr/bin/env", "-i"}, s.env...)
	for _, k := range slices.Sorted(maps.Keys(req.Env)) {
		argv = append(argv, k+"="+req.Env[k]) // env(1) takes the last of a name.
	}
	argv = append(argv, "/bin/sh", "-c", execWrapper, "troupe-exec", pidfile, wd, strconv.Itoa(s.state.Options.Limits.CPUSeconds), req.Cmd)

	start := time.Now()
	created, err := s.c.api.ContainerExecCreate(ctx, s.cid, container.ExecOptions{
		AttachStdout: true,
		AttachStderr: true,
		Cmd:          argv,
	})
	if err != nil {
		return sandbox.ExecResult{}, s.containerErr("exec", err)
	}
	hj, err := s.c.api.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		return sandbox.ExecResult{}, s.containerErr("exec attach", err)
	}
	defer hj.Close()

	out := sandbox.NewCappedOutput(req.MaxOutputBytes)
	done := make(chan error, 1)
	go func() {
		// One writer for both streams keeps their interleaving.
		_, err := stdcopy.StdCopy(out, out, hj.Reader)
		done <- err
	}()

	timer := time.NewTimer(req.Timeout)
	defer timer.Stop()
	poll := time.NewTicker(500 * time.Millisecond)
	defer poll.Stop()
	var timedOut, abandoned bool
	var ctxErr error
	// abandon stops reading output that something outside the command's
	// process group holds open, after a grace.
	abandon := func(grace time.Duration) {
		select {
		case err = <-done:
		case <-time.After(grace):
			abandoned = true
			hj.Close()
			<-done
		}
	}
wait:
	for {
		select {
		case err = <-done:
			break wait
		case <-timer.C:
			timedOut = true
			break wait
		case <-ctx.Done():
			ctxErr = ctx.Err()
			break wait
		case <-poll.C:
			// The output is still open: has the command ended anyway (a
			// process that left its group holds the output)?
			if info, ierr := s.c.api.ContainerExecInspect(ctx, created.ID); ierr == nil && !info.Running {
				abandon(250 * time.Millisecond)
				break wait
			}
		}
	}
	if timedOut || ctxErr != nil {
		s.kill(pidfile)
		abandon(killGrace)
	}
	dur := time.Since(start)
	if err != nil && !abandoned && !timedOut && ctxErr == nil {
		return sandbox.ExecResult{}, fmt.Errorf("docker: exec output: %w", err)
	}

	res := sandbox.ExecResult{Duration: dur, TimedOut: timedOut, ExitCode: -1}
	res.Output, res.Truncated, res.OriginalBytes = out.Result()
	if ctxErr != nil {
		return res, ctxErr
	}
	if timedOut {
		return res, nil
	}
	code, err := s.exitCode(ctx, created.ID)
	if err != nil {
		return res, err
	}
	if code >= 128 {
		// Killed: by the command itself, or with the whole container?
		if err := s.Alive(ctx); errors.Is(err, sandbox.ErrGone) {
			return res, err
		}
	}
	res.ExitCode = code
	return res, nil
}

// exitCode waits briefly for the engine to record the exec's exit: the
// output can end a moment before the exec is marked finished.
func (s *session) exitCode(ctx context.Context, execID string) (int, error) {
	for i := 0; ; i++ {
		info, err := s.c.api.ContainerExecInspect(ctx, execID)
		if err != nil {
			return -1, s.containerErr("exec inspect", err)
		}
		if !info.Running {
			return info.ExitCode, nil
		}
		if i == 200 {
			return -1, errors.New("docker: exec still running after its output ended")
		}
		select {
		case <-ctx.Done():
			return -1, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// kill kills the command's process group through a second exec. It runs
// on a fresh context, since the command's may be the one cancelled.
func (s *session) kill(pidfile string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	created, err := s.c.api.ContainerExecCreate(ctx, s.cid, container.ExecOptions{
		Cmd: []string{"/bin/sh", "-c", execKiller, "troupe-kill", pidfile},
	})
	if err != nil {
		return
	}
	if err := s.c.api.ContainerExecStart(ctx, created.ID, container.ExecStartOptions{}); err != nil {
		return
	}
	// ExecStart returns once the exec started; wait for the kill itself.
	for range 100 {
		info, err := s.c.api.ContainerExecInspect(ctx, created.ID)
		if err != nil || !info.Running {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
