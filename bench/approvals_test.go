package bench

import (
	"context"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/troupe-dev/troupe"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/workflows"
)

// waitingRuns is how many runs BenchmarkWaitingApprovals keeps waiting:
// TROUPE_BENCH_WAITING_RUNS, else 1,000.
func waitingRuns() int {
	if n, err := strconv.Atoi(os.Getenv("TROUPE_BENCH_WAITING_RUNS")); err == nil && n > 0 {
		return n
	}
	return 1000
}

// BenchmarkWaitingApprovals starts waitingRuns() runs on one worker, each
// of a sandbox agent that looks around its workspace (ls, which its
// policy lets through) and then asks to run rm -rf build, which waits for
// approval; with a 2 s sandbox idle timeout. Once every run waits, and
// the idle timeout has passed, it measures what they cost: the process's
// RSS (server, worker and model server share it) against the RSS before
// the runs, and the live sandboxes (must be 0: the workspaces on disk
// under the local backend's root). Then it approves every call through
// the runs' roots and times until the last run has ended.
//
// Reported: runs, rss-MB, rss-before-MB, live-sandboxes, approve-all-s.
func BenchmarkWaitingApprovals(b *testing.B) {
	n := waitingRuns()
	root := b.TempDir()
	cl, _ := sessionWorker(b, func(cfg *workflows.Config) { cfg.SandboxIdleTimeout = 2 * time.Second }, root)
	ctx := context.Background()
	rssBefore, _ := memory()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		runs := make([]*troupeclient.Run, n)
		waiting := make([]troupeclient.Approval, n)
		each := func(fn func(j int) error) {
			var wg sync.WaitGroup
			errs := make(chan error, n)
			sem := make(chan struct{}, 16)
			for j := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					sem <- struct{}{}
					defer func() { <-sem }()
					if err := fn(j); err != nil {
						errs <- err
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
		}
		each(func(j int) error {
			r, err := cl.Start(ctx, troupe.RunInput{Graph: sessionGraphName, Agent: "guard", Input: "clean up"})
			runs[j] = r
			return err
		})
		each(func(j int) error {
			for deadline := time.Now().Add(10 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
				list, err := runs[j].Approvals(ctx)
				if err == nil && len(list) == 1 {
					waiting[j] = list[0]
					return nil
				}
			}
			b.Errorf("run %s: no call waits for approval", runs[j].ID())
			return nil
		})
		// Every sandbox suspends after its idle timeout.
		deadline := time.Now().Add(5 * time.Minute)
		for len(liveWorkspaces(b, root)) > 0 && time.Now().Before(deadline) {
			time.Sleep(500 * time.Millisecond)
		}
		b.StopTimer()
		rss, _ := memory()
		b.ReportMetric(float64(n), "runs")
		b.ReportMetric(rss, "rss-MB")
		b.ReportMetric(rssBefore, "rss-before-MB")
		b.ReportMetric(float64(len(liveWorkspaces(b, root))), "live-sandboxes")
		began := time.Now()
		each(func(j int) error {
			if _, err := runs[j].Decide(ctx, troupeclient.Decision{ID: waiting[j].ID, Approve: true}); err != nil {
				return err
			}
			res, err := runs[j].Result(ctx)
			if err == nil && string(res.Output) != `"done"` {
				b.Errorf("run %s answered %s", runs[j].ID(), res.Output)
			}
			return err
		})
		b.ReportMetric(time.Since(began).Seconds(), "approve-all-s")
		b.StartTimer()
	}
}
