package cli

import (
	"errors"
	"testing"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/runtime"
)

// The flags of `sessions ls`: a page of 1 to 1,000 sessions, of a status
// a session can have; and the flags the next page's hint repeats.
func TestSessionsListFlags(t *testing.T) {
	for _, tc := range []struct {
		limit         int
		after, status string
		graph         string
		bad           bool
		next          string
	}{
		{limit: defaultListLimit, next: ""},
		{limit: 1, after: "s-1", status: "idle", graph: "dealdesk", next: " --limit 1 --status idle --graph dealdesk"},
		{limit: troupe.MaxSessionsPage, status: "stopped", next: " --limit 1000 --status stopped"},
		{limit: 0, bad: true},
		{limit: -5, bad: true},
		{limit: troupe.MaxSessionsPage + 1, bad: true},
		{limit: 10, status: "asleep", bad: true},
	} {
		in, err := pageInput(tc.limit, tc.after, tc.status, tc.graph)
		var u *usageError
		if tc.bad {
			if !errors.As(err, &u) {
				t.Errorf("--limit %d --status %q: %v, want a usage error", tc.limit, tc.status, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("--limit %d --status %q: %v", tc.limit, tc.status, err)
		}
		want := troupe.SessionsPageInput{Limit: tc.limit, After: tc.after, Status: runtime.SessionStatus(tc.status), Graph: tc.graph}
		if in != want {
			t.Errorf("page %+v, want %+v", in, want)
		}
		if got := filterFlags(in); got != tc.next {
			t.Errorf("next page's flags %q, want %q", got, tc.next)
		}
	}
}
