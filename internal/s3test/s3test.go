// Package s3test starts a real S3-compatible server for tests: versitygw
// (github.com/versity/versitygw, built from its Go module into tools/bin by
// scripts/setup.sh) over a POSIX directory, on a loopback port.
//
// The server keeps its objects' metadata in a sidecar directory: without
// metadata (versitygw's --nometa) it cannot tell that an object exists
// when it checks a conditional write, and lets every PutObject with
// If-None-Match: * through, so the create-only writes that memory's
// compare-and-swap is built on (blob.Store.Create) would all win.
package s3test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/proctest"
)

// Access and Secret are the server's root credentials.
const (
	Access = "troupe-test-access"
	Secret = "troupe-test-secret-key"
)

// Server is a running versitygw.
type Server struct {
	// Endpoint is its base URL, http://127.0.0.1:PORT.
	Endpoint string
	// Root is the directory that holds its buckets, one subdirectory each.
	Root string
}

// Binary returns the path of versitygw: $TROUPE_VERSITYGW, else
// tools/bin/versitygw in this module.
func Binary() string {
	return proctest.Tool("TROUPE_VERSITYGW", "bin", "versitygw")
}

// Start starts versitygw with one bucket per name given, and stops it when
// the test ends. A missing binary fails the test, saying how to build it.
func Start(t testing.TB, buckets ...string) *Server {
	t.Helper()
	return start(t, []string{"--sidecar", t.TempDir()}, buckets)
}

// StartWithoutMetadata is Start with a server that keeps no metadata
// (--nometa): one that ignores If-None-Match, for tests of what finds
// such a server.
func StartWithoutMetadata(t testing.TB, buckets ...string) *Server {
	t.Helper()
	return start(t, []string{"--nometa"}, buckets)
}

func start(t testing.TB, posixFlags, buckets []string) *Server {
	t.Helper()
	bin := Binary()
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("versitygw is missing (%v): run scripts/setup.sh (make test does)", err)
	}
	root := t.TempDir()
	for _, b := range buckets {
		if err := os.Mkdir(filepath.Join(root, b), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	addr := proctest.FreeAddr(t)
	cmd := exec.Command(bin, append(append([]string{"--port", addr, "posix"}, posixFlags...), root)...)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+Access, "ROOT_SECRET_ACCESS_KEY="+Secret)
	proctest.Serve(t, "versitygw", cmd, filepath.Join(t.TempDir(), "versitygw.log"), 30*time.Second, func() bool { return proctest.Dials(addr) })
	return &Server{Endpoint: "http://" + addr, Root: root}
}

// URL returns the gocloud.dev s3:// URL of bucket on s.
func (s *Server) URL(bucket string) string {
	return fmt.Sprintf("s3://%s?endpoint=%s&region=us-east-1&use_path_style=true&disable_https=true", bucket, s.Endpoint)
}

// Env returns the environment a client of s needs: its credentials, and
// no AWS profile or metadata lookups.
func (s *Server) Env() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + Access, "AWS_SECRET_ACCESS_KEY=" + Secret, "AWS_REGION=us-east-1",
		"AWS_EC2_METADATA_DISABLED=true",
		// versitygw sends no response checksums: validate them only when
		// an operation requires it, as for any such server.
		"AWS_RESPONSE_CHECKSUM_VALIDATION=when_required", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null"}
}

// SetEnv sets s's client environment for the test (see Env).
func (s *Server) SetEnv(t *testing.T) {
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}
