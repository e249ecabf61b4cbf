package server

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/troupe-dev/troupe/agents"
)

var idPattern = regexp.MustCompile(`^mcp-dealdesk-[0-9a-f]{32}$`)

func TestWorkflowID(t *testing.T) {
	run := agents.ExposedRun{Input: "Review the Acme deal", Vars: map[string]string{"a": "1", "b": "2"}}
	sameRun := agents.ExposedRun{Input: "Review the Acme deal", Vars: map[string]string{"b": "2", "a": "1"}}
	otherRun := agents.ExposedRun{Input: "Review the Beta deal", Vars: run.Vars}
	key := requestScope{Key: "k-1"}
	req := requestScope{Session: "s1", Request: "n:7"}
	id := func(tool string, run agents.ExposedRun, sc requestScope) string {
		return workflowID("dealdesk", tool, run, sc)
	}
	tests := []struct {
		name string
		a, b string
		same bool
	}{
		{"same key and arguments", id("t", run, key), id("t", sameRun, key), true},
		{"same request in its session", id("t", run, req), id("t", sameRun, req), true},
		{"no vars and empty vars", id("t", agents.ExposedRun{Input: "x"}, key), id("t", agents.ExposedRun{Input: "x", Vars: map[string]string{}}, key), true},
		{"other arguments", id("t", run, key), id("t", otherRun, key), false},
		{"other tool", id("t", run, key), id("u", run, key), false},
		{"other key", id("t", run, key), id("t", run, requestScope{Key: "k-2"}), false},
		{"other request id", id("t", run, req), id("t", run, requestScope{Session: "s1", Request: "n:8"}), false},
		{"same request id in another session", id("t", run, req), id("t", run, requestScope{Session: "s2", Request: "n:7"}), false},
		{"numeric and string request ids", id("t", run, req), id("t", run, requestScope{Session: "s1", Request: "s:7"}), false},
		{"key is not a session", id("t", run, requestScope{Key: "s1"}), id("t", run, requestScope{Session: "s1"}), false},
		{"no scope: a new run each time", id("t", run, requestScope{}), id("t", run, requestScope{}), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, x := range []string{tc.a, tc.b} {
				if !idPattern.MatchString(x) {
					t.Errorf("id %q does not match %s", x, idPattern)
				}
			}
			if (tc.a == tc.b) != tc.same {
				t.Errorf("ids %s and %s: same = %v, want %v", tc.a, tc.b, tc.a == tc.b, tc.same)
			}
		})
	}
}

func TestScopeOf(t *testing.T) {
	tests := []struct {
		name    string
		meta    mcp.Meta
		session string
		want    requestScope
		wantErr bool
	}{
		{"idempotency key wins", mcp.Meta{MetaIdempotencyKey: "abc", metaRequestID: "n:3"}, "s", requestScope{Key: "abc"}, false},
		{"session and request id", mcp.Meta{metaRequestID: "n:3"}, "s", requestScope{Session: "s", Request: "n:3"}, false},
		{"string request id", mcp.Meta{metaRequestID: "s:r-3"}, "s", requestScope{Session: "s", Request: "s:r-3"}, false},
		{"id above 2^53", mcp.Meta{metaRequestID: "n:9007199254740993"}, "s", requestScope{Session: "s", Request: "n:9007199254740993"}, false},
		{"not a stamp: no scope", mcp.Meta{metaRequestID: float64(3)}, "s", requestScope{}, false},
		{"no session: no scope", mcp.Meta{metaRequestID: "n:3"}, "", requestScope{}, false},
		{"no request id: no scope", nil, "s", requestScope{}, false},
		{"empty key", mcp.Meta{MetaIdempotencyKey: ""}, "s", requestScope{}, true},
		{"key not a string", mcp.Meta{MetaIdempotencyKey: float64(1)}, "s", requestScope{}, true},
		{"key too long", mcp.Meta{MetaIdempotencyKey: strings.Repeat("k", maxIdempotencyKey+1)}, "s", requestScope{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := scopeOf(tc.meta, tc.session)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("scopeOf = %+v, %v; want %+v, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestStampBody(t *testing.T) {
	tests := []struct {
		name string
		body string
		want string // the stamp of the first message, as JSON; "" when body must come back unchanged
		// requestIDGone: the first message's requestId is left out for
		// go-sdk (a cancellation of a request it does not hold).
		requestIDGone bool
	}{
		{"call", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","arguments":{}}}`, `"n:7"`, false},
		{"string id and _meta kept", `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x","_meta":{"progressToken":1,"troupe/jsonrpc_id":99}}}`, `"s:a"`, false},
		{"id above 2^53, digit for digit", `{"jsonrpc":"2.0","id":9007199254740993,"method":"tools/call","params":{}}`, `"n:9007199254740993"`, false},
		{"no params", `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`, `"n:1"`, false},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}},{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}]`, `"n:1"`, false},
		{"cancellation of a request not held", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9007199254740993,"reason":"r"}}`, `"n:9007199254740993"`, true},
		{"cancellation of a held request", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"reason":"r"}}`, `"n:3"`, false},
		{"cancellation of a string id", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a"}}`, `"s:a"`, true},
		{"cancellation without an id: the client's stamp goes", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"_meta":{"troupe/jsonrpc_id":"n:5"}}}`, `null`, false},
		{"cancellation without an id or stamp", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}`, ``, false},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{}}`, ``, false},
		{"other method", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, ``, false},
		{"notification", `{"jsonrpc":"2.0","method":"tools/call","params":{}}`, ``, false},
		{"not JSON", `{"jsonrpc":`, ``, false},
		{"params not an object", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[1]}`, ``, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, _ := stampBody([]byte(tc.body), func(stamp string) bool { return stamp == "n:3" })
			if tc.want == "" {
				if string(out) != tc.body {
					t.Errorf("body changed: %s", out)
				}
				return
			}
			var msgs []map[string]json.RawMessage
			if out[0] == '[' {
				_ = json.Unmarshal(out, &msgs)
			} else {
				var m map[string]json.RawMessage
				_ = json.Unmarshal(out, &m)
				msgs = append(msgs, m)
			}
			var p struct {
				Meta map[string]json.RawMessage `json:"_meta"`
				Name string                     `json:"name"`
			}
			if err := json.Unmarshal(msgs[0]["params"], &p); err != nil {
				t.Fatalf("params of %s: %v", out, err)
			}
			got := string(p.Meta[metaRequestID])
			if got == "" {
				got = "null"
			}
			if got != tc.want {
				t.Errorf("stamped id = %s, want %s (body %s)", got, tc.want, out)
			}
			if strings.Contains(tc.body, "progressToken") && string(p.Meta["progressToken"]) != "1" {
				t.Errorf("progressToken lost: %s", out)
			}
			if strings.Contains(tc.body, `"name":"x"`) && p.Name != "x" {
				t.Errorf("name lost: %s", out)
			}
			var first map[string]json.RawMessage
			_ = json.Unmarshal(msgs[0]["params"], &first)
			if _, has := first["requestId"]; string(msgs[0]["method"]) == `"notifications/cancelled"` && strings.Contains(tc.body, "requestId") && has == tc.requestIDGone {
				t.Errorf("requestId kept = %v, want %v: %s", has, !tc.requestIDGone, out)
			}
			if len(msgs) == 2 && !strings.Contains(string(msgs[1]["params"]), `"requestId":1`) {
				t.Errorf("the cancellation of a request earlier in the batch lost its requestId: %s", out)
			}
			if len(msgs) == 2 && !strings.Contains(string(msgs[1]["params"]), `"troupe/jsonrpc_id":"n:1"`) {
				t.Errorf("the cancellation in the batch is not stamped: %s", out)
			}
		})
	}
}

