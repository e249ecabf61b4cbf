package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/model/scripted"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/throttle"
)

// tickerScenario makes each run of the ticker take turns model turns: a
// call of tick, then, at the last, an answer.
func tickerScenario(turns, delayMS int) string {
	return fmt.Sprintf(`rules:
  - name: tick
    match: {instructions: "ticker", max_turn: %d}
    respond: {calls: [{name: tick, arguments: {n: "{{.Turn}}"}}], delay_ms: %d}
  - name: done
    match: {instructions: "ticker"}
    respond: {text: "done", delay_ms: %d}
`, turns-1, delayMS, delayMS)
}

func tickerGraph() *agents.Graph {
	tick := agents.MustFunctionTool("tick", "Does nothing.", func(_ context.Context, a bigArgs) (string, error) {
		return "tock " + a.N, nil
	})
	return agents.MustGraph("ticker", "ticker", &agents.Agent{Name: "ticker", Instructions: "ticker", Tools: []agents.Tool{tick}})
}

// tickerWorkers starts n workers (each a Runner of its own, as n worker
// processes) on one new queue, sharing one store, serving the ticker
// with its model at url and limits.
func tickerWorkers(t *testing.T, n int, url string, limits map[string]agents.ModelLimit) string {
	t.Helper()
	c := dial(t)
	store, err := blob.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	queue := fmt.Sprintf("e2e-ratelimit-%d", queues.Add(1))
	for range n {
		startWorkerOn(t, c, url, model.APIResponses, queue, func(cfg *workflows.Config) {
			cfg.Graphs, cfg.Store, cfg.ModelLimits = []*agents.Graph{tickerGraph()}, store, limits
		})
	}
	return queue
}

// Two workers on one queue, each a Runner of its own, keep one model
// endpoint within its limit together: a model server allowing 3 calls at
// once and 40 per second, which answers 429 past either, sees 200 calls
// of 40 runs started at once never past either limit, turns none away,
// and every run completes.
func TestModelLimitHeldAcrossWorkers(t *testing.T) {
	parallel(t)
	const runs, turns = 40, 5
	limit := agents.ModelLimit{MaxConcurrent: 3, Requests: 40}
	sc, err := scripted.ParseScenario([]byte(tickerScenario(turns, 30)))
	if err != nil {
		t.Fatal(err)
	}
	srv := scripted.New(sc, scripted.WithLimits(scripted.Limits{MaxConcurrent: limit.MaxConcurrent, Requests: limit.Requests}))
	url, err := srv.Start("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	queue := tickerWorkers(t, 2, url, map[string]agents.ModelLimit{"": limit})
	c := dial(t)

	var wg sync.WaitGroup
	errs := make([]error, runs)
	for i := range runs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			res, err := troupeclient.Execute(ctx, c, queue, troupe.RunInput{Graph: "ticker", Input: fmt.Sprintf("run %d", i)})
			if err == nil && string(res.Output) != `"done"` {
				err = fmt.Errorf("final output %s", res.Output)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("run %d: %v", i, err)
		}
	}
	if *historiesDir != "" {
		// The limiter's history, as it stands (it runs on with the
		// workers), for the replay tests (v16-rate-limits).
		saveHistories(t, c, map[string]bool{limiterOf(t, c, queue): true}, *historiesDir, "limiter")
	}
	st := srv.Stats()
	t.Logf("model server saw %+v", st)
	if st.PeakConcurrent > limit.MaxConcurrent || st.MaxInWindow > limit.Requests || st.RateLimited != 0 {
		t.Errorf("model server saw %d calls at once (limit %d), %d in a second (limit %d), %d turned away (want 0)",
			st.PeakConcurrent, limit.MaxConcurrent, st.MaxInWindow, limit.Requests, st.RateLimited)
	}
	if got := requests(srv.Calls(), nil); got != runs*turns {
		t.Errorf("%d model calls answered, want %d", got, runs*turns)
	}
}

// A model that answers 429 with a wait is asked again only once the wait
// is over, the wait is an event the run's followers see, and the run
// completes: a worker with no limit of its own against a server allowing
// one call every two seconds.
func TestModelRetryAfterHonoured(t *testing.T) {
	parallel(t)
	sc, err := scripted.ParseScenario([]byte(tickerScenario(3, 0)))
	if err != nil {
		t.Fatal(err)
	}
	srv := scripted.New(sc, scripted.WithLimits(scripted.Limits{Requests: 1, Per: 2 * time.Second}))
	url, err := srv.Start("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	queue := tickerWorkers(t, 2, url, nil)
	c := dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run, err := troupeclient.StartRun(ctx, c, queue, troupe.RunInput{Graph: "ticker", Input: "hurry"})
	if err != nil {
		t.Fatal(err)
	}
	var res troupe.RunResult
	if err := run.Get(ctx, &res); err != nil || string(res.Output) != `"done"` {
		t.Fatalf("run: %v, %s", err, res.Output)
	}
	throttles, calls := srv.Throttles(), srv.Calls()
	if len(throttles) == 0 {
		t.Fatal("the server turned no call away; the test needs it to")
	}
	// Each call turned away is followed by the next only after its wait.
	for _, th := range throttles {
		for _, call := range calls {
			if call.Start.After(th.At) && call.Start.Before(th.At.Add(th.RetryAfter)) {
				t.Errorf("a call at %s came %s after a 429 asking to wait %s", call.Start.Format(time.StampMilli), call.Start.Sub(th.At), th.RetryAfter)
			}
		}
	}
	if st := srv.Stats(); st.MaxInWindow-st.RateLimited > 1 {
		t.Errorf("stats %+v: calls let in closer than the limit", st)
	}
	events, err := troupeclient.Events(ctx, c, run.GetID(), troupeclient.WithPatience(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var waits int
	for _, e := range events {
		if e.Kind == troupe.EventModelRetry && strings.HasPrefix(e.Detail, "model rate-limited: ") {
			waits++
		}
	}
	if waits != len(throttles) {
		t.Errorf("%d rate-limit events, want one per 429 (%d)", waits, len(throttles))
	}
	if *historiesDir != "" {
		ids := map[string]bool{}
		for _, wf := range workflowTree(t, c, run.GetID()) {
			ids[wf] = true
		}
		saveHistories(t, c, ids, *historiesDir, "ratelimited")
	}
}

// limiterOf is the workflow id of the model limiter of the workers of
// queue (there is one endpoint).
func limiterOf(t *testing.T, c client.Client, queue string) string {
	t.Helper()
	resp, err := c.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running'", throttle.LimiterWorkflowName)})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range resp.GetExecutions() {
		if id := e.GetExecution().GetWorkflowId(); strings.HasPrefix(id, "troupe-model-limiter-"+queue+"-") {
			return id
		}
	}
	t.Fatalf("no running model limiter of queue %s", queue)
	return ""
}
