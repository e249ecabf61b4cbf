package chat

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
	"go.temporal.io/sdk/temporal"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/model"
)

// spentInfo is the open session after a review: seven model calls of
// four agents, priced, under budget b (nil for none).
func spentInfo(b *agents.Budget) troupeclient.SessionInfo {
	us := runtime.Usages{
		{Agent: "triage", Usage: model.Usage{Requests: 1, InputTokens: 400, OutputTokens: 20, TotalTokens: 420}, Cost: 0.00096},
		{Agent: "coordinator", Usage: model.Usage{Requests: 2, InputTokens: 1500, OutputTokens: 420, TotalTokens: 1920}, Cost: 0.00636},
	}
	info := troupeclient.SessionInfo{ID: sid, Graph: "dealdesk", Status: runtime.SessionIdle, Agent: "coordinator", Policy: runtime.PolicyEnqueue,
		Turns: 1, Usage: us.Total(), Agents: us, Cost: us.Cost(), NextEvent: 2}
	if b != nil {
		info.Budget = &runtime.BudgetReport{Budget: *b, Calls: 3, Usage: us.Total(), Cost: us.Cost(), Agents: us}
	}
	return info
}

// The header shows the session's cost next to its tokens, against its
// budget when it has one, and says when the budget is spent.
func TestHeaderSpend(t *testing.T) {
	tests := []struct {
		name   string
		budget *agents.Budget
		want   string
	}{
		{"no budget", nil, "· 1 turn · 2340 tokens · $0.00732 · policy enqueue"},
		{"a cost budget", &agents.Budget{Cost: 0.25}, "· 1 turn · 2340 tokens · $0.00732 of $0.25 · policy enqueue"},
		{"calls and cost", &agents.Budget{Cost: 0.25, ModelCalls: 40}, "· 1 turn · 2340 tokens · $0.00732 of $0.25, 3 of 40 calls · policy enqueue"},
		{"spent", &agents.Budget{ModelCalls: 3}, "· 1 turn · 2340 tokens · $0.00732, 3 of 3 calls · budget spent · policy enqueue"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := opened(t, spentInfo(tc.budget))
			if got := ansi.Strip(s.Header(200)); !strings.HasSuffix(got, tc.want) {
				t.Errorf("header\n%q\nwant it to end with\n%q", got, tc.want)
			}
		})
	}
}

