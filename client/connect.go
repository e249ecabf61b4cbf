package client

// Where a program's Temporal client connects: the one place that turns
// what a user said (a command's flags, the TEMPORAL_* environment, a
// profile of temporal.toml) into the SDK's client.Options, as the temporal
// CLI and the SDK's contrib/envconfig read them.

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"

	"github.com/troupe-dev/troupe/codec"
)

// Connection says where to connect, over what the environment and the
// config file of profiles say. Its zero value reads the environment and
// the default profile only. Resolve applies, for each setting, the first
// of:
//
//  1. the value given here (a command's --address, --namespace,
//     --profile);
//  2. the TEMPORAL_* environment variables the SDK's envconfig reads:
//     TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS,
//     TEMPORAL_TLS_CLIENT_CERT_PATH (or _DATA), TEMPORAL_TLS_CLIENT_KEY_PATH
//     (or _DATA), TEMPORAL_TLS_SERVER_CA_CERT_PATH (or _DATA),
//     TEMPORAL_TLS_SERVER_NAME, TEMPORAL_TLS_DISABLE_HOST_VERIFICATION,
//     TEMPORAL_GRPC_META_*; a variable that is set, even empty, wins over
//     the profile (envconfig's rule: TEMPORAL_ADDRESS= clears a profile's
//     address);
//  3. the profile of the config file: Profile, else TEMPORAL_PROFILE, else
//     "default", in ConfigFile, else TEMPORAL_CONFIG_FILE, else
//     envconfig.DefaultConfigFilePath() (~/.config/temporalio/temporal.toml
//     on Linux), the file `temporal config set` writes;
//  4. the default: no address (Resolved.AddressFrom is FromDefault, and
//     the caller chooses: the troupe CLI uses the embedded server of
//     TROUPE_HOME), namespace "default", no TLS unless an API key is set.
//
// A profile that was named (Profile or TEMPORAL_PROFILE) must exist; the
// default profile may be missing, and so may the file.
//
// Payloads are sealed with the keys of TROUPE_CODEC_KEY_FILE and
// TROUPE_CODEC_KEYS (read from Env too), the active one named by
// TROUPE_CODEC_KEY_ID (see package codec): Resolved.Options carries the
// codec's data and failure converters, so every client and worker dialled
// with them seals what it sends and opens what it reads.
type Connection struct {
	// Address is the server's host:port, over TEMPORAL_ADDRESS and the
	// profile's.
	Address string
	// Namespace is the namespace, over TEMPORAL_NAMESPACE and the
	// profile's.
	Namespace string
	// Profile is the profile to read, over TEMPORAL_PROFILE.
	Profile string
	// ConfigFile is the TOML file of profiles, over TEMPORAL_CONFIG_FILE.
	ConfigFile string
	// Env is where the TEMPORAL_* variables are read; nil reads the
	// process's environment (envconfig.EnvLookupOS).
	Env envconfig.EnvLookup
}

// Origin says where a connection setting came from.
type Origin string

// The origins of Resolved.AddressFrom.
const (
	// FromDefault: nothing named a server.
	FromDefault Origin = "default"
	// FromGiven: Connection.Address.
	FromGiven Origin = "given"
	// FromEnv: TEMPORAL_ADDRESS.
	FromEnv Origin = "env"
	// FromProfile: the address of the profile read.
	FromProfile Origin = "profile"
)

// Resolved is a Connection made concrete.
type Resolved struct {
	// Options are the client options: HostPort, Namespace, Credentials
	// (API key), ConnectionOptions (TLS, authority) and HeadersProvider
	// (gRPC metadata), DataConverter and FailureConverter (Codec's). The
	// caller adds its logger and interceptors.
	Options client.Options
	// Codec is the payload codec of the TROUPE_CODEC_* settings; one with
	// no keys (which seals nothing) when none is set.
	Codec *codec.Codec
	// AddressFrom is where Options.HostPort came from; FromDefault when
	// it is empty.
	AddressFrom Origin
	// Profile is the profile read: "" when none was (no file, or no
	// default profile in it).
	Profile string
	// File is the config file that was looked in.
	File string
}

// Where says, for a message, where the address came from: "TEMPORAL_ADDRESS",
// `profile "prod" of FILE`, "the address given", or "no address".
func (r Resolved) Where() string {
	switch r.AddressFrom {
	case FromGiven:
		return "the address given"
	case FromEnv:
		return "TEMPORAL_ADDRESS"
	case FromProfile:
		return fmt.Sprintf("profile %q of %s", r.Profile, r.File)
	}
	return "no address"
}

