package mcp

// The process behind a stdio server: started in its own process group with
// a minimal environment, its stderr sent to the logger, and stopped with its
// whole group.

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/agents"
)

// Bounds on what a server's stderr may put into the worker's log.
const (
	maxStderrLine  = 1024 // bytes of one line
	maxStderrLines = 1000 // lines logged per process
	stderrTail     = 10   // last lines kept for the warning when it dies
)

// process is a running stdio server.
type process struct {
	cmd    *exec.Cmd
	stdin  *onceCloser // our end of its stdin
	stdout *os.File    // our end of its stdout
	stderr *stderrLog

	stderrDone chan struct{} // closed when stderr has been read to its end
	exited     chan struct{} // closed when the process has exited
	exitErr    error         // cmd.Wait's error, set before exited closes
}

// CheckCommand says why the command of stdio server srv cannot run on
// this host, as a Pool starts it: a bare name not on PATH, or a path (which
// exec.Cmd takes relative to srv.Dir when that is set) that is not an
// executable file. It is nil when the command can run, and for a server
// with no command (an HTTP one).
func CheckCommand(srv *agents.MCPServer) error {
	if len(srv.Command) == 0 {
		return nil
	}
	command := srv.Command[0]
	if srv.Dir != "" && strings.ContainsRune(command, filepath.Separator) && !filepath.IsAbs(command) {
		command = filepath.Join(srv.Dir, command)
	}
	_, err := exec.LookPath(command)
	return err
}

// startProcess starts srv.Command with env.
func startProcess(srv *agents.MCPServer, env []string, logger *slog.Logger) (*process, error) {
	cmd := exec.Command(srv.Command[0], srv.Command[1:]...)
	cmd.Env = env
	cmd.Dir = srv.Dir
	setProcessGroup(cmd)
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, err
	}
	p := &process{
		cmd:        cmd,
		stdin:      &onceCloser{f: inW},
		stdout:     outR,
		stderr:     &stderrLog{logger: logger},
		stderrDone: make(chan struct{}),
		exited:     make(chan struct{}),
	}
	// Plain files, not writers: Wait then returns when the process exits,
	// even if a child it left behind holds the pipes open.
	cmd.Stdin = inR
	cmd.Stdout = outW
	cmd.Stderr = errW
	err = cmd.Start()
	// The child holds its own copies of these ends now.
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, err
	}
	go func() {
		_, _ = io.Copy(p.stderr, errR)
		errR.Close()
		p.stderr.flush()
		close(p.stderrDone)
	}()
	go func() {
		p.exitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// waitExit waits up to d for the process to exit.
func (p *process) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		return false
	}
}

// hasExited reports whether the process has exited.
func (p *process) hasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// exitReason describes how the process ended.
func (p *process) exitReason() string {
	if p.exitErr == nil {
		return "the server process exited"
	}
	return fmt.Sprintf("the server process exited (%v)", p.exitErr)
}

// stop ends the process the way MCP asks (close its stdin, wait), then with
// SIGTERM and SIGKILL for its whole group, and finally kills whatever the
// group still holds.
func (p *process) stop(grace time.Duration) {
	p.stdin.Close()
	if !p.waitExit(grace) {
		signalGroup(p.cmd, sigterm)
		if !p.waitExit(2 * time.Second) {
			signalGroup(p.cmd, sigkill)
			p.waitExit(5 * time.Second)
		}
	}
	signalGroup(p.cmd, sigkill)
}

// kill ends the process and its group at once.
func (p *process) kill() {
	signalGroup(p.cmd, sigkill)
	p.stdin.Close()
	p.waitExit(5 * time.Second)
}

// onceCloser closes a file once; the SDK and the process both close stdin.
type onceCloser struct {
	f    *os.File
	once sync.Once
	err  error
}

func (c *onceCloser) Write(b []byte) (int, error) { return c.f.Write(b) }

func (c *onceCloser) Close() error {
	c.once.Do(func() { c.err = c.f.Close() })
	return c.err
}

// stderrLog logs a server's stderr line by line, at debug level, within the
// bounds above; it keeps the last lines for a warning when the server dies.
type stderrLog struct {
	logger *slog.Logger

	mu      sync.Mutex
	partial []byte
	lines   int
	tail    []string
}

func (l *stderrLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			room := maxStderrLine - len(l.partial)
			l.partial = append(l.partial, b[:min(len(b), max(room, 0))]...)
			break
		}
		room := maxStderrLine - len(l.partial)
		l.partial = append(l.partial, b[:min(i, max(room, 0))]...)
		l.line()
		b = b[i+1:]
	}
	return n, nil
}

// line logs the collected partial line; l.mu is held.
func (l *stderrLog) line() {
	s := string(bytes.TrimRight(l.partial, "\r"))
	l.partial = l.partial[:0]
	l.tail = append(l.tail, s)
	if len(l.tail) > stderrTail {
		l.tail = l.tail[1:]
	}
	l.lines++
	switch {
	case l.lines < maxStderrLines:
		l.logger.Debug("MCP server stderr", "line", s)
	case l.lines == maxStderrLines:
		l.logger.Debug("MCP server stderr: further lines are not logged", "line", s)
	}
}

func (l *stderrLog) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.partial) > 0 {
		l.line()
	}
}

// lastStderr returns the last lines the server wrote to stderr, once the
// pipe has been read to its end or after a moment.
func (p *process) lastStderr() []string {
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-p.stderrDone:
	case <-t.C:
	}
	return p.stderr.lastLines()
}

// lastLines returns the last lines the server wrote to stderr.
func (l *stderrLog) lastLines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.tail...)
}
