package events

// These tests hold the delta relay over real HTTP on loopback, with the
// client's subscriber (client.SubscribeRelay). The end-to-end path
// (discovery through the task queue's pollers, followers in another
// process) is e2e/stream_test.go's.

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/client"
)

// servedBus serves a fresh bus's deltas on loopback for one test.
func servedBus(t *testing.T) (*Bus, string) {
	t.Helper()
	bus := NewBus()
	u, release, err := bus.ServeDeltas("", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	return bus, u
}

// subscribed subscribes to the relay at u for root and returns what it
// brings; it returns once the relay has the subscription.
func subscribed(t *testing.T, bus *Bus, root string) <-chan troupe.Event {
	t.Helper()
	u := bus.RelayURL()
	before := busSubscribers(bus)
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan troupe.Event, 4096)
	errc := make(chan error, 1)
	go func() { errc <- client.SubscribeRelay(ctx, u, root, out) }()
	t.Cleanup(func() {
		cancel()
		<-errc
	})
	// Once the bus has the relay's subscription, deltas published reach
	// it. (The relay counts a subscriber against its bound before it
	// subscribes it to the bus: a test that waited for that count could
	// publish before the subscription, and wait for ever for what it
	// published.)
	waitFor(t, func() bool { return busSubscribers(bus) > before })
	return out
}

// busSubscribers is how many subscriptions the bus has: here, the relay's.
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

func TestRelayRefusesWhoHasNoToken(t *testing.T) {
	_, u := servedBus(t)
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	token, _ := parsed.User.Password()
	bare := *parsed
	bare.User = nil
	tests := []struct {
		name       string
		user, pass string
		method     string
		query      string
		want       int
	}{
		{name: "no credentials", method: "GET", query: "?root=run-1", want: http.StatusUnauthorized},
		{name: "a wrong token", user: troupe.RelayUser, pass: strings.Repeat("0", len(token)), method: "GET", query: "?root=run-1", want: http.StatusUnauthorized},
		{name: "the token under another user", user: "admin", pass: token, method: "GET", query: "?root=run-1", want: http.StatusUnauthorized},
		{name: "no root", user: troupe.RelayUser, pass: token, method: "GET", want: http.StatusBadRequest},
		{name: "not a GET", user: troupe.RelayUser, pass: token, method: "POST", query: "?root=run-1", want: http.StatusMethodNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, bare.String()+tt.query, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tt.user != "" {
				req.SetBasicAuth(tt.user, tt.pass)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("status %d; want %d", resp.StatusCode, tt.want)
			}
		})
	}
	if host := parsed.Hostname(); host != "127.0.0.1" {
		t.Errorf("relay listens on %s; want loopback by default", host)
	}
	if len(token) < 32 {
		t.Errorf("token %q: want at least 128 random bits", token)
	}
}

func TestRelayCarriesTheDeltasOfOneRun(t *testing.T) {
	bus, _ := servedBus(t)
	got := subscribed(t, bus, "run-1")
	var want []string
	for i := range 50 {
		// The run's agents and the run's own id are the run's; another
		// run, one whose id merely starts the same, and recorded events
		// are not the relay's to carry.
		bus.PublishDelta(troupe.Event{Kind: troupe.EventTextDelta, WorkflowID: "run-1/0-a", Turn: 1, Detail: fmt.Sprint("a", i)})
		bus.PublishDelta(troupe.Event{Kind: troupe.EventTextDelta, WorkflowID: "run-10/0-a", Turn: 1, Detail: "other run"})
		bus.PublishDelta(troupe.Event{Kind: troupe.EventTextDelta, WorkflowID: "run-2/0-a", Turn: 1, Detail: "other run"})
		bus.Publish(troupe.Event{Seq: i + 1, Kind: troupe.EventToolCalled, WorkflowID: "run-1/0-a"})
		want = append(want, fmt.Sprint("a", i))
		if i == 20 {
			bus.PublishDelta(troupe.Event{Kind: troupe.EventTextDelta, WorkflowID: "run-1/0-a/t1.0/0-b", Turn: 2, Detail: "child"})
			want = append(want, "child")
		}
	}
	bus.PublishDelta(troupe.Event{Kind: troupe.EventTextEnd, WorkflowID: "run-1/0-a", Turn: 1})
	var seen []string
	for e := range got {
		if e.Kind == troupe.EventTextEnd {
			break
		}
		if e.Seq != 0 || e.Kind != troupe.EventTextDelta {
			t.Errorf("relay brought %+v; want deltas only, numbered 0", e)
		}
		seen = append(seen, e.Detail)
	}
	if strings.Join(seen, "|") != strings.Join(want, "|") {
		t.Errorf("relay brought %q;\nwant %q", seen, want)
	}
}

// TestRelayDropsForSlowSubscribers: a subscriber that reads nothing costs
// the model call nothing: publishing never waits for it, and what it
// holds is bounded.
func TestRelayDropsForSlowSubscribers(t *testing.T) {
	bus, u := servedBus(t)
	req, err := http.NewRequest("GET", u+"?root=run-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req) // never read
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	piece := strings.Repeat("x", 1000)
	for range 100_000 { // 100 MB, far beyond any socket buffer
		bus.PublishDelta(troupe.Event{Kind: troupe.EventTextDelta, WorkflowID: "run-1/0-a", Turn: 1, Detail: piece})
	}
	// Still serving: a second subscriber gets what is published now.
	got := subscribed(t, bus, "run-1")
	bus.PublishDelta(troupe.Event{Kind: troupe.EventTextDelta, WorkflowID: "run-1/0-a", Turn: 2, Detail: "after"})
	for e := range got {
		if e.Turn == 2 {
			if e.Detail != "after" {
				t.Errorf("got %+v", e)
			}
			break
		}
	}
}

func TestRelayBoundsItsSubscribers(t *testing.T) {
	_, u := servedBus(t)
	var bodies []*http.Response
	defer func() {
		for _, b := range bodies {
			b.Body.Close()
		}
	}()
	for i := range maxRelaySubscribers + 1 {
		resp, err := http.Get(u + "?root=run-1")
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, resp)
		want := http.StatusOK
		if i == maxRelaySubscribers {
			want = http.StatusServiceUnavailable
		}
		if resp.StatusCode != want {
			t.Fatalf("subscriber %d: status %d; want %d", i+1, resp.StatusCode, want)
		}
	}
}

// TestRelayIsSharedByTheWorkersOfABus: two workers of one bus serve one
// relay (a follower would otherwise get each delta twice); it stops with
// the last.
func TestRelayIsSharedByTheWorkersOfABus(t *testing.T) {
	bus := NewBus()
	u1, release1, err := bus.ServeDeltas("", "")
	if err != nil {
		t.Fatal(err)
	}
	u2, release2, err := bus.ServeDeltas("", "")
	if err != nil {
		t.Fatal(err)
	}
	if u1 != u2 || bus.RelayURL() != u1 {
		t.Fatalf("relays %s and %s (bus says %s); want one", u1, u2, bus.RelayURL())
	}
	release1()
	release1() // twice is once
	if resp, err := http.Get(u1 + "?root=r"); err != nil {
		t.Fatalf("relay stopped with a worker still serving it: %v", err)
	} else {
		resp.Body.Close()
	}
	release2()
	if bus.RelayURL() != "" {
		t.Errorf("RelayURL = %s after the last release; want none", bus.RelayURL())
	}
	if resp, err := http.Get(u1 + "?root=r"); err == nil {
		resp.Body.Close()
		t.Errorf("relay still answers after the last release")
	}
}
