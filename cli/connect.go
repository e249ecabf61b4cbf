package cli

// The commands that connect to Temporal (worker, run, runs, sessions,
// chat, mcp serve) take --address, --namespace and --profile, and resolve
// them with the TEMPORAL_* variables and the profiles of temporal.toml
// through troupeclient.Connection, the one place that does: flag, then
// environment, then profile, then the default (the embedded server of
// TROUPE_HOME).

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/troupe-dev/troupe"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/codec"
)

// The connection flags.
const (
	flagAddress   = "address"
	flagNamespace = "namespace"
	flagProfile   = "profile"
)

// addConnFlags adds --address, --namespace and --profile to a command
// that connects to Temporal (persistent on a group of them); connectionOf
// reads them.
func addConnFlags(f *pflag.FlagSet) {
	f.String(flagAddress, "", "Temporal frontend host:port (default $TEMPORAL_ADDRESS, else the profile's, else the embedded server of TROUPE_HOME)")
	f.String(flagNamespace, "", "Temporal namespace (default $TEMPORAL_NAMESPACE, else the profile's, else default)")
	f.String(flagProfile, "", "profile of the Temporal config file, as the temporal CLI reads it (default $TEMPORAL_PROFILE, else default); "+
		"the file is $TEMPORAL_CONFIG_FILE, else ~/.config/temporalio/temporal.toml")
}

// connectionOf is the connection cmd's flags ask for (empty for those it
// does not have).
func connectionOf(cmd *cobra.Command) troupeclient.Connection {
	get := func(name string) string {
		v, _ := cmd.Flags().GetString(name)
		return v
	}
	return troupeclient.Connection{Address: get(flagAddress), Namespace: get(flagNamespace), Profile: get(flagProfile)}
}

// resolveConn resolves c; a connection that cannot be resolved is a
// troupe.ErrConnectionConfig that names the file and profile, or the
// codec setting (TROUPE_CODEC_*) that is wrong.
func resolveConn(c troupeclient.Connection) (troupeclient.Resolved, error) {
	res, err := c.Resolve()
	return res, connConfigError(err)
}

// connConfigError is err as a troupe.ErrConnectionConfig when it is a
// connection's or a codec's *ConfigError.
func connConfigError(err error) error {
	var ce *troupeclient.ConfigError
	var cce *codec.ConfigError
	if errors.As(err, &ce) || errors.As(err, &cce) {
		return &Error{Type: troupe.ErrConnectionConfig, Message: err.Error(), Err: err}
	}
	return err
}

// payloadCodec is the codec of the TROUPE_CODEC_* settings, for a command
// that resolves no connection (troupe dev, troupe codec-server).
func payloadCodec() (*codec.Codec, error) {
	c, err := codec.FromEnv(nil)
	return c, connConfigError(err)
}

// cluster reports whether res names a Temporal server (rather than leave
// the commands to the embedded server of TROUPE_HOME).
func cluster(res troupeclient.Resolved) bool {
	return res.AddressFrom != troupeclient.FromDefault
}

// whereFrom says which setting named the server of res, in the words of
// the command line: "TEMPORAL_ADDRESS=HOST:PORT", "--address HOST:PORT",
// or `profile "NAME" of FILE`.
func whereFrom(res troupeclient.Resolved) string {
	switch res.AddressFrom {
	case troupeclient.FromGiven:
		return "--address " + res.Options.HostPort
	case troupeclient.FromEnv:
		return "TEMPORAL_ADDRESS=" + res.Options.HostPort
	}
	return res.Where()
}

// undoServer says how to leave the server of res for the embedded one of
// TROUPE_HOME.
func undoServer(res troupeclient.Resolved) string {
	switch res.AddressFrom {
	case troupeclient.FromGiven:
		return "leave out --address"
	case troupeclient.FromProfile:
		return fmt.Sprintf("fix the address of profile %q in %s (or choose another with --profile)", res.Profile, res.File)
	}
	return "unset TEMPORAL_ADDRESS"
}

// noServerNamed is the error of `troupe worker` when nothing names a
// server: a worker of the embedded server runs with it (`troupe dev`).
func noServerNamed(res troupeclient.Resolved) error {
	return &Error{Type: troupe.ErrConnectionConfig, Message: fmt.Sprintf("no Temporal server named: set TEMPORAL_ADDRESS, pass --address or --profile, "+
		"or give the default profile of %s an address; `troupe dev` runs a local server with a worker", res.File)}
}
