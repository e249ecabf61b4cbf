package server

// This file derives a call's workflow id (see "Workflow ids" in the package
// doc) and copies JSON-RPC request ids into tools/call's _meta, where the
// tool handler can read them: go-sdk keeps them to itself.

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/troupe-dev/troupe/agents"
)

// maxIdempotencyKey bounds a client's idempotency key, in bytes.
const maxIdempotencyKey = 256

// requestScope is what makes a call the same call again: a client's
// idempotency key, or a session and a JSON-RPC request id. The zero scope
// makes every call a new run.
type requestScope struct {
	Key     string `json:"key,omitempty"`
	Session string `json:"session,omitempty"`
	Request string `json:"request,omitempty"`
}

// scopeOf reads a call's scope from its _meta and session. It fails when
// the idempotency key is not a string of 1 to maxIdempotencyKey bytes.
func scopeOf(meta mcp.Meta, session string) (requestScope, error) {
	if v, ok := meta[MetaIdempotencyKey]; ok {
		key, isString := v.(string)
		if !isString || key == "" || len(key) > maxIdempotencyKey {
			return requestScope{}, fmt.Errorf("_meta[%q] must be a string of 1 to %d bytes", MetaIdempotencyKey, maxIdempotencyKey)
		}
		return requestScope{Key: key}, nil
	}
	if session == "" {
		return requestScope{}, nil
	}
	id, ok := meta[metaRequestID]
	if !ok || id == nil {
		return requestScope{}, nil
	}
	js, err := json.Marshal(id)
	if err != nil {
		return requestScope{}, nil
	}
	return requestScope{Session: session, Request: string(js)}, nil
}

// callKey is the key cancellations find the call by; zero when the
// request has no session and id.
func (sc requestScope) callKey() callKey {
	if sc.Session == "" || sc.Request == "" {
		return callKey{}
	}
	return callKey{sc.Session, sc.Request}
}

// workflowID is the workflow id of a call of tool (an agent of graph)
// asking for run in scope: "mcp-<graph>-<32 hex digits>", a hash of all
// of them, or random digits for the zero scope.
func workflowID(graph, tool string, run agents.ExposedRun, scope requestScope) string {
	if scope == (requestScope{}) {
		var b [16]byte
		_, _ = rand.Read(b[:])
		return "mcp-" + graph + "-" + hex.EncodeToString(b[:])
	}
	vars := run.Vars
	if len(vars) == 0 {
		vars = nil
	}
	// JSON of a fixed-order record: unambiguous, and map keys (Vars) are
	// sorted, so equal arguments hash equally however they were spelled.
	doc, err := json.Marshal(struct {
		V     int               `json:"v"`
		Tool  string            `json:"tool"`
		Scope requestScope      `json:"scope"`
		Input string            `json:"input"`
		Vars  map[string]string `json:"vars"`
	}{V: 1, Tool: tool, Scope: scope, Input: run.Input, Vars: vars})
	if err != nil {
		panic(err) // strings and maps of strings always marshal
	}
	sum := sha256.Sum256(doc)
	return "mcp-" + graph + "-" + hex.EncodeToString(sum[:16])
}

// stampParams returns a tools/call's params with _meta[metaRequestID] set
// to id (JSON). Params that are not a JSON object (or null) come back
// unchanged, for go-sdk to reject.
func stampParams(params json.RawMessage, id json.RawMessage) json.RawMessage {
	obj := map[string]json.RawMessage{}
	if t := bytes.TrimSpace(params); len(t) > 0 && !bytes.Equal(t, []byte("null")) {
		if err := json.Unmarshal(t, &obj); err != nil || obj == nil {
			return params
		}
	}
	meta := map[string]json.RawMessage{}
	if m, ok := obj["_meta"]; ok && !bytes.Equal(bytes.TrimSpace(m), []byte("null")) {
		if err := json.Unmarshal(m, &meta); err != nil || meta == nil {
			return params
		}
	}
	meta[metaRequestID] = id
	var err error
	if obj["_meta"], err = json.Marshal(meta); err != nil {
		return params
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return params
	}
	return out
}

// stampBody stamps the JSON-RPC ids of the tools/call requests in an HTTP
// body (one message or a batch). It returns body unchanged when there is
// nothing to stamp or the body does not parse.
func stampBody(body []byte) []byte {
	t := bytes.TrimSpace(body)
	if len(t) == 0 {
		return body
	}
	if t[0] != '[' {
		out, changed := stampMessage(t)
		if !changed {
			return body
		}
		return out
	}
	var batch []json.RawMessage
	if json.Unmarshal(t, &batch) != nil {
		return body
	}
	stamped := false
	for i, m := range batch {
		if out, changed := stampMessage(m); changed {
			batch[i], stamped = out, true
		}
	}
	if !stamped {
		return body
	}
	out, err := json.Marshal(batch)
	if err != nil {
		return body
	}
	return out
}

func stampMessage(msg json.RawMessage) (json.RawMessage, bool) {
	var head struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(msg, &head) != nil || head.Method != "tools/call" || len(head.ID) == 0 || string(head.ID) == "null" {
		return msg, false
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(msg, &obj) != nil {
		return msg, false
	}
	params := stampParams(obj["params"], head.ID)
	if bytes.Equal(params, obj["params"]) {
		return msg, false // not an object: go-sdk will say so
	}
	obj["params"] = params
	out, err := json.Marshal(obj)
	if err != nil {
		return msg, false
	}
	return out, true
}

// stampingTransport wraps a single-session transport (stdio, say): its
// connection stamps tools/call requests as it reads them, and has a
// random session id when the transport has none.
type stampingTransport struct{ mcp.Transport }

func (t *stampingTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	id := conn.SessionID()
	if id == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		id = "conn-" + hex.EncodeToString(b[:])
	}
	return &stampingConn{Connection: conn, id: id}, nil
}

type stampingConn struct {
	mcp.Connection
	id string
}

func (c *stampingConn) SessionID() string { return c.id }

func (c *stampingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if req, ok := msg.(*jsonrpc.Request); ok && err == nil && req.Method == "tools/call" && req.ID.IsValid() {
		if id, jerr := json.Marshal(req.ID.Raw()); jerr == nil {
			req.Params = stampParams(req.Params, id)
		}
	}
	return msg, err
}
