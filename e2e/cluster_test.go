package e2e

// The deployment of scripts/cluster.sh, end to end: a real Temporal server
// on PostgreSQL behind mTLS, versitygw, three worker hosts in network
// namespaces. It needs root and takes minutes (a cold `up` builds the
// server), so it runs only with TROUPE_E2E_CLUSTER=1: `make cluster-test`.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/cli"
	"github.com/troupe-dev/troupe/codec"
	"github.com/troupe-dev/troupe/examples/codereview"
	"github.com/troupe-dev/troupe/examples/dealdesk"
	"github.com/troupe-dev/troupe/runtime/model/scripted"
)

// clusterBridge is the address the cluster's services listen on, and the
// hosts reach the root namespace at (scripts/cluster.sh's BRIDGE_IP).
const clusterBridge = "10.77.24.1"

// clusterRig is the cluster scripts/cluster.sh brought up for a test,
// with the scripted model every host calls.
type clusterRig struct {
	// script is scripts/cluster.sh; state its state directory.
	script, state string
	model         *scripted.Server
	modelURL      string
	// c is a client of the cluster's namespace, with the client
	// certificate and the cluster's payload codec.
	c client.Client
	// codec is the payload codec of the client's key file
	// (TROUPE_CODEC_KEY_FILE of the client's environment).
	codec *codec.Codec
	// env is the client's environment, as cluster.sh wrote it.
	env map[string]string
}

