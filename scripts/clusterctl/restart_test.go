package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRestartHostOnADownCluster: scripts/cluster.sh restart-host on a
// cluster whose server is down (its environment written by an earlier
// up, the server stopped by down) refuses, saying why and what to run,
// and leaves the killed host's disk as it was: a worker started then
// would only retry a server that is not there.
func TestRestartHostOnADownCluster(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("cluster.sh needs root")
	}
	state := t.TempDir()
	dead := filepath.Join(state, "disks", "h1.dead")
	if err := os.MkdirAll(dead, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(state, "env"), []byte("TEMPORAL_ADDRESS=10.77.24.1:17233\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "../cluster.sh", "restart-host", "1")
	cmd.Env = append(os.Environ(), "TROUPE_CLUSTER_DIR="+state)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if err == nil || !strings.Contains(stderr.String(), "the cluster is down") || !strings.Contains(stderr.String(), "cluster.sh up") {
		t.Errorf("restart-host on a down cluster: %v, stderr %q; want a refusal that says the cluster is down and to run up", err, stderr.String())
	}
	if _, err := os.Stat(dead); err != nil {
		t.Errorf("the killed host's disk: %v; want it left as killed", err)
	}
}
