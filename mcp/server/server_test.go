package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/examples/codereview"
	"github.com/troupe-dev/troupe/examples/dealdesk"
)

type verdict struct {
	Risk string `json:"risk"`
}

// handoffGraphs: "same" hands off to an agent with the same output type,
// "mixed" to one with another, "text" has no output type.
func handoffGraphs() *agents.Graph {
	return agents.MustGraph("h", "same",
		&agents.Agent{Name: "same", Instructions: "x", Expose: agents.Expose("", "d"), Output: agents.MustOutput[verdict](),
			Handoffs: []agents.Handoff{agents.HandoffTo("same2")}},
		&agents.Agent{Name: "same2", Instructions: "x", Output: agents.MustOutput[verdict]()},
		&agents.Agent{Name: "mixed", Instructions: "x", Expose: agents.Expose("", "d"), Output: agents.MustOutput[verdict](),
			Handoffs: []agents.Handoff{agents.HandoffTo("text")}},
		&agents.Agent{Name: "text", Instructions: "x", Expose: agents.Expose("", "")},
	)
}

func TestSchemas(t *testing.T) {
	tests := []struct {
		name         string
		graph        *agents.Graph
		agent        string
		required     []string // of the input schema
		outputSchema string   // "" for none; else a substring
	}{
		{"plain input, typed output", dealdesk.Graph(), "coordinator", []string{"input"}, `"decision"`},
		// The coordinator may hand off to the fixer (a session's follow-up),
		// whose answer is text: its tool declares no output schema.
		{"typed input: optional properties are not required", codereview.Graph(), "coordinator", []string{"repo"}, ""},
		{"handoff to the same output type", handoffGraphs(), "same", []string{"input"}, `"risk"`},
		{"handoff to another output type: no output schema", handoffGraphs(), "mixed", []string{"input"}, ``},
		{"no output type: {output: text}", handoffGraphs(), "text", []string{"input"}, `"required":["output"]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := tc.graph.Agent(tc.agent)
			if err != nil {
				t.Fatal(err)
			}
			tool, err := newAgentTool(tc.graph, a)
			if err != nil {
				t.Fatal(err)
			}
			var in struct {
				Type       string         `json:"type"`
				Required   []string       `json:"required"`
				Properties map[string]any `json:"properties"`
			}
			if err := json.Unmarshal(tool.tool.InputSchema.(json.RawMessage), &in); err != nil {
				t.Fatal(err)
			}
			if in.Type != "object" || strings.Join(in.Required, ",") != strings.Join(tc.required, ",") {
				t.Errorf("input schema type %s, required %v; want object, %v", in.Type, in.Required, tc.required)
			}
			// Optional properties have one type, not [T, "null"].
			for name, p := range in.Properties {
				if _, union := p.(map[string]any)["type"].([]any); union {
					t.Errorf("property %s has a type union: %v", name, p)
				}
			}
			if tc.outputSchema == "" {
				if tool.tool.OutputSchema != nil {
					t.Errorf("output schema = %s, want none", tool.tool.OutputSchema)
				}
				return
			}
			out, _ := tool.tool.OutputSchema.(json.RawMessage)
			var obj struct {
				Type string `json:"type"`
			}
			if json.Unmarshal(out, &obj) != nil || obj.Type != "object" || !strings.Contains(string(out), tc.outputSchema) {
				t.Errorf("output schema = %s, want an object schema with %s", out, tc.outputSchema)
			}
			if tool.name != tc.graph.ExposedName(a) || tool.tool.Description == "" {
				t.Errorf("tool %q, description %q", tool.name, tool.tool.Description)
			}
		})
	}
}

func TestStructured(t *testing.T) {
	tests := []struct{ out, want string }{
		{`{"decision":"approve"}`, `{"decision":"approve"}`},
		{`"plain answer"`, `{"output":"plain answer"}`},
		{`42`, `{"output":"42"}`},
	}
	for _, tc := range tests {
		if got := string(structured(json.RawMessage(tc.out))); got != tc.want {
			t.Errorf("structured(%s) = %s, want %s", tc.out, got, tc.want)
		}
	}
}

func TestEventMessage(t *testing.T) {
	tests := []struct {
		e    troupe.Event
		want string // "" when the event is left out
	}{
		{troupe.Event{Kind: troupe.EventRunStarted, Agent: "triage"}, ""},
		{troupe.Event{Kind: troupe.EventAgentStarted, Agent: "coordinator", Child: "x/1-coordinator"}, "coordinator started"},
		{troupe.Event{Kind: troupe.EventAgentStarted, Agent: "coordinator"}, ""},
		{troupe.Event{Kind: troupe.EventAgentToolStarted, Agent: "coordinator", Tool: "review_pricing"}, "coordinator: calling review_pricing"},
		{troupe.Event{Kind: troupe.EventToolCalled, Agent: "pricing_reviewer", Tool: "exec_command"}, "pricing_reviewer: calling exec_command"},
		{troupe.Event{Kind: troupe.EventHandoff, Agent: "triage", Detail: "triage → coordinator"}, "handoff: triage → coordinator"},
		{troupe.Event{Kind: troupe.EventHandoff, Agent: "triage", Turn: 1, Detail: "triage → coordinator"}, ""},
		{troupe.Event{Kind: troupe.EventFinal, Agent: "coordinator", Turn: 2}, "coordinator: final output"},
		{troupe.Event{Kind: troupe.EventFinal, Agent: "coordinator"}, "run finished"},
		{troupe.Event{Kind: "sandbox_provisioned", Agent: "pricing_reviewer", Detail: "local"}, "pricing_reviewer: sandbox provisioned: local"},
	}
	for _, tc := range tests {
		got, ok := eventMessage(tc.e)
		if !ok {
			got = ""
		}
		if got != tc.want {
			t.Errorf("eventMessage(%s/%s) = %q, want %q", tc.e.Kind, tc.e.Agent, got, tc.want)
		}
	}
}

func newTestServer(t *testing.T, graphs ...*agents.Graph) *Server {
	t.Helper()
	c, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1"}) // never dialled by these tests
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	s, err := New(Config{Client: c, Graphs: graphs})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNewRejectsClashes(t *testing.T) {
	c, _ := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1"})
	defer c.Close()
	clash := agents.MustGraph("g", "a", &agents.Agent{Name: "a", Instructions: "x", Expose: agents.Expose(ToolRunStatus, "d")})
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no client", Config{}, "Client is required"},
		{"graph twice", Config{Client: c, Graphs: []*agents.Graph{dealdesk.Graph(), dealdesk.Graph()}}, "given twice"},
		{"run tool name", Config{Client: c, Graphs: []*agents.Graph{clash}}, "taken by a run tool"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, want %q", err, tc.want)
			}
		})
	}
}

// TestCallErrors: calls that cannot start a run answer isError with the
// reason, before any Temporal call.
func TestCallErrors(t *testing.T) {
	s := newTestServer(t, dealdesk.Graph(), codereview.Graph())
	ctx := context.Background()
	serverSide, clientSide := mcp.NewInMemoryTransports()
	go func() { _ = s.Serve(ctx, serverSide) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).Connect(ctx, clientSide, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tests := []struct {
		name string
		call mcp.CallToolParams
		want string
	}{
		{"missing input", mcp.CallToolParams{Name: "dealdesk_coordinator", Arguments: map[string]any{}}, "invalid arguments for dealdesk_coordinator"},
		{"unknown property", mcp.CallToolParams{Name: "codereview_coordinator", Arguments: map[string]any{"repo": ".", "colour": "red"}}, "invalid arguments for codereview_coordinator"},
		{"bad idempotency key", mcp.CallToolParams{Name: "dealdesk_coordinator", Arguments: map[string]any{"input": "x"},
			Meta: mcp.Meta{MetaIdempotencyKey: 5}}, MetaIdempotencyKey},
		{"status without run_id", mcp.CallToolParams{Name: ToolRunStatus, Arguments: map[string]any{}}, "run_id is required"},
		{"result with a long wait", mcp.CallToolParams{Name: ToolRunResult, Arguments: map[string]any{"run_id": "x", "wait_seconds": 3600}}, "wait_seconds must be 0 to 60"},
		{"approve without a call", mcp.CallToolParams{Name: ToolRunApprove, Arguments: map[string]any{"run_id": "x", "approve": true}}, "call is required"},
		{"approve without approve", mcp.CallToolParams{Name: ToolRunApprove, Arguments: map[string]any{"run_id": "x", "call": "a1"}}, "approve is required"},
		{"approve with a run and a session", mcp.CallToolParams{Name: ToolRunApprove, Arguments: map[string]any{"run_id": "x", "session_id": "y", "call": "a1", "approve": true}}, "either run_id or session_id"},
		{"approve with neither", mcp.CallToolParams{Name: ToolRunApprove, Arguments: map[string]any{"call": "a1", "approve": true}}, "either run_id or session_id"},
		{"approve, remember as text", mcp.CallToolParams{Name: ToolRunApprove, Arguments: map[string]any{"run_id": "x", "call": "a1", "approve": true, "remember": "tool"}}, "invalid arguments for " + ToolRunApprove},
		{"approve in a foreign run", mcp.CallToolParams{Name: ToolRunApprove, Arguments: map[string]any{"run_id": "troupe-dealdesk-1a2b3c4d", "call": "a1", "approve": true}}, `no run with id "troupe-dealdesk-1a2b3c4d"`},
		{"approve in a foreign session", mcp.CallToolParams{Name: ToolRunApprove, Arguments: map[string]any{"session_id": "troupe-session-1", "call": "a1", "approve": false}}, `no session with id "troupe-session-1"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := cs.CallTool(ctx, &tc.call)
			if err != nil {
				t.Fatalf("protocol error %v, want an isError result", err)
			}
			text := ""
			if len(res.Content) > 0 {
				text = res.Content[0].(*mcp.TextContent).Text
			}
			if !res.IsError || !strings.Contains(text, tc.want) {
				t.Errorf("result isError=%v %q, want isError with %q", res.IsError, text, tc.want)
			}
		})
	}
}

