package server

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/examples/codereview"
	"github.com/troupe-dev/troupe/examples/dealdesk"
	"github.com/troupe-dev/troupe/runtime"
)

var sessionIDForm = regexp.MustCompile(`^mcp-session-(dealdesk|codereview)-[0-9a-f]{32}$`)

func TestSessionTools(t *testing.T) {
	s := newTestServer(t, dealdesk.Graph(), codereview.Graph(), handoffGraphs())
	want := []string{"dealdesk_coordinator", "dealdesk_coordinator_session", "codereview_coordinator", "codereview_coordinator_session",
		"h_same", "h_same_session", "h_mixed", "h_mixed_session", "h_text", "h_text_session"}
	if got := s.Tools(); !slices.Equal(got, want) {
		t.Errorf("Tools() = %v, want %v", got, want)
	}
	tests := []struct {
		tool      string
		start     []string // the start argument's required properties; nil: no start
		reply     string   // a substring of the reply's schema
		replyType string
	}{
		{"dealdesk_coordinator_session", nil, `"decision"`, "object"},
		// The coordinator may hand off to the fixer: no reply schema but an object.
		{"codereview_coordinator_session", []string{"repo"}, `"description"`, "object"},
		{"h_same_session", nil, `"risk"`, "object"},
		{"h_text_session", nil, `"output"`, "object"},
		{"h_mixed_session", nil, `"type":"object"`, "object"},
	}
	for _, tc := range tests {
		t.Run(tc.tool, func(t *testing.T) {
			i := slices.IndexFunc(s.sessions, func(st *sessionTool) bool { return st.name == tc.tool })
			if i < 0 {
				t.Fatalf("no session tool %s", tc.tool)
			}
			st := s.sessions[i].tool
			var in struct {
				Type       string   `json:"type"`
				Required   []string `json:"required"`
				Properties map[string]struct {
					Type     any      `json:"type"`
					Required []string `json:"required"`
				} `json:"properties"`
				Additional *bool `json:"additionalProperties"`
			}
			if err := json.Unmarshal(st.InputSchema.(json.RawMessage), &in); err != nil {
				t.Fatal(err)
			}
			if in.Type != "object" || !slices.Equal(in.Required, []string{"message"}) || in.Additional == nil || *in.Additional ||
				in.Properties["message"].Type != "string" || in.Properties["session_id"].Type != "string" {
				t.Errorf("input schema %s: want {message, session_id?}", st.InputSchema)
			}
			start, hasStart := in.Properties["start"]
			if hasStart != (tc.start != nil) || hasStart && !slices.Equal(start.Required, tc.start) {
				t.Errorf("input schema %s: start %v, want required %v", st.InputSchema, start, tc.start)
			}
			var out struct {
				Type       string                     `json:"type"`
				Required   []string                   `json:"required"`
				Properties map[string]json.RawMessage `json:"properties"`
			}
			if err := json.Unmarshal(st.OutputSchema.(json.RawMessage), &out); err != nil {
				t.Fatal(err)
			}
			if out.Type != "object" || !slices.Equal(out.Required, []string{"session_id", "turn", "agent", "reply"}) ||
				!strings.Contains(string(out.Properties["reply"]), tc.reply) || !strings.Contains(string(out.Properties["reply"]), `"type":"`+tc.replyType+`"`) {
				t.Errorf("output schema %s: want session_id, turn, agent and a reply with %s", st.OutputSchema, tc.reply)
			}
			if st.Description == "" || st.Annotations == nil || st.Annotations.ReadOnlyHint {
				t.Errorf("tool %s: description %q, annotations %+v", st.Name, st.Description, st.Annotations)
			}
		})
	}
}

