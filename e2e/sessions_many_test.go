package e2e

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/workflows"
)

// manySessions is how many sessions TestSessionsCreatedConcurrently
// creates: 1,000 (10,000 with -scale, make scale).
func manySessions() int {
	if *fullScale {
		return 10000
	}
	return 1000
}

// Sessions by the thousand: 64 clients, each its own connection, create
// manySessions() sessions at once on one worker, of two graphs, with no
// error; the manager continues as new under the burst, no run of it past
// its bound by more than the updates under way (64 at most); paging through
// the list (ListSessions, as sessions ls does) gives each session created
// once and no other (a create the server hands the manager's next run
// again is not done twice), in the order Sessions gives in one go, and
// the filters by graph and status give exactly theirs.
func TestSessionsCreatedConcurrently(t *testing.T) {
	parallelLong(t) // long and on its own worker
	const clients, bound = 64, 1000
	n := manySessions()
	cl, _, c := sessionClient(t, "local", func(cfg *workflows.Config) { cfg.ContinueAfterEvents = bound })
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(n/100+5)*time.Minute) // a hang detector
	defer cancel()
	graphOf := func(i int) string {
		if i%4 == 0 {
			return "notes"
		}
		return "chatter"
	}
	ids := make([]string, n)
	next := make(chan int)
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	began := time.Now()
	for range clients {
		own, err := troupeclient.New(troupeclient.Config{Temporal: dial(t), TaskQueue: cl.TaskQueue()})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				s, _, err := own.CreateSession(ctx, troupeclient.SessionInput{Graph: graphOf(i), Name: fmt.Sprintf("n%d", i)})
				if err != nil {
					errs <- fmt.Errorf("session %d, after %s: %w", i, time.Since(began), err)
					continue
				}
				ids[i] = s.ID()
			}
		}()
	}
	go func() {
		defer close(next)
		for i := range n {
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	failed := false
	for err := range errs {
		t.Error(err)
		failed = true
	}
	if failed {
		var none []troupeclient.SessionEntry
		for i, id := range ids {
			if id == "" {
				none = append(none, troupeclient.SessionEntry{Name: fmt.Sprintf("n%d", i)})
			}
		}
		dumpManager(t, c, troupe.SessionManagerIDFor(cl.TaskQueue()), none, map[string]bool{})
		t.FailNow()
	}
	t.Logf("%d sessions created by %d clients in %s", n, clients, time.Since(began).Round(time.Millisecond))

	// A few stopped, for the status filter.
	var stopped []string
	for i := 1; i < n; i += n / 5 {
		if _, err := cl.Session(ids[i]).Command(ctx, troupeclient.SessionCommand{Op: troupe.CommandStop}); err != nil {
			t.Fatal(err)
		}
		stopped = append(stopped, ids[i])
	}

	// Every page by Next, at a limit that leaves a last page part full.
	list := func(in troupeclient.SessionsPageInput) []troupeclient.SessionEntry {
		t.Helper()
		var all []troupeclient.SessionEntry
		for pages := 0; ; pages++ {
			page, err := cl.ListSessions(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Sessions) > in.Limit {
				t.Fatalf("a page of %d sessions at a limit of %d", len(page.Sessions), in.Limit)
			}
			all = append(all, page.Sessions...)
			if page.Total != len(all) && page.Next == "" {
				t.Fatalf("the last page, with %d listed, says %d in all", len(all), page.Total)
			}
			if page.Next == "" {
				return all
			}
			if pages > n {
				t.Fatal("more pages than sessions")
			}
			in.After = page.Next
		}
	}
	idsOf := func(es []troupeclient.SessionEntry) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.ID)
		}
		return out
	}
	listed := list(troupeclient.SessionsPageInput{Limit: 97})
	all := idsOf(listed)
	if len(all) != n || !sameSet(all, ids) {
		created := distinct(ids)
		for _, e := range listed {
			if !created[e.ID] {
				t.Errorf("listed, not created: %+v", e)
			}
		}
		dumpManager(t, c, troupe.SessionManagerIDFor(cl.TaskQueue()), listed, created)
		t.Fatalf("listed %d sessions (%d distinct), want the %d created", len(all), len(distinct(all)), n)
	}
	var notes []string
	for i, id := range ids {
		if graphOf(i) == "notes" {
			notes = append(notes, id)
		}
	}
	byGraph := list(troupeclient.SessionsPageInput{Limit: 50, Graph: "notes"})
	if got := idsOf(byGraph); !sameSet(got, notes) || len(got) != len(notes) {
		t.Errorf("--graph notes listed %d sessions, want the %d of that graph", len(got), len(notes))
	}
	// The stop reaches the registry at once (the manager's command).
	if got := idsOf(list(troupeclient.SessionsPageInput{Limit: 2, Status: runtime.SessionStopped})); !sameSet(got, stopped) || len(got) != len(stopped) {
		t.Errorf("--status stopped listed %v, want %v", got, stopped)
	}
	if idle := list(troupeclient.SessionsPageInput{Limit: troupe.MaxSessionsPage, Status: runtime.SessionIdle}); len(idle) != n-len(stopped) {
		t.Errorf("--status idle listed %d sessions, want %d", len(idle), n-len(stopped))
	}
	// In order of creation: the registry's order is stable page to page,
	// so the listed order is the one Sessions gives in one go.
	whole, err := cl.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(idsOf(whole), all) {
		t.Error("Sessions and the pages of ListSessions list the sessions in different orders")
	}

	// The manager continued as new along the way and kept each run's
	// history near its bound.
	mgr := troupe.SessionManagerIDFor(cl.TaskQueue())
	runs, longest := 0, 0
	for runID := ""; ; runs++ {
		events, prev := 0, ""
		it := c.GetWorkflowHistory(ctx, mgr, runID, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			events++
			if a := e.GetWorkflowExecutionStartedEventAttributes(); a != nil {
				prev = a.GetContinuedExecutionRunId()
			}
		}
		longest = max(longest, events)
		if prev == "" {
			runs++
			break
		}
		runID = prev
	}
	t.Logf("the manager ran %d runs, the longest of %d events", runs, longest)
	// Without turning updates away at the bound, a burst holds off the
	// continue-as-new: a run of 3,000 events and more at 1,000 sessions.
	if runs < 2 || longest > 2*bound {
		t.Errorf("the manager ran %d runs, the longest of %d events: want it continued as new, no run past %d events", runs, longest, 2*bound)
	}
}

