package server

// This file handles the calls that wait for a human's approval in the
// agent tree of a run or session while a tool call waits on it (see
// "Approvals" in the package doc): the client is asked with an
// elicitation when it declared that it can answer one; otherwise the
// wait ends with the calls that wait, and troupe_run_approve decides them.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/troupe-dev/troupe"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/runtime"
)

// StatusWaitingForApproval is the _meta[MetaStatus] (and the structured
// "status") of an answer that says the run or session waits for decisions.
const StatusWaitingForApproval = "waiting_for_approval"

// errAwaitingApproval ends a wait whose client must decide calls that wait.
var errAwaitingApproval = errors.New("calls wait for approval")

// Messages a rejection gives the agent when the user did not fill the
// elicitation's form.
const (
	msgDeclined  = "the MCP client's user declined it"
	msgDismissed = "the MCP client's user dismissed the request for approval without deciding"
)

// elicitArgumentsLen bounds the arguments an elicitation's message shows.
const elicitArgumentsLen = 2000

// decideTimeout bounds taking a decision once the user gave it: it does
// not depend on the request's context, so an answer given as the wait
// ends is not lost.
const decideTimeout = 30 * time.Second

// forgetRequest is how long an approval that was requested but never
// listed by its root nor decided (its agent was cancelled, say) keeps a
// watch polling.
const forgetRequest = time.Minute