// cluster runs scripts/cluster.sh with args, failing the test if it fails.
func (r *clusterRig) cluster(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(r.script, args...)
	cmd.Env = append(os.Environ(), "OPENAI_API_KEY=cluster-test", "OPENAI_BASE_URL="+r.modelURL, "TROUPE_CLUSTER_DIR="+r.state)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("cluster.sh %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	t.Logf("cluster.sh %s: %s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	return out.String()
}

// startCluster brings the cluster up (and down at the test's end, unless
// TROUPE_E2E_CLUSTER_KEEP is set), its workers calling a scripted model of
// the deal-desk and code-review scenarios, after the rules of extra (a
// scenario's YAML) when given. The test's environment is the cluster's
// client's.
func startCluster(t *testing.T, extra string) *clusterRig {
	t.Helper()
	return startClusterUp(t, extra, "up")
}

// startClusterUp is startCluster bringing the cluster up with up, the
// arguments of cluster.sh (such as up --api-keys).
func startClusterUp(t *testing.T, extra string, up ...string) *clusterRig {
	t.Helper()
	if os.Getenv("TROUPE_E2E_CLUSTER") == "" {
		t.Skip("the cluster tests run with TROUPE_E2E_CLUSTER=1 (make cluster-test): they need root and minutes")
	}
	// Not parallel: it sets the environment the CLI reads (t.Setenv).
	script, err := filepath.Abs("../scripts/cluster.sh")
	if err != nil {
		t.Fatal(err)
	}
	state := os.Getenv("TROUPE_CLUSTER_DIR")
	if state == "" {
		state = "/var/lib/troupe-cluster" // The script's default.
	}

	// The model: one scripted server for every host, on every address of
	// the root namespace, so the hosts reach it through the bridge.
	sc := &scripted.Scenario{}
	for _, yaml := range [][]byte{[]byte(extra), dealdesk.Scenario, codereview.Scenario} {
		if len(yaml) == 0 {
			continue
		}
		more, err := scripted.ParseScenario(yaml)
		if err != nil {
			t.Fatal(err)
		}
		sc.Rules = append(sc.Rules, more.Rules...)
		if sc.Intents == nil {
			sc.Intents = map[string][]string{}
		}
		for k, v := range more.Intents {
			sc.Intents[k] = v
		}
	}
	model := scripted.New(sc)
	base, err := model.Start("0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { model.Close() })
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(strings.TrimSuffix(base, "/v1"), "http://"))
	r := &clusterRig{script: script, state: state, model: model, modelURL: "http://" + clusterBridge + ":" + port + "/v1"}
	r.cluster(t, up...)
	if os.Getenv("TROUPE_E2E_CLUSTER_KEEP") == "" {
		t.Cleanup(func() { r.cluster(t, "down") })
	}
	env := clusterEnv(t, filepath.Join(state, "env"))
	for k, v := range env {
		t.Setenv(k, v)
	}
	t.Setenv("TROUPE_HOME", t.TempDir())
	t.Setenv("OPENAI_API_KEY", "")
	r.env = env
	r.codec, err = codec.FromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	r.c = clusterClient(t, env, r.codec)
	return r
}

// TestCluster: a deal-desk run from a client outside the hosts completes,
// with activities on more than one host, and its prompt (a canary) sealed
// everywhere in the server's database, readable with the cluster's key;
// with host 1 killed whole, a second run completes on the others, none
// of its work on host 1; with host 2 killed too, a third runs on host 3,
// its sandboxes docker containers of host 3's own dockerd.
func TestCluster(t *testing.T) {
	r := startCluster(t, "")
	c, state := r.c, r.state
	cluster := func(args ...string) string { t.Helper(); return r.cluster(t, args...) }

	// Runs from this process, the root namespace: a client, not a worker.
	canary := "CANARY-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	run := func() troupe.RunResult {
		t.Helper()
		var stdout, stderr bytes.Buffer
		cmd := cli.Command([]cli.Graph{{Graph: dealdesk.Graph(), Scenario: dealdesk.Scenario}}, &stdout, &stderr)
		cmd.SetArgs([]string{"run", "--graph", "dealdesk", "--task-queue", troupe.DefaultTaskQueue, "--json",
			"Review the Acme Corp deal (" + canary + "): a 3-year, 5000-seat renewal at 35% off list, net-90, go-live in 3 weeks."})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		start := time.Now()
		if err := cmd.ExecuteContext(ctx); err != nil {
			t.Fatalf("troupe run: %v\nstderr:\n%s", err, stderr.String())
		}
		var res troupe.RunResult
		if err := json.Unmarshal(stdout.Bytes(), &res); err != nil || res.Agent != "coordinator" || len(res.Output) == 0 {
			t.Fatalf("result %+v (%v):\n%s\nstderr:\n%s", res, err, stdout.String(), stderr.String())
		}
		t.Logf("deal-desk run %s on the cluster: %s", res.WorkflowID, time.Since(start).Round(time.Millisecond))
		return res
	}

	first := run()
	clusterSealed(t, r, first.WorkflowID, canary)
	hosts := activityHosts(t, c, first.WorkflowID)
	if len(hosts) < 2 {
		// Matching hands each task to any poller: one run of a dozen
		// activities all on one of three hosts is rare, two in a row rarer.
		second := run()
		for h, n := range activityHosts(t, c, second.WorkflowID) {
			hosts[h] += n
		}
	}
	if len(hosts) < 2 {
		t.Fatalf("activities ran on %v: want more than one host", hosts)
	}
	t.Logf("activities by host: %v", hosts)

	cluster("kill-host", "1")
	if out, err := exec.Command("ip", "netns", "pids", "troupe-h1").Output(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("host 1 killed, yet processes in its netns: %q (%v)", out, err)
	}
	if _, err := os.Stat(filepath.Join(state, "disks", "h1")); !os.IsNotExist(err) {
		t.Fatalf("host 1 killed, yet its disk is where it was: %v", err)
	}
	after := run()
	onRest := activityHosts(t, c, after.WorkflowID)
	if onRest["troupe-h1"] > 0 || len(onRest) == 0 {
		t.Fatalf("with host 1 dead, activities ran on %v", onRest)
	}
	t.Logf("with host 1 killed, activities by host: %v", onRest)

	// Host 3 alone: its sandboxes are docker containers of its own dockerd.
	cluster("kill-host", "2")
	last := run()
	if on := activityHosts(t, c, last.WorkflowID); len(on) != 1 || on["troupe-h3"] == 0 {
		t.Fatalf("with hosts 1 and 2 dead, activities ran on %v", on)
	}
	sandboxes := 0
	for _, e := range runEvents(t, c, last.WorkflowID) {
		if e.Kind == troupe.EventSandboxProvisioned {
			sandboxes++
			if e.Detail != "docker sandbox on troupe-h3" {
				t.Errorf("with host 3 alone, a sandbox: %s; want a docker sandbox on troupe-h3", e.Detail)
			}
		}
	}
	if sandboxes == 0 {
		t.Error("with host 3 alone, the run made no sandbox")
	}
	cluster("restart-host", "1")
	cluster("restart-host", "2")
	if out := cluster("status"); strings.Contains(out, "DOWN") {
		t.Fatalf("after restart-host 1 and 2:\n%s", out)
	}
}

