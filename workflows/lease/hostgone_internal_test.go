package lease

import (
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/taskqueue/v1"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/runtime"
)

// TestServedBy: a store is served by a worker that polled its queue
// within PollerFresh, the worker that stopped answering aside.
func TestServedBy(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	poller := func(id string, ago time.Duration) *taskqueue.PollerInfo {
		return &taskqueue.PollerInfo{Identity: id, LastAccessTime: timestamppb.New(now.Add(-ago))}
	}
	for _, tc := range []struct {
		name    string
		pollers []*taskqueue.PollerInfo
		gone    string
		want    bool
	}{
		{"no poller", nil, "", false},
		{"only the dead worker, fresh", []*taskqueue.PollerInfo{poller("1@h1 a", time.Second)}, "1@h1 a", false},
		{"the host's next worker", []*taskqueue.PollerInfo{poller("1@h1 a", time.Second), poller("2@h1 a", 10*time.Second)}, "1@h1 a", true},
		{"another worker, stale", []*taskqueue.PollerInfo{poller("1@h1 a", time.Second), poller("2@h1 a", PollerFresh+time.Second)}, "1@h1 a", false},
		{"the dead worker unknown: its fresh polls count", []*taskqueue.PollerInfo{poller("1@h1 a", time.Second)}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := servedBy(tc.pollers, tc.gone, now); got != tc.want {
				t.Errorf("servedBy = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSuperseded: a sandbox is reaped from a host that came back only
// when its owner moved past it.
func TestSuperseded(t *testing.T) {
	labels := func(gen string) map[string]string {
		return map[string]string{"troupe.workflow": "s1", "troupe.agent": "coder", troupe.LabelGeneration: gen}
	}
	held := func(gen int, st runtime.LeaseState, lent bool) []Held {
		return []Held{{Agent: "other", Generation: 9, State: runtime.LeaseLost}, {Agent: "coder", Generation: gen, State: st, Lent: lent}}
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		held   []Held
		want   bool
	}{
		{"restored elsewhere since", labels("2"), held(3, runtime.LeaseIdle, false), true},
		{"restored elsewhere, lent to a turn", labels("2"), held(3, runtime.LeaseIdle, true), true},
		{"lost, not yet restored", labels("2"), held(2, runtime.LeaseLost, false), true},
		{"suspended, its stop never reached the host", labels("2"), held(2, runtime.LeaseSuspended, false), true},
		{"the owner's live sandbox", labels("2"), held(2, runtime.LeaseIdle, false), false},
		{"being made", labels("3"), held(3, runtime.LeaseProvisioning, false), false},
		{"lent at its generation: the turn may hold it", labels("2"), held(2, runtime.LeaseLost, true), false},
		{"newer than the lease the session lent", labels("4"), held(3, runtime.LeaseIdle, true), false},
		{"the owner does not say", labels("2"), nil, false},
		{"another agent's", map[string]string{"troupe.agent": "nobody", troupe.LabelGeneration: "1"}, held(5, runtime.LeaseIdle, false), false},
		{"no generation label", map[string]string{"troupe.agent": "coder"}, held(5, runtime.LeaseIdle, false), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Superseded(tc.labels, tc.held); got != tc.want {
				t.Errorf("Superseded = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestLostNote: the model hears what a loss took (the calls since the
// last snapshot) and what it finds instead.
func TestLostNote(t *testing.T) {
	many := make([]string, runtime.MaxUnsaved)
	for i := range many {
		many[i] = "exec_command c" + string(rune('a'+i))
	}
	for _, tc := range []struct {
		name     string
		lease    runtime.SandboxLease
		during   string
		want     []string
		wantNone []string
	}{
		{"this call alone", runtime.SandboxLease{Snapshot: "snapshots/r/1", Unsaved: []string{"exec_command c1"}}, "exec_command c1",
			[]string{"Error: the sandbox was lost while running this call", "from its last snapshot", "nothing else was lost"}, []string{"c1"}},
		{"this call and two before", runtime.SandboxLease{Snapshot: "snapshots/r/1", Unsaved: []string{"write_file w1", "exec_command c1", "exec_command c2"}}, "exec_command c2",
			[]string{"this call and the 2 calls before it", "write_file w1, exec_command c1"}, []string{"nothing else"}},
		{"no snapshot yet", runtime.SandboxLease{Unsaved: []string{"exec_command c1"}}, "exec_command c1",
			[]string{"from its manifest, as at its start"}, nil},
		{"between calls", runtime.SandboxLease{Snapshot: "snapshots/r/1", Unsaved: []string{"write_file w1"}}, "",
			[]string{"Note: the sandbox was lost since your last sandbox call", "the last 1 call (write_file w1)", "The output of this call follows."}, []string{"Error"}},
		{"past the bound", runtime.SandboxLease{Snapshot: "snapshots/r/1", Unsaved: many}, "",
			[]string{"at least 16 calls"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := lostNote(&tc.lease, tc.during)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("note %q lacks %q", got, w)
				}
			}
			for _, w := range tc.wantNone {
				if strings.Contains(got, w) {
					t.Errorf("note %q has %q", got, w)
				}
			}
		})
	}
}

// TestHosts: a store taken as gone stays gone, with its first reason.
func TestHosts(t *testing.T) {
	var h *Hosts
	if _, gone := h.Gone("q"); gone {
		t.Fatal("a nil Hosts knows a gone host")
	}
	h = &Hosts{}
	h.mark("q", "first")
	h.mark("q", "second")
	if why, gone := h.Gone("q"); !gone || why != "first" {
		t.Errorf("Gone(q) = %q, %v; want first, true", why, gone)
	}
	if _, gone := h.Gone("other"); gone {
		t.Error("another store taken as gone")
	}
}
