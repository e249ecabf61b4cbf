package events

// These tests hold a live feed's answers (Feed.Answer) on a bus, without a
// server. The path through Temporal (ServeFeed, the query, discovery in
// the task queue's pollers, followers in another process) is
// e2e/stream_test.go's.

import (
	"testing"
	"time"

	"github.com/troupe-dev/troupe"
)

func testFeed(t *testing.T) (*Bus, *Feed) {
	t.Helper()
	bus := NewBus()
	f := newFeed(bus, "troupe-live/test/1")
	t.Cleanup(f.close)
	return bus, f
}

func answer(t *testing.T, f *Feed, req troupe.LiveRequest) troupe.LivePage {
	t.Helper()
	p, err := f.Answer(req)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func kinds(evs []troupe.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Kind+":"+e.WorkflowID)
	}
	return out
}

func TestFeedPagesARunsEventsAndDeltas(t *testing.T) {
	bus, f := testFeed(t)
	// The first request starts the watch, with what the bus carried of
	// the run lately.
	bus.Publish(troupe.Event{Kind: troupe.EventRunStarted, WorkflowID: "r", Seq: 1})
	bus.Publish(troupe.Event{Kind: troupe.EventRunStarted, WorkflowID: "other", Seq: 1})
	first := answer(t, f, troupe.LiveRequest{Root: "r", Deltas: true})
	if k := kinds(first.Events); !equal(k, []string{"run_started:r"}) || first.Lost || first.Watch == "" || first.Next != 1 {
		t.Fatalf("first page %v next %d lost %v watch %q; want the run's recent run_started, a watch, nothing lost", k, first.Next, first.Lost, first.Watch)
	}
	bus.Publish(troupe.Event{Kind: troupe.EventAgentStarted, WorkflowID: "r", Seq: 2})
	bus.PublishDelta(troupe.Event{Kind: troupe.EventTextDelta, WorkflowID: "r/0-a", Turn: 1, Detail: "he"})
	bus.Publish(troupe.Event{Kind: troupe.EventAgentStarted, WorkflowID: "other", Seq: 1})
	bus.Publish(troupe.Event{Kind: troupe.EventAgentStarted, WorkflowID: "r2", Seq: 1}) // not r's: its id only starts alike
	bus.PublishDelta(troupe.Event{Kind: troupe.EventTextEnd, WorkflowID: "r/0-a", Turn: 1})
	bus.Publish(troupe.Event{Kind: troupe.EventTurn, WorkflowID: "r/0-a", Turn: 1, Seq: 1})

	tests := []struct {
		name string
		req  troupe.LiveRequest
		want []string
		next uint64
	}{
		{"deltas", troupe.LiveRequest{Root: "r", Watch: first.Watch, After: 1, Deltas: true},
			[]string{"agent_started:r", "text_delta:r/0-a", "text_end:r/0-a", "model_turn:r/0-a"}, 5},
		{"events only", troupe.LiveRequest{Root: "r", Watch: first.Watch, After: 1},
			[]string{"agent_started:r", "model_turn:r/0-a"}, 5},
		{"after a cursor", troupe.LiveRequest{Root: "r", Watch: first.Watch, After: 3, Deltas: true},
			[]string{"text_end:r/0-a", "model_turn:r/0-a"}, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := answer(t, f, tt.req)
			if got := kinds(p.Events); !equal(got, tt.want) || p.Next != tt.next || p.Lost || p.Watch != first.Watch {
				t.Errorf("page %v next %d lost %v watch %s; want %v next %d, nothing lost, watch %s", got, p.Next, p.Lost, p.Watch, tt.want, tt.next, first.Watch)
			}
		})
	}
	// A follower of another watch (one that ended) gets this one's items
	// from its first, and is told it lost some.
	if p := answer(t, f, troupe.LiveRequest{Root: "r", Watch: "gone", After: 9, Deltas: true}); len(p.Events) != 5 || !p.Lost {
		t.Errorf("a follower of an ended watch got %v, lost %v; want the 5 items, lost", kinds(p.Events), p.Lost)
	}
	if _, err := f.Answer(troupe.LiveRequest{}); err == nil {
		t.Error("a request with no root was answered")
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A request that finds nothing waits for the next item and returns with
// it; deltas wake no follower that does not take them.
func TestFeedHoldsARequestUntilNews(t *testing.T) {
	bus, f := testFeed(t)
	w := answer(t, f, troupe.LiveRequest{Root: "r"}).Watch
	got := make(chan troupe.LivePage, 1)
	go func() {
		p, _ := f.Answer(troupe.LiveRequest{Root: "r", Watch: w, WaitMS: troupe.LiveMaxWait})
		got <- p
	}()
	waitFor(t, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		ww := f.watches["r"]
		ww.mu.Lock()
		defer ww.mu.Unlock()
		return ww.waiting == 1
	})
	bus.PublishDelta(troupe.Event{Kind: troupe.EventTextDelta, WorkflowID: "r/0-a", Turn: 1, Detail: "x"})
	select {
	case p := <-got:
		t.Fatalf("a delta woke a follower of events only: %+v", p)
	case <-time.After(50 * time.Millisecond):
	}
	bus.Publish(troupe.Event{Kind: troupe.EventTurn, WorkflowID: "r/0-a", Turn: 1, Seq: 1})
	p := <-got
	if k := kinds(p.Events); !equal(k, []string{"model_turn:r/0-a"}) || p.Next != 2 {
		t.Errorf("held request answered %v next %d; want the model_turn, next 2", k, p.Next)
	}
	// A request with no wait answers at once, empty.
	if p := answer(t, f, troupe.LiveRequest{Root: "r", Watch: w, After: 2}); len(p.Events) != 0 || p.Next != 2 {
		t.Errorf("an unheld request got %+v", p)
	}
}

