package cli

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	troupeclient "github.com/troupe-dev/troupe/client"
)

// connecting are the commands that connect to Temporal: each takes the
// connection flags and resolves them alike.
var connecting = [][]string{{"worker"}, {"run"}, {"runs", "ls"}, {"runs", "resume"}, {"sessions", "ls"}, {"sessions", "send"}, {"chat"}, {"mcp", "serve"}}

// TestConnection resolves the Temporal connection of every command that
// connects, from its flags, the TEMPORAL_* variables and a temporal.toml
// made here (with a TLS profile whose certificates are made here too):
// a flag wins over the environment, the environment over the profile, the
// profile over the default (no address: the embedded server). A profile
// that is not there, or whose files do not load, is a
// troupe.ConnectionConfig error that names the file.
func TestConnection(t *testing.T) {
	dir := t.TempDir()
	ca, cert, key := makeCerts(t, dir)
	file := filepath.Join(dir, "temporal.toml")
	writeFile(t, file, `
[profile.default]
address = "profile-default:7233"
namespace = "from-profile"

[profile.prod]
address = "prod.example:7233"
namespace = "prod"

[profile.tls]
address = "tls.example:7233"
namespace = "secure"
[profile.tls.tls]
client_cert_path = "`+cert+`"
client_key_path = "`+key+`"
server_ca_cert_path = "`+ca+`"
server_name = "frontend.example"

[profile.broken]
address = "broken.example:7233"
[profile.broken.tls]
client_cert_path = "`+cert+`"
client_key_path = "`+filepath.Join(dir, "missing.key")+`"
`)
	missing := filepath.Join(dir, "none.toml")

	type want struct {
		address, namespace string
		from               troupeclient.Origin
		// tls: a client certificate, the CA made here as the only root,
		// and this server name.
		tls        bool
		serverName string
		apiKey     bool
		// errs, when set, are what the troupe.ConnectionConfig error says.
		errs []string
	}
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want want
	}{
		{name: "nothing: the embedded server", env: map[string]string{"TEMPORAL_CONFIG_FILE": missing},
			want: want{namespace: "default", from: troupeclient.FromDefault}},
		{name: "the default profile",
			want: want{address: "profile-default:7233", namespace: "from-profile", from: troupeclient.FromProfile}},
		{name: "env over profile", env: map[string]string{"TEMPORAL_ADDRESS": "env:7233"},
			want: want{address: "env:7233", namespace: "from-profile", from: troupeclient.FromEnv}},
		{name: "empty env clears the profile's address", env: map[string]string{"TEMPORAL_ADDRESS": ""},
			want: want{namespace: "from-profile", from: troupeclient.FromDefault}},
		{name: "flag over env", env: map[string]string{"TEMPORAL_ADDRESS": "env:7233", "TEMPORAL_NAMESPACE": "env-ns"},
			args: []string{"--address", "flag:7233", "--namespace", "flag-ns"},
			want: want{address: "flag:7233", namespace: "flag-ns", from: troupeclient.FromGiven}},
		{name: "env namespace over profile", env: map[string]string{"TEMPORAL_NAMESPACE": "env-ns"},
			want: want{address: "profile-default:7233", namespace: "env-ns", from: troupeclient.FromProfile}},
		{name: "TEMPORAL_PROFILE", env: map[string]string{"TEMPORAL_PROFILE": "prod"},
			want: want{address: "prod.example:7233", namespace: "prod", from: troupeclient.FromProfile}},
		{name: "--profile over TEMPORAL_PROFILE", env: map[string]string{"TEMPORAL_PROFILE": "prod"}, args: []string{"--profile", "default"},
			want: want{address: "profile-default:7233", namespace: "from-profile", from: troupeclient.FromProfile}},
		{name: "a TLS profile", args: []string{"--profile", "tls"},
			want: want{address: "tls.example:7233", namespace: "secure", from: troupeclient.FromProfile, tls: true, serverName: "frontend.example"}},
		{name: "env over a TLS profile's server name", env: map[string]string{"TEMPORAL_TLS_SERVER_NAME": "other.example"}, args: []string{"--profile", "tls"},
			want: want{address: "tls.example:7233", namespace: "secure", from: troupeclient.FromProfile, tls: true, serverName: "other.example"}},
		{name: "TLS from the environment", env: map[string]string{"TEMPORAL_CONFIG_FILE": missing, "TEMPORAL_ADDRESS": "env:7233",
			"TEMPORAL_TLS_CLIENT_CERT_PATH": cert, "TEMPORAL_TLS_CLIENT_KEY_PATH": key, "TEMPORAL_TLS_SERVER_CA_CERT_PATH": ca, "TEMPORAL_TLS_SERVER_NAME": "env.example"},
			want: want{address: "env:7233", namespace: "default", from: troupeclient.FromEnv, tls: true, serverName: "env.example"}},
		{name: "an API key", env: map[string]string{"TEMPORAL_API_KEY": "secret"}, args: []string{"--profile", "prod"},
			want: want{address: "prod.example:7233", namespace: "prod", from: troupeclient.FromProfile, apiKey: true}},
		{name: "an unknown profile", args: []string{"--profile", "nosuch"},
			want: want{errs: []string{`no Temporal profile "nosuch"`, file, "broken, default, prod, tls"}}},
		{name: "an unknown TEMPORAL_PROFILE, no file", env: map[string]string{"TEMPORAL_CONFIG_FILE": missing, "TEMPORAL_PROFILE": "prod"},
			want: want{errs: []string{`no Temporal profile "prod"`, missing, "does not exist"}}},
		{name: "a profile whose key does not load", args: []string{"--profile", "broken"},
			want: want{errs: []string{`profile "broken"`, file, "missing.key"}}},
	}
	graphs := []Graph{{Graph: agents.MustGraph("g", "a", &agents.Agent{Name: "a", Instructions: "Answer."})}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range []string{"TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "TEMPORAL_PROFILE", "TEMPORAL_API_KEY", "TEMPORAL_TLS",
				"TEMPORAL_TLS_CLIENT_CERT_PATH", "TEMPORAL_TLS_CLIENT_KEY_PATH", "TEMPORAL_TLS_SERVER_CA_CERT_PATH", "TEMPORAL_TLS_SERVER_NAME"} {
				t.Setenv(v, "")
				os.Unsetenv(v) // Unset, not empty: an empty one counts (envconfig).
			}
			t.Setenv("TEMPORAL_CONFIG_FILE", file)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			for _, path := range connecting {
				root := Command(graphs, io.Discard, io.Discard)
				cmd, _, err := root.Find(path)
				if err != nil {
					t.Fatal(err)
				}
				if err := cmd.ParseFlags(tc.args); err != nil {
					t.Fatalf("troupe %s %v: %v", strings.Join(path, " "), tc.args, err)
				}
				res, err := resolveConn(connectionOf(cmd))
				name := "troupe " + strings.Join(append(path, tc.args...), " ")
				if tc.want.errs != nil {
					if e, ok := err.(*Error); !ok || e.Type != troupe.ErrConnectionConfig {
						t.Fatalf("%s: %v (%T), want a %s error", name, err, err, troupe.ErrConnectionConfig)
					}
					for _, s := range tc.want.errs {
						if !strings.Contains(err.Error(), s) {
							t.Errorf("%s: the error %q does not say %q", name, err, s)
						}
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				o := res.Options
				if o.HostPort != tc.want.address || o.Namespace != tc.want.namespace || res.AddressFrom != tc.want.from {
					t.Errorf("%s: address %q, namespace %q from %s; want %q, %q from %s", name, o.HostPort, o.Namespace, res.AddressFrom,
						tc.want.address, tc.want.namespace, tc.want.from)
				}
				if (o.Credentials != nil) != tc.want.apiKey {
					t.Errorf("%s: credentials %v, want an API key: %v", name, o.Credentials, tc.want.apiKey)
				}
				switch conf := o.ConnectionOptions.TLS; {
				case tc.want.apiKey:
					if conf == nil {
						t.Errorf("%s: an API key without TLS", name)
					}
				case !tc.want.tls:
					if conf != nil {
						t.Errorf("%s: TLS %+v, want none", name, conf)
					}
				case conf == nil:
					t.Errorf("%s: no TLS", name)
				default:
					roots := x509.NewCertPool()
					roots.AppendCertsFromPEM(readFile(t, ca))
					if len(conf.Certificates) != 1 || conf.RootCAs == nil || !conf.RootCAs.Equal(roots) || conf.ServerName != tc.want.serverName {
						t.Errorf("%s: TLS with %d certificates, roots %v (the CA made here: %v), server name %q; want 1, the CA, %q",
							name, len(conf.Certificates), conf.RootCAs != nil, conf.RootCAs != nil && conf.RootCAs.Equal(roots), conf.ServerName, tc.want.serverName)
					}
				}
			}
		})
	}
}