// sameSet is whether a and b hold the same strings, each once.
func sameSet(a, b []string) bool {
	da, db := distinct(a), distinct(b)
	if len(da) != len(a) || len(db) != len(b) || len(da) != len(db) {
		return false
	}
	for s := range da {
		if !db[s] {
			return false
		}
	}
	return true
}

func distinct(ss []string) map[string]bool {
	out := make(map[string]bool, len(ss))
	for _, s := range ss {
		out[s] = true
	}
	return out
}

// dumpManager logs, for each of the sessions listed and not created, the
// updates of the manager's runs that created a session of its name, and
// the sessions they started: a create done twice shows its update taken
// in two runs.
func dumpManager(t *testing.T, c client.Client, mgr string, listed []troupeclient.SessionEntry, created map[string]bool) {
	t.Helper()
	names := map[string]bool{}
	for _, e := range listed {
		if !created[e.ID] {
			names[`"`+e.Name+`"`] = true
		}
	}
	ctx := context.Background()
	for runID, run := "", 0; ; run++ {
		prev := ""
		it := c.GetWorkflowHistory(ctx, mgr, runID, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			if a := e.GetWorkflowExecutionStartedEventAttributes(); a != nil {
				prev = a.GetContinuedExecutionRunId()
			}
			for n := range names {
				name := []byte(`"name":` + n)
				if a := e.GetWorkflowExecutionUpdateAcceptedEventAttributes(); a != nil {
					for _, p := range a.GetAcceptedRequest().GetInput().GetArgs().GetPayloads() {
						if bytes.Contains(p.GetData(), name) {
							t.Logf("run -%d event %d: update %s accepted (%s)", run, e.GetEventId(), a.GetAcceptedRequest().GetMeta().GetUpdateId(), n)
						}
					}
				}
				if a := e.GetStartChildWorkflowExecutionInitiatedEventAttributes(); a != nil {
					for _, p := range a.GetInput().GetPayloads() {
						if bytes.Contains(p.GetData(), name) {
							t.Logf("run -%d event %d: child %s started by task %d (%s)", run, e.GetEventId(), a.GetWorkflowId(), a.GetWorkflowTaskCompletedEventId(), n)
						}
					}
				}
			}
		}
		if prev == "" {
			return
		}
		runID = prev
	}
}
