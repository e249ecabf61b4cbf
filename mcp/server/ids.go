package server

// This file derives a call's workflow id (see "Workflow ids" in the package
// doc) and copies JSON-RPC request ids into the _meta of tools/call (and
// of notifications/cancelled, the id it cancels), where the tool handler
// and the cancel middleware can read them: go-sdk keeps them to itself,
// and its float64 view of a numeric id loses digits above 2^53. It also
// keeps go-sdk from acting on the cancellation of a request it does not
// hold (see held).

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"

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

// held is the set of client requests that go-sdk holds — read and not
// yet answered — by session and stamp.
//
// go-sdk cancels the request that a notifications/cancelled names as it
// reads the notification, on a goroutine of its own. For a request it
// holds, that ends the request's context, as it should. For a request it
// does not hold yet (a cancellation that overtook its request), that
// goroutine races with the request's arrival: it may find the request
// queued and answer it with a bare "context canceled" error before its
// handler begins, or not, by the scheduler's whim; and for an id above
// 2^53 (which go-sdk reads as a float64) it may end the context of another
// request. So the stamping transports leave a cancellation's requestId for
// go-sdk only when go-sdk holds that request. Any other cancellation
// reaches interceptCancel without it, and is handled by its stamp alone:
// the tombstone that the request's handler, should it come, finds.
type held struct {
	mu sync.Mutex
	n  map[callKey]int
}

// hold counts one more request k that go-sdk holds.
func (h *held) hold(k callKey) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == nil {
		h.n = map[callKey]int{}
	}
	h.n[k]++
}

// holdOnce records that go-sdk holds request k, unless it already does:
// go-sdk refuses a request whose id is in use, and never answers it.
func (h *held) holdOnce(k callKey) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == nil {
		h.n = map[callKey]int{}
	}
	if h.n[k] == 0 {
		h.n[k] = 1
	}
}

// release counts one request k fewer.
func (h *held) release(k callKey) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n[k] <= 1 {
		delete(h.n, k)
		return
	}
	h.n[k]--
}

// has reports whether go-sdk holds request k.
func (h *held) has(k callKey) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[k] > 0
}

// withoutRequestID returns notifications/cancelled params without their
// requestId, for go-sdk to cancel nothing (see held); params that are not
// a JSON object come back unchanged.
func withoutRequestID(params json.RawMessage) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal(params, &obj) != nil || obj == nil {
		return params
	}
	if _, ok := obj["requestId"]; !ok {
		return params
	}
	delete(obj, "requestId")
	out, err := json.Marshal(obj)
	if err != nil {
		return params
	}
	return out
}

// stampBody stamps the tools/call requests in an HTTP body (one message
// or a batch) with their JSON-RPC ids, and notifications/cancelled with
// the id they cancel; a cancellation keeps its requestId only when
// isHeld(stamp) (go-sdk holds the request) or the request comes earlier in
// the body (see held). It returns the body, unchanged when there is
// nothing to stamp or it does not parse, and the stamps of the requests
// in it, of any method.
func stampBody(body []byte, isHeld func(stamp string) bool) (out []byte, requests []string) {
	t := bytes.TrimSpace(body)
	if len(t) == 0 {
		return body, nil
	}
	inBody := map[string]bool{}
	heldHere := func(stamp string) bool { return inBody[stamp] || (isHeld != nil && isHeld(stamp)) }
	stamp := func(m json.RawMessage) (json.RawMessage, bool) {
		out, changed, request := stampMessage(m, heldHere)
		if request != "" {
			inBody[request] = true
			requests = append(requests, request)
		}
		return out, changed
	}
	if t[0] != '[' {
		out, changed := stamp(t)
		if !changed {
			return body, requests
		}
		return out, requests
	}
	var batch []json.RawMessage
	if json.Unmarshal(t, &batch) != nil {
		return body, nil
	}
	stamped := false
	for i, m := range batch {
		if out, changed := stamp(m); changed {
			batch[i], stamped = out, true
		}
	}
	if !stamped {
		return body, requests
	}
	out, err := json.Marshal(batch)
	if err != nil {
		return body, requests
	}
	return out, requests
}

