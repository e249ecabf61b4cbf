package codec

// Where a process's keys come from: a key file, the environment, or both.

import (
	"encoding/base64"
	"fmt"
	"os"
	"strings"
)

// The environment variables FromEnv reads.
const (
	// EnvKeyFile names a key file: a regular file that only its owner
	// can read (mode 0600 or stricter), of keys as ParseKeys reads them.
	EnvKeyFile = "TROUPE_CODEC_KEY_FILE"
	// EnvKeys holds keys, as ParseKeys reads them ("ID:BASE64", separated
	// by commas or spaces).
	EnvKeys = "TROUPE_CODEC_KEYS"
	// EnvKeyID names the active key, the one that seals. Default: the
	// last key given (the file's keys come before EnvKeys's).
	EnvKeyID = "TROUPE_CODEC_KEY_ID"
)

// Lookup reads an environment variable, as os.LookupEnv does.
type Lookup func(name string) (string, bool)

// FromEnv returns the codec of the keys lookup gives (nil reads the
// process's environment): those of the file EnvKeyFile names, then those
// of EnvKeys, sealing with EnvKeyID's, else with the last one. With none
// of them set it returns a Codec with no keys (see the package doc).
// Keys that cannot make a codec are a *ConfigError that names where they
// were read.
func FromEnv(lookup Lookup) (*Codec, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	var keys []Key
	if path, _ := lookup(EnvKeyFile); path != "" {
		ks, err := ReadKeyFile(path)
		if err != nil {
			return nil, err
		}
		keys = append(keys, ks...)
	}
	if v, _ := lookup(EnvKeys); v != "" {
		ks, err := ParseKeys(v)
		if err != nil {
			return nil, &ConfigError{Source: EnvKeys, Err: err}
		}
		keys = append(keys, ks...)
	}
	active, _ := lookup(EnvKeyID)
	c, err := New(keys, strings.TrimSpace(active))
	if err != nil {
		if ce, ok := err.(*ConfigError); ok && ce.Source == "" {
			ce.Source = sources(lookup)
		}
		return nil, err
	}
	return c, nil
}

// sources names the variables that gave keys, for an error.
func sources(lookup Lookup) string {
	var set []string
	for _, name := range []string{EnvKeyFile, EnvKeys, EnvKeyID} {
		if v, _ := lookup(name); v != "" {
			set = append(set, name)
		}
	}
	return strings.Join(set, ", ")
}

// ReadKeyFile reads the keys of the file at path: a regular file (not a
// symbolic link) that no one but its owner can read or write, since
// whoever reads it reads every payload.
func ReadKeyFile(path string) ([]Key, error) {
	fail := func(err error) ([]Key, error) {
		return nil, &ConfigError{Source: EnvKeyFile + "=" + path, Err: err}
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return fail(err)
	}
	if !fi.Mode().IsRegular() {
		return fail(fmt.Errorf("%s, want a regular file", fi.Mode().Type()))
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fail(fmt.Errorf("mode %04o lets others read or write it: chmod 600 %s", perm, path))
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fail(err)
	}
	keys, err := ParseKeys(string(data))
	if err != nil {
		return fail(err)
	}
	if len(keys) == 0 {
		return fail(fmt.Errorf("no keys in it"))
	}
	return keys, nil
}

// ParseKeys reads keys written "ID:BASE64": the key's id, a colon, and
// its KeySize bytes in base64 (standard or URL alphabet, padded or not),
// such as `openssl rand -base64 32` prints. Keys are separated by commas,
// spaces or newlines; a '#' starts a comment to the end of its line. An
// error names the key by id, never by its secret.
func ParseKeys(s string) ([]Key, error) {
	var keys []Key
	for _, line := range strings.Split(s, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		for _, field := range strings.FieldsFunc(line, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\r' }) {
			id, secret, ok := strings.Cut(field, ":")
			if !ok || id == "" {
				return nil, fmt.Errorf("a key written without its id: want ID:BASE64")
			}
			raw, err := decodeBase64(secret)
			if err != nil {
				return nil, fmt.Errorf("key %q: not base64", id)
			}
			keys = append(keys, Key{ID: id, Secret: raw})
		}
	}
	return keys, nil
}

func decodeBase64(s string) ([]byte, error) {
	var err error
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		var b []byte
		if b, err = enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, err
}
