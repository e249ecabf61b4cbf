package cli

// One embedded Temporal server per TROUPE_HOME. Whatever troupe command
// needs it first (`troupe dev`, `troupe run`, `troupe runs`) starts it on
// the home's database; the others use that one, found through the address
// file the server writes (devserver.Running). A command that started the
// server keeps it up, after its own work is done, until the other commands
// using it have finished: each holds a shared lock on server.users while
// it is connected, and the owner stops the server only once it gets that
// lock exclusively.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/troupe-dev/troupe/runtime/devserver"
)

// usersFile is the file, in TROUPE_HOME, that the commands using the
// home's server lock shared.
const usersFile = "server.users"

// homeServer is this process's use of the server of a TROUPE_HOME.
type homeServer struct {
	dir   string
	info  devserver.Info
	srv   *devserver.Server // nil when another process runs the server
	users *os.File          // holds the shared lock while in use
}

// openHomeServer returns the server of $TROUPE_HOME: the one running on
// it (a `troupe dev`, another `troupe run`), or one this process starts on
// the home's database. Release it with close.
func openHomeServer(ctx context.Context, stderr io.Writer) (*homeServer, error) {
	dir, err := home()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	users, err := os.OpenFile(filepath.Join(dir, usersFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	// Blocks only while an owner stops the server (about a second).
	if err := syscall.Flock(int(users.Fd()), syscall.LOCK_SH); err != nil {
		users.Close()
		return nil, fmt.Errorf("lock %s: %w", users.Name(), err)
	}
	h := &homeServer{dir: dir, users: users}
	deadline := time.Now().Add(time.Minute)
	for {
		info, err := devserver.Running(dir)
		if err == nil {
			h.info = info
			return h, nil
		}
		switch {
		case errors.Is(err, devserver.ErrNotRunning):
			srv, err := devserver.Start(ctx, devserver.Config{Dir: dir, UIPort: -1})
			if err == nil {
				h.srv, h.info = srv, devserver.Info{Address: srv.FrontendAddress(), Namespace: srv.Namespace(), PID: os.Getpid()}
				return h, nil
			}
			if !errors.Is(err, devserver.ErrDatabaseInUse) {
				users.Close()
				return nil, err
			}
			// Another command started it first.
		case !errors.Is(err, devserver.ErrStarting):
			users.Close()
			return nil, err
		}
		if time.Now().After(deadline) {
			users.Close()
			return nil, fmt.Errorf("the Temporal server of %s did not come up within a minute", dir)
		}
		select {
		case <-ctx.Done():
			users.Close()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// close releases the server: a server this process started is stopped
// once no other command uses it; until then close says so on stderr and
// waits, and a Ctrl-C (or SIGTERM) stops it at once.
func (h *homeServer) close(stderr io.Writer) {
	h.users.Close()
	if h.srv == nil {
		return
	}
	f, err := os.OpenFile(filepath.Join(h.dir, usersFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err == nil {
		defer f.Close()
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	}
	if errors.Is(err, syscall.EWOULDBLOCK) {
		fmt.Fprintf(stderr, "troupe: keeping the Temporal server of %s up for the other troupe commands using it (Ctrl-C stops it now)\n", h.dir)
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(sig)
		locked := make(chan struct{})
		go func() {
			_ = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
			close(locked)
		}()
		select {
		case <-locked:
		case <-sig:
		}
	}
	_ = h.srv.Stop()
}