// TestSessionToolNameClash: a session tool may not take the name of
// another tool.
func TestSessionToolNameClash(t *testing.T) {
	g := agents.MustGraph("g", "a",
		&agents.Agent{Name: "a", Instructions: "x", Expose: agents.Expose("", "d")},
		&agents.Agent{Name: "b", Instructions: "x", Expose: agents.Expose("g_a_session", "d")},
	)
	f := &fakeTemporal{}
	if _, err := New(Config{Client: f, Graphs: []*agents.Graph{g}}); err == nil || !strings.Contains(err.Error(), "session tool name g_a_session") {
		t.Errorf("New: %v, want the session tool's name taken", err)
	}
}

// callTool calls a tool over an in-memory transport to s.
func callTool(t *testing.T, s *Server, name string, args map[string]any, meta mcp.Meta) (text string, res *mcp.CallToolResult) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	serverSide, clientSide := mcp.NewInMemoryTransports()
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(ctx, serverSide) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).Connect(ctx, clientSide, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cs.Close(); cancel(); <-done }()
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args, Meta: meta})
	if err != nil {
		t.Fatalf("protocol error %v, want a result", err)
	}
	for _, c := range res.Content {
		text += c.(*mcp.TextContent).Text
	}
	return text, res
}

// TestSessionCallErrors: session calls whose arguments are wrong answer
// isError with the reason, and reach neither the session manager nor a
// session.
func TestSessionCallErrors(t *testing.T) {
	s, f := newFakeServer(t, nil, dealdesk.Graph(), codereview.Graph())
	const dd, cr = "dealdesk_coordinator_session", "codereview_coordinator_session"
	tests := []struct {
		name string
		tool string
		args map[string]any
		meta mcp.Meta
		want string
	}{
		{"no message", dd, map[string]any{}, nil, "message is required"},
		{"empty message", dd, map[string]any{"message": ""}, nil, "message is required"},
		{"blank message to a session", dd, map[string]any{"message": "  \n", "session_id": "mcp-session-dealdesk-" + strings.Repeat("a", 32)}, nil, "message is required"},
		{"empty session_id", dd, map[string]any{"message": "hi", "session_id": ""}, nil, "session_id must not be empty"},
		{"session_id not a string", dd, map[string]any{"message": "hi", "session_id": 7}, nil, "invalid arguments for " + dd},
		{"unknown property", dd, map[string]any{"message": "hi", "colour": "red"}, nil, `unknown field "colour"`},
		{"start for a plain exposure", dd, map[string]any{"message": "hi", "start": map[string]any{"input": "x"}}, nil, `unknown field "start"`},
		{"start with a session", cr, map[string]any{"message": "hi", "session_id": "x", "start": map[string]any{"repo": "."}}, nil, "leave it out with session_id"},
		{"start without its required property", cr, map[string]any{"message": "review it"}, nil, "invalid arguments for " + cr + ": start:"},
		{"bad idempotency key", dd, map[string]any{"message": "hi"}, mcp.Meta{MetaIdempotencyKey: ""}, MetaIdempotencyKey},
		{"an id of another form", dd, map[string]any{"message": "hi", "session_id": "session-dealdesk-1a2b3c4d"},
			nil, `no session with id "session-dealdesk-1a2b3c4d": call ` + dd + " without session_id to start one"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			text, res := callTool(t, s, tc.tool, tc.args, tc.meta)
			if !res.IsError || !strings.Contains(text, tc.want) {
				t.Errorf("result isError=%v %q, want isError with %q", res.IsError, text, tc.want)
			}
		})
	}
	if asked := f.sessionsAsked(); len(asked) != 0 {
		t.Errorf("sessions asked for: %+v", asked)
	}
}

