package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"

	"github.com/troupe-dev/troupe"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/runtime"
)

const sid = "session-dealdesk-1"

var kindNames = map[Kind]string{KindUser: "user", KindReply: "reply", KindAnswer: "answer", KindStep: "step", KindNote: "note", KindProblem: "problem", KindHelp: "help"}

// show is the transcript as "kind/depth text" lines (a streaming reply
// ends with "▍"); help shows as its first line.
func show(es []Entry) []string {
	var out []string
	for _, e := range es {
		text, _, _ := strings.Cut(e.Text, "\n")
		if e.Kind != KindHelp {
			text = e.Text
		}
		if e.Streaming {
			text += "▍"
		}
		line := fmt.Sprintf("%s/%d %s", kindNames[e.Kind], e.Depth, text)
		if e.Kind == KindReply || e.Kind == KindAnswer {
			line = fmt.Sprintf("%s/%d %s: %s", kindNames[e.Kind], e.Depth, e.Agent, text)
		}
		out = append(out, line)
	}
	return out
}

// opened returns a state with session sid open, its transcript empty.
func opened(t *testing.T, info troupeclient.SessionInfo) *State {
	t.Helper()
	s := NewState(Options{Graph: "dealdesk", Graphs: []string{"dealdesk", "codereview"}})
	if info.ID == "" {
		info = troupeclient.SessionInfo{ID: sid, Graph: "dealdesk", Status: runtime.SessionIdle, Agent: "triage", Policy: runtime.PolicyEnqueue, NextEvent: 2}
	}
	s.Apply(Opened{Info: info})
	s.Entries = nil
	return s
}

// apply applies each message and returns the effects of the last.
func apply(s *State, msgs ...Msg) []Effect {
	var effects []Effect
	for _, m := range msgs {
		effects = s.Apply(m)
	}
	return effects
}

