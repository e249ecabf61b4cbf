package devserver

// The address file: a file-backed server records where it listens next to its database,
// so other processes on the same Dir (a `troupe run` beside a `troupe dev`) use it rather
// than fail on the database lock.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// InfoFile is the name of the file, inside [Config.Dir], in which a running file-backed
// server records its addresses for other processes; see [Running].
const InfoFile = "server.json"

// ErrNotRunning is returned by [Running] when no server runs on the directory.
var ErrNotRunning = errors.New("no server running")

// ErrStarting is returned by [Running] when a server holds the directory's database but has
// not recorded its addresses yet: it is starting (or stopping). Ask again shortly.
var ErrStarting = errors.New("server starting")

// Info is where a running server listens, as it records it in [InfoFile].
type Info struct {
	// Address is the frontend's gRPC address, host:port.
	Address string `json:"address"`
	// Namespace is the namespace the server registered.
	Namespace string `json:"namespace"`
	// UI is the Web UI's base URL, or "" when the server runs without one.
	UI string `json:"ui,omitempty"`
	// PID is the process the server runs in.
	PID int `json:"pid"`
}

// Running returns the server that runs on dir's database, in this process or another. It
// returns [ErrNotRunning] when none does (a file left by a server that died is ignored:
// the database lock, which dies with its process, decides) and [ErrStarting] while one
// holds the database but has not recorded its addresses yet.
func Running(dir string) (Info, error) {
	dbPath := filepath.Join(dir, DBFile)
	held, err := lockHeld(dbPath)
	if err != nil {
		return Info{}, err
	}
	if !held {
		return Info{}, fmt.Errorf("devserver: %s: %w", dir, ErrNotRunning)
	}
	b, err := os.ReadFile(filepath.Join(dir, InfoFile))
	if errors.Is(err, fs.ErrNotExist) {
		return Info{}, fmt.Errorf("devserver: %s: %w", dir, ErrStarting)
	}
	if err != nil {
		return Info{}, fmt.Errorf("devserver: %w", err)
	}
	var info Info
	if err := json.Unmarshal(b, &info); err != nil || info.Address == "" {
		return Info{}, fmt.Errorf("devserver: %s: %w", dir, ErrStarting)
	}
	return info, nil
}

// writeInfo records info in dir's InfoFile, whole or not at all.
func writeInfo(dir string, info Info) error {
	b, err := json.Marshal(info)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, InfoFile+".*")
	if err != nil {
		return fmt.Errorf("devserver: record addresses: %w", err)
	}
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, InfoFile))
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("devserver: record addresses: %w", err)
	}
	return nil
}