// approvalSchema is the form an elicitation asks the user to fill: the
// restricted, flat schema MCP allows.
var approvalSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"approve":{"type":"boolean","title":"Approve","description":"Run the call (true), or reject it (false): the agent is told and goes on without it."},` +
	`"message":{"type":"string","title":"Message","description":"For the agent (optional): why you reject the call, or a note on it."},` +
	`"remember":{"type":"boolean","title":"Remember","description":"Decide the same way on this agent's later calls of this tool, for the rest of the run or session.","default":false}},` +
	`"required":["approve"]}`)

// mrtrVersion is the first MCP version in which a server asks a client
// for input by answering a request with input requests (multi round-trip
// requests, SEP-2322), and may no longer send it requests of its own.
const mrtrVersion = "2026-07-28"

// elicits reports whether the client of ss declared that it answers form
// elicitations, and the protocol version it speaks.
func elicits(ss *mcp.ServerSession) (ok bool, version string) {
	if ss == nil {
		return false, ""
	}
	ip := ss.InitializeParams()
	if ip == nil || ip.Capabilities == nil || ip.Capabilities.Elicitation == nil {
		return false, ""
	}
	e := ip.Capabilities.Elicitation
	// No mode named means form (MCP's backward compatibility).
	return e.Form != nil || e.URL == nil, ip.ProtocolVersion
}

// canElicit reports whether the server may send the client of ss an
// elicitation/create while it serves a request: the client answers form
// elicitations, speaks a version before mrtrVersion, and the session can
// carry a request to it (stateless HTTP sessions, without an id, cannot).
func canElicit(ss *mcp.ServerSession) bool {
	ok, version := elicits(ss)
	return ok && version < mrtrVersion && ss.ID() != ""
}

// canRequestInput reports whether the client of ss answers form
// elicitations that a result asks for as input requests (mrtrVersion on).
func canRequestInput(ss *mcp.ServerSession) bool {
	ok, version := elicits(ss)
	return ok && version >= mrtrVersion
}

// approvalWatch watches the approvals of one agent tree, a run's or a
// session's (root), while a tool call waits on it. Its follower passes it
// the tree's events (event); run acts on the calls that wait: it asks the
// client about each, one at a time (when ss is set), or reports them.
type approvalWatch struct {
	s    *Server
	root string
	// ss, when set, is the session whose client is asked.
	ss *mcp.ServerSession
	// every, when set, has run read the calls that wait that often too,
	// for a follower that may not see every workflow of the tree.
	every time.Duration

	poke chan struct{}

	mu sync.Mutex
	// open are the approvals requested and not decided yet, as the
	// events tell, with when their request was seen.
	open    map[string]time.Time
	decided map[string]bool
	// asking is the approval the client is asked about now; stopAsking
	// withdraws the question.
	asking     string
	stopAsking context.CancelFunc
}

// watchApprovals returns the watch of root's approvals for a call of req:
// it elicits the decisions when elicit is true and the client can answer.
func (s *Server) watchApprovals(req *mcp.CallToolRequest, root string, elicit bool) *approvalWatch {
	w := &approvalWatch{s: s, root: root, poke: make(chan struct{}, 1), open: map[string]time.Time{}, decided: map[string]bool{}}
	if elicit && canElicit(req.Session) {
		w.ss = req.Session
	}
	return w
}

// event takes an event of the tree. It never blocks: the follower's
// other work goes on.
func (w *approvalWatch) event(e troupe.Event) {
	if w == nil || e.Approval == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch e.Kind {
	case troupe.EventApprovalRequested:
		if !w.decided[e.Approval] {
			w.open[e.Approval] = time.Now()
		}
		select {
		case w.poke <- struct{}{}:
		default:
		}
	case troupe.EventApprovalDecided:
		w.decided[e.Approval] = true
		delete(w.open, e.Approval)
		if w.asking == e.Approval && w.stopAsking != nil {
			w.stopAsking() // Decided elsewhere (troupe runs approve, a timeout).
		}
	}
}

// waitsFor reports whether an approval was requested and is not decided
// yet (its root may not list it yet: the agent records the request a
// moment before its root has it), forgetting those requested long ago.
func (w *approvalWatch) waitsFor() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, since := range w.open {
		if time.Since(since) > forgetRequest {
			delete(w.open, id)
		}
	}
	return len(w.open) > 0
}

func (w *approvalWatch) isDecided(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.decided[id]
}

// run acts on the calls that wait until ctx ends. A client that can
// answer is asked about each call the root lists, oldest first, and its
// answer decides the call. Otherwise — or when a question fails — report
// gets the calls that wait, and run returns. ctx carries the request's
// values, which route the elicitations to the request's stream.
//
// The root is read when an approval is requested (and again, backing
// off, until it lists the call or the call is decided), and every
// w.every when set.
func (w *approvalWatch) run(ctx context.Context, report func([]troupeclient.Approval)) {
	asked := map[string]bool{}
	var tick <-chan time.Time
	if w.every > 0 {
		t := time.NewTicker(w.every)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.poke:
		case <-tick:
		}
		// Read until no call waits that the events announced and the root
		// has not listed yet; after a question, read again at once: more
		// calls may wait.
		for wait, again := 50*time.Millisecond, true; again || w.waitsFor(); wait = min(2*wait, 2*time.Second) {
			again = false
			list, err := w.s.runs.Approvals(ctx, w.root)
			if err != nil && ctx.Err() == nil {
				w.s.log.Debug("mcp: read approvals", "root", w.root, "error", err)
			}
			next := -1
			for i, a := range list {
				if !asked[a.ID] && !w.isDecided(a.ID) {
					next = i
					break
				}
			}
			if next >= 0 && w.ss == nil {
				report(list)
				return
			}
			if next >= 0 {
				asked[list[next].ID] = true
				if !w.ask(ctx, list[next]) {
					if list, err = w.s.runs.Approvals(ctx, w.root); err == nil && len(list) > 0 {
						report(list)
						return
					}
				}
				wait, again = 25*time.Millisecond, true
			}
			if !again && !w.waitsFor() {
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
	}
}

// ask asks the client about call a and takes its answer as the decision.
// It returns false when the client could not be asked, or the decision
// not taken: the call waits for troupe_run_approve then.
func (w *approvalWatch) ask(ctx context.Context, a troupeclient.Approval) bool {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	w.mu.Lock()
	if w.decided[a.ID] {
		w.mu.Unlock()
		return true
	}
	w.asking, w.stopAsking = a.ID, cancel
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.asking, w.stopAsking = "", nil
		w.mu.Unlock()
	}()
	res, err := w.ss.Elicit(actx, &mcp.ElicitParams{Message: approvalQuestion(w.root, a), RequestedSchema: approvalSchema})
	if err != nil {
		if actx.Err() != nil {
			return true // Decided elsewhere, or nobody waits any more.
		}
		w.s.log.Warn("mcp: elicitation failed; the call waits for "+ToolRunApprove, "root", w.root, "approval", a.ID, "error", err)
		return false
	}
	dec := decisionOf(a.ID, res)
	dctx, cancelDecide := context.WithTimeout(context.WithoutCancel(ctx), decideTimeout)
	defer cancelDecide()
	if _, err := w.s.runs.Decide(dctx, w.root, dec); err != nil {
		if troupe.ErrorType(err) == troupe.ErrBadDecision {
			return true // Decided meanwhile, elsewhere or by its timeout.
		}
		w.s.log.Warn("mcp: decide", "root", w.root, "approval", a.ID, "error", err)
		return false
	}
	w.s.log.Info("mcp: decided by elicitation", "root", w.root, "approval", a.ID, "action", res.Action, "approve", dec.Approve)
	return true
}

// approvalQuestion is an elicitation's message: who wants to call what,
// with which arguments, and what happens without an answer.
func approvalQuestion(root string, a troupeclient.Approval) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Agent %s wants to call %s", a.Agent, a.Tool)
	if args := prettyArguments(a.Arguments); args != "" {
		fmt.Fprintf(&b, " with these arguments:\n%s\n", clipText(args, elicitArgumentsLen))
	} else {
		b.WriteString(".\n")
	}
	if a.Deadline != nil {
		outcome := "rejected"
		if a.OnTimeout == "approve" {
			outcome = "approved"
		}
		fmt.Fprintf(&b, "Without a decision by %s it is %s.\n", a.Deadline.UTC().Format(time.RFC3339), outcome)
	}
	fmt.Fprintf(&b, "Approve this call? (call %s of %s)", a.ID, root)
	return b.String()
}

// prettyArguments is a call's arguments indented, or as they are when
// they are not JSON.
func prettyArguments(args string) string {
	args = strings.TrimSpace(args)
	if args == "" || args == "{}" {
		return ""
	}
	return pretty(json.RawMessage(args))
}

// clipText is s cut to at most n bytes between runes, lines kept.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}

// decisionOf is the decision an elicitation's result gives: the form's
// answer when the user accepted it, a rejection when they declined or
// dismissed it.
func decisionOf(id string, res *mcp.ElicitResult) troupeclient.Decision {
	switch res.Action {
	case "accept":
		d := troupeclient.Decision{ID: id}
		d.Approve, _ = res.Content["approve"].(bool)
		d.Message, _ = res.Content["message"].(string)
		d.Message = strings.TrimSpace(d.Message)
		if r, _ := res.Content["remember"].(bool); r {
			d.Remember = runtime.RememberTool
		}
		return d
	case "decline":
		return troupeclient.Decision{ID: id, Message: msgDeclined}
	}
	return troupeclient.Decision{ID: id, Message: msgDismissed}
}

// approvalDoc is a call that waits, as answers list it. Arguments is a
// JSON object: the call's, or {"text": ...} for arguments that are not one.
type approvalDoc struct {
	ID        string          `json:"id"`
	Agent     string          `json:"agent"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Since     time.Time       `json:"since"`
	Deadline  *time.Time      `json:"deadline,omitempty"`
	OnTimeout string          `json:"on_timeout,omitempty"`
}