func TestLines(t *testing.T) {
	none, stopped := "none", "stopped"
	tests := []struct {
		name    string
		session string // "" for one open, none, or stopped
		line    string
		effects []Effect
		shows   []string
		quit    bool
	}{
		{name: "message", line: "hello there", effects: []Effect{{Do: DoSend, Session: sid, Arg: "hello there"}, {Do: DoCheckServed}},
			shows: []string{"user/0 hello there"}},
		{name: "message to a paused session", session: "paused", line: "hello", effects: []Effect{{Do: DoSend, Session: sid, Arg: "hello"}, {Do: DoCheckServed}},
			shows: []string{"user/0 hello", "note/0 the session is paused: this message waits for /resume"}},
		{name: "message with no session", session: none, line: "hello", shows: []string{"problem/0 no session open: /new [graph] starts one, /sessions lists them"}},
		{name: "message to a stopped session", session: stopped, line: "hello",
			shows: []string{"problem/0 session session-dealdesk-1 is stopped: /new starts another, /sessions lists them"}},
		{name: "blank", line: "   "},
		{name: "new with the default graph", session: none, line: "/new", effects: []Effect{{Do: DoCreate, Arg: "dealdesk"}, {Do: DoCheckServed}}},
		{name: "new with a graph", line: "/new codereview", effects: []Effect{{Do: DoCreate, Arg: "codereview"}, {Do: DoCheckServed}}},
		{name: "sessions", session: none, line: "/sessions", effects: []Effect{{Do: DoList}}},
		{name: "open", session: none, line: "/open s2", effects: []Effect{{Do: DoOpen, Session: "s2"}, {Do: DoCheckServed}}},
		{name: "open with no id", line: "/open", shows: []string{"problem/0 name a session: /open SESSION (/sessions lists them)"}},
		{name: "rename", line: "/rename Acme renewal", effects: []Effect{{Do: DoCommand, Session: sid, Command: "rename", Arg: "Acme renewal"}}},
		{name: "rename with no name", line: "/rename", shows: []string{"problem/0 usage: /rename NAME"}},
		{name: "rename with no session", session: none, line: "/rename x",
			shows: []string{"problem/0 /rename needs a session: /new [graph] starts one, /sessions lists them"}},
		{name: "fork", line: "/fork", effects: []Effect{{Do: DoFork, Session: sid}}},
		{name: "fork named", line: "/fork what-if", effects: []Effect{{Do: DoFork, Session: sid, Arg: "what-if"}}},
		{name: "switch", line: "/switch bwrap", effects: []Effect{{Do: DoSwitch, Session: sid, Arg: "bwrap"}}},
		{name: "switch with no backend", line: "/switch", shows: []string{"problem/0 usage: /switch BACKEND (bwrap, docker or local)"}},
		{name: "pause", line: "/pause", effects: []Effect{{Do: DoCommand, Session: sid, Command: "pause"}}},
		{name: "pause with an argument", line: "/pause now", shows: []string{"problem/0 usage: /pause (it takes no argument)"}},
		{name: "resume", line: "/resume", effects: []Effect{{Do: DoCommand, Session: sid, Command: "resume"}}},
		{name: "policy", line: "/policy reject", effects: []Effect{{Do: DoCommand, Session: sid, Command: "policy", Arg: "reject"}}},
		{name: "policy with none", line: "/policy", shows: []string{"problem/0 usage: /policy enqueue|reject|interrupt|rollback"}},
		{name: "stop", line: "/stop", effects: []Effect{{Do: DoCommand, Session: sid, Command: "stop"}}},
		{name: "pause a stopped session", session: stopped, line: "/pause",
			shows: []string{"problem/0 session session-dealdesk-1 is stopped: /new starts another, /sessions lists them"}},
		{name: "done", line: "/done", effects: []Effect{{Do: DoQuit}}, quit: true},
		{name: "done with no session", session: none, line: "/done", effects: []Effect{{Do: DoQuit}}, quit: true},
		{name: "help", line: "/help", shows: []string{"help/0 Type a message and press Enter to send it to the open session. Commands:"}},
		{name: "unknown", line: "/frobnicate", shows: []string{"problem/0 unknown command /frobnicate: /help shows the commands"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s *State
			switch tc.session {
			case none:
				s = NewState(Options{Graph: "dealdesk"})
				s.Entries = nil
			case stopped:
				s = opened(t, troupeclient.SessionInfo{ID: sid, Status: runtime.SessionStopped})
			case "paused":
				s = opened(t, troupeclient.SessionInfo{ID: sid, Status: runtime.SessionPaused})
			default:
				s = opened(t, troupeclient.SessionInfo{})
			}
			effects := s.Apply(Line{Text: tc.line})
			if !slices.EqualFunc(effects, tc.effects, sameEffect) {
				t.Errorf("effects %+v, want %+v", effects, tc.effects)
			}
			if got := show(s.Entries); !slices.Equal(got, tc.shows) {
				t.Errorf("shows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.shows, "\n"))
			}
			if s.Quit != tc.quit {
				t.Errorf("Quit = %v", s.Quit)
			}
		})
	}
}

func sameEffect(a, b Effect) bool {
	return a.Do == b.Do && a.Session == b.Session && a.Arg == b.Arg && a.Command == b.Command && fmt.Sprint(a.Cursor) == fmt.Sprint(b.Cursor)
}

func TestNewNeedsAGraph(t *testing.T) {
	s := NewState(Options{Graphs: []string{"dealdesk", "codereview"}})
	if effects := s.Apply(Line{Text: "/new"}); effects != nil {
		t.Errorf("effects %+v", effects)
	}
	want := "problem/0 name a graph: /new GRAPH (this troupe serves dealdesk, codereview)"
	if got := show(s.Entries); got[len(got)-1] != want {
		t.Errorf("shows %q, want %q last", got, want)
	}
}

// ev is an event of workflow wf (the session's own for "").
func ev(wf, kind, agent string, turn int, detail string) troupeclient.Event {
	if wf == "" {
		wf = sid
	}
	return troupeclient.Event{WorkflowID: wf, Kind: kind, Agent: agent, Turn: turn, Detail: detail}
}

func withChild(e troupeclient.Event, child, tool string) troupeclient.Event {
	e.Child, e.Tool = child, tool
	return e
}

func withTool(e troupeclient.Event, tool string) troupeclient.Event {
	e.Tool = tool
	return e
}

// The workflows of a deal-desk turn, named as the session names them.
const (
	triage      = sid + "/t1/0-triage"
	coordinator = sid + "/t1/1-coordinator"
	pricing     = coordinator + "/t1.0/0-pricing_reviewer"
	rollout     = coordinator + "/t1.1/0-rollout_reviewer"
)

// A turn as its follower reads it: the user's message, a handoff, two
// agents-as-tools in parallel (their steps indented under the agent that
// called them), sandboxes, and the answer, cut in the event and whole in
// the session's record of the turn.
func TestTurn(t *testing.T) {
	s := opened(t, troupeclient.SessionInfo{})
	output := `{"decision":"approve_with_conditions","summary":"` + strings.Repeat("x", 300) + `"}`
	cut := output[:200] + "…"
	steps := []struct {
		event  troupeclient.Event
		atWork []string
	}{
		{ev("", troupe.EventMessage, "", 1, "Review the Acme deal"), nil},
		{withChild(ev("", troupe.EventAgentStarted, "triage", 0, ""), triage, ""), nil},
		{ev(triage, troupe.EventAgentStarted, "triage", 0, ""), []string{"triage"}},
		{ev(triage, troupe.EventTurn, "triage", 1, "1 tool call(s)"), []string{"triage"}},
		{withTool(ev(triage, troupe.EventHandoff, "triage", 1, "triage → coordinator"), "transfer_to_coordinator"), nil},
		{withTool(ev("", troupe.EventHandoff, "triage", 0, "triage → coordinator"), "transfer_to_coordinator"), nil},
		{withChild(ev("", troupe.EventAgentStarted, "coordinator", 0, ""), coordinator, ""), nil},
		{ev(coordinator, troupe.EventAgentStarted, "coordinator", 0, ""), []string{"coordinator"}},
		{ev(coordinator, troupe.EventTurn, "coordinator", 1, "2 tool call(s)"), []string{"coordinator"}},
		{withChild(ev(coordinator, troupe.EventAgentToolStarted, "coordinator", 1, "Review the pricing"), pricing, "review_pricing"), []string{"coordinator"}},
		{withChild(ev(coordinator, troupe.EventAgentStarted, "pricing_reviewer", 0, ""), pricing, ""), []string{"coordinator"}},
		{withChild(ev(coordinator, troupe.EventAgentToolStarted, "coordinator", 1, "Review the rollout"), rollout, "review_rollout"), []string{"coordinator"}},
		{withChild(ev(coordinator, troupe.EventAgentStarted, "rollout_reviewer", 0, ""), rollout, ""), []string{"coordinator"}},
		{ev(pricing, troupe.EventAgentStarted, "pricing_reviewer", 0, ""), []string{"coordinator", "pricing_reviewer"}},
		{ev(rollout, troupe.EventAgentStarted, "rollout_reviewer", 0, ""), []string{"coordinator", "pricing_reviewer", "rollout_reviewer"}},
		{ev(pricing, troupe.EventSandboxProvisioned, "pricing_reviewer", 0, "bwrap sandbox on vm"), nil},
		{ev(pricing, troupe.EventTurn, "pricing_reviewer", 1, "1 tool call(s)"), nil},
		{withTool(ev(pricing, troupe.EventToolCalled, "pricing_reviewer", 1, `{"cmd":"cat deal/pricing.json"}`), "exec_command"), nil},
		{withTool(ev(pricing, troupe.EventToolResult, "pricing_reviewer", 1, "Process exited with code 0\nOutput: {}"), "exec_command"), nil},
		{ev(pricing, troupe.EventFinal, "pricing_reviewer", 2, `{"risk_level":"high"}`), []string{"coordinator", "rollout_reviewer"}},
		{withTool(ev(coordinator, troupe.EventAgentToolFinished, "coordinator", 1, `{"risk_level":"high"}`), "review_pricing"), nil},
		{ev(rollout, troupe.EventFailed, "rollout_reviewer", 0, "troupe.ModelError: model: HTTP 400"), []string{"coordinator"}},
		{withTool(ev(coordinator, troupe.EventAgentToolFinished, "coordinator", 1, "Error: agent tool review_rollout failed"), "review_rollout"), nil},
		{ev(coordinator, troupe.EventTurn, "coordinator", 2, output[:80]), nil},
		{ev(coordinator, troupe.EventFinal, "coordinator", 2, cut), []string{}},
		{ev("", troupe.EventFinal, "coordinator", 1, cut), []string{}},
	}
	var infos int
	for i, st := range steps {
		effects := s.Apply(Followed{Session: sid, Event: st.event})
		top := st.event.WorkflowID == sid
		if top != (len(effects) == 1 && effects[0].Do == DoInfo) {
			t.Errorf("step %d (%s of %s): effects %+v; want a DoInfo for the session's own events only", i, st.event.Kind, st.event.WorkflowID, effects)
		}
		if top {
			infos++
		}
		if st.atWork != nil && !slices.Equal(s.AtWork(), st.atWork) && (len(st.atWork) > 0 || len(s.AtWork()) > 0) {
			t.Errorf("step %d (%s of %s): at work %v, want %v", i, st.event.Kind, st.event.Agent, s.AtWork(), st.atWork)
		}
	}
	want := []string{
		"user/0 Review the Acme deal", // not sent from here
		"step/0 ● triage",
		"step/0 triage · turn 1: 1 tool call(s)",
		"step/0 ↪ handoff: triage → coordinator",
		"step/0 ● coordinator",
		"step/0 coordinator · turn 1: 2 tool call(s)",
		"step/0 coordinator ⇉ review_pricing (agent as tool): Review the pricing",
		"step/0 coordinator ⇉ review_rollout (agent as tool): Review the rollout",
		"step/1 ▣ pricing_reviewer: sandbox provisioned: bwrap sandbox on vm",
		"step/1 pricing_reviewer · turn 1: 1 tool call(s)",
		`step/1 pricing_reviewer → exec_command {"cmd":"cat deal/pricing.json"}`,
		"step/1 pricing_reviewer ← exec_command: Process exited with code 0\nOutput: {}",
		`step/0 coordinator ⇇ review_pricing: {"risk_level":"high"}`,
		"problem/1 rollout_reviewer failed: troupe.ModelError: model: HTTP 400",
		"step/0 coordinator ⇇ review_rollout: Error: agent tool review_rollout failed",
		"step/0 coordinator · turn 2: " + output[:80],
		"answer/0 coordinator: " + cut,
	}
	if got := show(s.Entries); !slices.Equal(got, want) {
		t.Errorf("shows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// The session's record of the turn holds the whole answer.
	info := s.Info
	info.Turns, info.Agent = 1, "coordinator"
	info.Recent = []troupeclient.TurnRecord{{Turn: "t1", Outcome: runtime.TurnAnswered, Agent: "coordinator", Output: json.RawMessage(output)}}
	s.Apply(Refreshed{Info: info})
	whole := FormatOutput(json.RawMessage(output))
	if got := s.Entries[len(s.Entries)-1]; got.Kind != KindAnswer || got.Text != whole {
		t.Errorf("answer after the record %q, want %q", got.Text, whole)
	}
	if !strings.Contains(whole, `"decision": "approve_with_conditions"`) {
		t.Errorf("whole answer not indented: %s", whole)
	}
	if s.Info.Turns != 1 || s.Info.Agent != "coordinator" {
		t.Errorf("info %+v", s.Info)
	}
}

// Live streaming: text_delta events grow an agent's reply, at its depth;
// the model_turn event ends it; the reply that the answering agent
// streamed last becomes the answer, whole once the record is read.
func TestStreaming(t *testing.T) {
	const agent = sid + "/t1/0-assistant"
	const helper = agent + "/t1.0/0-helper"
	s := opened(t, troupeclient.SessionInfo{})
	delta := func(wf, who string, turn int, text string) Msg {
		return Followed{Session: sid, Event: ev(wf, EventTextDelta, who, turn, text)}
	}
	apply(s,
		Line{Text: "say hello"},
		Followed{Session: sid, Event: ev("", troupe.EventMessage, "", 1, "say hello")},
		Followed{Session: sid, Event: withChild(ev("", troupe.EventAgentStarted, "assistant", 0, ""), agent, "")},
		delta(agent, "assistant", 1, "Let me "),
		delta(agent, "assistant", 1, "ask."),
	)
	want := []string{"user/0 say hello", "step/0 ● assistant", "reply/0 assistant: Let me ask.▍"}
	if got := show(s.Entries); !slices.Equal(got, want) {
		t.Fatalf("shows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !slices.Equal(s.AtWork(), []string{"assistant"}) {
		t.Errorf("at work %v", s.AtWork())
	}
	apply(s,
		Followed{Session: sid, Event: ev(agent, troupe.EventTurn, "assistant", 1, "1 tool call(s)")},
		Followed{Session: sid, Event: withChild(ev(agent, troupe.EventAgentToolStarted, "assistant", 1, "greet"), helper, "ask_helper")},
		delta(helper, "helper", 1, "Hel"),
		delta(helper, "helper", 1, "lo!"),
		Followed{Session: sid, Event: ev(helper, troupe.EventTurn, "helper", 1, "Hello!")},
		Followed{Session: sid, Event: withTool(ev(agent, troupe.EventAgentToolFinished, "assistant", 1, "Hello!"), "ask_helper")},
		delta(agent, "assistant", 2, "The helper "),
		delta(agent, "assistant", 2, "says: Hello!"),
	)
	want = append(want[:2],
		"reply/0 assistant: Let me ask.",
		"step/0 assistant · turn 1: 1 tool call(s)",
		"step/0 assistant ⇉ ask_helper (agent as tool): greet",
		"reply/1 helper: Hello!",
		"step/0 assistant ⇇ ask_helper: Hello!",
		"reply/0 assistant: The helper says: Hello!▍",
	)
	if got := show(s.Entries); !slices.Equal(got, want) {
		t.Fatalf("shows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	apply(s,
		Followed{Session: sid, Event: ev(agent, troupe.EventTurn, "assistant", 2, "The helper says: Hello!")},
		Followed{Session: sid, Event: ev(agent, troupe.EventFinal, "assistant", 2, `"The helper says: Hello!"`)},
		Followed{Session: sid, Event: ev("", troupe.EventFinal, "assistant", 1, `"The helper says: Hello!"`)},
	)
	want[len(want)-1] = "answer/0 assistant: The helper says: Hello!"
	if got := show(s.Entries); !slices.Equal(got, want) {
		t.Fatalf("shows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(s.AtWork()) != 0 {
		t.Errorf("at work after the answer: %v", s.AtWork())
	}
	info := s.Info
	info.Recent = []troupeclient.TurnRecord{{Turn: "t1", Outcome: runtime.TurnAnswered, Agent: "assistant", Output: json.RawMessage(`"The helper says: Hello!"`)}}
	s.Apply(Refreshed{Info: info})
	if got := show(s.Entries); !slices.Equal(got, want) {
		t.Errorf("after the record: shows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A message shows once: as sent from here, whether its message event
// comes before the send's answer or after; one sent by another client
// shows when its event comes.
func TestMessages(t *testing.T) {
	sent := func(turn, text string) Msg {
		return Sent{Session: sid, Text: text, Result: troupeclient.SendResult{Turn: turn}}
	}
	message := func(turn int, text string) Msg {
		return Followed{Session: sid, Event: ev("", troupe.EventMessage, "", turn, text)}
	}
	long := strings.Repeat("y", 250)
	tests := []struct {
		name string
		msgs []Msg
		want []string
	}{
		{"event first", []Msg{Line{Text: "one"}, message(1, "one"), sent("t1", "one")}, []string{"user/0 one"}},
		{"answer first", []Msg{Line{Text: "one"}, sent("t1", "one"), message(1, "one")}, []string{"user/0 one"}},
		{"the same twice", []Msg{Line{Text: "one"}, Line{Text: "one"}, message(1, "one"), sent("t1", "one"), message(2, "one"), sent("t2", "one")},
			[]string{"user/0 one", "user/0 one"}},
		{"long", []Msg{Line{Text: long}, message(1, long[:200]+"…"), sent("t1", long)}, []string{"user/0 " + long}},
		{"from another client", []Msg{message(1, "hi from a script")}, []string{"user/0 hi from a script"}},
		{"after one from here", []Msg{Line{Text: "one"}, sent("t1", "one"), message(1, "one"), message(2, "one")}, []string{"user/0 one", "user/0 one"}},
		{"queued", []Msg{Line{Text: "two"}, Sent{Session: sid, Text: "two", Result: troupeclient.SendResult{Turn: "t2", Ahead: 1}}},
			[]string{"user/0 two", "note/0 queued as turn t2, after 1 turn"}},
		{"refused", []Msg{Line{Text: "two"}, Failed{Do: DoSend, Session: sid, Text: "two",
			Err: fmt.Errorf("send to session %s: %w", sid, temporal.NewNonRetryableApplicationError("the session is busy", troupe.ErrSessionBusy, nil))}, message(1, "two")},
			[]string{"user/0 two",
				"problem/0 session session-dealdesk-1 is busy with a turn, and its policy refuses messages meanwhile: send it again once the turn ends, or /policy enqueue",
				"user/0 two"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := opened(t, troupeclient.SessionInfo{})
			apply(s, tc.msgs...)
			if got := show(s.Entries); !slices.Equal(got, tc.want) {
				t.Errorf("shows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// The session's own news: commands taken or refused, turns that failed
// or were rolled back, its stop.
func TestSessionNews(t *testing.T) {
	tests := []struct {
		event troupeclient.Event
		want  []string
	}{
		{ev("", troupe.EventSessionCommand, "", 0, "pause"), []string{"note/0 paused: no turn starts, and a running turn's agents start no model call or tool"}},
		{ev("", troupe.EventSessionCommand, "", 0, "resume"), []string{"note/0 resumed"}},
		{ev("", troupe.EventSessionCommand, "", 0, "rename Acme renewal"), []string{"note/0 renamed Acme renewal"}},
		{ev("", troupe.EventSessionCommand, "", 0, "policy reject"), []string{"note/0 input policy reject"}},
		{ev("", troupe.EventSessionCommand, "", 0, "resume refused: the session is not paused"),
			[]string{"problem/0 the session refused resume: the session is not paused"}},
		{ev("", troupe.EventMessageRefused, "", 2, "the session stopped before this message's turn"),
			[]string{"problem/0 message refused: the session stopped before this message's turn"}},
		{ev("", troupe.EventFailed, "coordinator", 3, "troupe.MaxTurns: too many turns"), []string{"problem/0 turn t3 failed: troupe.MaxTurns: too many turns"}},
		{ev("", troupe.EventTurnRolledBack, "coordinator", 3, "a new message rolled the turn back"), []string{"note/0 turn t3 rolled back: a new message rolled the turn back"}},
		{ev("", troupe.EventSessionStopped, "coordinator", 0, "after 3 turns"), []string{"note/0 session stopped after 3 turns"}},
		{ev("", troupe.EventSandboxSuspended, "pricing_reviewer", 0, "snapshot s1"), []string{"step/0 ▣ pricing_reviewer: sandbox suspended: snapshot s1"}},
		{ev("", troupe.EventSessionStarted, "triage", 0, ""), nil},
		{ev("", troupe.EventContinued, "triage", 0, "history of 10000 events"), nil},
	}
	for _, tc := range tests {
		t.Run(tc.event.Kind+" "+tc.event.Detail, func(t *testing.T) {
			s := opened(t, troupeclient.SessionInfo{})
			effects := s.Apply(Followed{Session: sid, Event: tc.event})
			if len(effects) != 1 || effects[0].Do != DoInfo || effects[0].Session != sid {
				t.Errorf("effects %+v, want the session's info read again", effects)
			}
			if got := show(s.Entries); !slices.Equal(got, tc.want) {
				t.Errorf("shows %q, want %q", got, tc.want)
			}
		})
	}
}

// An agent's failure says why; the turn's failure then does not repeat
// it.
func TestTurnFailsOnce(t *testing.T) {
	s := opened(t, troupeclient.SessionInfo{})
	why := "troupe.ModelError: model: HTTP 400 invalid_request_error"
	apply(s,
		Followed{Session: sid, Event: ev("", troupe.EventMessage, "", 2, "what if 25%?")},
		Followed{Session: sid, Event: withChild(ev("", troupe.EventAgentStarted, "coordinator", 0, ""), coordinator, "")},
		Followed{Session: sid, Event: ev(coordinator, troupe.EventFailed, "coordinator", 0, why)},
		Followed{Session: sid, Event: ev("", troupe.EventFailed, "coordinator", 2, why)},
	)
	want := []string{"user/0 what if 25%?", "step/0 ● coordinator", "problem/0 coordinator failed: " + why, "problem/0 turn t2 failed"}
	if got := show(s.Entries); !slices.Equal(got, want) {
		t.Errorf("shows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestOpen(t *testing.T) {
	info := troupeclient.SessionInfo{ID: "s2", Name: "acme", Graph: "dealdesk", Status: runtime.SessionThinking, Agent: "coordinator", Turns: 24, Running: "t25", NextEvent: 90,
		Recent: []troupeclient.TurnRecord{
			{Turn: "t21", Message: "first", Outcome: runtime.TurnAnswered, Agent: "coordinator", Output: json.RawMessage(`"fine"`)},
			{Turn: "t22", Message: "second", Outcome: runtime.TurnFailed, Error: "troupe.MaxTurns: too many"},
			{Turn: "t23", Message: "third", Outcome: runtime.TurnRolledBack},
			{Turn: "t24", Message: "fourth", Outcome: runtime.TurnAnswered, Agent: "coordinator", Output: json.RawMessage(`{"a":1}`)},
		}}
	s := NewState(Options{})
	effects := apply(s, Line{Text: "/open s2"})
	if want := (Effect{Do: DoOpen, Session: "s2"}); len(effects) == 0 || !sameEffect(effects[0], want) {
		t.Errorf("effects %+v, want %+v first", effects, want)
	}
	if w := s.Waiting(); !slices.Equal(w, []string{"opening the session"}) {
		t.Errorf("waiting %v", w)
	}
	effects = s.Apply(Opened{Info: info})
	if want := []Effect{{Do: DoFollow, Session: "s2", Cursor: troupeclient.Cursor{"s2": 89}}}; !slices.EqualFunc(effects, want, sameEffect) {
		t.Errorf("effects %+v, want %+v", effects, want)
	}
	if len(s.Waiting()) != 0 {
		t.Errorf("waiting %v", s.Waiting())
	}
	want := []string{
		"note/0 ── session s2 (acme) of dealdesk: thinking, 24 turns, next answered by coordinator ──",
		"note/0 (20 earlier turns not shown)",
		"user/0 first", "answer/0 coordinator: fine",
		"user/0 second", "problem/0 turn t22 failed: troupe.MaxTurns: too many",
		"user/0 third", "note/0 turn t23: rolled back",
		"user/0 fourth", "answer/0 coordinator: {\n  \"a\": 1\n}",
		"note/0 turn t25 is running",
	}
	if got := show(s.Entries); !slices.Equal(got, want) {
		t.Errorf("shows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The follower of a session left behind is not shown.
	s.Apply(Followed{Session: sid, Event: ev("", troupe.EventMessage, "", 1, "elsewhere")})
	if len(s.Entries) != len(want) {
		t.Errorf("an event of another session shows: %q", show(s.Entries)[len(want):])
	}
	// Opening it again reads it again, and follows nothing new.
	if effects := s.Apply(Opened{Info: info}); effects != nil {
		t.Errorf("effects %+v", effects)
	}
}

func TestPicker(t *testing.T) {
	list := []troupeclient.SessionEntry{{ID: "a"}, {ID: sid}, {ID: "c"}}
	tests := []struct {
		name    string
		msgs    []Msg
		picking bool
		pick    int
		effects []Effect
	}{
		{"the open one first", []Msg{Listed{Sessions: list}}, true, 1, nil},
		{"up", []Msg{Listed{Sessions: list}, Key{Name: "up"}, Key{Name: "up"}}, true, 0, nil},
		{"down", []Msg{Listed{Sessions: list}, Key{Name: "down"}, Key{Name: "down"}}, true, 2, nil},
		{"enter", []Msg{Listed{Sessions: list}, Key{Name: "down"}, Key{Name: "enter"}}, false, 2, []Effect{{Do: DoOpen, Session: "c"}, {Do: DoCheckServed}}},
		{"empty line", []Msg{Listed{Sessions: list}, Key{Name: "up"}, Line{Text: ""}}, false, 0, []Effect{{Do: DoOpen, Session: "a"}, {Do: DoCheckServed}}},
		{"esc", []Msg{Listed{Sessions: list}, Key{Name: "esc"}, Key{Name: "enter"}}, false, 1, nil},
		{"a command closes it", []Msg{Listed{Sessions: list}, Line{Text: "/pause"}}, false, 1, []Effect{{Do: DoCommand, Session: sid, Command: "pause"}}},
		{"keys without it", []Msg{Key{Name: "down"}, Key{Name: "enter"}}, false, 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := opened(t, troupeclient.SessionInfo{})
			effects := apply(s, tc.msgs...)
			if s.Picking != tc.picking || s.Pick != tc.pick {
				t.Errorf("picking %v at %d, want %v at %d", s.Picking, s.Pick, tc.picking, tc.pick)
			}
			if !slices.EqualFunc(effects, tc.effects, sameEffect) {
				t.Errorf("effects %+v, want %+v", effects, tc.effects)
			}
		})
	}
	s := NewState(Options{})
	s.Apply(Listed{})
	if got := show(s.Entries); s.Picking || got[len(got)-1] != "note/0 no sessions yet: /new [graph] starts one" {
		t.Errorf("no sessions: picking %v, shows %q", s.Picking, got)
	}
}

// What the session manager says of the open session shows at once; the
// session is then read again.
func TestCommanded(t *testing.T) {
	s := opened(t, troupeclient.SessionInfo{})
	apply(s, Line{Text: "/pause"})
	if w := s.Waiting(); !slices.Equal(w, []string{"asking the session manager"}) {
		t.Errorf("waiting %v", w)
	}
	effects := s.Apply(Commanded{Session: sid, Command: "pause", Entry: troupeclient.SessionEntry{ID: sid, Name: "n", Status: runtime.SessionPaused, Policy: runtime.PolicyReject, Turns: 2}})
	if want := []Effect{{Do: DoInfo, Session: sid}}; !slices.EqualFunc(effects, want, sameEffect) {
		t.Errorf("effects %+v", effects)
	}
	if s.Info.Status != runtime.SessionPaused || s.Info.Name != "n" || s.Info.Policy != runtime.PolicyReject || s.Info.Turns != 2 || s.Info.Agent != "triage" {
		t.Errorf("info %+v", s.Info)
	}
	if len(s.Waiting()) != 0 || len(s.Entries) != 0 {
		t.Errorf("waiting %v, shows %q", s.Waiting(), show(s.Entries))
	}
	// Of another session: nothing changes.
	if effects := s.Apply(Commanded{Session: "other", Command: "stop", Entry: troupeclient.SessionEntry{ID: "other", Status: runtime.SessionStopped}}); effects != nil || s.Info.Status != runtime.SessionPaused {
		t.Errorf("effects %+v, info %+v", effects, s.Info)
	}
}

func TestForkAndSwitch(t *testing.T) {
	s := opened(t, troupeclient.SessionInfo{})
	effects := apply(s, Line{Text: "/fork"}, Forked{From: sid, Entry: troupeclient.SessionEntry{ID: "s-fork", Name: "what-if"}})
	if want := []Effect{{Do: DoOpen, Session: "s-fork"}, {Do: DoCheckServed}}; !slices.EqualFunc(effects, want, sameEffect) {
		t.Errorf("effects %+v, want %+v", effects, want)
	}
	effects = apply(s, Line{Text: "/switch docker"}, Switched{Session: sid, Backend: "docker", Entry: troupeclient.SessionEntry{ID: sid, Status: runtime.SessionIdle}})
	if want := []Effect{{Do: DoInfo, Session: sid}}; !slices.EqualFunc(effects, want, sameEffect) {
		t.Errorf("effects %+v, want %+v", effects, want)
	}
	want := []string{
		"note/0 forked session session-dealdesk-1 into s-fork (what-if): the fork opens; /open session-dealdesk-1 goes back",
		"note/0 session session-dealdesk-1: its workspaces move to the docker backend",
	}
	if got := show(s.Entries); !slices.Equal(got, want) {
		t.Errorf("shows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestProblems(t *testing.T) {
	app := func(typ string) error {
		return fmt.Errorf("wrapped: %w", temporal.NewNonRetryableApplicationError("the message", typ, nil))
	}
	tests := []struct {
		name string
		msgs []Msg
		want []string
	}{
		{"busy", []Msg{Failed{Do: DoSend, Session: sid, Err: app(troupe.ErrSessionBusy)}},
			[]string{"problem/0 session session-dealdesk-1 is busy with a turn, and its policy refuses messages meanwhile: send it again once the turn ends, or /policy enqueue"}},
		{"stopped", []Msg{Failed{Do: DoCommand, Session: sid, Err: app(troupe.ErrSessionStopped)}},
			[]string{"problem/0 session session-dealdesk-1 is stopped: /new starts another, /sessions lists them"}},
		{"unknown session", []Msg{Failed{Do: DoCommand, Session: "x", Err: app(troupe.ErrUnknownSession)}},
			[]string{"problem/0 no session x: /sessions lists them"}},
		{"bad command", []Msg{Failed{Do: DoCommand, Session: sid, Err: app(troupe.ErrBadCommand)}}, []string{"problem/0 the message"}},
		{"gone", []Msg{Failed{Do: DoOpen, Session: "x", Err: fmt.Errorf("session x: %w", serviceerror.NewNotFound("workflow not found"))}},
			[]string{"problem/0 session x is not running (stopped, or no such session): /sessions lists them"}},
		{"not built", []Msg{Failed{Do: DoFork, Session: sid, Err: errors.New("fork session s: not built yet")}}, []string{"problem/0 fork session s: not built yet"}},
		{"unserved, once", []Msg{Served{Queue: "troupe"}, Served{Queue: "troupe"}},
			[]string{"problem/0 no worker serves task queue troupe: the session waits until `troupe dev` or `troupe worker` runs"}},
		{"unserved again", []Msg{Served{Queue: "troupe"}, Served{Queue: "troupe", OK: true}, Line{Text: "hello"}, Served{Queue: "troupe"}},
			[]string{"problem/0 no worker serves task queue troupe: the session waits until `troupe dev` or `troupe worker` runs",
				"user/0 hello",
				"problem/0 no worker serves task queue troupe: the session waits until `troupe dev` or `troupe worker` runs"}},
		{"the same twice", []Msg{Failed{Do: DoInfo, Session: sid, Err: errors.New("deadline exceeded")}, Failed{Do: DoInfo, Session: sid, Err: errors.New("deadline exceeded")}},
			[]string{"problem/0 deadline exceeded"}},
		{"info of another session", []Msg{Failed{Do: DoInfo, Session: "x", Err: errors.New("deadline exceeded")}}, nil},
		{"follower ended", []Msg{FollowEnded{Session: sid, Err: errors.New("connection lost")}},
			[]string{"problem/0 stopped following session session-dealdesk-1: connection lost (/open session-dealdesk-1 follows it again)"}},
		{"follower stopped", []Msg{FollowEnded{Session: sid}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := opened(t, troupeclient.SessionInfo{})
			apply(s, tc.msgs...)
			if got := show(s.Entries); !slices.Equal(got, tc.want) {
				t.Errorf("shows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
	// A stopped session need not answer queries.
	s := opened(t, troupeclient.SessionInfo{ID: sid, Status: runtime.SessionStopped})
	s.Apply(Failed{Do: DoInfo, Session: sid, Err: errors.New("workflow closed")})
	if len(s.Entries) != 0 {
		t.Errorf("shows %q", show(s.Entries))
	}
}

func TestFormatOutput(t *testing.T) {
	tests := []struct{ in, want string }{
		{`"plain text"`, "plain text"},
		{`{"a":[1,2]}`, "{\n  \"a\": [\n    1,\n    2\n  ]\n}"},
		{`{"a":"cut…`, `{"a":"cut…`},
		{``, ``},
	}
	for _, tc := range tests {
		if got := FormatOutput(json.RawMessage(tc.in)); got != tc.want {
			t.Errorf("FormatOutput(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// A call that waits shows with how to decide it; y, n and a decide the
// oldest, /reject ID MESSAGE a named one; its decided event takes it off.
func TestApprovals(t *testing.T) {
	s := opened(t, troupeclient.SessionInfo{})
	asked := func(id, args string) troupeclient.Event {
		e := withTool(ev(pricing, troupe.EventApprovalRequested, "pricing_reviewer", 1, args), "exec_command")
		e.Approval = id
		return e
	}
	if eff := s.Apply(Line{Text: "/approve"}); eff != nil || !strings.Contains(last(s).Text, "no call waits") {
		t.Errorf("/approve with nothing waiting: %+v, %q", eff, last(s).Text)
	}
	s.Apply(Followed{Session: sid, Event: asked("a1", `{"cmd":"rm -rf build/"}`)})
	s.Apply(Followed{Session: sid, Event: asked("a2", `{"cmd":"make"}`)})
	if !strings.Contains(last(s).Text, "pricing_reviewer wants to run exec_command") || len(s.Approvals) != 2 {
		t.Fatalf("after two requests: %+v; shown %q", s.Approvals, last(s).Text)
	}
	// The session's info may be read before its root took the requests:
	// the header says the session waits all the same.
	s.Apply(Refreshed{Info: troupeclient.SessionInfo{ID: sid, Status: runtime.SessionThinking}})
	if h := s.Header(200); !strings.Contains(h, "· waiting ·") {
		t.Errorf("the header while calls wait, the session's info still thinking: %q", h)
	}
	for _, tc := range []struct {
		line string
		want troupeclient.Decision
	}{
		{"y", troupeclient.Decision{ID: "a1", Approve: true}},
		{"n", troupeclient.Decision{ID: "a1"}},
		{"a", troupeclient.Decision{ID: "a1", Approve: true, Remember: runtime.RememberTool}},
		{"/reject a2 not now", troupeclient.Decision{ID: "a2", Message: "not now"}},
		{"/reject no reason", troupeclient.Decision{ID: "a1", Message: "no reason"}},
	} {
		eff := s.Apply(Line{Text: tc.line})
		if len(eff) != 1 || eff[0].Do != DoDecide || eff[0].Session != sid || eff[0].Decision != tc.want {
			t.Errorf("%q: effects %+v, want the decision %+v", tc.line, eff, tc.want)
		}
		s.Apply(Failed{Do: DoDecide, Session: sid, Err: errors.New("not taken")})
	}
	s.Apply(Decided{Session: sid, Decisions: []troupeclient.Decision{{ID: "a2", Approve: true}}})
	decided := withTool(ev(pricing, troupe.EventApprovalDecided, "pricing_reviewer", 1, "approved by user"), "exec_command")
	decided.Approval = "a1"
	s.Apply(Followed{Session: sid, Event: decided})
	if len(s.Approvals) != 0 {
		t.Errorf("still waiting: %+v", s.Approvals)
	}
	// With nothing waiting, y is a message again.
	if eff := s.Apply(Line{Text: "y"}); len(eff) == 0 || eff[0].Do != DoSend {
		t.Errorf("y with nothing waiting: %+v, want it sent", eff)
	}
}

func last(s *State) Entry { return s.Entries[len(s.Entries)-1] }

// /help and /policy's usage name every policy a session takes.
func TestHelpNamesEveryPolicy(t *testing.T) {
	for _, p := range runtime.Policies {
		if !strings.Contains(Help, string(p)) || !strings.Contains(sessionCommands["/policy"].text, string(p)) {
			t.Errorf("policy %s: missing from /help or from /policy's usage", p)
		}
	}
}