// TestSessionCreation: a call without session_id asks the session
// manager for a session of the tool's graph, at its agent, named after
// the first message, with the run variables of the exposure's arguments,
// under an id derived from the request: the same request asks for the
// same id, another request (or no scope) for another.
func TestSessionCreation(t *testing.T) {
	s, f := newFakeServer(t, nil, dealdesk.Graph(), codereview.Graph())
	key := mcp.Meta{MetaIdempotencyKey: "k1"}
	calls := []struct {
		tool string
		args map[string]any
		meta mcp.Meta
	}{
		{"dealdesk_coordinator_session", map[string]any{"message": "Review the Acme Corp deal"}, key},
		{"dealdesk_coordinator_session", map[string]any{"message": "Review the Acme Corp deal"}, key},
		{"dealdesk_coordinator_session", map[string]any{"message": "Review the Acme Corp deal"}, mcp.Meta{MetaIdempotencyKey: "k2"}},
		{"codereview_coordinator_session", map[string]any{"message": "review it", "start": map[string]any{"repo": "/src/app"}}, key},
	}
	for _, c := range calls {
		// The fake refuses to create: the call says so.
		if text, res := callTool(t, s, c.tool, c.args, c.meta); !res.IsError || !strings.Contains(text, "could not start a session") {
			t.Errorf("%s: %q, want the creation's failure", c.tool, text)
		}
	}
	asked := f.sessionsAsked()
	if len(asked) != len(calls) {
		t.Fatalf("sessions asked for: %+v, want %d", asked, len(calls))
	}
	for i, a := range asked {
		if !sessionIDForm.MatchString(a.ID) || s.graphOfSessionID(a.ID) == nil {
			t.Errorf("session %d: id %q", i, a.ID)
		}
	}
	if asked[0].ID != asked[1].ID || asked[0].ID == asked[2].ID {
		t.Errorf("ids %q, %q, %q: want the first two equal (same key, tool and message), the third apart", asked[0].ID, asked[1].ID, asked[2].ID)
	}
	dd := asked[0].Session
	if dd.Graph != "dealdesk" || dd.Agent != "coordinator" || dd.Name != "dealdesk_coordinator: Review the Acme Corp deal" || dd.Carry != nil {
		t.Errorf("dealdesk session %+v", dd)
	}
	cr := asked[3].Session
	if cr.Graph != "codereview" || cr.Agent != "coordinator" || cr.Vars[codereview.VarRepo] != "/src/app" || !strings.HasPrefix(asked[3].ID, "mcp-session-codereview-") {
		t.Errorf("codereview session %s: %+v, want the repo in its vars", asked[3].ID, cr)
	}
}

// TestCheckSession: a session tool continues only the sessions that the
// session tools of a server of these graphs create, of its own graph and
// agent; every other id is "no session", and a session of another tool
// says which.
func TestCheckSession(t *testing.T) {
	const hex = "0123456789abcdef0123456789abcdef"
	mine := troupe.SessionInput{Graph: "dealdesk", Agent: "coordinator", Name: "x"}
	known := map[string]fakeWorkflow{
		"mcp-session-dealdesk-" + hex: session(mine),
		// `troupe sessions new` of a served graph.
		"session-dealdesk-1a2b3c4d": session(mine),
		// A run under an id of this server's form.
		"mcp-session-dealdesk-" + strings.Repeat("1", 32): orchestrator(troupe.RunInput{Graph: "dealdesk", Agent: "coordinator"}),
		// Graphs and agents that no session tool serves.
		"mcp-session-other-" + hex:                        session(troupe.SessionInput{Graph: "other", Agent: "a"}),
		"mcp-session-dealdesk-" + strings.Repeat("2", 32): session(troupe.SessionInput{Graph: "codereview", Agent: "coordinator"}),
		"mcp-session-dealdesk-" + strings.Repeat("3", 32): session(troupe.SessionInput{Graph: "dealdesk", Agent: "triage"}),
		"mcp-session-dealdesk-" + strings.Repeat("4", 32): session(troupe.SessionInput{Graph: "dealdesk"}),
		// A session of the other graph's session tool.
		"mcp-session-codereview-" + hex: session(troupe.SessionInput{Graph: "codereview", Agent: "coordinator"}),
	}
	s, _ := newFakeServer(t, known, dealdesk.Graph(), codereview.Graph())
	dd := s.sessions[0]
	if dd.name != "dealdesk_coordinator_session" {
		t.Fatalf("first session tool %s", dd.name)
	}
	ctx := context.Background()
	if err := s.checkSession(ctx, dd, "mcp-session-dealdesk-"+hex); err != nil {
		t.Fatalf("a session of dealdesk_coordinator_session: %v", err)
	}
	tests := []struct{ name, id, want string }{
		{"unknown", "no-such-session", ""},
		{"unknown, of this server's form", "mcp-session-dealdesk-" + strings.Repeat("f", 32), ""},
		{"a session of troupe sessions", "session-dealdesk-1a2b3c4d", ""},
		{"a run", "mcp-session-dealdesk-" + strings.Repeat("1", 32), ""},
		{"a graph not served", "mcp-session-other-" + hex, ""},
		{"another graph under a served graph's id", "mcp-session-dealdesk-" + strings.Repeat("2", 32), ""},
		{"an agent not exposed", "mcp-session-dealdesk-" + strings.Repeat("3", 32), ""},
		{"no agent", "mcp-session-dealdesk-" + strings.Repeat("4", 32), ""},
		{"a run id", "mcp-dealdesk-" + hex, ""},
		{"another tool's session", "mcp-session-codereview-" + hex,
			fmt.Sprintf("session %q is a conversation with agent coordinator of graph codereview, not with coordinator of dealdesk: continue it with codereview_coordinator_session", "mcp-session-codereview-"+hex)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			if want == "" {
				want = fmt.Sprintf("no session with id %q: call dealdesk_coordinator_session without session_id to start one", tc.id)
			}
			if err := s.checkSession(ctx, dd, tc.id); err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Errorf("checkSession: %v, want %s", err, want)
			}
		})
	}
}