func approvalDocs(list []troupeclient.Approval) []approvalDoc {
	out := make([]approvalDoc, 0, len(list))
	for _, a := range list {
		args := json.RawMessage(strings.TrimSpace(a.Arguments))
		var obj map[string]json.RawMessage
		if len(args) == 0 {
			args = json.RawMessage("{}")
		} else if json.Unmarshal(args, &obj) != nil {
			// Not an object, as a model may give: the text as it is.
			args, _ = json.Marshal(map[string]string{"text": a.Arguments})
		}
		out = append(out, approvalDoc{ID: a.ID, Agent: a.Agent, Tool: a.Tool, Arguments: args, Since: a.Since, Deadline: a.Deadline, OnTimeout: a.OnTimeout})
	}
	return out
}

// waitingDoc is the structured answer of a call whose run or session
// waits for decisions.
type waitingDoc struct {
	RunID     string        `json:"run_id,omitempty"`
	SessionID string        `json:"session_id,omitempty"`
	Status    string        `json:"status"`
	Approvals []approvalDoc `json:"approvals"`
}

// waitingResult answers a call whose run (or session, when session is
// true) id waits for the decisions on list, which the client takes with
// troupe_run_approve. An agent or session tool answers it as isError,
// without structuredContent: its output schema is the agent's, which MCP
// holds every other result to; troupe_run_approve, which declares none,
// answers it as its structured result.
func waitingResult(id string, session bool, list []troupeclient.Approval, isError bool) *mcp.CallToolResult {
	doc := waitingDoc{Status: StatusWaitingForApproval, Approvals: approvalDocs(list)}
	what, key, meta := "Run", "run_id", mcp.Meta{MetaRunID: id}
	if session {
		what, key, meta = "Session", "session_id", mcp.Meta{MetaSessionID: id}
		doc.SessionID = id
	} else {
		doc.RunID = id
	}
	meta[MetaStatus] = StatusWaitingForApproval
	meta[MetaApprovals] = doc.Approvals
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s waits for a human's decision on %d call(s):\n", what, id, len(list))
	for _, a := range list {
		args := strings.Join(strings.Fields(a.Arguments), " ")
		fmt.Fprintf(&b, "- call %s: agent %s wants to call %s with %s\n", a.ID, a.Agent, a.Tool, clip(args, 500))
	}
	first := "ID"
	if len(list) > 0 {
		first = list[0].ID
	}
	fmt.Fprintf(&b, "Ask the user whether to allow each call, then decide it with %s: {%q: %q, \"call\": %q, \"approve\": true} runs it; "+
		"\"approve\": false rejects it (add a \"message\" saying why: the agent reads it); \"remember\": true decides the same way on the agent's later calls of the tool. "+
		"%s then waits and answers with the result, or with the calls that wait next.", ToolRunApprove, key, id, first, ToolRunApprove)
	js, _ := json.Marshal(doc)
	out := &mcp.CallToolResult{Meta: meta, IsError: isError, Content: []mcp.Content{
		&mcp.TextContent{Text: b.String()}, &mcp.TextContent{Text: pretty(js)},
	}}
	if !isError {
		out.StructuredContent = json.RawMessage(js)
	}
	return out
}

