package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/examples/dealdesk"
	"github.com/troupe-dev/troupe/runtime/devserver"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/workflows/lease"
)

// TestCLIRunIsOnlyAClient: `troupe run` pointed at a Temporal server, by
// TEMPORAL_ADDRESS or by a profile of temporal.toml (--profile), without
// --task-queue or --worker, is only a client. A worker of another process
// (here the test's, with an identity of its own) serves the shared task
// queue and runs the deal desk, sandboxes and all; the command prints the
// result, and the server lists no poller of the command's process on the
// shared queue nor on the sandbox queue of its host and home: it served
// nothing and provisioned no sandbox. (Before, it became a worker of the
// shared queue and ran the sandboxes on its own machine.)
func TestCLIRunIsOnlyAClient(t *testing.T) {
	parallel(t)
	// A server of its own: the shared queue is troupe.DefaultTaskQueue,
	// which no other test's worker may serve here.
	srv, err := devserver.Start(context.Background(), devserver.Config{InMemory: true, UIPort: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	c, err := client.Dial(client.Options{HostPort: srv.FrontendAddress(), Namespace: srv.Namespace(), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, url := modelServer(t)
	const identity = "e2e-cluster-worker"
	stop, err := newRunner(t, url, model.APIResponses, "cluster-host", nil).StartWorkers(c, troupe.DefaultTaskQueue, worker.Options{Identity: identity})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	profiles := filepath.Join(t.TempDir(), "temporal.toml")
	if err := os.WriteFile(profiles, []byte(fmt.Sprintf("[profile.cluster]\naddress = %q\nnamespace = %q\n", srv.FrontendAddress(), srv.Namespace())), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  []string
		args []string
	}{
		{"TEMPORAL_ADDRESS", []string{"TEMPORAL_ADDRESS=" + srv.FrontendAddress(), "TEMPORAL_NAMESPACE=" + srv.Namespace()}, nil},
		{"a profile", []string{"TEMPORAL_CONFIG_FILE=" + profiles}, []string{"--profile", "cluster"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			args := append([]string{"run", "--graph", "dealdesk", "--json"}, tc.args...)
			r := startCLIEnv(t, home, tc.env, append(args, "Review the Acme Corp deal")...)
			if code := r.wait(t); code != 0 {
				t.Fatalf("troupe run: exit %d; stderr:\n%s", code, r.errText())
			}
			var res troupe.RunResult
			if err := json.Unmarshal([]byte(r.stdout.String()), &res); err != nil {
				t.Fatalf("stdout is not a run result: %v\n%s", err, r.stdout.String())
			}
			if rec, err := agents.Decode[dealdesk.Recommendation](res.Output); err != nil || rec.Decision != "approve_with_conditions" {
				t.Errorf("result %+v: %+v, %v", res, rec, err)
			}
			progress := r.errText()
			if !strings.Contains(progress, "sandbox provisioned") {
				t.Errorf("the run provisioned no sandbox (it should, on the worker); stderr:\n%s", progress)
			}
			if strings.Contains(progress, "troupe: sandboxes:") {
				t.Errorf("troupe run started a worker of its own; stderr:\n%s", progress)
			}

			// The server lists the pollers of the last minutes, gone or
			// not: a worker the command ran would still be there.
			mine := fmt.Sprintf("%d@", r.cmd.Process.Pid)
			host, err := os.Hostname()
			if err != nil {
				t.Fatal(err)
			}
			// The queues of its home's sandbox store: by its identity, and
			// as named before stores had one.
			store, err := lease.OpenStoreIdentity(filepath.Join(home, "sandboxes"), host)
			if err != nil {
				t.Fatal(err)
			}
			served := false
			for _, q := range []string{troupe.DefaultTaskQueue, lease.IdentityQueue(store.ID), lease.StoreQueue(host, filepath.Join(home, "sandboxes"))} {
				for _, typ := range []enums.TaskQueueType{enums.TASK_QUEUE_TYPE_WORKFLOW, enums.TASK_QUEUE_TYPE_ACTIVITY} {
					d, err := c.DescribeTaskQueue(context.Background(), q, typ)
					if err != nil {
						t.Fatal(err)
					}
					for _, p := range d.GetPollers() {
						switch id := p.GetIdentity(); {
						case strings.HasPrefix(id, mine):
							t.Errorf("troupe run (pid %d) polled task queue %s (%s) as %q", r.cmd.Process.Pid, q, typ, id)
						case strings.HasPrefix(id, identity) && q == troupe.DefaultTaskQueue:
							served = true
						}
					}
				}
			}
			if !served {
				t.Errorf("no poller of the worker %s on task queue %s", identity, troupe.DefaultTaskQueue)
			}
		})
	}
}
