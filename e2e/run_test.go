package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/examples/dealdesk"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/model/scripted"
)

func TestDealDesk(t *testing.T) {
	parallel(t)
	c := dial(t)
	for _, api := range apis {
		t.Run(string(api), func(t *testing.T) {
			ms, url := modelServer(t)
			queue := startWorker(t, c, url, api, nil)
			run, err := client.StartRun(context.Background(), c, queue, troupe.RunInput{Graph: "dealdesk", Input: "Review the Acme Corp deal"})
			if err != nil {
				t.Fatal(err)
			}
			var events []troupe.Event
			fctx, stop := context.WithCancel(context.Background())
			followed := make(chan struct{})
			go func() {
				defer close(followed)
				_ = client.Follow(fctx, c, run.GetID(), 50*time.Millisecond, func(e troupe.Event) { events = append(events, e) })
			}()
			var res troupe.RunResult
			err = run.Get(context.Background(), &res)
			stop()
			<-followed
			if err != nil {
				t.Fatal(err)
			}
			rec, err := agents.Decode[dealdesk.Recommendation](res.Output)
			if err != nil {
				t.Fatalf("output %s: %v", res.Output, err)
			}
			if rec.Decision != "approve_with_conditions" || rec.PricingRisk != "high" || rec.RolloutRisk != "medium" {
				t.Errorf("recommendation = %+v", rec)
			}
			// The conditions quote the documents the reviewers read through their tool.
			if len(rec.Conditions) != 2 || !strings.Contains(rec.Conditions[0], "35%") || !strings.Contains(rec.Conditions[1], "8 weeks") {
				t.Errorf("conditions = %q", rec.Conditions)
			}
			if got := strings.Join(res.Path, ">"); got != "triage>coordinator" {
				t.Errorf("path = %s", got)
			}
			if res.Usage.Requests != 7 || ms.Requests("pricing-reviews") != 1 || ms.Requests("rollout-reviews") != 1 {
				t.Errorf("usage requests = %d (want 7), pricing-reviews %d, rollout-reviews %d",
					res.Usage.Requests, ms.Requests("pricing-reviews"), ms.Requests("rollout-reviews"))
			}
			checkCausal(t, run.GetID(), events)
			kinds := map[string]int{}
			ids := map[string]bool{}
			for _, e := range events {
				kinds[e.Kind]++
				ids[e.WorkflowID] = true
			}
			if len(ids) != 5 {
				t.Errorf("events came from %d workflows, want 5 (orchestrator, triage, coordinator, two reviewers)", len(ids))
			}
			if *historiesDir != "" && api == model.APIResponses {
				saveHistories(t, c, ids, *historiesDir, "dealdesk")
			}
			for kind, want := range map[string]int{
				troupe.EventAgentToolStarted: 2, troupe.EventAgentToolFinished: 2,
				troupe.EventToolCalled: 2, troupe.EventToolResult: 2,
			} {
				if kinds[kind] != want {
					t.Errorf("%d %s events, want %d (all: %v)", kinds[kind], kind, want, kinds)
				}
			}
			if kinds[troupe.EventHandoff] < 1 || kinds[troupe.EventFinal] < 1 {
				t.Errorf("events lack a handoff or a final output: %v", kinds)
			}
		})
	}
}

func TestHandoffChain(t *testing.T) {
	parallel(t)
	c := dial(t)
	for _, api := range apis {
		t.Run(string(api), func(t *testing.T) {
			ms, url := modelServer(t)
			queue := startWorker(t, c, url, api, nil)
			res, err := runGraph(t, c, queue, troupe.RunInput{Graph: "chain", Input: "hello there"})
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(res.Path, ">"); got != "a>b>c" || res.Handoffs != 2 {
				t.Errorf("path = %s, handoffs %d", got, res.Handoffs)
			}
			if string(res.Output) != `"c answered: hello there"` {
				t.Errorf("output = %s", res.Output)
			}
			for _, rule := range []string{"chain-a", "chain-b", "chain-c"} {
				if ms.Requests(rule) != 1 {
					t.Errorf("%s answered %d times, want 1", rule, ms.Requests(rule))
				}
			}
		})
	}
}

// TestAgentsAsToolsOverlap: the four agents-as-tools of one turn run at
// once. The model server holds each of their calls until all four are in
// flight, so what the test sees does not hang on how fast a loaded
// machine starts them; called one after the other, the first would wait
// for the others in vain (a minute) and the most in flight would be one.
func TestAgentsAsToolsOverlap(t *testing.T) {
	parallel(t)
	c := dial(t)
	for _, api := range apis {
		t.Run(string(api), func(t *testing.T) {
			ms := scripted.New(scenario(t))
			g := &gate{next: ms, match: "fan worker slow", want: 4, all: make(chan struct{})}
			srv := httptest.NewServer(g)
			t.Cleanup(srv.Close)
			queue := startWorker(t, c, srv.URL+"/v1", api, nil)
			res, err := runGraph(t, c, queue, troupe.RunInput{Graph: "fan", Input: "split the work"})
			if err != nil {
				t.Fatal(err)
			}
			var text string
			_ = json.Unmarshal(res.Output, &text)
			if text != "part 1 done slowly;part 2 done slowly;part 3 done slowly;part 4 done slowly;" {
				t.Errorf("output = %q", text)
			}
			if n := ms.Requests("fan-slow"); n != 4 {
				t.Errorf("%d worker calls, want 4", n)
			}
			if most := g.most(); most < 4 {
				t.Errorf("at most %d of the four agent tools' model calls in flight at once, want all four", most)
			}
		})
	}
}

