package server

// This file derives a call's workflow id (see "Workflow ids" in the package
// doc) and copies JSON-RPC request ids into the _meta of tools/call (and
// of notifications/cancelled, the id it cancels), where the tool handler
// and the cancel middleware can read them: go-sdk keeps them to itself,
// and its float64 view of a numeric id loses digits above 2^53.

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"

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
	// Only a stamp of this package's transports (a string) counts.
	id, _ := meta[metaRequestID].(string)
	if id == "" {
		return requestScope{}, nil
	}
	return requestScope{Session: session, Request: id}, nil
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

// requestKeyJSON is the stamp of a JSON-RPC id as it came on the wire:
// "s:" and the string, or "n:" and the number's text. The text keeps ids
// above 2^53 apart, which a float64 (how JSON numbers decode into _meta)
// would not. ok is false for null and anything that is not an id.
func requestKeyJSON(raw json.RawMessage) (key string, ok bool) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return "", false
	}
	if t[0] == '"' {
		var s string
		if json.Unmarshal(t, &s) != nil {
			return "", false
		}
		return "s:" + s, true
	}
	var n json.Number
	if json.Unmarshal(t, &n) != nil || n == "" {
		return "", false
	}
	return "n:" + n.String(), true
}

// requestKeyOf is the stamp of a JSON-RPC id as go-sdk decoded it (a
// string, or a number as int64; see jsonrpc.MakeID). Over transports
// whose messages go-sdk decodes before this package sees them (stdio),
// calls and their cancellations are both stamped from that view.
func requestKeyOf(id any) (key string, ok bool) {
	if f, isFloat := id.(float64); isFloat {
		jid, err := jsonrpc.MakeID(f)
		if err != nil {
			return "", false
		}
		id = jid.Raw()
	}
	switch v := id.(type) {
	case string:
		return "s:" + v, true
	case int64:
		return "n:" + strconv.FormatInt(v, 10), true
	}
	return "", false
}

// stampParams returns a message's params with _meta[metaRequestID] set to
// key, or removed when !ok (a client cannot stamp its own). Params that are
// not a JSON object (or null) come back unchanged, for go-sdk to reject.
func stampParams(params json.RawMessage, key string, ok bool) json.RawMessage {
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
	if ok {
		meta[metaRequestID], _ = json.Marshal(key)
	} else {
		if _, had := meta[metaRequestID]; !had {
			return params
		}
		delete(meta, metaRequestID)
	}
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

// cancelledID is the requestId of notifications/cancelled params, as
// JSON; nil when there is none.
func cancelledID(params json.RawMessage) json.RawMessage {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil {
		return nil
	}
	return p.RequestID
}

// stampBody stamps the tools/call requests in an HTTP body (one message
// or a batch) with their JSON-RPC ids, and notifications/cancelled with
// the id they cancel. It returns body unchanged when there is
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
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(msg, &head) != nil {
		return msg, false
	}
	var params json.RawMessage
	switch {
	case head.Method == "tools/call" && len(head.ID) > 0:
		key, ok := requestKeyJSON(head.ID)
		if !ok {
			return msg, false
		}
		params = stampParams(head.Params, key, true)
	case head.Method == "notifications/cancelled" && len(head.ID) == 0:
		key, ok := requestKeyJSON(cancelledID(head.Params))
		params = stampParams(head.Params, key, ok)
	default:
		return msg, false
	}
	if bytes.Equal(params, head.Params) {
		return msg, false // not an object (go-sdk will say so), or nothing to do
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(msg, &obj) != nil {
		return msg, false
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
	req, isReq := msg.(*jsonrpc.Request)
	if err != nil || !isReq {
		return msg, err
	}
	switch {
	case req.Method == "tools/call" && req.ID.IsValid():
		if key, ok := requestKeyOf(req.ID.Raw()); ok {
			req.Params = stampParams(req.Params, key, true)
		}
	case req.Method == "notifications/cancelled" && !req.ID.IsValid():
		var id any
		key, ok := "", false
		if raw := cancelledID(req.Params); raw != nil && json.Unmarshal(raw, &id) == nil {
			key, ok = requestKeyOf(id)
		}
		req.Params = stampParams(req.Params, key, ok)
	}
	return msg, err
}
