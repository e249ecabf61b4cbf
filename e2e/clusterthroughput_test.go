package e2e

// Deal-desk runs per minute on scripts/cluster.sh's cluster with its three
// worker hosts, then with one: the cost of spreading work over hosts that
// share the machine's cores. Behind TROUPE_E2E_CLUSTER_RUNS=N (make
// cluster-bench), as it takes minutes.

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupe-dev/troupe"
	troupeclient "github.com/troupe-dev/troupe/client"
)

// TestClusterThroughput runs N deal-desk runs at once (TROUPE_E2E_CLUSTER_RUNS)
// with the cluster's three worker hosts, then, with hosts 2 and 3 killed,
// on host 1 alone, and prints the runs per minute of each and their
// ratio. Every run must complete with the deal desk's recommendation, and
// with three hosts the runs' activities must have run on all three.
func TestClusterThroughput(t *testing.T) {
	n, err := strconv.Atoi(os.Getenv("TROUPE_E2E_CLUSTER_RUNS"))
	if err != nil || n <= 0 {
		t.Skip("the throughput bench runs with TROUPE_E2E_CLUSTER_RUNS=N (make cluster-bench)")
	}
	r := startCluster(t, "")
	// A warm-up on every host first: the first sandboxes of a fresh
	// cluster pay for what later ones find ready.
	dealDeskBurst(t, r, min(n, 30), "warm-up")
	three, ids := dealDeskBurst(t, r, n, "three")
	hosts := map[string]int{}
	for _, id := range ids[:min(len(ids), 20)] {
		for h, k := range activityHosts(t, r.c, id) {
			hosts[h] += k
		}
	}
	for _, h := range []string{"troupe-h1", "troupe-h2", "troupe-h3"} {
		if hosts[h] == 0 {
			t.Errorf("with three hosts, no activity of the first runs ran on %s: %v", h, hosts)
		}
	}
	r.cluster(t, "kill-host", "2")
	r.cluster(t, "kill-host", "3")
	// Hosts left killed stay down at the next up: give them back first
	// (this runs before the cluster's down).
	t.Cleanup(func() {
		r.cluster(t, "restart-host", "2")
		r.cluster(t, "restart-host", "3")
	})
	one, _ := dealDeskBurst(t, r, n, "one")
	perMin := func(d time.Duration) float64 { return float64(n) / d.Minutes() }
	t.Logf("%d deal-desk runs at once: three hosts %.0f runs/min (%s), one host %.0f runs/min (%s); three hosts take %.2f× one host's time",
		n, perMin(three), three.Round(time.Second), perMin(one), one.Round(time.Second), three.Seconds()/one.Seconds())
}

// dealDeskBurst starts n deal-desk runs at once and waits for them all; it
// returns the time from the first start to the last result, and the runs'
// ids.
func dealDeskBurst(t *testing.T, r *clusterRig, n int, label string) (time.Duration, []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute) // a hang detector
	defer cancel()
	began := time.Now()
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			run, err := troupeclient.StartRun(ctx, r.c, troupe.DefaultTaskQueue, troupe.RunInput{Graph: "dealdesk",
				Input: fmt.Sprintf("Review the Acme Corp deal (%s %d): a 3-year, 5000-seat renewal at 35%% off list, net-90, go-live in 3 weeks.", label, i)})
			if err != nil {
				errs[i] = err
				return
			}
			ids[i] = run.GetID()
			var res troupe.RunResult
			if err := run.Get(ctx, &res); err != nil {
				errs[i] = err
				return
			}
			if !strings.Contains(string(res.Output), `"pricing_risk":"high"`) {
				errs[i] = fmt.Errorf("output %s, want the deal desk's recommendation", res.Output)
			}
		})
	}
	wg.Wait()
	took := time.Since(began)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("%s hosts, run %d: %v", label, i, err)
		}
	}
	return took, ids
}
