package e2e

// A host of scripts/cluster.sh's cluster killed whole (kill-host: every
// process, its disk unreachable) while a bwrap sandbox of a run runs a
// command there. Behind TROUPE_E2E_CLUSTER (make cluster-test);
// TROUPE_E2E_CLUSTER_KILLS=N kills N times and prints the recovery's
// p50/p95 (make cluster-bench).

import (
	"context"
	"fmt"
	"os"
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
	troupeclient "github.com/troupe-dev/troupe/client"
)

// hostLossRules make the pricing reviewer of a deal whose input says
// HOSTLOSS run a command that hangs, after writing a file, until its host
// is killed. Told the command was lost, it reads the deal again
// (dealdesk's pricing-reads-again) and reviews it.
const hostLossRules = `
rules:
  - name: hostloss-hang
    match: {instructions: "pricing reviewer", turn: 1, input: "HOSTLOSS"}
    respond: {calls: [{name: exec_command, arguments: {cmd: "echo started > hostloss.txt && sleep 600", yield_time_ms: 120000}}]}
`

// TestClusterHostLoss kills the host whose bwrap sandbox runs a command
// of a deal-desk run. The run goes on on the other hosts within one host
// timeout: its next event (sandbox_lost) comes once, the command is not
// sent to the dead host again, the workspace is restored from the
// manifest (it had no snapshot yet) and the command the model runs
// again reads the deal; the run's output carries the deal's figures, and
// no finished work is done twice (each rule of the scenario answers
// once). After restart-host, nothing of the run is left on any host.
func TestClusterHostLoss(t *testing.T) {
	r := startCluster(t, hostLossRules)
	kills := 1
	if n, err := strconv.Atoi(os.Getenv("TROUPE_E2E_CLUSTER_KILLS")); err == nil && n > 0 {
		kills = n
	}
	var recoveries []time.Duration
	for i := range kills {
		recoveries = append(recoveries, killDuringCommand(t, r, i))
	}
	slices.Sort(recoveries)
	pct := func(p float64) time.Duration {
		return recoveries[min(len(recoveries)-1, int(p*float64(len(recoveries))))]
	}
	t.Logf("host-loss recovery, kill to the affected run's next event, over %d kill(s): p50 %s, p95 %s, all %v (host timeout 30s)",
		len(recoveries), pct(0.5).Round(100*time.Millisecond), pct(0.95).Round(100*time.Millisecond), recoveries)
}

