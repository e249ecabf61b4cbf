package e2e

// The session tools of `troupe mcp serve` (package mcp/server), with the
// TypeScript SDK client: a conversation over two connections.

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.temporal.io/api/enums/v1"

	"github.com/troupe-dev/troupe"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/mcp/server"
	"github.com/troupe-dev/troupe/runtime"
)

var mcpSessionID = regexp.MustCompile(`^mcp-session-(mcpchat|mcpwait)-[0-9a-f]{32}$`)

// tsSessionReply is a session tool's structured content.
type tsSessionReply struct {
	SessionID string `json:"session_id"`
	Turn      int    `json:"turn"`
	Agent     string `json:"agent"`
	Reply     struct {
		Output string `json:"output"`
	} `json:"reply"`
}

// TestMCPServeSession: the TypeScript SDK client holds a conversation
// with mcpchat_talker_session, whose scripted talker answers each message
// with its turn, the message and the conversation's first message. Two
// messages in one MCP session; then a new MCP session (a reconnected
// client) continues the conversation by its id, sending a third message
// twice under one idempotency key (one turn); wrong calls fail clearly;
// a call cancelled mid-turn leaves the session and its turn going on.
func TestMCPServeSession(t *testing.T) {
	parallel(t)
	f := newMCPServeFixture(t, server.HTTPOptions{})
	const tool, other = "mcpchat_talker_session", "mcpwait_waiter_session"
	var out struct {
		Tools         []tsTool     `json:"tools"`
		Progress      []tsProgress `json:"progress"`
		SessionID     string       `json:"session_id"`
		Sessions      []string     `json:"sessions"`
		MetaSessionID string       `json:"meta_session_id"`
		One           tsResult     `json:"one"`
		Two           tsResult     `json:"two"`
		Three         tsResult     `json:"three"`
		ThreeAgain    tsResult     `json:"three_again"`
		Unknown       tsResult     `json:"unknown"`
		Empty         tsResult     `json:"empty"`
		Other         tsResult     `json:"other"`
		WrongTool     tsResult     `json:"wrong_tool"`
		Cancelled     *string      `json:"cancelled"`
		SlowProgress  []string     `json:"slow_progress"`
		After         tsResult     `json:"after"`
	}
	runTSClient(t, "session.mjs", nil, &out, f.url, tool, other, newIdempotencyKey("session"))

	ctx := context.Background()
	cl, err := troupeclient.New(troupeclient.Config{Temporal: f.c, TaskQueue: f.queue})
	if err != nil {
		t.Fatal(err)
	}
	id := out.SessionID
	if !mcpSessionID.MatchString(id) || !strings.HasPrefix(id, "mcp-session-mcpchat-") || out.MetaSessionID != id {
		t.Fatalf("session id %q (_meta %q): %s", id, out.MetaSessionID, out.One.text())
	}
	if len(out.Sessions) != 2 || out.Sessions[0] == "" || out.Sessions[0] == out.Sessions[1] {
		t.Errorf("MCP sessions %q, want two", out.Sessions)
	}
	var schema json.RawMessage
	for _, tl := range out.Tools {
		if tl.Name == tool {
			schema = tl.OutputSchema
		}
	}
	if len(schema) == 0 {
		t.Fatalf("tools/list has no %s with an output schema", tool)
	}
	// reply checks an answer: its session, turn and text, and that its
	// text content is its structured content.
	reply := func(name string, res tsResult, session string, turn int, text string) {
		t.Helper()
		if res.IsError {
			t.Errorf("%s: %s", name, res.text())
			return
		}
		checkSchema(t, schema, res.StructuredContent)
		var r tsSessionReply
		if err := json.Unmarshal(res.StructuredContent, &r); err != nil {
			t.Fatalf("%s: %v: %s", name, err, res.StructuredContent)
		}
		if r.SessionID != session || r.Turn != turn || r.Reply.Output != text {
			t.Errorf("%s: %s; want session %s, turn %d, reply %q", name, res.StructuredContent, session, turn, text)
		}
		var fromText, fromStructured any
		if json.Unmarshal([]byte(res.text()), &fromText) != nil || json.Unmarshal(res.StructuredContent, &fromStructured) != nil ||
			jsonString(t, fromText) != jsonString(t, fromStructured) {
			t.Errorf("%s: text content %q is not the structured content", name, res.text())
		}
	}
	// The replies show what the talker was given: the second and third
	// messages came with the conversation before them, the third from
	// another MCP session.
	reply("first message", out.One, id, 1, "reply 1 to hello (first: hello)")
	reply("second message", out.Two, id, 2, "reply 2 to again (first: hello)")
	reply("third message, reconnected", out.Three, id, 3, "reply 3 to third (first: hello)")
	reply("third message again, same idempotency key", out.ThreeAgain, id, 3, "reply 3 to third (first: hello)")
	var r tsSessionReply
	if json.Unmarshal(out.One.StructuredContent, &r) == nil && r.Agent != "talker" {
		t.Errorf("first answer's agent %q, want talker", r.Agent)
	}

	if len(out.Progress) == 0 {
		t.Fatal("no progress notifications")
	}
	if first := out.Progress[0]; first.Message != "session "+id+" started" || first.Meta[server.MetaSessionID] != id {
		t.Errorf("first progress notification = %+v, want session %s started, with its id in _meta", first, id)
	}
	var messages []string
	for i, p := range out.Progress {
		messages = append(messages, p.Message)
		if i > 0 && p.Progress <= out.Progress[i-1].Progress {
			t.Errorf("progress does not increase: %v after %v", p.Progress, out.Progress[i-1].Progress)
		}
	}
	for _, want := range []string{"turn 1: message taken", "talker started", "turn 1 answered by talker"} {
		if !slices.Contains(messages, want) {
			t.Errorf("progress lacks %q:\n%s", want, strings.Join(messages, "\n"))
		}
	}

	if want := `no session with id "no-such-session": call ` + tool + " without session_id to start one"; !out.Unknown.IsError || out.Unknown.text() != want {
		t.Errorf("unknown session: %q (isError %v), want %q", out.Unknown.text(), out.Unknown.IsError, want)
	}
	if !out.Empty.IsError || !strings.Contains(out.Empty.text(), "message is required") {
		t.Errorf("empty message: %q (isError %v)", out.Empty.text(), out.Empty.IsError)
	}
	var waiter tsSessionReply
	if out.Other.IsError || json.Unmarshal(out.Other.StructuredContent, &waiter) != nil || !mcpSessionID.MatchString(waiter.SessionID) ||
		!strings.HasPrefix(waiter.SessionID, "mcp-session-mcpwait-") || waiter.Reply.Output != "done: hi" {
		t.Errorf("%s: %s (%s)", other, out.Other.StructuredContent, out.Other.text())
	}
	// The sessions end with the test (before its worker does).
	t.Cleanup(func() {
		for _, s := range []string{id, waiter.SessionID} {
			if s == "" {
				continue
			}
			if _, err := cl.Session(s).Command(ctx, troupeclient.SessionCommand{Op: troupe.CommandStop}); err != nil {
				t.Errorf("stop session %s: %v", s, err)
			}
		}
	})
	if !out.WrongTool.IsError || !strings.Contains(out.WrongTool.text(), "is a conversation with agent waiter of graph mcpwait") ||
		!strings.Contains(out.WrongTool.text(), "continue it with "+other) {
		t.Errorf("another tool's session: %q (isError %v)", out.WrongTool.text(), out.WrongTool.IsError)
	}

	// The cancelled call stopped waiting; its turn (4) went on in the
	// session, so the message after it is turn 5 and sees it.
	if out.Cancelled == nil || !slices.Contains(out.SlowProgress, "turn 4: message taken") {
		t.Errorf("the slow call: error %s, progress %q; want it aborted after turn 4 was taken", jsonString(t, out.Cancelled), out.SlowProgress)
	}
	reply("message after a cancelled call", out.After, id, 5, "reply 5 to after (first: hello)")

	info, err := cl.Session(id).Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var slow *runtime.TurnRecord
	for i, rec := range info.Recent {
		if rec.Turn == "t4" {
			slow = &info.Recent[i]
		}
	}
	if info.Turns != 5 || info.Graph != "mcpchat" || info.Agent != "talker" || info.Status != runtime.SessionIdle || info.Name != "mcpchat_talker: hello" ||
		slow == nil || slow.Outcome != runtime.TurnAnswered || string(slow.Output) != `"reply 4 to slow four (first: hello)"` {
		t.Errorf("session %+v; want 5 turns, idle, the slow turn answered", info)
	}
	// One model call per message, the third's included, though it was
	// sent twice. Each call once: the slow one, made again when its
	// workflow task timed out on a loaded machine, is one call (see
	// requests).
	if n := f.ms.Count("mcp-talker-slow"); n > 1 {
		t.Logf("the slow call made %d times: made again by workflow tasks that timed out", n)
	}
	if talker, slowCalls := f.ms.Requests("mcp-talker"), f.ms.Requests("mcp-talker-slow"); talker != 4 || slowCalls != 1 {
		t.Errorf("the talker answered %d messages and %d slow ones, want 4 and 1", talker, slowCalls)
	}
	entries, err := cl.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, e := range entries {
		listed = append(listed, e.ID)
	}
	if !slices.Contains(listed, id) || !slices.Contains(listed, waiter.SessionID) {
		t.Errorf("the session manager of the server's queue lists %q, want %s and %s", listed, id, waiter.SessionID)
	}
	d, err := f.c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil || d.GetWorkflowExecutionInfo().GetStatus() != enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
		t.Errorf("session workflow %s: %v (%v), want RUNNING", id, d.GetWorkflowExecutionInfo().GetStatus(), err)
	}
}

func jsonString(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