// gate is a model server's front that holds the requests whose body
// holds match until want of them are in flight at once (or for a minute,
// when they never are), and records how many were in flight at most.
type gate struct {
	next  http.Handler
	match string
	want  int
	all   chan struct{} // closed once want are in flight

	mu                 sync.Mutex
	inFlight, mostSeen int
	open               bool
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if !bytes.Contains(body, []byte(g.match)) {
		g.next.ServeHTTP(w, r)
		return
	}
	g.mu.Lock()
	g.inFlight++
	g.mostSeen = max(g.mostSeen, g.inFlight)
	if g.inFlight >= g.want && !g.open {
		g.open = true
		close(g.all)
	}
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.inFlight--
		g.mu.Unlock()
	}()
	wait := time.NewTimer(time.Minute)
	defer wait.Stop()
	select {
	case <-g.all:
	case <-wait.C:
	case <-r.Context().Done():
		return
	}
	g.next.ServeHTTP(w, r)
}

func (g *gate) most() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mostSeen
}

func TestStructuredOutputCorrected(t *testing.T) {
	parallel(t)
	c := dial(t)
	for _, api := range apis {
		t.Run(string(api), func(t *testing.T) {
			ms, url := modelServer(t)
			queue := startWorker(t, c, url, api, nil)
			res, err := runGraph(t, c, queue, troupe.RunInput{Graph: "fix", Input: "assess"})
			if err != nil {
				t.Fatal(err)
			}
			if string(res.Output) != `{"note":"corrected","risk":"low"}` {
				t.Errorf("output = %s", res.Output)
			}
			if ms.Requests("fix-invalid") != 1 || ms.Requests("fix-corrected") != 1 || res.Turns != 2 {
				t.Errorf("invalid %d, corrected %d, turns %d; want 1, 1, 2", ms.Requests("fix-invalid"), ms.Requests("fix-corrected"), res.Turns)
			}
		})
	}
}

// TestFollowIsPushed: a follower whose polls are an hour apart still gets
// a run's events as the run records them, because it watches the
// workflows' histories (a long poll the server answers as each grows):
// the agent's tool result comes while the run still runs (its next model
// call hangs for two minutes), not with the run's end.
func TestFollowIsPushed(t *testing.T) {
	parallel(t)
	c := dial(t)
	_, url := modelServer(t)
	queue := startWorker(t, c, url, "", nil)
	ctx := context.Background()
	run, err := client.StartRun(ctx, c, queue, troupe.RunInput{Graph: "watch", Input: "go"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CancelWorkflow(context.Background(), run.GetID(), "") })
	got := make(chan troupe.Event, 100)
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		_ = client.Follow(fctx, c, run.GetID(), time.Hour, func(e troupe.Event) { got <- e })
	}()
	// The guard only ends a broken follower's wait: the run hangs longer.
	guard := time.After(100 * time.Second)
	for {
		select {
		case e := <-got:
			if e.Kind != troupe.EventToolResult {
				continue
			}
		case <-guard:
			t.Fatal("no tool result followed while the run ran")
		}
		break
	}
	d, err := c.DescribeWorkflowExecution(ctx, run.GetID(), "")
	if err != nil {
		t.Fatal(err)
	}
	if st := d.GetWorkflowExecutionInfo().GetStatus(); st != enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
		t.Errorf("the tool result was followed when the run was %v; want it while the run runs", st)
	}
}

// checkCausal fails t unless events, as a follower of run root passed
// them on, came each once, parents first: every workflow's events after
// the event of its parent that started it (Child), and in their own
// order.
func checkCausal(t *testing.T, root string, events []troupe.Event) {
	t.Helper()
	shown := map[string]bool{root: true}
	last := map[string]int{}
	for i, e := range events {
		if !shown[e.WorkflowID] {
			t.Errorf("event %d (%s of %s) came before the event that started its workflow", i, e.Kind, e.WorkflowID)
		}
		if e.Seq <= last[e.WorkflowID] {
			t.Errorf("event %d (%s of %s) is #%d, after #%d: out of order or twice", i, e.Kind, e.WorkflowID, e.Seq, last[e.WorkflowID])
		}
		last[e.WorkflowID] = e.Seq
		if e.Child != "" {
			shown[e.Child] = true
		}
	}
}