var runApproveTool = &mcp.Tool{
	Name:  ToolRunApprove,
	Title: "Troupe: decide a call that waits for approval",
	Description: "Decides a call that waits for a human's approval in a Troupe run or session that a tool of this server started, " +
		"when a tool's answer said it waits (status " + StatusWaitingForApproval + ", with the calls listed): approve runs the call, " +
		"a rejection tells the agent, with your message, and it goes on without the call. Ask the user first: this is their decision. " +
		"Then waits, as the tool that started the run or the session's message would have, and answers with its result, or with the calls that wait next.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{` + runIDProperty + `,` +
		`"session_id":{"type":"string","description":"Instead of run_id: the session whose turn waits, the session_id of a session tool's answer."},` +
		`"call":{"type":"string","minLength":1,"description":"The id of the call that waits, as the answer listed it."},` +
		`"approve":{"type":"boolean","description":"true runs the call; false rejects it."},` +
		`"message":{"type":"string","description":"For the agent: why the call is rejected, or a note on an approved one."},` +
		`"remember":{"type":"boolean","description":"Decide the same way on the agent's later calls of this tool, for the rest of the run or session."}},` +
		`"required":["call","approve"],"additionalProperties":false}`),
	Annotations: &mcp.ToolAnnotations{Title: "Troupe: decide a call that waits for approval",
		// Approving runs a call that a policy held back for a human.
		DestructiveHint: new(true), OpenWorldHint: new(true)},
}

// approveArgs are troupe_run_approve's arguments.
type approveArgs struct {
	RunID     *string `json:"run_id"`
	SessionID *string `json:"session_id"`
	Call      string  `json:"call"`
	Approve   *bool   `json:"approve"`
	Message   string  `json:"message"`
	Remember  bool    `json:"remember"`
}

// decision checks the arguments and returns the decision they take.
func (a approveArgs) decision() (troupeclient.Decision, error) {
	switch {
	case (a.RunID == nil) == (a.SessionID == nil):
		return troupeclient.Decision{}, errors.New("give either run_id or session_id")
	case a.RunID != nil && *a.RunID == "", a.SessionID != nil && *a.SessionID == "":
		return troupeclient.Decision{}, errors.New("run_id and session_id must not be empty")
	case strings.TrimSpace(a.Call) == "":
		return troupeclient.Decision{}, errors.New("call is required: the id of a call that waits")
	case a.Approve == nil:
		return troupeclient.Decision{}, errors.New("approve is required: true or false")
	}
	d := troupeclient.Decision{ID: strings.TrimSpace(a.Call), Approve: *a.Approve, Message: strings.TrimSpace(a.Message)}
	if a.Remember {
		d.Remember = runtime.RememberTool
	}
	return d, nil
}

