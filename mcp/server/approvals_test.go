package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/troupe-dev/troupe"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/examples/dealdesk"
	"github.com/troupe-dev/troupe/runtime"
)

// TestElicitApproval: a client with an elicitation handler on a version
// before multi round-trip requests is deemed able to answer, gets the
// approval form (which go-sdk and the client both accept as a valid
// elicitation schema), and its answers become decisions; a client
// without one is not asked; one on mrtrVersion is asked with input
// requests instead.
func TestElicitApproval(t *testing.T) {
	s := newTestServer(t, dealdesk.Graph())
	a := troupeclient.Approval{ID: "a1", Agent: "keeper", Tool: "rm_rf", Arguments: `{"path":"build/"}`}
	// probe answers whether its caller can be asked, and, if so, the
	// decision its answer to the approval form gives.
	s.sdk.AddTool(&mcp.Tool{Name: "probe", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if canRequestInput(req.Session) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "input requests"}}}, nil
			}
			if !canElicit(req.Session) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "cannot ask"}}}, nil
			}
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: approvalQuestion("run-1", a), RequestedSchema: approvalSchema})
			if err != nil {
				return errorResult(err.Error(), nil), nil
			}
			d := decisionOf(a.ID, res)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%v %q %q", d.Approve, d.Message, d.Remember)}}}, nil
		})
	tests := []struct {
		name    string
		version string            // the client's protocol version; "" for 2025-11-25
		answer  *mcp.ElicitResult // nil: no elicitation handler
		want    string
	}{
		{"no capability", "", nil, "cannot ask"},
		{"no capability, multi round-trip", mrtrVersion, nil, "cannot ask"},
		{"multi round-trip", mrtrVersion, &mcp.ElicitResult{Action: "accept"}, "input requests"},
		{"approve", "", &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, `true "" ""`},
		{"approve and remember", "", &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true, "remember": true, "message": " ok "}},
			`true "ok" "` + runtime.RememberTool + `"`},
		{"reject with a message", "", &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": false, "message": "not now"}}, `false "not now" ""`},
		{"decline", "", &mcp.ElicitResult{Action: "decline"}, `false "` + msgDeclined + `" ""`},
		{"cancel", "", &mcp.ElicitResult{Action: "cancel"}, `false "` + msgDismissed + `" ""`},
		{"accept without approve: the form's required field", "", &mcp.ElicitResult{Action: "accept", Content: map[string]any{"message": "hm"}}, "does not match requested schema"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			serverSide, clientSide := mcp.NewInMemoryTransports()
			go func() { _ = s.Serve(ctx, serverSide) }()
			var opts *mcp.ClientOptions
			var asked *mcp.ElicitParams
			if tc.answer != nil {
				opts = &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					asked = req.Params
					return tc.answer, nil
				}}
			}
			version := tc.version
			if version == "" {
				version = "2025-11-25"
			}
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, opts).Connect(ctx, clientSide, &mcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "probe", Arguments: map[string]any{}})
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			if asked != nil && (!strings.Contains(asked.Message, "Agent keeper wants to call rm_rf") || !strings.Contains(asked.Message, `"path": "build/"`)) {
				t.Errorf("the question %q does not name the agent, the tool and the arguments", asked.Message)
			}
		})
	}
}

func TestApprovalQuestion(t *testing.T) {
	deadline := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name string
		a    troupeclient.Approval
		want []string
	}{
		{"arguments", troupeclient.Approval{ID: "a1", Agent: "keeper", Tool: "rm_rf", Arguments: `{"path":"x"}`},
			[]string{"Agent keeper wants to call rm_rf with these arguments:\n{\n  \"path\": \"x\"\n}", "(call a1 of run-1)"}},
		{"no arguments", troupeclient.Approval{ID: "a1", Agent: "keeper", Tool: "ping", Arguments: `{}`}, []string{"Agent keeper wants to call ping.\n"}},
		{"a timeout that approves", troupeclient.Approval{ID: "a1", Agent: "k", Tool: "t", Deadline: &deadline, OnTimeout: "approve"},
			[]string{"Without a decision by 2026-01-02T03:04:05Z it is approved."}},
		{"long arguments are cut", troupeclient.Approval{ID: "a1", Agent: "k", Tool: "t", Arguments: `{"patch":"` + strings.Repeat("x", 5000) + `"}`},
			[]string{"…\nApprove this call?"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := approvalQuestion("run-1", tc.a)
			for _, w := range tc.want {
				if !strings.Contains(q, w) {
					t.Errorf("question %q lacks %q", q, w)
				}
			}
			if len(q) > elicitArgumentsLen+300 {
				t.Errorf("question of %d bytes", len(q))
			}
		})
	}
}