func TestHTTPHandlerAuthAndPath(t *testing.T) {
	s := newTestServer(t, dealdesk.Graph())
	srv := httptest.NewServer(s.HTTPHandler(HTTPOptions{Token: "s3cret"}))
	defer srv.Close()
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`
	tests := []struct {
		name, path, auth string
		status           int
		challenge        string
	}{
		{"no token", Path, "", http.StatusUnauthorized, `Bearer realm="troupe"`},
		{"wrong token", Path, "Bearer nope", http.StatusUnauthorized, `error="invalid_token"`},
		{"other scheme", Path, "Basic s3cret", http.StatusUnauthorized, `error="invalid_token"`},
		{"token", Path, "Bearer s3cret", http.StatusOK, ""},
		{"scheme is case-insensitive", Path, "bearer s3cret", http.StatusOK, ""},
		{"other path", "/", "Bearer s3cret", http.StatusNotFound, ""},
		{"subpath", Path + "/x", "Bearer s3cret", http.StatusNotFound, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+tc.path, strings.NewReader(initialize))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status || !strings.Contains(resp.Header.Get("WWW-Authenticate"), tc.challenge) {
				t.Errorf("status %d, WWW-Authenticate %q; want %d, %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), tc.status, tc.challenge)
			}
		})
	}
}

// TestCallsWithoutWorker: when Config.Workers says that no worker serves
// the queue, a call of an agent tool or a session tool answers so at
// once, typed troupe.ErrNoWorker, and starts nothing (the fake Temporal
// records no start and no session).
func TestCallsWithoutWorker(t *testing.T) {
	ft := &fakeTemporal{}
	s, err := New(Config{Client: ft, Graphs: []*agents.Graph{dealdesk.Graph()},
		Workers: func(context.Context) error { return errors.New("no worker serves task queue troupe; start one") }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	serverSide, clientSide := mcp.NewInMemoryTransports()
	go func() { _ = s.Serve(ctx, serverSide) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).Connect(ctx, clientSide, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, tool := range []string{"dealdesk_coordinator", "dealdesk_coordinator_session"} {
		t.Run(tool, func(t *testing.T) {
			arg := "input"
			if strings.HasSuffix(tool, "_session") {
				arg = "message"
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{arg: "Review the Acme Corp deal"}})
			if err != nil {
				t.Fatalf("protocol error %v, want an isError result", err)
			}
			text := ""
			if len(res.Content) > 0 {
				text = res.Content[0].(*mcp.TextContent).Text
			}
			if !res.IsError || !strings.Contains(text, "no worker serves task queue troupe") || res.Meta[MetaErrorType] != troupe.ErrNoWorker {
				t.Errorf("result isError=%v %q meta %v, want isError saying no worker serves the queue, typed %s", res.IsError, text, res.Meta, troupe.ErrNoWorker)
			}
		})
	}
	ft.mu.Lock()
	defer ft.mu.Unlock()
	if len(ft.starts) > 0 || len(ft.sessions) > 0 {
		t.Errorf("calls without a worker started %v and sessions %v", ft.starts, ft.sessions)
	}
}
