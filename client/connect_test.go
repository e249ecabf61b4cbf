package client

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/codec"
)

// env is an EnvLookup over a map: what the tests set, and nothing of the
// process's.
type env map[string]string

func (e env) Environ() []string {
	out := make([]string, 0, len(e))
	for k, v := range e {
		out = append(out, k+"="+v)
	}
	return out
}

func (e env) LookupEnv(k string) (string, bool) {
	v, ok := e[k]
	return v, ok
}

// TestConnectionResolve: a value given wins over the environment, the
// environment over the profile, the profile over the default; Where says
// which named the server; a named profile that is not there is an
// ErrUnknownProfile naming the file.
func TestConnectionResolve(t *testing.T) {
	file := filepath.Join(t.TempDir(), "temporal.toml")
	if err := os.WriteFile(file, []byte("[profile.default]\naddress = \"d:7233\"\n[profile.prod]\naddress = \"p:7233\"\nnamespace = \"prod\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "none.toml")
	tests := []struct {
		name            string
		conn            Connection
		env             env
		address, ns     string
		from            Origin
		where, errorSay string
	}{
		{name: "no file", env: env{"TEMPORAL_CONFIG_FILE": missing}, ns: "default", from: FromDefault, where: "no address"},
		{name: "default profile", env: env{"TEMPORAL_CONFIG_FILE": file}, address: "d:7233", ns: "default", from: FromProfile,
			where: `profile "default" of ` + file},
		{name: "env profile", env: env{"TEMPORAL_CONFIG_FILE": file, "TEMPORAL_PROFILE": "prod"}, address: "p:7233", ns: "prod", from: FromProfile},
		{name: "given profile over env", conn: Connection{Profile: "default"}, env: env{"TEMPORAL_CONFIG_FILE": file, "TEMPORAL_PROFILE": "prod"},
			address: "d:7233", ns: "default", from: FromProfile},
		{name: "given file over env", conn: Connection{ConfigFile: file, Profile: "prod"}, env: env{"TEMPORAL_CONFIG_FILE": missing},
			address: "p:7233", ns: "prod", from: FromProfile},
		{name: "env address", env: env{"TEMPORAL_CONFIG_FILE": file, "TEMPORAL_PROFILE": "prod", "TEMPORAL_ADDRESS": "e:7233"},
			address: "e:7233", ns: "prod", from: FromEnv, where: "TEMPORAL_ADDRESS"},
		{name: "given address", conn: Connection{Address: "g:7233", Namespace: "g"}, env: env{"TEMPORAL_CONFIG_FILE": file, "TEMPORAL_ADDRESS": "e:7233", "TEMPORAL_NAMESPACE": "e"},
			address: "g:7233", ns: "g", from: FromGiven, where: "the address given"},
		{name: "unknown profile", conn: Connection{Profile: "nosuch"}, env: env{"TEMPORAL_CONFIG_FILE": file}, errorSay: "its profiles: default, prod"},
		{name: "unknown profile, no file", env: env{"TEMPORAL_CONFIG_FILE": missing, "TEMPORAL_PROFILE": "nosuch"}, errorSay: "does not exist"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.conn.Env = tc.env
			res, err := tc.conn.Resolve()
			if tc.errorSay != "" {
				var ce *ConfigError
				if !errors.As(err, &ce) || !errors.Is(err, ErrUnknownProfile) || !strings.Contains(err.Error(), tc.errorSay) || !strings.Contains(err.Error(), ce.File) || ce.Profile != "nosuch" {
					t.Fatalf("Resolve: %v; want an ErrUnknownProfile of profile nosuch that says %q and names its file", err, tc.errorSay)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Options.HostPort != tc.address || res.Options.Namespace != tc.ns || res.AddressFrom != tc.from {
				t.Errorf("%q in %q from %s; want %q in %q from %s", res.Options.HostPort, res.Options.Namespace, res.AddressFrom, tc.address, tc.ns, tc.from)
			}
			if tc.where != "" && res.Where() != tc.where {
				t.Errorf("Where() = %q, want %q", res.Where(), tc.where)
			}
		})
	}
}

// TestConnectionCodec: the TROUPE_CODEC_* settings of Env put the codec
// on the options, sealing with the active key; keys that cannot be used
// are a *codec.ConfigError; with none, the codec seals nothing.
func TestConnectionCodec(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.toml")
	key := func(id string) string { return id + ":" + strings.Repeat("A", 43) + "=" }
	tests := []struct {
		name   string
		env    env
		active string
		err    string
	}{
		{name: "none", env: env{}},
		{name: "keys", env: env{"TROUPE_CODEC_KEYS": key("a") + "," + key("b")}, active: "b"},
		{name: "active named", env: env{"TROUPE_CODEC_KEYS": key("a") + "," + key("b"), "TROUPE_CODEC_KEY_ID": "a"}, active: "a"},
		{name: "bad key", env: env{"TROUPE_CODEC_KEYS": "a:c2hvcnQ="}, err: `key "a": 5 bytes`},
		{name: "missing file", env: env{"TROUPE_CODEC_KEY_FILE": filepath.Join(t.TempDir(), "keys")}, err: "TROUPE_CODEC_KEY_FILE="},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.env["TEMPORAL_CONFIG_FILE"] = missing
			res, err := Connection{Env: tc.env}.Resolve()
			if tc.err != "" {
				var ce *codec.ConfigError
				if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Resolve: %v; want a *codec.ConfigError saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Codec == nil || res.Codec.ActiveKey() != tc.active || res.Options.DataConverter == nil || res.Options.FailureConverter == nil {
				t.Fatalf("codec %v (active %q), converters %v %v; want active %q", res.Codec, res.Codec.ActiveKey(), res.Options.DataConverter, res.Options.FailureConverter, tc.active)
			}
			p, err := res.Options.DataConverter.ToPayload("a prompt")
			if err != nil {
				t.Fatal(err)
			}
			if got := codec.Sealed(p); got != (tc.active != "") {
				t.Errorf("sealed: %v, want %v", got, tc.active != "")
			}
		})
	}
}