// runApprove serves troupe_run_approve.
func (s *Server) runApprove(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args approveArgs
	if err := decodeArgs(req.Params.Arguments, &args); err != nil {
		return errorResult(fmt.Sprintf("invalid arguments for %s: %v", ToolRunApprove, err), nil), nil
	}
	dec, err := args.decision()
	if err != nil {
		return errorResult(fmt.Sprintf("invalid arguments for %s: %v", ToolRunApprove, err), nil), nil
	}
	if req.Params.RequestState != "" {
		// The client answered the input requests of this call's last
		// answer: its decision was taken then.
		return s.resume(ctx, req, nil, nil), nil
	}
	if args.SessionID != nil {
		return s.approveSession(ctx, req, *args.SessionID, dec), nil
	}
	return s.approveRun(ctx, req, *args.RunID, dec), nil
}

// approveRun decides a call of run id, then waits for the run as its
// agent tool does.
func (s *Server) approveRun(ctx context.Context, req *mcp.CallToolRequest, id string, dec troupeclient.Decision) *mcp.CallToolResult {
	info, err := s.lookup(ctx, id)
	if err != nil {
		return errorResult(err.Error(), nil)
	}
	meta := mcp.Meta{MetaRunID: id}
	if info.closed() {
		return errorResult(fmt.Sprintf("run %s has finished: no call of it waits; read its result with %s", id, ToolRunResult), meta)
	}
	decided, err := s.runs.Decide(ctx, id, dec)
	if err != nil {
		return decideErrorResult("run", id, dec, err, meta)
	}
	s.log.Info("mcp: decided", "run", id, "approval", dec.ID, "approve", dec.Approve, "session", sessionID(req))
	p := s.progressFor(ctx, req)
	p.send(decisionsText(decided), mcp.Meta{MetaRunID: id})
	// Waiting is not the run: cancelling this call cancels no run, so it
	// is registered without a key.
	cl, wctx := s.calls.add(ctx, callKey{})
	defer s.calls.remove(cl, false)
	if out := s.awaitRun(wctx, req, p, id, false); out != nil {
		return out
	}
	return interruptedResult(wctx, id)
}

// approveSession decides a call of session id's running turn, then waits
// for the turn as its session tool does.
func (s *Server) approveSession(ctx context.Context, req *mcp.CallToolRequest, id string, dec troupeclient.Decision) *mcp.CallToolResult {
	if _, err := s.sessionToolOf(ctx, id); err != nil {
		return errorResult(err.Error(), nil)
	}
	meta := mcp.Meta{MetaSessionID: id}
	info, err := s.runs.Session(id).Info(ctx)
	if err != nil {
		return errorResult(fmt.Sprintf("could not read session %s: %v", id, err), meta)
	}
	if info.Running == "" {
		return errorResult(fmt.Sprintf("session %s runs no turn: no call of it waits", id), meta)
	}
	waited, _ := s.runs.Approvals(ctx, id)
	decided, err := s.runs.Decide(ctx, id, dec)
	if err != nil {
		return decideErrorResult("session", id, dec, err, meta)
	}
	s.log.Info("mcp: decided", "mcp_session", sessionID(req), "session", id, "approval", dec.ID, "approve", dec.Approve)
	p := s.progressFor(ctx, req)
	p.send(decisionsText(decided), mcp.Meta{MetaSessionID: id})
	cl, wctx := s.calls.add(ctx, callKey{})
	defer s.calls.remove(cl, false)
	return s.awaitTurn(wctx, req, p, id, info, waited)
}