// clusterEnv reads the KEY='value' lines cluster.sh writes for clients.
func clusterEnv(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	env := map[string]string{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), "=")
		if !ok || strings.HasPrefix(k, "#") {
			continue
		}
		env[k] = strings.TrimSuffix(strings.TrimPrefix(v, "'"), "'")
	}
	if env["TEMPORAL_ADDRESS"] == "" || env["TROUPE_BLOB_URL"] == "" {
		t.Fatalf("%s has no TEMPORAL_ADDRESS or TROUPE_BLOB_URL: %v", path, env)
	}
	return env
}

// clusterOptions are the options of a client of the cluster's frontend
// with env's client certificate and key as its API key ("" for none), and
// the pool of the server's CA.
func clusterOptions(t *testing.T, env map[string]string, key string) (client.Options, *x509.CertPool) {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(env["TEMPORAL_TLS_CLIENT_CERT_PATH"], env["TEMPORAL_TLS_CLIENT_KEY_PATH"])
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(env["TEMPORAL_TLS_SERVER_CA_CERT_PATH"])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	opts := client.Options{HostPort: env["TEMPORAL_ADDRESS"], Namespace: env["TEMPORAL_NAMESPACE"], Logger: quiet(),
		ConnectionOptions: client.ConnectionOptions{TLS: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool}}}
	if key != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(key)
	}
	return opts, pool
}

// clusterClient dials the cluster's frontend with the client certificate
// (and API key) of env and the payload codec cd.
func clusterClient(t *testing.T, env map[string]string, cd *codec.Codec) client.Client {
	t.Helper()
	opts, pool := clusterOptions(t, env, env["TEMPORAL_API_KEY"])
	cd.Apply(&opts)
	c, err := client.Dial(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)

	// Without a client certificate the frontend refuses (mTLS is required).
	bare, err := client.Dial(client.Options{HostPort: env["TEMPORAL_ADDRESS"], Namespace: env["TEMPORAL_NAMESPACE"], Logger: quiet(),
		ConnectionOptions: client.ConnectionOptions{TLS: &tls.Config{RootCAs: pool}}})
	if err == nil {
		_, err = bare.DescribeTaskQueue(context.Background(), troupe.DefaultTaskQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
		bare.Close()
	}
	if err == nil {
		t.Fatal("the frontend answered a client without a certificate")
	}
	if env["TEMPORAL_API_KEY"] != "" {
		return c // The server checks API keys: TestClusterAPIKeys.
	}
	// An API key goes with the certificate (as the CLI sends
	// TEMPORAL_API_KEY): this server has no authorizer, so the key is
	// carried and not checked; the certificate is what lets a client in.
	keyedOpts, _ := clusterOptions(t, env, "cluster-test-key")
	keyed, err := client.Dial(keyedOpts)
	if err == nil {
		_, err = keyed.DescribeTaskQueue(context.Background(), troupe.DefaultTaskQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
		keyed.Close()
	}
	if err != nil {
		t.Fatalf("a client with its certificate and an API key: %v", err)
	}
	return c
}

// runID is the workflow id of the run `troupe run --json` printed.
func runID(t *testing.T, out []byte) string {
	t.Helper()
	var res troupe.RunResult
	if err := json.Unmarshal(out, &res); err != nil || res.WorkflowID == "" {
		t.Fatalf("troupe run --json printed %s (%v)", out, err)
	}
	return res.WorkflowID
}

var clusterHost = regexp.MustCompile(`\d+@(troupe-h\d+)\b`)

// activityHosts counts the activities of a run and of its child workflows,
// all the way down, by the host of the worker that ran each (the hostname
// in its identity: pid@host).
func activityHosts(t *testing.T, c client.Client, workflowID string) map[string]int {
	t.Helper()
	hosts := map[string]int{}
	queue := []string{workflowID}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		it := c.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatalf("history of %s: %v", id, err)
			}
			if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
				// The hosts' hostnames (UTS namespaces) are troupe-hN.
				host := "not a cluster host: " + a.GetIdentity()
				if m := clusterHost.FindStringSubmatch(a.GetIdentity()); m != nil {
					host = m[1]
				}
				hosts[host]++
			}
			if ch := ev.GetChildWorkflowExecutionStartedEventAttributes(); ch != nil && !slices.Contains(queue, ch.GetWorkflowExecution().GetWorkflowId()) {
				queue = append(queue, ch.GetWorkflowExecution().GetWorkflowId())
			}
		}
	}
	return hosts
}