// A follower that falls behind the buffer is told it lost items, and goes
// on from the oldest kept; the feed keeps a bounded number.
func TestFeedBoundsWhatItKeeps(t *testing.T) {
	bus, f := testFeed(t)
	w := answer(t, f, troupe.LiveRequest{Root: "r"}).Watch
	for i := range 3 * feedBuffer {
		bus.PublishDelta(troupe.Event{Kind: troupe.EventTextDelta, WorkflowID: "r/0-a", Turn: 1, Detail: string(rune('a' + i%26))})
	}
	f.mu.Lock()
	kept := len(f.watches["r"].items)
	f.mu.Unlock()
	if kept >= 2*feedBuffer {
		t.Errorf("the watch keeps %d items; want fewer than %d", kept, 2*feedBuffer)
	}
	p := answer(t, f, troupe.LiveRequest{Root: "r", Watch: w, After: 1, Deltas: true})
	if !p.Lost || len(p.Events) != feedPage || p.Next <= feedBuffer {
		t.Errorf("a follower behind the buffer got %d items from %d, lost %v; want a page, lost", len(p.Events), p.Next, p.Lost)
	}
}

// A watch no follower asks about ends, and with it its subscription.
func TestFeedEndsIdleWatches(t *testing.T) {
	bus, f := testFeed(t)
	answer(t, f, troupe.LiveRequest{Root: "r"})
	answer(t, f, troupe.LiveRequest{Root: "s"})
	// The feed's own, for the recent items, and one a watch.
	if n := busSubscribers(bus); n != 3 {
		t.Fatalf("%d subscriptions for two watches; want 3", n)
	}
	f.expire(time.Now()) // too early: kept
	if n := busSubscribers(bus); n != 3 {
		t.Fatalf("%d subscriptions after an early sweep; want 3", n)
	}
	f.expire(time.Now().Add(feedWatchIdle))
	if n := busSubscribers(bus); n != 1 {
		t.Errorf("%d subscriptions after the watches went idle; want 1", n)
	}
	f.close()
	if n := busSubscribers(bus); n != 0 {
		t.Errorf("%d subscriptions after the feed closed; want 0", n)
	}
	if _, err := f.Answer(troupe.LiveRequest{Root: "r"}); err == nil {
		t.Error("a closed feed answered")
	}
}

// busSubscribers is how many subscriptions the bus has.
func busSubscribers(bus *Bus) int {
	bus.mu.Lock()
	defer bus.mu.Unlock()
	return len(bus.subs)
}

// waitFor polls cond until it holds; a test that never gets there is
// stopped by go test's timeout.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for !cond() {
		time.Sleep(5 * time.Millisecond)
	}
}