// awaitTurn waits for the turn that runs in session id (as info, read
// before, says), following its events into p and acting on its
// approvals, and answers as the session tool does. waited are the calls
// that waited before: the turn's agents are followed from the workflows
// that hold them.
func (s *Server) awaitTurn(ctx context.Context, req *mcp.CallToolRequest, p *progress, id string, info troupeclient.SessionInfo, waited []troupeclient.Approval) *mcp.CallToolResult {
	n := turnNumber(info.Running)
	actx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	ended := make(chan struct{}, 1)
	// A follower from the session's next event knows none of the turn's
	// agents, which the turn started before: it follows those that hold
	// the calls that waited from their start, and tells what happened
	// since those calls were asked for. Agents it cannot know of (an
	// agent-as-tool started before, whose caller is not followed) may ask
	// too: the watch reads the root's list every 2 s as well.
	cursor := troupeclient.Cursor{id: info.NextEvent - 1}
	shown := map[string]time.Time{}
	for _, a := range waited {
		cursor[a.Workflow] = 0
		if a.Since.After(shown[a.Workflow]) {
			shown[a.Workflow] = a.Since
		}
	}
	w := s.watchApprovals(req, id, true)
	w.every = 2 * time.Second
	fn := func(e troupeclient.Event) {
		if actx.Err() != nil {
			return
		}
		w.event(e)
		if e.WorkflowID != id {
			if !e.Time.After(shown[e.WorkflowID]) {
				return // The call that asked had shown it.
			}
			p.event(e)
			return
		}
		if msg, ok := sessionEventMessage(id, e); ok {
			p.send(msg, nil)
		}
		switch e.Kind {
		case troupe.EventFinal, troupe.EventFailed, troupe.EventTurnRolledBack, troupe.EventInterrupted, troupe.EventSessionStopped:
			if e.Turn == n || e.Kind == troupe.EventSessionStopped {
				select {
				case ended <- struct{}{}:
				default:
				}
			}
		}
	}
	var waiting []troupeclient.Approval
	watched := make(chan struct{})
	// The follower is not waited for: its last reading may take a while,
	// and the turn's end has come through it already.
	go func() { _ = s.runs.Session(id).FollowFrom(actx, cursor, fn) }()
	go func() {
		defer close(watched)
		w.run(actx, func(list []troupeclient.Approval) { waiting = list; stop(errAwaitingApproval) })
	}()
	select {
	case <-ended:
	case <-actx.Done():
	}
	stop(nil)
	<-watched
	p.stop()
	switch {
	case waiting != nil:
		p.settle()
		return s.waitingAnswer(req, id, true, info.Running, waiting, false)
	case ctx.Err() != nil:
		return sessionInterrupted(ctx, id, false, true)
	}
	// The turn's end is recorded with its record: read it.
	for range 20 {
		now, err := s.runs.Session(id).Info(ctx)
		if err != nil {
			return errorResult(fmt.Sprintf("could not read session %s: %v", id, err), mcp.Meta{MetaSessionID: id})
		}
		for _, rec := range now.Recent {
			if rec.Turn == info.Running {
				p.settle()
				return turnResult(id, rec)
			}
		}
		if now.Running == info.Running {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		break
	}
	return errorResult(fmt.Sprintf("turn %d of session %s ended, and its record is gone from the session's recent turns", n, id), mcp.Meta{MetaSessionID: id})
}

// sessionToolOf is the session tool whose sessions id is one of: a
// session that a session tool of this server created, of a served graph,
// at an exposed agent. Any other id is "no session with id X".
func (s *Server) sessionToolOf(ctx context.Context, id string) (*sessionTool, error) {
	noSession := fmt.Errorf("no session with id %q", id)
	g := s.graphOfSessionID(id)
	if g == nil {
		return nil, noSession
	}
	in, err := s.runs.Session(id).Input(ctx)
	if err != nil {
		if errors.Is(err, troupeclient.ErrNoSession) {
			return nil, noSession
		}
		return nil, fmt.Errorf("could not look session %q up: %w", id, err)
	}
	for _, t := range s.sessions {
		if t.agent.graph == g && t.agent.agent.Name == in.Agent && in.Graph == g.Name() {
			return t, nil
		}
	}
	return nil, noSession
}

// decideErrorResult says why a decision was not taken.
func decideErrorResult(what, id string, dec troupeclient.Decision, err error, meta mcp.Meta) *mcp.CallToolResult {
	if troupe.ErrorType(err) == troupe.ErrBadDecision {
		return errorResult(fmt.Sprintf("%s %s did not take the decision on call %s: %s", what, id, dec.ID, appMessage(err)), meta)
	}
	return errorResult(fmt.Sprintf("could not decide call %s of %s %s: %v", dec.ID, what, id, err), meta)
}

// decisionsText words the decisions a decision took (itself, and those
// it remembered for other calls that waited).
func decisionsText(decided []troupeclient.Decision) string {
	parts := make([]string, 0, len(decided))
	for _, d := range decided {
		verb := "rejected"
		if d.Approve {
			verb = "approved"
		}
		parts = append(parts, "call "+d.ID+" "+verb)
	}
	return strings.Join(parts, "; ")
}

// waitingAnswer answers a call whose run (or session, when session is
// true) id waits for the decisions on list: with input requests, one
// elicitation per call, for a client that takes them (canRequestInput),
// which then calls again with the answers (see resume); otherwise with
// the list (waitingResult). turn is the session's turn that waits.
func (s *Server) waitingAnswer(req *mcp.CallToolRequest, id string, session bool, turn string, list []troupeclient.Approval, isError bool) *mcp.CallToolResult {
	if !canRequestInput(req.Session) {
		return waitingResult(id, session, list, isError)
	}
	st := inputState{V: 1, Run: id}
	meta := mcp.Meta{MetaRunID: id, MetaStatus: StatusWaitingForApproval}
	if session {
		st = inputState{V: 1, Session: id, Turn: turn}
		meta = mcp.Meta{MetaSessionID: id, MetaStatus: StatusWaitingForApproval}
	}
	reqs := mcp.InputRequestMap{}
	for _, a := range list {
		reqs[a.ID] = &mcp.ElicitParams{Mode: "form", Message: approvalQuestion(id, a), RequestedSchema: approvalSchema}
	}
	return &mcp.CallToolResult{Meta: meta, InputRequests: reqs, RequestState: st.encode()}
}

// inputState is the requestState of an answer with input requests: the
// run or session (and its turn) whose calls wait.
type inputState struct {
	V       int    `json:"v"`
	Run     string `json:"run,omitempty"`
	Session string `json:"session,omitempty"`
	Turn    string `json:"turn,omitempty"`
}

func (st inputState) encode() string {
	js, _ := json.Marshal(st)
	return base64.RawURLEncoding.EncodeToString(js)
}

func decodeInputState(s string) (inputState, error) {
	var st inputState
	js, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(js, &st)
	}
	if err == nil && (st.V != 1 || (st.Run == "") == (st.Session == "") || (st.Session != "" && st.Turn == "")) {
		err = errors.New("not a state this server gave")
	}
	return st, err
}

