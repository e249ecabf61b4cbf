package runtime

import (
	"errors"
	"testing"
	"time"
)

func TestSessionSubmit(t *testing.T) {
	now := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		policy  InputPolicy
		running bool
		stopped bool
		text    string
		err     error
		preempt Preempt
	}{
		{"idle enqueue", PolicyEnqueue, false, false, "hi", nil, PreemptNone},
		{"busy enqueue", PolicyEnqueue, true, false, "hi", nil, PreemptNone},
		{"idle reject", PolicyReject, false, false, "hi", nil, PreemptNone},
		{"busy reject", PolicyReject, true, false, "hi", ErrSessionBusy, PreemptNone},
		{"busy interrupt", PolicyInterrupt, true, false, "hi", nil, PreemptInterrupt},
		{"idle interrupt", PolicyInterrupt, false, false, "hi", nil, PreemptNone},
		{"busy rollback", PolicyRollback, true, false, "hi", nil, PreemptRollback},
		{"stopped", PolicyEnqueue, false, true, "hi", ErrSessionStopped, PreemptNone},
		{"empty", PolicyEnqueue, false, false, "", ErrEmptyMessage, PreemptNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSessionState("s", "a", tc.policy)
			if tc.running {
				if _, _, err := s.Submit("first", now); err != nil {
					t.Fatal(err)
				}
				if _, err := s.StartTurn(); err != nil {
					t.Fatal(err)
				}
			}
			if tc.stopped {
				s.Stop()
			}
			queued := len(s.Queue)
			m, p, err := s.Submit(tc.text, now)
			if !errors.Is(err, tc.err) || p != tc.preempt {
				t.Fatalf("Submit = %+v, %v, %v; want preempt %v, error %v", m, p, err, tc.preempt, tc.err)
			}
			if err != nil && len(s.Queue) != queued {
				t.Errorf("a refused message was queued")
			}
			if err == nil && (len(s.Queue) != queued+1 || s.Queue[queued].Turn != m.Turn) {
				t.Errorf("queue %+v, want %s at its end", s.Queue, m.Turn)
			}
		})
	}
}

func TestSessionTurns(t *testing.T) {
	now := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	s := NewSessionState("s", "a", "")
	if s.Policy != PolicyEnqueue || s.Status() != SessionIdle {
		t.Fatalf("new session %+v", s)
	}
	for _, text := range []string{"one", "two", "three"} {
		if _, _, err := s.Submit(text, now); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Pause(); err != nil || s.Ready() || s.Status() != SessionPaused {
		t.Fatalf("paused: ready %v, status %s, err %v", s.Ready(), s.Status(), err)
	}
	_ = s.Resume()
	for i, want := range []string{"t1", "t2", "t3"} {
		m, err := s.StartTurn()
		if err != nil || m.Turn != want {
			t.Fatalf("turn %d = %+v, %v; want %s", i, m, err, want)
		}
		if _, err := s.StartTurn(); err == nil {
			t.Fatal("a second turn started while one runs")
		}
		if err := s.TurnEnded(TurnRecord{Turn: "t9"}, "b", TranscriptRef{}); err == nil {
			t.Fatal("a turn that is not running ended")
		}
		tr := TranscriptRef{Key: "k", Segments: i + 1}
		if err := s.TurnEnded(TurnRecord{Turn: m.Turn, Outcome: TurnAnswered, Ended: now}, "b", tr); err != nil {
			t.Fatal(err)
		}
		if s.Agent != "b" || s.Transcript.Key != tr.Key || s.Transcript.Segments != tr.Segments || s.Turns != i+1 {
			t.Fatalf("after %s: %+v", m.Turn, s)
		}
	}
	if r, ok := s.Record("t2"); !ok || r.Turn != "t2" {
		t.Errorf("Record(t2) = %+v, %v", r, ok)
	}
	for i := 0; i < RecentTurns+5; i++ {
		m, _, _ := s.Submit("more", now)
		_, _ = s.StartTurn()
		_ = s.TurnEnded(TurnRecord{Turn: m.Turn}, "b", TranscriptRef{})
	}
	if len(s.Recent) != RecentTurns || s.Recent[len(s.Recent)-1].Turn != "t28" {
		t.Errorf("%d recent turns ending %s, want %d ending t28", len(s.Recent), s.Recent[len(s.Recent)-1].Turn, RecentTurns)
	}
	_, _, _ = s.Submit("dropped", now)
	if dropped := s.Stop(); len(dropped) != 1 || s.Status() != SessionStopped || s.Pause() == nil || s.SetPolicy(PolicyReject) == nil {
		t.Errorf("stop dropped %v, status %s", dropped, s.Status())
	}
}

func TestSessionLeases(t *testing.T) {
	s := NewSessionState("s", "a", "")
	if l := s.LeaseOf("x"); l.State != LeaseNew {
		t.Errorf("unknown agent's lease %+v, want new", l)
	}
	s.SetLease("zed", SandboxLease{State: LeaseSuspended, Snapshot: "z"})
	s.SetLease("amy", SandboxLease{State: LeaseLost, Snapshot: "a"})
	s.SetLease("zed", SandboxLease{State: LeaseSuspended, Snapshot: "z2"})
	if len(s.Leases) != 2 || s.Leases[0].Agent != "amy" || s.LeaseOf("zed").Snapshot != "z2" {
		t.Errorf("leases %+v, want amy then zed at z2", s.Leases)
	}
}

func TestParsePolicy(t *testing.T) {
	for in, want := range map[string]InputPolicy{"": PolicyEnqueue, "reject": PolicyReject, "interrupt": PolicyInterrupt, "rollback": PolicyRollback} {
		if got, err := ParsePolicy(in); err != nil || got != want {
			t.Errorf("ParsePolicy(%q) = %s, %v", in, got, err)
		}
	}
	if _, err := ParsePolicy("drop"); !errors.Is(err, ErrUnknownPolicy) {
		t.Errorf("ParsePolicy(drop) err = %v", err)
	}
}

func TestLeaseForfeit(t *testing.T) {
	for _, tc := range []struct {
		from, want LeaseState
	}{
		{LeaseNew, LeaseNew}, {LeaseIdle, LeaseLost}, {LeaseInUse, LeaseLost}, {LeaseSuspended, LeaseLost}, {LeaseStopped, LeaseStopped},
	} {
		l := SandboxLease{State: tc.from, Snapshot: "s", Calls: 2}
		if tc.from == LeaseIdle || tc.from == LeaseInUse {
			l.Sandbox = &LeasedSandbox{}
		}
		l.Forfeit()
		if l.State != tc.want || (tc.want == LeaseLost && (l.Sandbox != nil || l.Calls != 0 || l.Snapshot != "s")) {
			t.Errorf("Forfeit from %s = %+v, want %s keeping the snapshot", tc.from, l, tc.want)
		}
	}
}
