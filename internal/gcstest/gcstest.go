// Package gcstest starts a real Google Cloud Storage emulator for tests:
// fake-gcs-server (github.com/fsouza/fake-gcs-server, built from its Go
// module into tools/bin by scripts/setup.sh), in memory, on a loopback
// port, as a process of its own.
//
// The server honours ifGenerationMatch=0 on uploads, the precondition
// gocloud's gcsblob sends for a create-only write (blob.Store.Create),
// which memory's compare-and-swap is built on; the blob-store conformance
// tests check that it does.
package gcstest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/proctest"
)

// Server is a running fake-gcs-server.
type Server struct {
	// Endpoint is its base URL, http://127.0.0.1:PORT.
	Endpoint string
}

// Binary returns the path of fake-gcs-server: $TROUPE_FAKE_GCS_SERVER,
// else tools/bin/fake-gcs-server in this module.
func Binary() string {
	return proctest.Tool("TROUPE_FAKE_GCS_SERVER", "bin", "fake-gcs-server")
}

// Start starts fake-gcs-server with one bucket per name given, and stops
// it when the test ends. A missing binary fails the test, saying how to
// build it.
func Start(t testing.TB, buckets ...string) *Server {
	t.Helper()
	bin := Binary()
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("fake-gcs-server is missing (%v): run scripts/setup.sh (make test does)", err)
	}
	addr := proctest.FreeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	endpoint := "http://" + addr
	// -public-host makes the server take requests addressed to it by this
	// host as path-style ones (/BUCKET/OBJECT, the XML API reads use).
	cmd := exec.Command(bin, "-backend", "memory", "-scheme", "http", "-host", "127.0.0.1", "-port", port,
		"-public-host", addr, "-external-url", endpoint, "-log-level", "warn")
	proctest.Serve(t, "fake-gcs-server", cmd, filepath.Join(t.TempDir(), "fake-gcs-server.log"), 30*time.Second, func() bool { return proctest.Dials(addr) })
	s := &Server{Endpoint: endpoint}
	for _, b := range buckets {
		s.createBucket(t, b)
	}
	return s
}

// createBucket creates bucket through the JSON API.
func (s *Server) createBucket(t testing.TB, bucket string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body, _ := json.Marshal(map[string]string{"name": bucket})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.Endpoint+"/storage/v1/b?project=troupe-test", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("fake-gcs-server: create bucket %s: %v", bucket, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		out, _ := io.ReadAll(resp.Body)
		t.Fatalf("fake-gcs-server: create bucket %s: %s: %s", bucket, strconv.Quote(resp.Status), out)
	}
}

// URL returns the gocloud.dev gs:// URL of bucket on s, with no
// credentials (see package blob).
func (s *Server) URL(bucket string) string {
	return fmt.Sprintf("gs://%s?endpoint=%s&anonymous=true", bucket, s.Endpoint)
}
