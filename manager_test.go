package troupe_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/runtime"
)

func TestSessionsPage(t *testing.T) {
	// s0..s9: graphs a and b in turn, s3 and s6 stopped.
	var sessions []troupe.SessionEntry
	for i := range 10 {
		e := troupe.SessionEntry{ID: fmt.Sprintf("s%d", i), Graph: "a", Status: runtime.SessionIdle}
		if i%2 == 1 {
			e.Graph = "b"
		}
		if i == 3 || i == 6 {
			e.Status = runtime.SessionStopped
		}
		sessions = append(sessions, e)
	}
	for _, tc := range []struct {
		name      string
		in        troupe.SessionsPageInput
		want      string
		next      string
		total     int
		errorType string
	}{
		{"all in one", troupe.SessionsPageInput{}, "s0 s1 s2 s3 s4 s5 s6 s7 s8 s9", "", 10, ""},
		{"first page", troupe.SessionsPageInput{Limit: 3}, "s0 s1 s2", "s2", 10, ""},
		{"middle page", troupe.SessionsPageInput{Limit: 3, After: "s2"}, "s3 s4 s5", "s5", 10, ""},
		{"last page, full", troupe.SessionsPageInput{Limit: 3, After: "s6"}, "s7 s8 s9", "", 10, ""},
		{"after the last", troupe.SessionsPageInput{Limit: 3, After: "s9"}, "", "", 10, ""},
		{"by graph", troupe.SessionsPageInput{Limit: 2, Graph: "b"}, "s1 s3", "s3", 5, ""},
		{"by graph, after one of the other graph", troupe.SessionsPageInput{Limit: 2, Graph: "b", After: "s4"}, "s5 s7", "s7", 5, ""},
		{"by status", troupe.SessionsPageInput{Status: runtime.SessionStopped}, "s3 s6", "", 2, ""},
		{"by status and graph", troupe.SessionsPageInput{Status: runtime.SessionIdle, Graph: "a"}, "s0 s2 s4 s8", "", 4, ""},
		{"no match", troupe.SessionsPageInput{Graph: "c"}, "", "", 0, ""},
		{"over the bound", troupe.SessionsPageInput{Limit: troupe.MaxSessionsPage + 1}, "s0 s1 s2 s3 s4 s5 s6 s7 s8 s9", "", 10, ""},
		{"unknown after", troupe.SessionsPageInput{After: "gone"}, "", "", 0, troupe.ErrUnknownSession},
		{"negative limit", troupe.SessionsPageInput{Limit: -1}, "", "", 0, troupe.ErrBadCommand},
	} {
		t.Run(tc.name, func(t *testing.T) {
			page, err := troupe.PageSessions(sessions, tc.in)
			if tc.errorType != "" {
				if troupe.ErrorType(err) != tc.errorType {
					t.Fatalf("error %v, want one of type %s", err, tc.errorType)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, e := range page.Sessions {
				ids = append(ids, e.ID)
			}
			if got := strings.Join(ids, " "); got != tc.want || page.Next != tc.next || page.Total != tc.total {
				t.Errorf("page %q next %q total %d, want %q next %q total %d", got, page.Next, page.Total, tc.want, tc.next, tc.total)
			}
		})
	}
}

// Paging through a large registry by Next, at any limit, lists every
// session once, in order.
func TestSessionsPagesCoverAll(t *testing.T) {
	const n = 2500
	sessions := make([]troupe.SessionEntry, n)
	for i := range sessions {
		sessions[i] = troupe.SessionEntry{ID: fmt.Sprintf("s%05d", i)}
	}
	for _, limit := range []int{1, 7, 100, troupe.MaxSessionsPage, 5000} {
		var got []string
		in := troupe.SessionsPageInput{Limit: limit}
		for pages := 0; ; pages++ {
			if pages > n {
				t.Fatalf("limit %d: more pages than sessions", limit)
			}
			page, err := troupe.PageSessions(sessions, in)
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Sessions) > min(limit, troupe.MaxSessionsPage) {
				t.Fatalf("limit %d: a page of %d", limit, len(page.Sessions))
			}
			for _, e := range page.Sessions {
				got = append(got, e.ID)
			}
			if page.Next == "" {
				break
			}
			in.After = page.Next
		}
		if len(got) != n {
			t.Fatalf("limit %d: %d sessions listed, want %d", limit, len(got), n)
		}
		for i, id := range got {
			if id != sessions[i].ID {
				t.Fatalf("limit %d: session %d is %s, want %s", limit, i, id, sessions[i].ID)
			}
		}
	}
}
