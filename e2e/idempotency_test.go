package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	troupeclient "github.com/troupe-dev/troupe/client"
)

// TestToolKilledMidCall kills the worker process (SIGKILL) while a
// function tool's call runs (a local activity), and starts another. An
// idempotent tool's call runs again, with the same idempotency key, and
// its output is the answer; a NotIdempotent tool's call is not run again:
// the model reads that it may or may not have taken effect, and the agent
// records a tool_in_doubt event.
func TestToolKilledMidCall(t *testing.T) {
	parallel(t)
	for _, tc := range []struct {
		input, tool string
		runs        int
	}{
		{"charge", "charge", 2},
		{"ticket", "file_ticket", 1},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			c := dial(t)
			_, url := modelServer(t)
			blobDir, queue := t.TempDir(), fmt.Sprintf("idem-%d-%d", os.Getpid(), queues.Add(1))
			dir := t.TempDir()
			hang, log := filepath.Join(dir, "hang"), filepath.Join(dir, tc.tool+".log")
			if err := os.WriteFile(hang, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			first := spawnWorker(t, url, blobDir, queue)
			run, err := troupeclient.StartRun(context.Background(), c, queue, troupe.RunInput{Graph: "idem", Input: tc.input, Vars: map[string]string{"dir": dir}})
			if err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
				if data, _ := os.ReadFile(log); len(data) > 0 {
					break // The call has started, and waits.
				}
				if time.Now().After(deadline) {
					t.Fatal("the tool's call never started")
				}
			}
			if err := first.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = first.Wait()
			if err := os.Remove(hang); err != nil {
				t.Fatal(err)
			}
			spawnWorker(t, url, blobDir, queue)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var res troupe.RunResult
			if err := run.Get(ctx, &res); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(log)
			if err != nil {
				t.Fatal(err)
			}
			keys := strings.Fields(string(data))
			if len(keys) != tc.runs || !strings.HasPrefix(keys[0], agents.IdempotencyKeyPrefix) {
				t.Fatalf("the tool ran with keys %q, want %d runs with a key", keys, tc.runs)
			}
			for _, k := range keys[1:] {
				if k != keys[0] {
					t.Errorf("the call ran again with the key %s, want the first run's %s", k, keys[0])
				}
			}
			var output string
			if err := json.Unmarshal(res.Output, &output); err != nil {
				t.Fatalf("output %s: %v", res.Output, err)
			}
			inDoubt := 0
			for _, e := range eventsOf(t, c, run.GetID()+"/0-payer") {
				if e.Kind == troupe.EventToolInDoubt && e.Tool == tc.tool && strings.Contains(e.Detail, keys[0]) {
					inDoubt++
				}
			}
			if tc.runs == 2 {
				if output != tc.tool+" done "+keys[0] || inDoubt != 0 {
					t.Errorf("output %q, %d in-doubt events; want the second run's output and none", output, inDoubt)
				}
				return
			}
			if !strings.HasPrefix(output, agents.InDoubtPrefix) || !strings.Contains(output, keys[0]) {
				t.Errorf("the model read %q, want it told the call may have taken effect, with its key", output)
			}
			if inDoubt != 1 {
				t.Errorf("%d tool_in_doubt events for %s, want 1", inDoubt, tc.tool)
			}
		})
	}
}