// TestStampingConn: over a single-session transport, tools/call requests
// reach the server with their id in _meta, and the session has an id. A
// cancellation reaches go-sdk with its requestId only while go-sdk holds
// that request: from its reading to the writing of its answer.
func TestStampingConn(t *testing.T) {
	ctx := context.Background()
	serverSide, clientSide := mcp.NewInMemoryTransports()
	conn, err := (&stampingTransport{Transport: serverSide}).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if !strings.HasPrefix(conn.SessionID(), "conn-") {
		t.Errorf("session id = %q", conn.SessionID())
	}
	cc, err := clientSide.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	id, _ := jsonrpc.MakeID(float64(12))
	call := func() jsonrpc.Message {
		return &jsonrpc.Request{ID: id, Method: "tools/call", Params: json.RawMessage(`{"name":"x"}`)}
	}
	cancel := func() jsonrpc.Message {
		return &jsonrpc.Request{Method: "notifications/cancelled", Params: json.RawMessage(`{"requestId":12}`)}
	}
	send := func(msgs ...jsonrpc.Message) {
		go func() {
			for _, m := range msgs {
				_ = cc.Write(ctx, m)
			}
		}()
	}
	read := func(want string, requestID bool) {
		t.Helper()
		msg, err := conn.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		req, ok := msg.(*jsonrpc.Request)
		if !ok || req.Method != want || !strings.Contains(string(req.Params), `"troupe/jsonrpc_id":"n:12"`) {
			t.Errorf("read %#v, want %s with the id stamped", msg, want)
			return
		}
		if has := strings.Contains(string(req.Params), `"requestId"`); want == "notifications/cancelled" && has != requestID {
			t.Errorf("%s: requestId kept = %v, want %v", req.Params, has, requestID)
		}
	}
	send(cancel(), call(), cancel())
	read("notifications/cancelled", false) // before its request
	read("tools/call", false)
	read("notifications/cancelled", true) // while go-sdk holds it
	answered := make(chan error, 1)
	go func() { _, err := cc.Read(ctx); answered <- err }()
	if err := conn.Write(ctx, &jsonrpc.Response{ID: id, Result: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
	send(cancel())
	read("notifications/cancelled", false) // after its answer
}

// TestBigIDsStayApart: JSON-RPC ids that a float64 cannot tell apart are
// two requests, as go-sdk hands their stamps to the tool handler.
func TestBigIDsStayApart(t *testing.T) {
	scope := func(id string) requestScope {
		t.Helper()
		var msg struct {
			Params mcp.CallToolParams `json:"params"`
		}
		body, _ := stampBody([]byte(`{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"x"}}`), nil)
		if err := json.Unmarshal(body, &msg); err != nil {
			t.Fatal(err)
		}
		sc, err := scopeOf(msg.Params.Meta, "s")
		if err != nil || sc == (requestScope{}) {
			t.Fatalf("scope of id %s: %+v, %v", id, sc, err)
		}
		return sc
	}
	a, b := scope("9007199254740992"), scope("9007199254740993")
	if a == b {
		t.Errorf("ids 2^53 and 2^53+1 have one scope %+v", a)
	}
	run := agents.ExposedRun{Input: "x"}
	if workflowID("g", "t", run, a) == workflowID("g", "t", run, b) {
		t.Error("ids 2^53 and 2^53+1 share a workflow id")
	}
}
