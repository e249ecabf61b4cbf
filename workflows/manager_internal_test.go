package workflows

import (
	"fmt"
	"testing"
	"time"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/runtime"
)

func TestPruneStopped(t *testing.T) {
	at := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	var sessions []troupe.SessionEntry
	for i := range 10 {
		status := runtime.SessionIdle
		if i%2 == 0 {
			status = runtime.SessionStopped
		}
		// Stopped s0, s2, s4, s6, s8, last active in that order but s4 last.
		last := at.Add(time.Duration(i) * time.Hour)
		if i == 4 {
			last = at.Add(100 * time.Hour)
		}
		sessions = append(sessions, troupe.SessionEntry{ID: fmt.Sprintf("s%d", i), Status: status, LastActivity: last})
	}
	for _, tc := range []struct {
		max  int
		want string
	}{
		{10, "s0 s1 s2 s3 s4 s5 s6 s7 s8 s9"},
		{5, "s0 s1 s2 s3 s4 s5 s6 s7 s8 s9"},
		{2, "s1 s3 s4 s5 s7 s8 s9"},
		{1, "s1 s3 s4 s5 s7 s9"},
	} {
		var ids string
		for i, e := range pruneStopped(sessions, tc.max) {
			if i > 0 {
				ids += " "
			}
			ids += e.ID
		}
		if ids != tc.want {
			t.Errorf("pruneStopped(%d) = %s, want %s", tc.max, ids, tc.want)
		}
	}
}

// The manager checks a session's budget command as the session would,
// without the session's prices (the session checks those).
func TestManagerChecksBudgetCommands(t *testing.T) {
	s := session{st: &runtime.SessionState{}}
	for arg, ok := range map[string]bool{"cost=1": true, "model_calls=10 input_tokens=500": true, "off": true, "cost=-1": false, "pennies=3": false} {
		if err := s.checkCommand(troupe.SessionCommand{Op: troupe.CommandBudget, Arg: arg}); (err == nil) != ok {
			t.Errorf("budget %q: %v", arg, err)
		}
	}
}
