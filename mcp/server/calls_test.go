package server

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"
)

// TestCallsCancel: a client's cancellation cancels the call's run however
// it races with the start and with the handler's return; nothing else
// does.
func TestCallsCancel(t *testing.T) {
	key := callKey{session: "s", request: "n:7"}
	tests := []struct {
		name string
		// steps runs the call's life; cancel sends the client's
		// notifications/cancelled for request 7 of session s.
		steps      func(cs *calls, cancel func())
		wantCancel bool
	}{
		{"cancelled while waiting", func(cs *calls, cancel func()) {
			cl, _ := cs.add(context.Background(), key)
			cs.started(cl, "wf")
			cancel()
			cs.remove(cl, true)
		}, true},
		{"cancelled before the run started", func(cs *calls, cancel func()) {
			cl, _ := cs.add(context.Background(), key)
			cancel()
			cs.started(cl, "wf")
			cs.remove(cl, true)
		}, true},
		{"cancellation after the handler stopped waiting", func(cs *calls, cancel func()) {
			cl, _ := cs.add(context.Background(), key)
			cs.started(cl, "wf")
			cs.remove(cl, true)
			cancel()
		}, true},
		{"cancellation after the run's result", func(cs *calls, cancel func()) {
			cl, _ := cs.add(context.Background(), key)
			cs.started(cl, "wf")
			cs.remove(cl, false)
			cancel()
		}, false},
		{"session released: no cancel", func(cs *calls, cancel func()) {
			cl, ctx := cs.add(context.Background(), key)
			cs.started(cl, "wf")
			cs.releaseSession("s", errDisconnected)
			if context.Cause(ctx) != errDisconnected {
				t.Errorf("cause %v, want %v", context.Cause(ctx), errDisconnected)
			}
			cs.remove(cl, true)
		}, false},
		{"cancelled before the handler registered the call", func(cs *calls, cancel func()) {
			cancel()
			cl, _ := cs.add(context.Background(), key)
			if !cs.wasCancelled(cl) {
				t.Error("the call is not cancelled: its handler would start the run")
			}
			cs.remove(cl, false)
		}, false},
		{"unaddressable call", func(cs *calls, cancel func()) {
			cl, _ := cs.add(context.Background(), callKey{})
			cs.started(cl, "wf")
			cancel()
			cs.remove(cl, true)
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cancelled := make(chan string, 1)
			cs := newCalls(func(_ context.Context, id string) error { cancelled <- id; return nil }, slog.New(slog.DiscardHandler))
			tc.steps(cs, func() { cs.cancel("s", "n:7", "test") })
			select {
			case id := <-cancelled:
				if !tc.wantCancel || id != "wf" {
					t.Errorf("run %q cancelled, want cancel = %v", id, tc.wantCancel)
				}
			case <-time.After(200 * time.Millisecond):
				if tc.wantCancel {
					t.Error("the run was not cancelled")
				}
			}
		})
	}
}

// TestCallsTombstones: a cancellation of a request not seen yet marks
// that request, and only it, once; and there is a bound on how many are
// kept.
func TestCallsTombstones(t *testing.T) {
	cs := newCalls(func(context.Context, string) error { return nil }, slog.New(slog.DiscardHandler))
	cs.cancel("s", "n:7", "test")
	for _, tc := range []struct {
		name string
		key  callKey
		want bool
	}{
		{"other request", callKey{"s", "n:8"}, false},
		{"same request id in another session", callKey{"t", "n:7"}, false},
		{"string id of the same digits", callKey{"s", "s:7"}, false},
		{"the cancelled request", callKey{"s", "n:7"}, true},
		{"the cancelled request again, after its call", callKey{"s", "n:7"}, false},
	} {
		cl, _ := cs.add(context.Background(), tc.key)
		if got := cs.wasCancelled(cl); got != tc.want {
			t.Errorf("%s: cancelled = %v, want %v", tc.name, got, tc.want)
		}
		cs.remove(cl, false)
	}
	for i := range 2 * maxTombstones {
		cs.cancel("s", fmt.Sprintf("n:%d", 1000+i), "flood")
	}
	cs.mu.Lock()
	n, counted := len(cs.byKey), cs.tombstones
	cs.mu.Unlock()
	if n != maxTombstones || counted != maxTombstones {
		t.Errorf("%d keys (%d counted) after a flood of cancellations, want %d", n, counted, maxTombstones)
	}
}
