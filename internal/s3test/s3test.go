// Package s3test starts a real S3-compatible server for tests: versitygw
// (github.com/versity/versitygw, built from its Go module into tools/bin by
// scripts/setup.sh) over a POSIX directory, on a loopback port.
package s3test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
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
	if p := os.Getenv("TROUPE_VERSITYGW"); p != "" {
		return p
	}
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "tools", "bin", "versitygw")
}

// Start starts versitygw with one bucket per name given, and stops it when
// the test ends. A missing binary fails the test, saying how to build it.
func Start(t testing.TB, buckets ...string) *Server {
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, "--port", addr, "posix", "--nometa", root)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+Access, "ROOT_SECRET_ACCESS_KEY="+Secret)
	logf, err := os.Create(filepath.Join(t.TempDir(), "versitygw.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		logf.Close()
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		select {
		case err := <-exited:
			log, _ := os.ReadFile(logf.Name())
			t.Fatalf("versitygw exited: %v\n%s", err, log)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("versitygw did not listen on %s within 30 s", addr)
		}
	}
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
