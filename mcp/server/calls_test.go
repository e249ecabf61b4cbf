package server

import (
	"context"
	"log/slog"
	"testing"
	"time"
)

// TestCallsCancel: a client's cancellation cancels the call's run however
// it races with the start and with the handler's return; nothing else
// does.
func TestCallsCancel(t *testing.T) {
	key := callKey{session: "s", request: "7"}
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
			tc.steps(cs, func() { cs.cancel("s", float64(7), "test") })
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
