package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/cli"
	"github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/examples/dealdesk"
	"github.com/troupe-dev/troupe/internal/s3test"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/retention"
)

// TestDealDeskOnS3: `troupe run` of the deal desk with TROUPE_BLOB_URL on a
// real S3-compatible server (versitygw): the run completes, and its
// transcripts and outputs are in the bucket, under the run's own prefix.
func TestDealDeskOnS3(t *testing.T) {
	// Not parallel: it sets the environment the CLI or the store reads (t.Setenv).
	s3 := s3test.Start(t, "troupe")
	s3.SetEnv(t)
	t.Setenv("TROUPE_BLOB_URL", s3.URL("troupe"))
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("TEMPORAL_ADDRESS", temporalAddr)
	t.Setenv("TROUPE_HOME", t.TempDir())
	var stdout, stderr bytes.Buffer

	// A bucket that does not exist stops the command before any run.
	t.Setenv("TROUPE_BLOB_URL", s3.URL("nobucket"))
	cmd := cli.Command([]cli.Graph{{Graph: dealdesk.Graph(), Scenario: dealdesk.Scenario}}, &stdout, &stderr)
	cmd.SetArgs([]string{"run", "--worker", "--graph", "dealdesk", "--json", "Review the Acme Corp deal"})
	err := cmd.ExecuteContext(context.Background())
	if err == nil || !strings.Contains(err.Error(), "TROUPE_BLOB_URL: blob: store") || !strings.Contains(err.Error(), "cannot be used") || strings.Contains(stderr.String(), "▶ run") {
		t.Fatalf("troupe run on a bucket that does not exist: %v\nstderr:\n%s", err, stderr.String())
	}
	t.Setenv("TROUPE_BLOB_URL", s3.URL("troupe"))
	stdout.Reset()
	stderr.Reset()
	cmd = cli.Command([]cli.Graph{{Graph: dealdesk.Graph(), Scenario: dealdesk.Scenario}}, &stdout, &stderr)
	cmd.SetArgs([]string{"run", "--worker", "--graph", "dealdesk", "--json", "Review the Acme Corp deal"})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("troupe run: %v\nstderr:\n%s", err, stderr.String())
	}
	var res troupe.RunResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil || res.Agent != "coordinator" {
		t.Fatalf("result %+v (%v):\n%s", res, err, stdout.String())
	}
	// The bucket is a directory of versitygw's root; the objects, its files.
	var keys []string
	_ = filepath.WalkDir(filepath.Join(s3.Root, "troupe"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(filepath.Join(s3.Root, "troupe"), p)
			keys = append(keys, rel)
		}
		return nil
	})
	var transcripts int
	for _, k := range keys {
		area, rest, _ := strings.Cut(k, "/")
		if area == "memory" {
			// The coordinator's memory: its scope's, shared by its runs.
			if !strings.HasPrefix(rest, dealdesk.MemoryScope+"/") {
				t.Errorf("key %s is not under the memory scope %s", k, dealdesk.MemoryScope)
			}
			continue
		}
		if !strings.HasPrefix(rest, res.WorkflowID+"/") {
			t.Errorf("key %s is not under its run %s", k, res.WorkflowID)
		}
		if area == "transcripts" {
			transcripts++
		}
	}
	if transcripts == 0 {
		t.Errorf("no transcript in the bucket; keys: %v", keys)
	}
}

// TestBlobRetention: the sweeper deletes the blob data of a run closed for
// longer than the retention and of a run Temporal no longer holds, and
// leaves a running run's data alone, on a real S3-compatible server.
func TestBlobRetention(t *testing.T) {
	// Not parallel: it sets the environment the CLI or the store reads (t.Setenv).
	s3 := s3test.Start(t, "troupe")
	s3.SetEnv(t)
	ctx := context.Background()
	store, err := blob.Open(ctx, s3.URL("troupe"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	c := dial(t)
	_, url := modelServer(t)
	queue := startWorker(t, c, url, "", func(cfg *workflows.Config) { cfg.Store = store })

	closed, err := runGraph(t, c, queue, troupe.RunInput{Graph: "dealdesk", Input: "Review the Acme Corp deal"})
	if err != nil {
		t.Fatal(err)
	}
	running, err := client.StartRun(ctx, c, queue, troupe.RunInput{Graph: "long", Input: "loop"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.TerminateWorkflow(ctx, running.GetID(), "", "test over") }()
	// A run the namespace no longer holds (as after Temporal's retention).
	// Two more: one whose data a running run shares (a fork of it), which
	// stays; one whose data only a closed run shares, which goes.
	for _, k := range []string{"outputs/troupe-gone-00000000/0-agent/1-call", "outputs/troupe-shared-0000000/0-agent/1-call",
		"outputs/troupe-gone2-0000000/0-agent/1-call", "keep/troupe-shared-0000000/" + running.GetID() + "/mark",
		"keep/troupe-gone2-0000000/" + closed.WorkflowID + "/mark"} {
		if err := store.Put(ctx, k, []byte("old")); err != nil {
			t.Fatal(err)
		}
	}
	has := func(run string) bool {
		for _, area := range []string{"transcripts/", "outputs/", "snapshots/"} {
			if _, ok, err := store.Newest(ctx, area+run+"/"); err != nil {
				t.Fatal(err)
			} else if ok {
				return true
			}
		}
		return false
	}
	// The running run has written its first transcript segments.
	for deadline := time.Now().Add(time.Minute); !has(running.GetID()); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the running run wrote nothing to the store")
		}
	}
	if !has(closed.WorkflowID) {
		t.Fatal("the closed run wrote nothing to the store")
	}

	// A retention longer than their age keeps everything.
	swept, err := retention.Sweep(ctx, c, store, time.Hour)
	if err != nil || len(swept) != 0 {
		t.Fatalf("sweep with 1h retention: %v, %v; want nothing deleted", swept, err)
	}
	time.Sleep(10 * time.Millisecond)
	swept, err = retention.Sweep(ctx, c, store, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{closed.WorkflowID, "troupe-gone-00000000", "troupe-gone2-0000000"}
	if strings.Join(swept, ",") != strings.Join(want, ",") {
		t.Errorf("swept %v, want %v", swept, want)
	}
	if has(closed.WorkflowID) || has("troupe-gone-00000000") || has("troupe-gone2-0000000") {
		t.Error("a swept run's data is still in the store")
	}
	if !has(running.GetID()) {
		t.Error("the running run's data was deleted")
	}
	if !has("troupe-shared-0000000") {
		t.Error("the data a running fork shares was deleted")
	}
	if marks, err := store.Dirs(ctx, "keep/"); err != nil || strings.Join(marks, ",") != "troupe-shared-0000000" {
		t.Errorf("keep marks left: %v, %v; want the running fork's only", marks, err)
	}
}