// TestWaitingResult: an agent tool answers the calls that wait as
// isError without structuredContent (its output schema is the agent's);
// troupe_run_approve with structuredContent. Both carry the list and the
// status in _meta, and text that says how to decide.
func TestWaitingResult(t *testing.T) {
	since := time.Unix(1700000000, 0).UTC()
	list := []troupeclient.Approval{
		{ID: "a1", Agent: "keeper", Tool: "rm_rf", Arguments: `{"path":"build/"}`, Since: since},
		{ID: "a2", Agent: "keeper", Tool: "shell", Arguments: `not json`, Since: since},
	}
	for _, tc := range []struct {
		name             string
		session, isError bool
		key              string
	}{
		{"agent tool", false, true, MetaRunID},
		{"troupe_run_approve", false, false, MetaRunID},
		{"session tool", true, true, MetaSessionID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := waitingResult("id-1", tc.session, list, tc.isError)
			if res.IsError != tc.isError || (res.StructuredContent != nil) == tc.isError {
				t.Errorf("isError %v, structured %v", res.IsError, res.StructuredContent != nil)
			}
			if res.Meta[tc.key] != "id-1" || res.Meta[MetaStatus] != StatusWaitingForApproval {
				t.Errorf("_meta %v", res.Meta)
			}
			docs, _ := json.Marshal(res.Meta[MetaApprovals])
			want := `[{"id":"a1","agent":"keeper","tool":"rm_rf","arguments":{"path":"build/"},"since":"2023-11-14T22:13:20Z"},` +
				`{"id":"a2","agent":"keeper","tool":"shell","arguments":{"text":"not json"},"since":"2023-11-14T22:13:20Z"}]`
			if string(docs) != want {
				t.Errorf("approvals %s, want %s", docs, want)
			}
			text := res.Content[0].(*mcp.TextContent).Text
			for _, w := range []string{"waits for a human's decision on 2 call(s)", "- call a1: agent keeper wants to call rm_rf with {\"path\":\"build/\"}", ToolRunApprove, `"call": "a1"`} {
				if !strings.Contains(text, w) {
					t.Errorf("text lacks %q:\n%s", w, text)
				}
			}
		})
	}
}

func TestApprovalEventMessages(t *testing.T) {
	tests := []struct {
		e    troupe.Event
		want string
	}{
		{troupe.Event{Kind: troupe.EventApprovalRequested, Agent: "keeper", Tool: "rm_rf", Approval: "a1", Detail: `{"path":"x"}`},
			`keeper: rm_rf waits for approval (call a1): {"path":"x"}`},
		{troupe.Event{Kind: troupe.EventApprovalDecided, Agent: "keeper", Tool: "rm_rf", Approval: "a1", Detail: "rejected by user: " + msgDeclined},
			"keeper: rm_rf rejected by user: " + msgDeclined},
	}
	for _, tc := range tests {
		if got, ok := eventMessage(tc.e); !ok || got != tc.want {
			t.Errorf("eventMessage(%s) = %q, want %q", tc.e.Kind, got, tc.want)
		}
	}
}

// TestApprovalWatchEvents: the watch keeps the approvals requested and
// not decided, and withdraws the question on one decided elsewhere.
func TestApprovalWatchEvents(t *testing.T) {
	w := &approvalWatch{poke: make(chan struct{}, 1), open: map[string]time.Time{}, decided: map[string]bool{}}
	w.event(troupe.Event{Kind: troupe.EventApprovalRequested, Approval: "a1"})
	w.event(troupe.Event{Kind: troupe.EventApprovalRequested, Approval: "a2"})
	if !w.waitsFor() || len(w.poke) != 1 {
		t.Fatalf("after two requests: waits %v, pokes %d", w.waitsFor(), len(w.poke))
	}
	withdrawn := false
	w.asking, w.stopAsking = "a1", func() { withdrawn = true }
	w.event(troupe.Event{Kind: troupe.EventApprovalDecided, Approval: "a1"})
	w.event(troupe.Event{Kind: troupe.EventApprovalDecided, Approval: "a2"})
	if w.waitsFor() || !withdrawn || !w.isDecided("a1") {
		t.Errorf("after the decisions: waits %v, question withdrawn %v", w.waitsFor(), withdrawn)
	}
	w.open["old"] = time.Now().Add(-2 * forgetRequest)
	if w.waitsFor() {
		t.Error("a request never listed nor decided keeps the watch waiting")
	}
}

// TestInputRequests: a client on mrtrVersion that answers elicitations
// gets one elicitation per call that waits, as input requests, and a
// requestState that names the run or the session's turn; the state of
// anything else is refused.
func TestInputRequests(t *testing.T) {
	list := []troupeclient.Approval{{ID: "a1", Agent: "keeper", Tool: "rm_rf", Arguments: `{"path":"x"}`}, {ID: "a2", Agent: "keeper", Tool: "rm_rf", Arguments: `{"path":"y"}`}}
	tests := []struct {
		name    string
		session bool
		want    inputState
	}{
		{"run", false, inputState{V: 1, Run: "run-1"}},
		{"session", true, inputState{V: 1, Session: "run-1", Turn: "t2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := inputState{V: 1, Run: "run-1"}
			if tc.session {
				st = inputState{V: 1, Session: "run-1", Turn: "t2"}
			}
			got, err := decodeInputState(st.encode())
			if err != nil || got != tc.want {
				t.Errorf("state round trip: %+v %v", got, err)
			}
		})
	}
	for _, bad := range []string{"", "%%%", inputState{V: 2, Run: "r"}.encode(), inputState{V: 1}.encode(),
		inputState{V: 1, Run: "r", Session: "s", Turn: "t1"}.encode(), inputState{V: 1, Session: "s"}.encode()} {
		if _, err := decodeInputState(bad); err == nil {
			t.Errorf("decodeInputState(%q) took it", bad)
		}
	}
	res := waitingResult("run-1", false, list, true)
	if res.InputRequests != nil {
		t.Errorf("a listing with input requests")
	}
	answers := mcp.InputResponseMap{
		"a2": &mcp.ElicitResult{Action: "decline"},
		"a1": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}},
	}
	got := decisionsOf(answers)
	if len(got) != 2 || got[0].ID != "a1" || !got[0].Approve || got[1].ID != "a2" || got[1].Approve || got[1].Message != msgDeclined {
		t.Errorf("decisionsOf: %+v", got)
	}
}