// stampMessage stamps one message as stampBody does. request is the stamp
// of msg when it is a request (of any method), else "".
func stampMessage(msg json.RawMessage, isHeld func(stamp string) bool) (out json.RawMessage, changed bool, request string) {
	var head struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(msg, &head) != nil {
		return msg, false, ""
	}
	if head.Method != "" && len(head.ID) > 0 {
		request, _ = requestKeyJSON(head.ID)
	}
	var params json.RawMessage
	switch {
	case head.Method == "tools/call" && len(head.ID) > 0:
		if request == "" {
			return msg, false, ""
		}
		params = stampParams(head.Params, request, true)
	case head.Method == "notifications/cancelled" && len(head.ID) == 0:
		key, ok := requestKeyJSON(cancelledID(head.Params))
		params = stampParams(head.Params, key, ok)
		if ok && !isHeld(key) {
			params = withoutRequestID(params)
		}
	default:
		return msg, false, request
	}
	if bytes.Equal(params, head.Params) {
		return msg, false, request // not an object (go-sdk will say so), or nothing to do
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(msg, &obj) != nil {
		return msg, false, request
	}
	obj["params"] = params
	out, err := json.Marshal(obj)
	if err != nil {
		return msg, false, request
	}
	return out, true, request
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

// stampingConn stamps what it reads, and tracks the requests go-sdk holds:
// from their reading to the writing of their answers. One goroutine reads
// (go-sdk handles each message before it reads the next), so a
// cancellation is read after go-sdk took every request before it.
type stampingConn struct {
	mcp.Connection
	id   string
	held held
}

func (c *stampingConn) SessionID() string { return c.id }

func (c *stampingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	req, isReq := msg.(*jsonrpc.Request)
	if err != nil || !isReq {
		return msg, err
	}
	switch {
	case req.ID.IsValid():
		key, ok := requestKeyOf(req.ID.Raw())
		if !ok {
			break
		}
		c.held.holdOnce(callKey{c.id, key})
		if req.Method == "tools/call" {
			req.Params = stampParams(req.Params, key, true)
		}
	case req.Method == "notifications/cancelled":
		var id any
		key, ok := "", false
		if raw := cancelledID(req.Params); raw != nil && json.Unmarshal(raw, &id) == nil {
			key, ok = requestKeyOf(id)
		}
		req.Params = stampParams(req.Params, key, ok)
		if ok && !c.held.has(callKey{c.id, key}) {
			req.Params = withoutRequestID(req.Params)
		}
	}
	return msg, err
}

// Write releases the request that msg answers (see held).
func (c *stampingConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if resp, ok := msg.(*jsonrpc.Response); ok && resp.ID.IsValid() {
		if key, ok := requestKeyOf(resp.ID.Raw()); ok {
			c.held.release(callKey{c.id, key})
		}
	}
	return c.Connection.Write(ctx, msg)
}

// sessionIDPrefix starts the ids of the sessions that session tools
// create: "mcp-session-<graph>-<32 hex digits>".
const sessionIDPrefix = "mcp-session-"

// sessionWorkflowID is the id of the session that a call of tool (a
// session tool of graph) creates with its first message and start
// arguments in scope: a hash of all of them, or random digits for the
// zero scope. Either way the digits are as hard to guess as the scope:
// the id is what a client needs to continue the session.
func sessionWorkflowID(graph, tool, message string, start json.RawMessage, scope requestScope) string {
	if scope == (requestScope{}) {
		var b [16]byte
		_, _ = rand.Read(b[:])
		return sessionIDPrefix + graph + "-" + hex.EncodeToString(b[:])
	}
	return sessionIDPrefix + graph + "-" + scopedDigest(struct {
		V       int             `json:"v"`
		Tool    string          `json:"tool"`
		Scope   requestScope    `json:"scope"`
		Message string          `json:"message"`
		Start   json.RawMessage `json:"start,omitempty"`
	}{V: 1, Tool: tool, Scope: scope, Message: message, Start: canonicalJSON(start)})
}

// messageID is the update id under which a call of tool sends message to
// session in scope, so that Temporal takes a retried call's message once
// (client.WithMessageID); "" for the zero scope: a fresh one each time.
func messageID(tool, session, message string, scope requestScope) string {
	if scope == (requestScope{}) {
		return ""
	}
	return "mcp-message-" + scopedDigest(struct {
		V       int          `json:"v"`
		Tool    string       `json:"tool"`
		Session string       `json:"session"`
		Scope   requestScope `json:"scope"`
		Message string       `json:"message"`
	}{V: 1, Tool: tool, Session: session, Scope: scope, Message: message})
}

// scopedDigest is 32 hex digits of the SHA-256 of record's JSON: a
// struct, whose fields keep their order.
func scopedDigest(record any) string {
	doc, err := json.Marshal(record)
	if err != nil {
		panic(err) // strings and JSON documents always marshal
	}
	sum := sha256.Sum256(doc)
	return hex.EncodeToString(sum[:16])
}

// canonicalJSON is doc with its object keys sorted and no insignificant
// space, so that equal arguments hash equally however they were spelled;
// nil for nothing (or what does not parse, which never gets this far).
func canonicalJSON(doc json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(doc)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber() // numbers keep their digits
	var v any
	if dec.Decode(&v) != nil {
		return nil
	}
	out, _ := json.Marshal(v)
	return out
}

// graphOfSessionID is the served graph whose session tools create
// session id (see sessionWorkflowID), or nil.
func (s *Server) graphOfSessionID(id string) *agents.Graph {
	rest, ok := strings.CutPrefix(id, sessionIDPrefix)
	if !ok || len(rest) < 34 {
		return nil
	}
	name, digits := rest[:len(rest)-33], rest[len(rest)-33:]
	if digits[0] != '-' || !isLowerHex(digits[1:]) {
		return nil
	}
	return s.graphs[name]
}
