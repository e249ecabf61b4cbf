// Package proctest runs the real servers that tests talk to (versitygw,
// Jaeger) as child processes of the test.
package proctest

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// Tool returns where a server that scripts/setup.sh installs is: the
// path in the environment variable env, when set, else elem under this
// module's tools directory (tools/bin/versitygw: Tool("TROUPE_VERSITYGW",
// "bin", "versitygw")).
func Tool(env string, elem ...string) string {
	if p := os.Getenv(env); p != "" {
		return p
	}
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(append([]string{filepath.Dir(file), "..", "..", "tools"}, elem...)...)
}

// FreeAddr returns a loopback address (127.0.0.1:PORT) with a port free
// now, for a server the test starts.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Dials reports whether something accepts TCP connections at addr: the
// up check of Serve for a server that is ready once it listens.
func Dials(addr string) bool {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// Serve starts cmd with its output in the file log, stops it when the
// test ends, and returns once up reports true. It fails the test, with
// the log, when the process exits first or is not up within patience.
func Serve(t testing.TB, name string, cmd *exec.Cmd, log string, patience time.Duration, up func() bool) {
	t.Helper()
	logf, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatal(err)
	}
	// exited is closed when the process has exited, with its error in
	// waitErr: both the wait below and the cleanup read it, so a process
	// that exits before it is up does not leave the cleanup waiting.
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		logf.Close()
	})
	deadline := time.Now().Add(patience)
	for !up() {
		select {
		case <-exited:
			out, _ := os.ReadFile(log)
			t.Fatalf("%s exited: %v\n%s", name, waitErr, out)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(log)
			t.Fatalf("%s was not up within %s\n%s", name, patience, out)
		}
	}
}
