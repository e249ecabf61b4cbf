package server

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/examples/codereview"
	"github.com/troupe-dev/troupe/examples/dealdesk"
)

// rawConn speaks JSON-RPC to a Server over an in-memory transport, so a
// test chooses the request ids and the order of the messages.
type rawConn struct {
	t    *testing.T
	conn mcp.Connection
}

func serveRaw(t *testing.T, s *Server) *rawConn {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	serverSide, clientSide := mcp.NewInMemoryTransports()
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(ctx, serverSide) }()
	conn, err := clientSide.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); conn.Close(); <-done })
	c := &rawConn{t: t, conn: conn}
	c.call(1, "initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}`)
	c.notify("notifications/initialized", `{}`)
	return c
}

func (c *rawConn) notify(method, params string) {
	c.t.Helper()
	if err := c.conn.Write(context.Background(), &jsonrpc.Request{Method: method, Params: json.RawMessage(params)}); err != nil {
		c.t.Fatal(err)
	}
}

// call sends a request and returns its result.
func (c *rawConn) call(id int64, method, params string) json.RawMessage {
	c.t.Helper()
	jid, _ := jsonrpc.MakeID(float64(id))
	if err := c.conn.Write(context.Background(), &jsonrpc.Request{ID: jid, Method: method, Params: json.RawMessage(params)}); err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		msg, err := c.conn.Read(ctx)
		if err != nil {
			c.t.Fatalf("%s %d: %v", method, id, err)
		}
		if resp, ok := msg.(*jsonrpc.Response); ok && resp.ID == jid {
			if resp.Error != nil {
				c.t.Fatalf("%s %d: %v", method, id, resp.Error)
			}
			return resp.Result
		}
	}
}

func resultText(t *testing.T, raw json.RawMessage) (text string, isError bool) {
	t.Helper()
	var res struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(raw, &res); err != nil || len(res.Content) == 0 {
		t.Fatalf("result %s: %v", raw, err)
	}
	return res.Content[0].Text, res.IsError
}

// TestCancelBeforeCall: go-sdk may handle a client's notifications/cancelled
// before the handler of the request it cancels begins. That handler must
// not start the run, and says so (go-sdk must not answer the request
// first, with a bare "context canceled", as its own cancelling would when
// it won the race with the request's arrival; see held); the next request
// starts one.
func TestCancelBeforeCall(t *testing.T) {
	s, f := newFakeServer(t, nil, dealdesk.Graph())
	c := serveRaw(t, s)
	call := func(id int64) json.RawMessage {
		return c.call(id, "tools/call", fmt.Sprintf(`{"name":"dealdesk_coordinator","arguments":{"input":"deal %d"}}`, id))
	}
	c.notify("notifications/cancelled", `{"requestId":7,"reason":"changed my mind"}`)
	text, isError := resultText(t, call(7))
	if !isError || !strings.Contains(text, "no run was started") {
		t.Errorf("the cancelled call answered %q (isError %v), want that no run was started", text, isError)
	}
	if starts := f.started(); len(starts) != 0 {
		t.Errorf("the cancelled call started %v", starts)
	}
	call(8)
	if starts := f.started(); len(starts) != 1 {
		t.Errorf("starts after a call that was not cancelled: %v, want 1", starts)
	}
}

// TestCallWithEndedContext: a handler whose context ended before it
// began (go-sdk cancelled the request) starts no run.
func TestCallWithEndedContext(t *testing.T) {
	s, f := newFakeServer(t, nil, dealdesk.Graph())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := s.callAgent(s.tools[0])(ctx, &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{
		Name: "dealdesk_coordinator", Arguments: json.RawMessage(`{"input":"deal"}`),
	}})
	if err != nil || !res.IsError {
		t.Fatalf("result %+v, %v; want isError", res, err)
	}
	if starts := f.started(); len(starts) != 0 {
		t.Errorf("started %v", starts)
	}
}

// TestPrepareVars: Config.PrepareVars readies the variables of the run or
// session a call starts, given the graph, the id derived from the call
// (from its arguments as given, so a retry derives it again) and a copy
// of the variables: what it makes is what starts. Its refusal is the
// call's answer, typed as it is, and nothing starts.
func TestPrepareVars(t *testing.T) {
	type prepared struct {
		graph, id string
		vars      map[string]string
	}
	var seen []prepared
	var refusal error
	f := &fakeTemporal{}
	s, err := New(Config{Client: f, Graphs: []*agents.Graph{codereview.Graph()},
		PrepareVars: func(_ context.Context, graph, id string, vars map[string]string) error {
			seen = append(seen, prepared{graph, id, maps.Clone(vars)})
			vars[codereview.VarRepo] = "blob:inputs/" + id + "/0123"
			return refusal
		}})
	if err != nil {
		t.Fatal(err)
	}
	key := mcp.Meta{MetaIdempotencyKey: "k1"}
	run := map[string]any{"repo": "/src/app"}
	session := map[string]any{"message": "review it", "start": run}
	for _, c := range []struct {
		tool string
		args map[string]any
	}{{"codereview_coordinator", run}, {"codereview_coordinator_session", session}} {
		// The fake refuses to start: the call says so.
		if text, res := callTool(t, s, c.tool, c.args, key); !res.IsError || !strings.Contains(text, "could not start") {
			t.Errorf("%s: %q, want the start's failure", c.tool, text)
		}
	}
	if len(seen) != 2 || len(f.runs) != 1 || len(f.sessions) != 1 {
		t.Fatalf("prepared %+v; runs %+v, sessions %+v: want one of each", seen, f.runs, f.sessions)
	}
	started := []struct {
		id   string
		vars map[string]string
	}{{f.starts[0], f.runs[0].Vars}, {f.sessions[0].ID, f.sessions[0].Session.Vars}}
	for i, p := range seen {
		if p.graph != "codereview" || p.id != started[i].id || p.vars[codereview.VarRepo] != "/src/app" {
			t.Errorf("PrepareVars got %+v; want graph codereview, id %s and the path", p, started[i].id)
		}
		if want := "blob:inputs/" + p.id + "/0123"; started[i].vars[codereview.VarRepo] != want {
			t.Errorf("%s started with %v, want repo %s", p.id, started[i].vars, want)
		}
	}
	if again := workflowID("codereview", "codereview_coordinator", agents.ExposedRun{Input: f.runs[0].Input, Vars: seen[0].vars}, requestScope{Key: "k1"}); again != seen[0].id {
		t.Errorf("run id %s, want %s: derived from the arguments as given", seen[0].id, again)
	}

	refusal = troupe.NonRetryable(troupe.ErrBlobMissing, "the repository --repo /src/app goes through the workers' blob store, ...: set TROUPE_BLOB_URL")
	for _, c := range []struct {
		tool, what string
		args       map[string]any
	}{{"codereview_coordinator", "codereview_coordinator cannot run: ", run}, {"codereview_coordinator_session", "codereview_coordinator_session cannot start a session: ", session}} {
		text, res := callTool(t, s, c.tool, c.args, mcp.Meta{MetaIdempotencyKey: "k2"})
		if want := c.what + "the repository --repo /src/app goes"; !res.IsError || !strings.HasPrefix(text, want) || res.Meta[MetaErrorType] != troupe.ErrBlobMissing {
			t.Errorf("%s refused: %q, meta %v; want isError, %q..., typed %s", c.tool, text, res.Meta, want, troupe.ErrBlobMissing)
		}
	}
	if len(f.starts) != 1 || len(f.sessions) != 1 {
		t.Errorf("refused calls started %v and sessions %v", f.starts[1:], f.sessions[1:])
	}
}