// TestSessionCancelBeforeSend: a cancellation that comes before its call
// keeps the call from creating a session or sending anything.
func TestSessionCancelBeforeSend(t *testing.T) {
	s, f := newFakeServer(t, nil, dealdesk.Graph())
	c := serveRaw(t, s)
	c.notify("notifications/cancelled", `{"requestId":7,"reason":"changed my mind"}`)
	text, isError := resultText(t, c.call(7, "tools/call", `{"name":"dealdesk_coordinator_session","arguments":{"message":"hello"}}`))
	if !isError || !strings.Contains(text, "nothing was sent") {
		t.Errorf("the cancelled call answered %q (isError %v), want that nothing was sent", text, isError)
	}
	if asked := f.sessionsAsked(); len(asked) != 0 {
		t.Errorf("the cancelled call asked for sessions %+v", asked)
	}
	c.call(8, "tools/call", `{"name":"dealdesk_coordinator_session","arguments":{"message":"hello"}}`)
	if asked := f.sessionsAsked(); len(asked) != 1 {
		t.Errorf("sessions asked for after a call that was not cancelled: %+v, want 1", asked)
	}
}

func TestSessionIDs(t *testing.T) {
	scope := requestScope{Session: "s1", Request: "n:1"}
	a := sessionWorkflowID("g", "g_a_session", "hi", json.RawMessage(`{"b":1,"a":[1,2]}`), scope)
	b := sessionWorkflowID("g", "g_a_session", "hi", json.RawMessage(` {"a": [1, 2], "b": 1}`), scope)
	if a != b || !regexp.MustCompile(`^mcp-session-g-[0-9a-f]{32}$`).MatchString(a) {
		t.Errorf("equal arguments spelled apart: %q and %q, want one id of the form", a, b)
	}
	for _, other := range []string{
		sessionWorkflowID("g", "g_a_session", "hi!", nil, scope),
		sessionWorkflowID("g", "g_b_session", "hi", json.RawMessage(`{"b":1,"a":[1,2]}`), scope),
		sessionWorkflowID("g", "g_a_session", "hi", json.RawMessage(`{"b":1,"a":[1,2]}`), requestScope{Key: "k"}),
		sessionWorkflowID("g", "g_a_session", "hi", json.RawMessage(`{"b":1,"a":[1,2]}`), requestScope{}),
	} {
		if other == a {
			t.Errorf("another call derived the same id %s", a)
		}
	}
	if r1, r2 := sessionWorkflowID("g", "t", "hi", nil, requestScope{}), sessionWorkflowID("g", "t", "hi", nil, requestScope{}); r1 == r2 {
		t.Errorf("two calls without a scope share the session %s", r1)
	}
	if id := messageID("t", "s", "hi", requestScope{}); id != "" {
		t.Errorf("message id without a scope = %q, want none (a fresh one)", id)
	}
	m := messageID("t", "s", "hi", scope)
	if m == "" || m != messageID("t", "s", "hi", scope) || m == messageID("t", "s2", "hi", scope) || m == messageID("t", "s", "ho", scope) {
		t.Errorf("message ids: %q, want one per tool, session, message and scope", m)
	}
}