// killDuringCommand is one kill: it returns the time from the kill to the
// affected agent's next event.
func killDuringCommand(t *testing.T, r *clusterRig, i int) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a hang detector
	defer cancel()
	before := ruleCounts(r)
	run, err := troupeclient.StartRun(ctx, r.c, troupe.DefaultTaskQueue, troupe.RunInput{Graph: "dealdesk",
		Input: fmt.Sprintf("Review the Acme Corp deal (HOSTLOSS %d): a 3-year, 5000-seat renewal at 35%% off list, net-90, go-live in 3 weeks.", i)})
	if err != nil {
		t.Fatal(err)
	}
	// The pricing reviewer's command runs: its activity started on the
	// host that holds the sandbox.
	child, host := "", ""
	for child == "" || host == "" || !activityStarted(ctx, r.c, child, "troupe.SandboxTool") {
		if ctx.Err() != nil {
			t.Fatalf("the hanging command never started (child %q, host %q)", child, host)
		}
		time.Sleep(200 * time.Millisecond)
		if child == "" {
			child = childNamed(ctx, r.c, run.GetID(), "pricing")
			continue
		}
		for _, e := range eventsOfQuiet(r.c, child) {
			if m := provisionedOn.FindStringSubmatch(e.Detail); e.Kind == troupe.EventSandboxProvisioned && m != nil {
				host = m[1]
			}
		}
	}
	n := strings.TrimPrefix(host, "troupe-h")
	killed := time.Now()
	r.cluster(t, "kill-host", n)

	var res troupe.RunResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatalf("run %s after host %s was killed: %v", run.GetID(), host, err)
	}
	if !strings.Contains(string(res.Output), "35%") {
		t.Errorf("output %s: want the pricing review's figures (35%%), not an empty review", res.Output)
	}
	var next time.Duration
	kinds := map[string]int{}
	for _, e := range eventsOfQuiet(r.c, child) {
		kinds[e.Kind]++
		if next == 0 && e.Time.After(killed) {
			next = e.Time.Sub(killed)
			if e.Kind != troupe.EventSandboxLost {
				t.Errorf("the first event after the kill is %s (%s), want sandbox_lost", e.Kind, e.Detail)
			}
		}
		if e.Kind == troupe.EventSandboxRestored && strings.Contains(e.Detail, host) {
			t.Errorf("restored on the dead host: %s", e.Detail)
		}
	}
	if kinds[troupe.EventSandboxLost] != 1 || kinds[troupe.EventSandboxCallRetry] != 0 || kinds[troupe.EventSandboxProvisioned] != 2 {
		t.Errorf("events of %s: %v; want the sandbox lost once, the call not run again on the dead host, a new sandbox made", child, kinds)
	}
	// Nothing finished was done again: each rule answered once, the
	// command lost and the one run again each once.
	after := ruleCounts(r)
	for rule, n := range after {
		if d := n - before[rule]; d > 1 {
			t.Errorf("rule %s answered %d times in this run, want once at most", rule, d)
		}
	}
	if after["hostloss-hang"]-before["hostloss-hang"] != 1 || after["pricing-reads-again"]-before["pricing-reads-again"] != 1 {
		t.Errorf("the hanging command was asked for %d times and run again %d times, want once each",
			after["hostloss-hang"]-before["hostloss-hang"], after["pricing-reads-again"]-before["pricing-reads-again"])
	}

	// The host comes back: its worker's first reap removes the workspace
	// of the sandbox lost there; nothing of the run is on any host.
	r.cluster(t, "restart-host", n)
	prefix := sandboxPrefix(child)
	var left []string
	deadline := time.Now().Add(2 * time.Minute) // a hang detector
	for {
		left = left[:0]
		disks, _ := filepath.Glob(filepath.Join(r.state, "disks", "h*", "home", "sandboxes", "*", "*"))
		for _, d := range disks {
			if strings.Contains(filepath.Base(d), prefix) {
				left = append(left, d)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Errorf("after restart-host %s, left of the run's sandboxes: %v", n, left)
	}
	t.Logf("kill %d: host %s killed while %s ran a command; its next event %s after the kill", i+1, host, child, next.Round(100*time.Millisecond))
	return next
}

var provisionedOn = regexp.MustCompile(`sandbox on (troupe-h\d+)`)

// ruleCounts are the answers of each rule of the rig's model so far.
func ruleCounts(r *clusterRig) map[string]int {
	n := map[string]int{}
	for _, c := range r.model.Calls() {
		if !c.Canceled {
			n[c.Rule]++
		}
	}
	return n
}

// eventsOfQuiet is queryEvents, nil when the workflow does not answer.
func eventsOfQuiet(c client.Client, id string) []troupe.Event {
	evs, _ := queryEvents(c, id)
	return evs
}

// childNamed is the id of the child workflow of id (at any depth) whose
// id holds part, or "".
func childNamed(ctx context.Context, c client.Client, id, part string) string {
	queue := []string{id}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				break
			}
			if ch := ev.GetChildWorkflowExecutionStartedEventAttributes(); ch != nil {
				cid := ch.GetWorkflowExecution().GetWorkflowId()
				if strings.Contains(cid, part) {
					return cid
				}
				queue = append(queue, cid)
			}
		}
	}
	return ""
}

// activityStarted reports whether workflow id has an activity of type
// typ started (running on a worker).
func activityStarted(ctx context.Context, c client.Client, id, typ string) bool {
	d, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return false
	}
	for _, a := range d.GetPendingActivities() {
		if a.GetActivityType().GetName() == typ && a.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED {
			return true
		}
	}
	return false
}

// sandboxPrefix is what the names of the sandboxes of workflow id start
// with on a host (the lease package's sandboxID: the id made file-safe,
// its last 40 characters).
func sandboxPrefix(id string) string {
	base := regexp.MustCompile(`[^a-zA-Z0-9_.-]+`).ReplaceAllString(id, "-")
	if len(base) > 40 {
		base = base[len(base)-40:]
	}
	return base
}