// resume serves a call that comes again with the answers to the input
// requests of its previous answer (its requestState set): it takes the
// answers as decisions, and waits on the run or session as the call did.
// agent and session, when set, are the tool called, whose run or session
// the state must name; troupe_run_approve takes any of this server's.
// The state is the client's to send, so it is checked as a run or
// session id a client gives is: it reaches only what this server's tools
// start.
func (s *Server) resume(ctx context.Context, req *mcp.CallToolRequest, agent *agentTool, session *sessionTool) *mcp.CallToolResult {
	st, err := decodeInputState(req.Params.RequestState)
	if err != nil {
		return errorResult(fmt.Sprintf("invalid requestState: %v", err), nil)
	}
	decisions := decisionsOf(req.Params.InputResponses)
	if st.Session != "" {
		t, err := s.sessionToolOf(ctx, st.Session)
		if err == nil && (agent != nil || session != nil && t != session) {
			err = fmt.Errorf("no session with id %q", st.Session)
		}
		if err != nil {
			return errorResult(err.Error(), nil)
		}
		return s.continueTurn(ctx, req, st.Session, st.Turn, decisions)
	}
	info, err := s.lookup(ctx, st.Run)
	if err == nil && (session != nil || agent != nil && (info.in.Graph != agent.graph.Name() || info.in.Agent != agent.agent.Name)) {
		err = fmt.Errorf("no run with id %q", st.Run)
	}
	if err != nil {
		return errorResult(err.Error(), nil)
	}
	id := info.id
	var key callKey
	if agent != nil {
		// The agent tool's call goes on: cancelling it cancels its run.
		scope, err := scopeOf(req.Params.Meta, sessionID(req))
		if err != nil {
			return errorResult(err.Error(), nil)
		}
		key = scope.callKey()
	}
	cl, wctx := s.calls.add(ctx, key)
	interrupted := false
	defer func() { s.calls.remove(cl, interrupted) }()
	if agent != nil {
		s.calls.started(cl, id)
	}
	p := s.progressFor(ctx, req)
	if !info.closed() {
		s.decideAll(ctx, p, id, decisions)
	}
	out := s.awaitRun(wctx, req, p, id, agent != nil)
	if out == nil {
		interrupted = agent != nil
		if s.calls.wasCancelled(cl) {
			return errorResult(fmt.Sprintf("call cancelled: run %s is being cancelled", id), mcp.Meta{MetaRunID: id, MetaErrorType: "cancelled"})
		}
		return interruptedResult(wctx, id)
	}
	return out
}