func TestSessionEventMessage(t *testing.T) {
	const id = "mcp-session-g-x"
	tests := []struct {
		e    troupe.Event
		want string // "" when the event is left out
	}{
		{troupe.Event{WorkflowID: id, Kind: troupe.EventSessionStarted, Agent: "a"}, ""},
		{troupe.Event{WorkflowID: id, Kind: troupe.EventMessage, Turn: 2, Detail: "hi"}, "turn 2: message taken"},
		{troupe.Event{WorkflowID: id, Kind: troupe.EventAgentStarted, Agent: "a", Child: id + "/t2/0-a"}, "a started"},
		{troupe.Event{WorkflowID: id + "/t2/0-a", Kind: troupe.EventFinal, Agent: "a", Turn: 1}, "a: final output"},
		{troupe.Event{WorkflowID: id, Kind: troupe.EventFinal, Agent: "a", Turn: 2}, "turn 2 answered by a"},
		{troupe.Event{WorkflowID: id, Kind: troupe.EventFailed, Agent: "a", Turn: 2, Detail: "boom"}, "turn 2 failed: boom"},
		{troupe.Event{WorkflowID: id, Kind: troupe.EventTurnRolledBack, Turn: 2}, "turn 2 rolled back"},
		{troupe.Event{WorkflowID: id, Kind: troupe.EventSessionStopped}, "session stopped"},
		{troupe.Event{WorkflowID: id, Kind: troupe.EventHandoff, Agent: "a", Detail: "a → b"}, "handoff: a → b"},
	}
	for _, tc := range tests {
		got, ok := sessionEventMessage(id, tc.e)
		if !ok {
			got = ""
		}
		if got != tc.want {
			t.Errorf("sessionEventMessage(%s/%s) = %q, want %q", tc.e.WorkflowID, tc.e.Kind, got, tc.want)
		}
	}
}

func TestTurnResult(t *testing.T) {
	const id = "mcp-session-g-x"
	ok := turnResult(id, troupeclient.TurnRecord{Turn: "t3", Outcome: runtime.TurnAnswered, Agent: "a", Output: json.RawMessage(`"hello"`)})
	if ok.IsError || string(ok.StructuredContent.(json.RawMessage)) != `{"session_id":"mcp-session-g-x","turn":3,"agent":"a","reply":{"output":"hello"}}` ||
		ok.Meta[MetaSessionID] != id {
		t.Errorf("answered turn: %+v %s", ok, ok.StructuredContent)
	}
	var fromText map[string]any
	if err := json.Unmarshal([]byte(ok.Content[0].(*mcp.TextContent).Text), &fromText); err != nil || fromText["turn"] != 3.0 {
		t.Errorf("text content %q is not the structured content", ok.Content[0].(*mcp.TextContent).Text)
	}
	failed := turnResult(id, troupeclient.TurnRecord{Turn: "t2", Outcome: runtime.TurnFailed, Error: "too many turns", ErrorType: troupe.ErrMaxTurns})
	if text := failed.Content[0].(*mcp.TextContent).Text; !failed.IsError || failed.StructuredContent != nil || failed.Meta[MetaErrorType] != troupe.ErrMaxTurns ||
		!strings.Contains(text, "turn 2 of session "+id+" failed: troupe.MaxTurnsExceeded: too many turns") {
		t.Errorf("failed turn: %+v (%q)", failed, text)
	}
}
