package e2e

// The cluster with API keys (scripts/cluster.sh up --api-keys): the
// Temporal server's JWT authorizer, with its default claim mapper and
// authorizer, checks the bearer token every client sends (the SDK's API
// key credentials, TEMPORAL_API_KEY) on top of mTLS.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/cli"
	"github.com/troupe-dev/troupe/examples/dealdesk"
)

// TestClusterAPIKeys: with the server checking API keys, a client with
// the key up minted (and its certificate) runs a deal desk on the hosts,
// whose workers carry keys of their own; the server's own services still
// reach it (a schedule's action starts a workflow: the scheduler runs in
// the server's worker service and calls the frontend); the Web UI, with
// its own key, lists the run; a client with its
// certificate but no key, a key that is not a JWT, one signed by another
// key and one for another namespace are refused as PermissionDenied, and
// the troupe command says the server wants an API key.
func TestClusterAPIKeys(t *testing.T) {
	r := startClusterUp(t, "", "up", "--api-keys")
	key := r.env["TEMPORAL_API_KEY"]
	if key == "" {
		t.Fatal("up --api-keys wrote no TEMPORAL_API_KEY into the client's environment")
	}
	if out := r.cluster(t, "status"); !strings.Contains(out, "API keys") {
		t.Errorf("status does not say the server checks API keys:\n%s", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a hang detector
	defer cancel()

	// A client with the key: a run end to end, on the hosts' workers.
	var stdout, stderr bytes.Buffer
	cmd := cli.Command([]cli.Graph{{Graph: dealdesk.Graph(), Scenario: dealdesk.Scenario}}, &stdout, &stderr)
	cmd.SetArgs([]string{"run", "--graph", "dealdesk", "--task-queue", troupe.DefaultTaskQueue, "--json",
		"Review the Acme Corp deal: a 3-year, 5000-seat renewal at 35% off list, net-90, go-live in 3 weeks."})
	if err := cmd.ExecuteContext(ctx); err != nil {
		t.Fatalf("troupe run with the API key: %v\nstderr:\n%s", err, stderr.String())
	}
	id := runID(t, stdout.Bytes())
	if hosts := activityHosts(t, r.c, id); len(hosts) == 0 || hosts["troupe-h1"]+hosts["troupe-h2"]+hosts["troupe-h3"] == 0 {
		t.Errorf("the run's activities ran on %v, want the hosts", hosts)
	}

	// The server's own calls: a schedule's scheduler workflow runs in the
	// server's worker service, which starts the action through the
	// internal frontend.
	sc, err := r.c.ScheduleClient().Create(ctx, client.ScheduleOptions{ID: "apikeys-schedule",
		Spec:   client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: time.Hour}}},
		Action: &client.ScheduleWorkflowAction{ID: "apikeys-scheduled", Workflow: "NoSuchWorkflow", TaskQueue: "apikeys-nobody"}})
	if err != nil {
		t.Fatalf("create a schedule with the API key: %v", err)
	}
	defer func() { _ = sc.Delete(context.Background()) }()
	if err := sc.Trigger(ctx, client.ScheduleTriggerOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		d, err := sc.Describe(ctx)
		if err == nil && len(d.Info.RecentActions) > 0 {
			// Nobody serves its queue: it would wait there for ever.
			if err := r.c.TerminateWorkflow(ctx, d.Info.RecentActions[0].StartWorkflowResult.WorkflowID, "", "test over"); err != nil {
				t.Errorf("terminate the scheduled workflow: %v", err)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the schedule never started its action (the server's worker service cannot reach its frontend?): %+v %v", d, err)
		}
		time.Sleep(500 * time.Millisecond)
	}

	// The Web UI calls the server with its own key: it lists the run.
	resp, err := http.Get(r.env["TROUPE_CLUSTER_UI"] + "/api/v1/namespaces/" + r.env["TEMPORAL_NAMESPACE"] + "/workflows")
	if err != nil {
		t.Fatal(err)
	}
	listed, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(listed), id) {
		t.Errorf("the Web UI's workflow list: %s, without the run %s: %.300s", resp.Status, id, listed)
	}

	// Refused: each gets in through mTLS, and no further.
	state := r.state
	other := t.TempDir()
	clusterctl := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(filepath.Join(state, "bin", "clusterctl"), args...).Output()
		if err != nil {
			t.Fatalf("clusterctl %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	clusterctl("jwks", other)
	for _, tc := range []struct{ name, key string }{
		{"no key", ""},
		{"not a JWT", "cluster-test-key"},
		{"another signing key", clusterctl("token", other, "troupe-client", "1h", "troupe:write")},
		{"another namespace", clusterctl("token", filepath.Join(state, "jwt"), "troupe-client", "1h", "elsewhere:admin")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := describeWith(t, r.env, tc.key)
			var denied *serviceerror.PermissionDenied
			if !errors.As(err, &denied) {
				t.Fatalf("a client with %s: %v, want PermissionDenied", tc.name, err)
			}
		})
	}
	if err := describeWith(t, r.env, key); err != nil {
		t.Fatalf("the client's key: %v", err)
	}

	// The troupe command says what is wrong.
	t.Setenv("TEMPORAL_API_KEY", "")
	stdout.Reset()
	stderr.Reset()
	code := cli.Execute(ctx, cli.Command([]cli.Graph{{Graph: dealdesk.Graph(), Scenario: dealdesk.Scenario}}, &stdout, &stderr), []string{"runs", "ls"})
	msg := stderr.String()
	t.Logf("troupe runs ls without an API key: exit %d: %s", code, strings.TrimSpace(msg))
	if code == 0 || !strings.Contains(msg, troupe.ErrPermissionDenied) || !strings.Contains(msg, "TEMPORAL_API_KEY") {
		t.Errorf("troupe runs ls without a key: exit %d, %q: want %s naming TEMPORAL_API_KEY", code, msg, troupe.ErrPermissionDenied)
	}
}

// describeWith describes the task queue with the client certificate of
// env and key as the API key ("" for none).
func describeWith(t *testing.T, env map[string]string, key string) error {
	t.Helper()
	opts, _ := clusterOptions(t, env, key)
	c, err := client.Dial(opts)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.DescribeTaskQueue(context.Background(), troupe.DefaultTaskQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
	return err
}