// awaitRun waits for run id for a call of req, following it into p and
// acting on its approvals, and answers: with the run's outcome (its
// status in _meta but for an agent tool), or with the calls that wait for
// a decision (isError for an agent tool, see waitingResult). It returns
// nil when ctx ended first.
func (s *Server) awaitRun(ctx context.Context, req *mcp.CallToolRequest, p *progress, id string, agentTool bool) *mcp.CallToolResult {
	w := s.wait(ctx, p, id, 0, s.watchApprovals(req, id, true))
	switch {
	case w.waiting != nil:
		s.log.Info("mcp: call answered with the calls that wait for approval", "tool", req.Params.Name, "run", id, "approvals", len(w.waiting))
		return s.waitingAnswer(req, id, false, "", w.waiting, agentTool)
	case !w.done:
		return nil
	}
	out := s.outcome(id, w.res, w.err)
	if !agentTool {
		status := "completed"
		if w.err != nil {
			status = "unknown"
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), eventsTimeout)
			if d, err := s.runs.Run(id).Describe(dctx); err == nil {
				status = statusName(d.Status)
			}
			cancel()
		}
		out.Meta[MetaStatus] = status
	}
	return out
}

// continueTurn takes decisions on calls of session id's turn, then waits
// for the turn as its session tool does. A turn that has ended is
// answered from its record.
func (s *Server) continueTurn(ctx context.Context, req *mcp.CallToolRequest, id, turn string, decisions []troupeclient.Decision) *mcp.CallToolResult {
	meta := mcp.Meta{MetaSessionID: id}
	info, err := s.runs.Session(id).Info(ctx)
	if err != nil {
		return errorResult(fmt.Sprintf("could not read session %s: %v", id, err), meta)
	}
	if info.Running != turn {
		for _, rec := range info.Recent {
			if rec.Turn == turn {
				return turnResult(id, rec)
			}
		}
		return errorResult(fmt.Sprintf("turn %d of session %s has ended, and its record is gone from the session's recent turns", turnNumber(turn), id), meta)
	}
	p := s.progressFor(ctx, req)
	waited, _ := s.runs.Approvals(ctx, id)
	s.decideAll(ctx, p, id, decisions)
	cl, wctx := s.calls.add(ctx, callKey{})
	defer s.calls.remove(cl, false)
	return s.awaitTurn(wctx, req, p, id, info, waited)
}

// decisionsOf are the decisions that the answers to input requests give,
// by approval id (the requests' ids).
func decisionsOf(answers mcp.InputResponseMap) []troupeclient.Decision {
	var out []troupeclient.Decision
	for id, r := range answers {
		if res, ok := r.(*mcp.ElicitResult); ok && res != nil {
			out = append(out, decisionOf(id, res))
		}
	}
	slices.SortFunc(out, func(a, b troupeclient.Decision) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// decideAll takes decisions on calls of root's tree, as the client gave
// them. One that cannot be taken (decided meanwhile, say) is skipped: the
// wait that follows shows what still waits.
func (s *Server) decideAll(ctx context.Context, p *progress, root string, decisions []troupeclient.Decision) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), decideTimeout)
	defer cancel()
	for _, d := range decisions {
		decided, err := s.runs.Decide(dctx, root, d)
		if err != nil {
			s.log.Info("mcp: decision not taken", "root", root, "approval", d.ID, "error", err)
			continue
		}
		p.send(decisionsText(decided), nil)
	}
}