// /budget shows the budget and what was spent per agent, once the
// session has said where it stands; /budget SPEC changes it, checked
// first.
func TestBudgetCommand(t *testing.T) {
	s := opened(t, spentInfo(&agents.Budget{Cost: 0.25}))
	if effects := s.Apply(Line{Text: "/budget"}); !slices.EqualFunc(effects, []Effect{{Do: DoInfo, Session: sid}}, sameEffect) {
		t.Errorf("/budget: effects %+v", effects)
	}
	if len(s.Entries) != 0 {
		t.Errorf("/budget shows %q before the session answers", show(s.Entries))
	}
	s.Apply(Refreshed{Info: spentInfo(&agents.Budget{Cost: 0.25})})
	want := []string{"note/0 budget cost=0.25: $0.00732 of $0.25 ($0.243 left)\n" +
		"usage: 3 model calls, 2340 tokens (1900 in, 440 out), $0.00732\n" +
		"  agent        calls  tokens in  tokens out  cost\n" +
		"  triage           1        400          20  $0.00096\n" +
		"  coordinator      2       1500         420  $0.00636\n" +
		"  total            3       1900         440  $0.00732"}
	if got := show(s.Entries); !slices.Equal(got, want) {
		t.Errorf("/budget shows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Once: the next reading shows nothing more.
	s.Apply(Refreshed{Info: spentInfo(&agents.Budget{Cost: 0.25})})
	if len(s.Entries) != 1 {
		t.Errorf("a second reading shows %q", show(s.Entries)[1:])
	}

	s.Entries = nil
	if effects := s.Apply(Line{Text: "/budget cost=1,model_calls=40"}); !slices.EqualFunc(effects, []Effect{{Do: DoBudget, Session: sid, Arg: "cost=1,model_calls=40"}}, sameEffect) {
		t.Errorf("/budget SPEC: effects %+v", effects)
	}
	if w := s.Waiting(); !slices.Equal(w, []string{"changing the budget"}) {
		t.Errorf("waiting %v", w)
	}
	s.Apply(Budgeted{Session: sid, Info: spentInfo(&agents.Budget{Cost: 1, ModelCalls: 40})})
	if len(s.Waiting()) != 0 || s.Info.Budget == nil || s.Info.Budget.Budget.ModelCalls != 40 {
		t.Errorf("waiting %v, budget %+v", s.Waiting(), s.Info.Budget)
	}
	if got := show(s.Entries); len(got) != 1 || !strings.HasPrefix(got[0], "note/0 budget cost=1 model_calls=40: $0.00732 of $1.00 ($0.993 left), 3 of 40 model calls (37 left)\n") {
		t.Errorf("after /budget SPEC: %q", got)
	}

	tests := []struct{ line, want string }{
		{"/budget cost=abc", `problem/0 /budget "cost=abc": cost: "abc" is not a number: usage: /budget [` + "cost=N,model_calls=N,input_tokens=N,output_tokens=N (any of them) or off]"},
		{"/budget calls=3", `problem/0 /budget "calls=3": unknown limit "calls" (want cost, model_calls, input_tokens or output_tokens): usage: /budget [` + "cost=N,model_calls=N,input_tokens=N,output_tokens=N (any of them) or off]"},
	}
	for _, tc := range tests {
		s.Entries = nil
		if effects := s.Apply(Line{Text: tc.line}); effects != nil {
			t.Errorf("%s: effects %+v", tc.line, effects)
		}
		if got := show(s.Entries); !slices.Equal(got, []string{tc.want}) {
			t.Errorf("%s shows\n%q\nwant\n%q", tc.line, got, tc.want)
		}
	}
	s.Entries = nil
	s.Apply(Failed{Do: DoBudget, Session: sid, Err: temporal.NewNonRetryableApplicationError(
		"budget: agents: invalid budget: the budget limits cost, but graph plod has no prices: give it some", troupe.ErrBadBudget, nil)})
	if got := show(s.Entries); !slices.Equal(got, []string{"problem/0 the session refused the budget: the budget limits cost, but graph plod has no prices: give it some"}) {
		t.Errorf("a refused budget shows %q", got)
	}
	// This chat's change shows once (Budgeted), another client's is
	// news.
	s.Entries = nil
	s.Apply(Followed{Session: sid, Event: ev("", troupe.EventSessionCommand, "", 0, "budget cost=1,model_calls=40")})
	if len(s.Entries) != 0 {
		t.Errorf("this chat's change shows again: %q", show(s.Entries))
	}
	s.Apply(Followed{Session: sid, Event: ev("", troupe.EventSessionCommand, "", 0, "budget off")})
	if got := show(s.Entries); !slices.Equal(got, []string{"note/0 budget changed: off (from the next model call on; /budget shows it)"}) {
		t.Errorf("the budget command's event shows %q", got)
	}
	// With no budget, /budget says so, and what was spent.
	s = opened(t, spentInfo(nil))
	apply(s, Line{Text: "/budget"}, Refreshed{Info: spentInfo(nil)})
	if got := show(s.Entries); len(got) != 1 || !strings.HasPrefix(got[0], "note/0 budget off\nusage: 3 model calls, 2340 tokens (1900 in, 440 out), $0.00732\n") {
		t.Errorf("/budget with no budget shows %q", got)
	}
}

// A turn the budget stopped says which limit is reached and how to raise
// it, once the session's record of the turn says why it failed; the
// agent refused says it stopped for the budget; a message refused says
// the same.
func TestBudgetStops(t *testing.T) {
	long := "troupe.BudgetExceeded: agent pricing_reviewer stopped before its model call of turn 1: the session's budget is spent (3 of 3 model calls): raise it with the session's budget command"
	s := opened(t, spentInfo(&agents.Budget{ModelCalls: 40}))
	effects := apply(s,
		Followed{Session: sid, Event: ev("", troupe.EventMessage, "", 2, "what if 25%?")},
		Followed{Session: sid, Event: withChild(ev("", troupe.EventAgentStarted, "coordinator", 0, ""), coordinator, "")},
		Followed{Session: sid, Event: withChild(ev(coordinator, troupe.EventAgentToolStarted, "coordinator", 1, "review"), pricing, "review_pricing")},
		Followed{Session: sid, Event: withChild(ev("", troupe.EventBudgetExceeded, "pricing_reviewer", 1, "the model call of pricing_reviewer (turn 1) was refused: "+long), pricing, "")},
		Followed{Session: sid, Event: ev(pricing, troupe.EventFailed, "pricing_reviewer", 0, long)},
		Followed{Session: sid, Event: ev(coordinator, troupe.EventFailed, "coordinator", 0, long)},
		Followed{Session: sid, Event: ev("", troupe.EventFailed, "coordinator", 2, long)},
	)
	if !slices.EqualFunc(effects, []Effect{{Do: DoInfo, Session: sid}}, sameEffect) {
		t.Errorf("effects %+v", effects)
	}
	info := spentInfo(&agents.Budget{ModelCalls: 3})
	info.Turns, info.Recent = 2, []troupeclient.TurnRecord{{Turn: "t2", Message: "what if 25%?", Outcome: runtime.TurnFailed, Error: long, ErrorType: troupe.ErrBudgetExceeded}}
	s.Apply(Refreshed{Info: info})
	want := []string{
		"user/0 what if 25%?",
		"step/0 ● coordinator",
		"step/0 coordinator ⇉ review_pricing (agent as tool): review",
		"step/1 pricing_reviewer: no model call, the budget is spent",
		"problem/1 pricing_reviewer stopped: the budget is spent",
		"problem/0 coordinator stopped: the budget is spent",
		"problem/0 turn t2 stopped: the session's budget is spent (3 of 3 model calls): /budget model_calls=N raises it (N the new limit), /budget off lifts it",
	}
	if got := show(s.Entries); !slices.Equal(got, want) {
		t.Errorf("shows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// The next message is refused.
	s.Entries = nil
	apply(s, Line{Text: "and now?"}, Failed{Do: DoSend, Session: sid, Text: "and now?",
		Err: fmt.Errorf("send to session %s: %w", sid, temporal.NewNonRetryableApplicationError("the session's budget is spent (3 of 3 model calls): raise it", troupe.ErrBudgetExceeded, nil))})
	want = []string{"user/0 and now?", "problem/0 message refused: the session's budget is spent (3 of 3 model calls): /budget model_calls=N raises it (N the new limit), /budget off lifts it"}
	if got := show(s.Entries); !slices.Equal(got, want) {
		t.Errorf("a refused message shows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Opened later: the turn says the budget stopped it, and whether it
	// still is spent.
	for _, tc := range []struct {
		budget agents.Budget
		want   string
	}{
		{agents.Budget{ModelCalls: 3}, "problem/0 turn t2 stopped: the session's budget is spent (3 of 3 model calls): /budget model_calls=N raises it (N the new limit), /budget off lifts it"},
		{agents.Budget{ModelCalls: 10}, "problem/0 turn t2 stopped: the session's budget was spent (/budget shows it now)"},
	} {
		info := spentInfo(&tc.budget)
		info.Turns, info.Recent = 2, []troupeclient.TurnRecord{{Turn: "t2", Message: "what if 25%?", Outcome: runtime.TurnFailed, Error: long, ErrorType: troupe.ErrBudgetExceeded}}
		s := NewState(Options{})
		s.Apply(Opened{Info: info})
		if got := show(s.Entries); !slices.Contains(got, tc.want) {
			t.Errorf("opened with budget %s: shows\n%s\nwant a line\n%s", tc.budget, strings.Join(got, "\n"), tc.want)
		}
	}
}
