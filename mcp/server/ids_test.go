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
	req := requestScope{Session: "s1", Request: "7"}
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
		{"other request id", id("t", run, req), id("t", run, requestScope{Session: "s1", Request: "8"}), false},
		{"same request id in another session", id("t", run, req), id("t", run, requestScope{Session: "s2", Request: "7"}), false},
		{"numeric and string request ids", id("t", run, req), id("t", run, requestScope{Session: "s1", Request: `"7"`}), false},
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
		{"idempotency key wins", mcp.Meta{MetaIdempotencyKey: "abc", metaRequestID: float64(3)}, "s", requestScope{Key: "abc"}, false},
		{"session and request id", mcp.Meta{metaRequestID: float64(3)}, "s", requestScope{Session: "s", Request: "3"}, false},
		{"string request id", mcp.Meta{metaRequestID: "r-3"}, "s", requestScope{Session: "s", Request: `"r-3"`}, false},
		{"no session: no scope", mcp.Meta{metaRequestID: float64(3)}, "", requestScope{}, false},
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
		want string // the stamped ids, as JSON, in order; "" when body must come back unchanged
	}{
		{"call", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","arguments":{}}}`, `7`},
		{"string id and _meta kept", `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x","_meta":{"progressToken":1,"troupe/jsonrpc_id":99}}}`, `"a"`},
		{"no params", `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`, `1`},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}},{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}]`, `1`},
		{"other method", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, ``},
		{"notification", `{"jsonrpc":"2.0","method":"tools/call","params":{}}`, ``},
		{"not JSON", `{"jsonrpc":`, ``},
		{"params not an object", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[1]}`, ``},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := stampBody([]byte(tc.body))
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
			if got := string(p.Meta[metaRequestID]); got != tc.want {
				t.Errorf("stamped id = %s, want %s (body %s)", got, tc.want, out)
			}
			if strings.Contains(tc.body, "progressToken") && string(p.Meta["progressToken"]) != "1" {
				t.Errorf("progressToken lost: %s", out)
			}
			if strings.Contains(tc.body, `"name":"x"`) && p.Name != "x" {
				t.Errorf("name lost: %s", out)
			}
			if len(msgs) == 2 && string(msgs[1]["method"]) != `"notifications/cancelled"` {
				t.Errorf("second message changed: %s", out)
			}
		})
	}
}

// TestStampingConn: over a single-session transport, tools/call requests
// reach the server with their id in _meta, and the session has an id.
func TestStampingConn(t *testing.T) {
	serverSide, clientSide := mcp.NewInMemoryTransports()
	conn, err := (&stampingTransport{Transport: serverSide}).Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if !strings.HasPrefix(conn.SessionID(), "conn-") {
		t.Errorf("session id = %q", conn.SessionID())
	}
	cc, err := clientSide.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	id, _ := jsonrpc.MakeID(float64(12))
	go func() {
		_ = cc.Write(context.Background(), &jsonrpc.Request{ID: id, Method: "tools/call", Params: json.RawMessage(`{"name":"x"}`)})
	}()
	msg, err := conn.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	req, ok := msg.(*jsonrpc.Request)
	if !ok || !strings.Contains(string(req.Params), `"troupe/jsonrpc_id":12`) {
		t.Errorf("read %#v (params %s), want the id stamped", msg, req.Params)
	}
}