// TestConnectionErrors runs commands whose connection cannot be resolved:
// each fails at once, before it connects or starts anything, with a
// troupe.ConnectionConfig error naming the file; `troupe worker` with no
// server named says how to name one; `troupe run` against a cluster
// refuses a worker's flag without --worker.
func TestConnectionErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "temporal.toml")
	writeFile(t, file, "[profile.prod]\naddress = \"prod.example:7233\"\n")
	t.Setenv("TROUPE_HOME", t.TempDir())
	t.Setenv("TEMPORAL_CONFIG_FILE", file)
	t.Setenv("TEMPORAL_ADDRESS", "")
	os.Unsetenv("TEMPORAL_ADDRESS")
	graphs := []Graph{{Graph: agents.MustGraph("g", "a", &agents.Agent{Name: "a", Instructions: "Answer."})}}
	tests := []struct {
		args []string
		json bool
		// typ is the error's type; default troupe.ErrConnectionConfig.
		typ  string
		says []string
	}{
		{args: []string{"runs", "ls", "--profile", "nosuch"}, json: true, says: []string{`no Temporal profile "nosuch"`, file, "prod"}},
		{args: []string{"sessions", "ls", "--profile", "nosuch"}, json: true, says: []string{`no Temporal profile "nosuch"`, file}},
		{args: []string{"run", "--profile", "nosuch", "hello"}, json: true, says: []string{`no Temporal profile "nosuch"`, file}},
		{args: []string{"chat", "--profile", "nosuch"}, says: []string{`no Temporal profile "nosuch"`, file}},
		{args: []string{"mcp", "serve", "--profile", "nosuch"}, says: []string{`no Temporal profile "nosuch"`, file}},
		{args: []string{"worker", "--profile", "nosuch"}, says: []string{`no Temporal profile "nosuch"`, file}},
		{args: []string{"worker"}, says: []string{"no Temporal server named", "TEMPORAL_ADDRESS", "--profile", file, "troupe dev"}},
		// A worker's flag on a run that goes to a cluster's workers.
		{args: []string{"run", "--profile", "prod", "--sandbox", "local", "hello"}, json: true, typ: troupe.ErrUsage, says: []string{"--sandbox", "--worker", "troupe worker"}},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			args := tc.args
			if tc.json {
				args = append(args, "--json")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			typ := tc.typ
			if typ == "" {
				typ = troupe.ErrConnectionConfig
			}
			var stdout, stderr bytes.Buffer
			code, info := execute(ctx, Command(graphs, &stdout, &stderr), args)
			if info.Type != typ {
				t.Fatalf("troupe %s: exit %d, error %s: %s; want %s", strings.Join(args, " "), code, info.Type, info.Message, typ)
			}
			for _, s := range tc.says {
				if !strings.Contains(info.Message, s) {
					t.Errorf("troupe %s: %q does not say %q", strings.Join(args, " "), info.Message, s)
				}
			}
			checkFailure(t, args, code, stdout.String(), stderr.String(), typ, tc.json)
			if _, err := os.Stat(filepath.Join(os.Getenv("TROUPE_HOME"), "server.json")); err == nil {
				t.Errorf("troupe %s started the embedded server", strings.Join(args, " "))
			}
		})
	}
}

// makeCerts writes, in dir, a CA and a client certificate and key it
// signed, as PEM files, and returns their paths.
func makeCerts(t *testing.T, dir string) (ca, cert, key string) {
	t.Helper()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey, clientKey := newKey(), newKey()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "troupe test CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	clientTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "troupe client"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	clientDER, err := x509.CreateCertificate(rand.Reader, clientTmpl, caCert, &clientKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(clientKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, cert, key = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "client.pem"), filepath.Join(dir, "client.key")
	writeFile(t, ca, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})))
	writeFile(t, cert, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: clientDER})))
	writeFile(t, key, string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})))
	return ca, cert, key
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
