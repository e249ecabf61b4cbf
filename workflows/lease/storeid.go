package lease

// A sandbox store's identity. Workers of one host name were told apart by
// their hostname and the path of their sandbox roots; two hosts with the
// same hostname and the same TROUPE_HOME path looked like one store, and a
// call of one host's sandbox that reached the other was answered "gone".
// A store's identity is a random id made once, in the store's directory,
// and kept there: a worker started again on the same disk reads it back
// and takes over the store's sandboxes; a store made anywhere else,
// whatever its path, has another.

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// StoreIDFile is the file, in a sandbox store's directory, that keeps the
// store's identity. Its name starts with a dot: the reapers of the
// backends whose roots share the directory leave it alone.
const StoreIDFile = ".troupe-store-id"

// StoreDirName is the directory, in a backend's root, that keeps the
// store's identity when no directory is named for it
// (workflows.Config.StoreDir). Its name starts with a dot: it is no
// workspace, and reapers leave it alone.
const StoreDirName = ".troupe-store"

// StoreIdentity is the identity of a sandbox store kept on disk.
type StoreIdentity struct {
	// ID is the store's identity: the host's name when it was made (for
	// people to read; the host may be renamed since) and 16 random hex
	// digits, which are what tell stores apart.
	ID string
	// Replaced, when set, is the identity the file held before this one
	// replaced it, and Why says why: the file was made on another
	// machine, or is a copy (cp -a, rsync, a backup restored) of the one
	// made here. The old identity's sandboxes are not this store's: a
	// worker still serving it elsewhere keeps them; with none, they are
	// taken as lost after the host timeout and restored from their last
	// snapshots.
	Replaced, Why string
}

// storeIDRecord is what StoreIDFile holds.
type storeIDRecord struct {
	ID string `json:"id"`
	// Machine is a hash of the machine id of the machine that made the
	// file (/etc/machine-id); empty where it has none.
	Machine string `json:"machine,omitempty"`
	// Inode is the file's own inode number when it was made: a copy of
	// the file is another file, with another number.
	Inode   uint64    `json:"inode,omitempty"`
	Created time.Time `json:"created"`
}

// OpenStoreIdentity returns the identity of the sandbox store whose
// directory is dir, made there (and dir with it) on the first call. host
// names the host in a new identity.
//
// The identity stays with the directory as long as it stays on its disk:
// a worker started again, or the host rebooted, finds it. A copy of the
// directory (cp -a of a TROUPE_HOME to another machine, or beside it) is
// detected as far as the file can tell and given a new identity
// (StoreIdentity.Replaced says so): the file records a hash of the machine
// id (/etc/machine-id) and its own inode number, and a file whose machine
// or inode differs is a copy. What it cannot tell: a copy that keeps the
// inode (a block-level clone of the disk, a VM snapshot) on a machine with
// the same machine id (a cloned image that was not given its own), or a
// machine with no machine id whose copy kept the inode. Such clones must
// have their StoreIDFile removed before their workers start.
func OpenStoreIdentity(dir, host string) (StoreIdentity, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return StoreIdentity{}, fmt.Errorf("sandbox store %s: %w", dir, err)
	}
	unlock, err := lockStoreDir(dir)
	if err != nil {
		return StoreIdentity{}, fmt.Errorf("sandbox store %s: lock its identity: %w", dir, err)
	}
	defer unlock()
	path := filepath.Join(dir, StoreIDFile)
	machine := machineHash()
	rec, err := readStoreID(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		rec, err = writeStoreID(dir, host, machine)
		return StoreIdentity{ID: rec.ID}, err
	case err != nil:
		return StoreIdentity{}, fmt.Errorf("sandbox store %s: %w (remove %s to give the store a new identity; its sandboxes are then restored from their last snapshots)", dir, err, path)
	}
	why := ""
	switch {
	case rec.Machine != "" && machine != "" && rec.Machine != machine:
		why = "it was made on another machine (another /etc/machine-id): a copy of a store on another host"
	case rec.Inode != 0 && inodeOf(path) != 0 && rec.Inode != inodeOf(path):
		why = "it is a copy of the file it was made as (another inode): a copy of a store"
	}
	if why == "" {
		return StoreIdentity{ID: rec.ID}, nil
	}
	fresh, err := writeStoreID(dir, host, machine)
	return StoreIdentity{ID: fresh.ID, Replaced: rec.ID, Why: why}, err
}

// readStoreID reads the record at path.
func readStoreID(path string) (storeIDRecord, error) {
	var rec storeIDRecord
	b, err := os.ReadFile(path)
	if err != nil {
		return rec, err
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, fmt.Errorf("its identity file %s does not parse: %w", path, err)
	}
	if !validStoreID(rec.ID) {
		return rec, fmt.Errorf("its identity file %s holds no valid identity (%q)", path, rec.ID)
	}
	return rec, nil
}

// validStoreID reports whether id can name a store and its task queue.
func validStoreID(id string) bool {
	return id != "" && len(id) <= 200 && !strings.ContainsAny(id, " \t\r\n/")
}

// writeStoreID makes a new identity for the store in dir, and puts it in
// place whole (a file written aside, then renamed over StoreIDFile).
func writeStoreID(dir, host, machine string) (storeIDRecord, error) {
	var random [8]byte
	if _, err := rand.Read(random[:]); err != nil {
		return storeIDRecord{}, err
	}
	rec := storeIDRecord{ID: storeIDHost(host) + "-" + hex.EncodeToString(random[:]), Machine: machine, Created: time.Now().UTC()}
	f, err := os.CreateTemp(dir, StoreIDFile+".*")
	if err != nil {
		return rec, fmt.Errorf("sandbox store %s: %w", dir, err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	// The inode is the file's own: rename keeps it.
	rec.Inode = inodeOf(f.Name())
	b, err := json.Marshal(rec)
	if err == nil {
		_, err = f.Write(append(b, '\n'))
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(dir, StoreIDFile))
	}
	if err != nil {
		return rec, fmt.Errorf("sandbox store %s: write its identity: %w", dir, err)
	}
	return rec, nil
}

// storeIDHost is host as it goes into an identity: letters, digits, dots
// and dashes.
func storeIDHost(host string) string {
	host = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
			return r
		}
		return '-'
	}, host)
	if len(host) > 63 {
		host = host[:63]
	}
	if host == "" {
		host = "host"
	}
	return host
}

// machineIDFiles are where a Linux machine keeps its machine id.
var machineIDFiles = []string{"/etc/machine-id", "/var/lib/dbus/machine-id"}

// machineHash is a short hash of this machine's id, "" when it has none.
func machineHash() string {
	for _, p := range machineIDFiles {
		if b, err := os.ReadFile(p); err == nil {
			if id := strings.TrimSpace(string(b)); id != "" && id != "uninitialized" {
				sum := sha256.Sum256([]byte("troupe store\x00" + id))
				return hex.EncodeToString(sum[:8])
			}
		}
	}
	return ""
}

// IdentityQueue is the task queue of the sandbox store whose identity is
// id: troupe-sandbox-<id>. It is a worker's default sandbox queue, and a
// worker whose sandbox queue is another (Config.SandboxQueue) serves it
// too, so a call that reached a worker of another store can be sent on to
// the store that holds its sandbox by the identity in the sandbox's state.
func IdentityQueue(id string) string { return "troupe-sandbox-" + id }
