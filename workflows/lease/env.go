package lease

// This file keeps a sandbox's environment on its host. The environment
// of a sandbox's commands (its manifest's Env: API tokens, credentials)
// is resolved on the worker that makes the sandbox, and the sandbox's
// State travels through the workflow's history to every later call. So
// the State that leaves SandboxCreate carries the environment sealed
// (AES-256-GCM) with a key that never leaves the host, in a file beside
// the worker's spool; the calls that reach the sandbox, on that host,
// open it. Nobody who reads the history, nor any other host, can read a
// value; nothing is left on the host to reap when a sandbox goes.

import (
	"cmp"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// sealedEnvKey is the key of State.Data that holds a sealed environment.
const sealedEnvKey = "troupe.env.sealed"

// envKeyFile is the name of the host's sealing key in the spool directory.
const envKeyFile = "troupe-sandbox-env.key"

// envKey returns the host's sealing key, making it on first use. Two
// workers that make it at once agree on one: each writes its own and
// links it into place, and the one that loses reads the winner's.
func (a *Activities) envKey() ([]byte, error) {
	path := a.envKeyPath()
	if key, err := readEnvKey(path); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("sandbox environment key: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), envKeyFile+".*")
	if err != nil {
		return nil, fmt.Errorf("sandbox environment key: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(key)
	if err := errors.Join(werr, tmp.Chmod(0o600), tmp.Close()); err != nil {
		return nil, fmt.Errorf("sandbox environment key: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("sandbox environment key: %w", err)
	}
	return readEnvKey(path)
}

// envKeyPath is where the host's sealing key is: in SpoolDir, which a
// worker keeps across restarts.
func (a *Activities) envKeyPath() string {
	return filepath.Join(cmp.Or(a.SpoolDir, os.TempDir()), envKeyFile)
}

// readEnvKey reads the key at path: a regular file that no one but its
// owner can read (a key another user of the host planted, or could read,
// would let them open the environments).
func readEnvKey(path string) ([]byte, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("sandbox environment key %s: %s, want a regular file of mode 0600", path, fi.Mode())
	}
	key, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(key) != 32 {
		return nil, fmt.Errorf("sandbox environment key %s: %d bytes, want 32", path, len(key))
	}
	return key, nil
}

// sealEnv returns st with its environment sealed: Env empty, its values
// encrypted in Data under sealedEnvKey, bound to the sandbox's id.
func (a *Activities) sealEnv(st sandbox.State) (sandbox.State, error) {
	if len(st.Env) == 0 {
		return st, nil
	}
	key, err := a.envKey()
	if err != nil {
		return st, err
	}
	aead, err := envAEAD(key)
	if err != nil {
		return st, err
	}
	plain, err := json.Marshal(st.Env)
	if err != nil {
		return st, err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return st, err
	}
	data := make(map[string]string, len(st.Data)+1)
	for k, v := range st.Data {
		data[k] = v
	}
	data[sealedEnvKey] = base64.StdEncoding.EncodeToString(aead.Seal(nonce, nonce, plain, []byte(st.ID)))
	st.Data, st.Env = data, nil
	return st, nil
}

// openEnv returns st with its sealed environment opened into Env. A State
// with nothing sealed (one recorded before environments were sealed) is
// returned as it is. An environment this host cannot open (another
// host's, or its key is gone) fails with sandbox.ErrGone: the workflow
// makes the sandbox again, with its environment resolved afresh.
func (a *Activities) openEnv(st sandbox.State) (sandbox.State, error) {
	sealed, ok := st.Data[sealedEnvKey]
	if !ok {
		return st, nil
	}
	gone := func(why error) (sandbox.State, error) {
		return st, fmt.Errorf("%w: the environment of sandbox %s cannot be opened on this host: %v", sandbox.ErrGone, st.ID, why)
	}
	raw, err := base64.StdEncoding.DecodeString(sealed)
	if err != nil {
		return gone(err)
	}
	key, err := readEnvKey(a.envKeyPath())
	if err != nil {
		return gone(err)
	}
	aead, err := envAEAD(key)
	if err != nil {
		return gone(err)
	}
	if len(raw) < aead.NonceSize() {
		return gone(errors.New("sealed environment too short"))
	}
	plain, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], []byte(st.ID))
	if err != nil {
		return gone(err)
	}
	var env map[string]string
	if err := json.Unmarshal(plain, &env); err != nil {
		return gone(err)
	}
	st.Env = env
	return st, nil
}

func envAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
