package chat

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
)

// /new readies the new session's variables with PrepareVars, given the
// graph, the id the session will have and a copy of Vars (troupe chat
// sends a local repository there): Vars stay as they are for the next
// /new, and a refusal is the one line the chat shows, with no session
// created (this Runner has no client to create one with).
func TestCreatePreparesVars(t *testing.T) {
	r := NewRunner(context.Background(), nil, nil)
	r.Vars = map[string]string{"repo": "/src/app", "out": "/tmp/review"}
	refusal := errors.New("--repo /src/app is not a git repository: give a repository's directory, or give a URL every worker can clone (--var repo=URL)")
	var ids []string
	r.PrepareVars = func(_ context.Context, graph, id string, vars map[string]string) error {
		if graph != "codereview" {
			t.Errorf("PrepareVars of graph %q, want codereview", graph)
		}
		if vars["repo"] != "/src/app" || vars["out"] != "/tmp/review" {
			t.Errorf("PrepareVars got %v, want Vars", vars)
		}
		ids = append(ids, id)
		vars["repo"] = "blob:inputs/" + id + "/0123"
		return refusal
	}
	s := NewState(Options{Graph: "codereview", Graphs: []string{"dealdesk", "codereview"}})
	for range 2 {
		effects := s.Apply(Line{Text: "/new"})
		if len(effects) == 0 || effects[0].Do != DoCreate {
			t.Fatalf("/new: %v", effects)
		}
		msg := r.Do(effects[0])()
		f, ok := msg.(Failed)
		if !ok || !errors.Is(f.Err, refusal) {
			t.Fatalf("/new with PrepareVars refusing: %#v, want Failed with its error", msg)
		}
		s.Apply(f)
		if got := show(s.Entries); len(got) == 0 || got[len(got)-1] != "problem/0 "+refusal.Error() {
			t.Errorf("the chat shows %q, want the refusal last", got)
		}
	}
	if len(ids) != 2 || ids[0] == ids[1] || !strings.HasPrefix(ids[0], "session-codereview-") {
		t.Errorf("PrepareVars got ids %q, want a fresh session id of codereview each /new", ids)
	}
	if want := map[string]string{"repo": "/src/app", "out": "/tmp/review"}; !maps.Equal(r.Vars, want) {
		t.Errorf("Vars after /new: %v, want them unchanged: %v", r.Vars, want)
	}
}