// ErrUnknownProfile is the cause of a ConfigError whose profile was named
// (Connection.Profile or TEMPORAL_PROFILE) but is not in the config file.
var ErrUnknownProfile = errors.New("no such profile")

// ConfigError is a connection that cannot be resolved: a profile that is
// not in the file (ErrUnknownProfile), a file that cannot be read or
// parsed, TLS files that do not load.
type ConfigError struct {
	// File is the config file of profiles.
	File string
	// Profile is the profile asked for.
	Profile string
	// Known are the profiles the file has, sorted (for ErrUnknownProfile).
	Known []string
	// Missing says that the file does not exist.
	Missing bool
	// Err is the cause.
	Err error
}

func (e *ConfigError) Error() string {
	if errors.Is(e.Err, ErrUnknownProfile) {
		switch {
		case e.Missing:
			return fmt.Sprintf("no Temporal profile %q: the config file %s does not exist (TEMPORAL_CONFIG_FILE names another)", e.Profile, e.File)
		case len(e.Known) == 0:
			return fmt.Sprintf("no Temporal profile %q in %s: it has no profiles", e.Profile, e.File)
		}
		return fmt.Sprintf("no Temporal profile %q in %s; its profiles: %s", e.Profile, e.File, strings.Join(e.Known, ", "))
	}
	return fmt.Sprintf("the Temporal connection (profile %q of %s, and the TEMPORAL_* variables): %v", e.Profile, e.File, e.Err)
}

func (e *ConfigError) Unwrap() error { return e.Err }

// Resolve returns the client options c comes to (see Connection for the
// order), or a *ConfigError; codec keys that cannot be read are a
// *codec.ConfigError.
func (c Connection) Resolve() (Resolved, error) {
	env := c.Env
	if env == nil {
		env = envconfig.EnvLookupOS
	}
	// The file and profile as envconfig picks them, worked out here too
	// so that an error can name them.
	file := c.ConfigFile
	if file == "" {
		file, _ = env.LookupEnv("TEMPORAL_CONFIG_FILE")
	}
	if file == "" {
		file = envconfig.DefaultConfigFilePath()
	}
	profile := c.Profile
	if profile == "" {
		profile, _ = env.LookupEnv("TEMPORAL_PROFILE")
	}
	named := profile != ""
	if !named {
		profile = envconfig.DefaultConfigFileProfile
	}
	fail := func(err error) (Resolved, error) {
		return Resolved{}, &ConfigError{File: file, Profile: profile, Err: err}
	}
	conf, err := envconfig.LoadClientConfig(envconfig.LoadClientConfigOptions{ConfigFilePath: file, EnvLookup: env})
	if err != nil {
		return fail(err)
	}
	res := Resolved{File: file, AddressFrom: FromDefault}
	var prof envconfig.ClientConfigProfile
	if p := conf.Profiles[profile]; p != nil {
		prof, res.Profile = *p, profile
	} else if named {
		_, statErr := os.Stat(file)
		known := make([]string, 0, len(conf.Profiles))
		for name := range conf.Profiles {
			known = append(known, name)
		}
		slices.Sort(known)
		return Resolved{}, &ConfigError{File: file, Profile: profile, Known: known, Missing: errors.Is(statErr, os.ErrNotExist), Err: ErrUnknownProfile}
	}
	if prof.Address != "" {
		res.AddressFrom = FromProfile
	}
	if err := prof.ApplyEnvVars(env); err != nil {
		return fail(err)
	}
	if _, set := env.LookupEnv("TEMPORAL_ADDRESS"); set {
		res.AddressFrom = FromEnv
	}
	if c.Address != "" {
		prof.Address, res.AddressFrom = c.Address, FromGiven
	}
	if c.Namespace != "" {
		prof.Namespace = c.Namespace
	}
	if res.Options, err = prof.ToClientOptions(envconfig.ToClientOptionsRequest{}); err != nil {
		return fail(err)
	}
	if res.Options.HostPort == "" {
		res.AddressFrom = FromDefault
	}
	if res.Options.Namespace == "" {
		res.Options.Namespace = "default"
	}
	if res.Codec, err = codec.FromEnv(env.LookupEnv); err != nil {
		return Resolved{}, err
	}
	res.Codec.Apply(&res.Options)
	return res, nil
}
