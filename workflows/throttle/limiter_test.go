package throttle

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/agents"
)

func TestFairShares(t *testing.T) {
	want := func(h Holder) int { return h.WantCalls }
	for _, tc := range []struct {
		name  string
		total int
		wants []int
		out   []int
	}{
		{"equal", 50, []int{100, 100}, []int{25, 25}},
		{"one small", 50, []int{10, 100}, []int{10, 40}},
		{"room left spread over those that want", 50, []int{10, 10, 0}, []int{25, 25, 0}},
		{"odd ones in order", 10, []int{100, 100, 100}, []int{4, 3, 3}},
		{"none wants", 10, []int{0, 0}, []int{0, 0}},
		{"fewer than holders", 2, []int{5, 5, 5}, []int{1, 1, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs := make([]Holder, len(tc.wants))
			for i, w := range tc.wants {
				hs[i].WantCalls = w
			}
			got := fairShares(tc.total, hs, want)
			for i := range got {
				if got[i] != tc.out[i] {
					t.Fatalf("shares %v, want %v", got, tc.out)
				}
			}
		})
	}
}

// worker is a simulated holder: what it enforces and uses.
type worker struct {
	id            string
	calls, starts int // its grant, as it enforces it (Unlimited none)
	inFlight      int
	recent        int
	want          int
}

// Whatever the order of renewals and whatever each worker uses within
// what it enforces, what the workers may use never adds up past the limit,
// and shares follow demand: three busy workers end with a third each.
func TestSharesNeverPassTheLimit(t *testing.T) {
	limit := agents.ModelLimit{MaxConcurrent: 50, Requests: 100}
	st := &LimiterState{Endpoint: "e"}
	ws := []*worker{{id: "a", want: 200}, {id: "b", want: 200}, {id: "c", want: 0}}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(1, 2))
	for step := range 2000 {
		now = now.Add(time.Duration(rng.IntN(300)) * time.Millisecond)
		w := ws[rng.IntN(len(ws))]
		if step%100 == 0 && step < 1500 {
			// Demand moves.
			for _, w := range ws {
				w.want = []int{0, 10, 200}[rng.IntN(3)]
			}
		}
		if step == 1500 {
			for _, w := range ws {
				w.want = 200
			}
		}
		// The worker uses what it may: up to what it enforces and wants,
		// or, above that, no more than it used (calls in flight end, starts
		// leave the window, none begins).
		use := func(cap, used int) int {
			if cap == Unlimited {
				cap = 1 << 20
			}
			top := max(min(cap, w.want), used)
			if rng.IntN(2) == 0 {
				return top
			}
			return rng.IntN(top + 1)
		}
		w.inFlight, w.recent = use(w.calls, w.inFlight), use(w.starts, w.recent)
		g := st.Renew(now, RenewRequest{Holder: w.id, Limit: limit, Calls: w.calls, Starts: w.starts,
			InFlight: w.inFlight, Recent: w.recent, WantCalls: w.want, WantStarts: w.want})
		w.calls, w.starts = g.Calls, g.Starts
		// The most the workers may use now, each up to what it enforces
		// or above it by what it used before.
		calls, starts := 0, 0
		for _, w := range ws {
			calls += max(w.calls, w.inFlight)
			starts += max(w.starts, w.recent)
		}
		if calls > limit.MaxConcurrent || starts > limit.Requests {
			t.Fatalf("step %d: workers may use %d calls and %d starts, past %s: %+v", step, calls, starts, limit, st.Holders)
		}
	}
	for _, w := range ws {
		if w.calls < 15 || w.calls > 17 || w.starts < 32 || w.starts > 34 {
			t.Errorf("worker %s ends with %d calls, %d starts; want about a third each", w.id, w.calls, w.starts)
		}
	}
}

// A holder silent for its lease, a window and the grace is dropped and
// its share freed; one that gives its lease back frees it at once.
func TestLapsedAndReleasedSharesAreFreed(t *testing.T) {
	limit := agents.ModelLimit{MaxConcurrent: 10}
	st := &LimiterState{}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if g := st.Renew(now, RenewRequest{Holder: "a", Limit: limit, WantCalls: 100}); g.Calls != 10 {
		t.Fatalf("a alone gets %d, want 10", g.Calls)
	}
	if g := st.Renew(now, RenewRequest{Holder: "b", Limit: limit, WantCalls: 100}); g.Calls != 0 {
		t.Fatalf("b gets %d while a may use all, want 0", g.Calls)
	}
	silent := LeaseTTL + time.Second + reclaimGrace
	if g := st.Renew(now.Add(silent), RenewRequest{Holder: "b", Limit: limit, WantCalls: 100}); g.Calls != 0 {
		t.Fatalf("b gets %d before a's lease is reclaimed, want 0", g.Calls)
	}
	if g := st.Renew(now.Add(silent+time.Millisecond), RenewRequest{Holder: "b", Limit: limit, WantCalls: 100}); g.Calls != 10 {
		t.Fatalf("b gets %d once a's lease is reclaimed, want 10", g.Calls)
	}
	st.Renew(now.Add(silent+time.Second), RenewRequest{Holder: "b", Release: true})
	if g := st.Renew(now.Add(silent+time.Second), RenewRequest{Holder: "c", Limit: limit, WantCalls: 3}); g.Calls != 10 {
		t.Fatalf("c gets %d after b gave its share back, want 10", g.Calls)
	}
}

// The stricter of the holders' limits holds.
func TestStricterLimitHolds(t *testing.T) {
	st := &LimiterState{}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st.Renew(now, RenewRequest{Holder: "a", Limit: agents.ModelLimit{MaxConcurrent: 10}})
	g := st.Renew(now, RenewRequest{Holder: "b", Limit: agents.ModelLimit{MaxConcurrent: 20, Requests: 5}, WantCalls: 1, WantStarts: 1})
	if g.Limit.MaxConcurrent != 10 || g.Limit.Requests != 5 || g.Calls != 10 || g.Starts != 5 {
		t.Errorf("grant %+v; want the stricter limit (10 at once, 5 per second), all of it for b", g)
	}
}
