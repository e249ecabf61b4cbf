package server

// This file serves the session tools: for each agent tool X, X_session
// holds a conversation with X's agent in a durable session (a
// SessionWorkflow, created through the session manager as `troupe
// sessions new` creates one). A call without session_id creates the
// session; a call with one sends the message to it, from any connection.
// Either way the call waits for the message's turn, following its events
// for progress, and answers with the reply and the session's id.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.temporal.io/api/serviceerror"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/runtime"
)

// SessionToolSuffix ends the name of an agent tool's session tool.
const SessionToolSuffix = "_session"

// sessionNameLen bounds the part of the first message in a new session's
// name.
const sessionNameLen = 60

// sessionTool is the session tool of an agent tool.
type sessionTool struct {
	name  string
	agent *agentTool
	// start: the agent's exposure takes more than a plain input, so the
	// tool takes its arguments (start) when it creates a session, for the
	// run variables they set.
	start bool
	tool  *mcp.Tool
}

// sessionArgs are a session tool's arguments.
type sessionArgs struct {
	Message   string          `json:"message"`
	SessionID *string         `json:"session_id"`
	Start     json.RawMessage `json:"start"`
}

// sessionReply is a session tool's structured answer.
type sessionReply struct {
	SessionID string          `json:"session_id"`
	Turn      int             `json:"turn"`
	Agent     string          `json:"agent"`
	Reply     json.RawMessage `json:"reply"`
}

func newSessionTool(at *agentTool) (*sessionTool, error) {
	name := at.name + SessionToolSuffix
	g, a := at.graph, at.agent
	var agentIn map[string]any
	if err := json.Unmarshal(at.tool.InputSchema.(json.RawMessage), &agentIn); err != nil {
		return nil, fmt.Errorf("server: tool %s: %w", name, err)
	}
	props, _ := agentIn["properties"].(map[string]any)
	_, plain := props["input"]
	plain = plain && len(props) == 1
	st := &sessionTool{name: name, agent: at, start: !plain}

	in := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"message": map[string]any{"type": "string", "minLength": 1,
				"description": "What you say to the agent: the next message of the conversation."},
			"session_id": map[string]any{"type": "string",
				"description": "The session to continue: the session_id of an earlier answer of this tool (from any connection). Leave it out to start a new session."},
		},
		"required":             []string{"message"},
		"additionalProperties": false,
	}
	if st.start {
		start, err := embed(in, agentIn)
		if err != nil {
			return nil, fmt.Errorf("server: tool %s: start: %w", name, err)
		}
		start["description"] = fmt.Sprintf("With no session_id only: the arguments of %s, which set up the new session (its run variables).", at.name)
		in["properties"].(map[string]any)["start"] = start
	}

	replySchema := outputSchema(g, a)
	if replySchema == nil {
		replySchema = json.RawMessage(`{"type":"object"}`)
	}
	var replyDoc map[string]any
	if err := json.Unmarshal(replySchema, &replyDoc); err != nil {
		return nil, fmt.Errorf("server: tool %s: output schema: %w", name, err)
	}
	out := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"session_id": map[string]any{"type": "string",
				"description": "The session's id: pass it as session_id to send the next message."},
			"turn": map[string]any{"type": "integer", "minimum": 1,
				"description": "The number of this message's turn in the session: 1 for the message that started it."},
			"agent": map[string]any{"type": "string",
				"description": "The agent that answered; it answers the next message too."},
		},
		"required":             []string{"session_id", "turn", "agent", "reply"},
		"additionalProperties": false,
	}
	reply, err := embed(out, replyDoc)
	if err != nil {
		return nil, fmt.Errorf("server: tool %s: reply: %w", name, err)
	}
	if _, ok := reply["description"]; !ok {
		reply["description"] = fmt.Sprintf("The answer, as %s answers: the agent's output document, or {\"output\": text} for an agent without an output type.", at.name)
	}
	out["properties"].(map[string]any)["reply"] = reply
	inJSON, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("server: tool %s: %w", name, err)
	}
	outJSON, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("server: tool %s: %w", name, err)
	}

	desc := fmt.Sprintf("Talks with the %s agent of the %s graph (as %s does) in a durable session that keeps the conversation: "+
		"without session_id it starts a new session; with the session_id of an earlier answer it sends the message to that session, "+
		"whose agent answers with the conversation so far. A session waits between messages at no cost; continue it by id from any connection.",
		a.Name, g.Name(), at.name)
	if st.start {
		desc += fmt.Sprintf(" A new session takes %s's arguments as start.", at.name)
	}
	st.tool = &mcp.Tool{
		Name:         name,
		Title:        g.Name() + ": " + a.Name + " (session)",
		Description:  desc,
		InputSchema:  json.RawMessage(inJSON),
		OutputSchema: json.RawMessage(outJSON),
		Annotations: &mcp.ToolAnnotations{
			Title: g.Name() + ": " + a.Name + " (session)",
			// A call adds a turn to a conversation: neither read-only
			// nor idempotent (a retry of the same request is, see the
			// package doc).
			OpenWorldHint: new(true),
		},
	}
	return st, nil
}

// embed returns schema for use inside root: without its own $schema and
// $id, and with its $defs moved to root's, where its "#/$defs/..."
// references find them. Two definitions of one name that differ fail.
func embed(root, schema map[string]any) (map[string]any, error) {
	out := map[string]any{}
	for k, v := range schema {
		switch k {
		case "$schema", "$id":
		case "$defs":
			defs, _ := v.(map[string]any)
			rootDefs, _ := root["$defs"].(map[string]any)
			if rootDefs == nil {
				rootDefs = map[string]any{}
			}
			for name, d := range defs {
				if old, taken := rootDefs[name]; taken {
					a, _ := json.Marshal(old)
					b, _ := json.Marshal(d)
					if string(a) != string(b) {
						return nil, fmt.Errorf("two schemas define %q", name)
					}
				}
				rootDefs[name] = d
			}
			if len(rootDefs) > 0 {
				root["$defs"] = rootDefs
			}
		default:
			out[k] = v
		}
	}
	return out, nil
}

// callSession serves the calls of a session tool.
func (s *Server) callSession(t *sessionTool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if req.Params.RequestState != "" {
			// The client answered the input requests of its last answer
			// (the calls that waited): the turn goes on.
			return s.resume(ctx, req, nil, t), nil
		}
		args, err := t.args(req.Params.Arguments)
		if err != nil {
			return errorResult(fmt.Sprintf("invalid arguments for %s: %v", t.name, err), nil), nil
		}
		scope, err := scopeOf(req.Params.Meta, sessionID(req))
		if err != nil {
			return errorResult(err.Error(), nil), nil
		}
		// Registered under its key so that a cancellation finds it (and
		// one that came first keeps it from sending anything), but with no
		// workflow to cancel: a cancelled call stops waiting, and the
		// session and its turn go on.
		cl, wctx := s.calls.add(ctx, scope.callKey())
		defer s.calls.remove(cl, false)
		if ctx.Err() != nil || s.calls.wasCancelled(cl) {
			return errorResult("call cancelled before its message was sent; nothing was sent", mcp.Meta{MetaErrorType: "cancelled"}), nil
		}
		if res := s.unserved(ctx); res != nil {
			return res, nil
		}

		var id string
		created := false
		if args.SessionID != nil {
			id = *args.SessionID
			if err := s.checkSession(ctx, t, id); err != nil {
				return errorResult(err.Error(), nil), nil
			}
		} else {
			var refused *mcp.CallToolResult
			if id, created, refused, err = s.newSession(ctx, t, args, scope); refused != nil {
				return refused, nil
			} else if err != nil {
				return errorResult(err.Error(), nil), nil
			}
		}
		meta := mcp.Meta{MetaSessionID: id}
		if !created {
			info, err := s.runs.Session(id).Info(ctx)
			switch {
			case err != nil && ctx.Err() != nil:
				return sessionInterrupted(wctx, id, s.calls.wasCancelled(cl), false), nil
			case err != nil:
				return errorResult(fmt.Sprintf("could not read session %s: %v", id, err), meta), nil
			case info.Status == runtime.SessionStopped:
				return errorResult(fmt.Sprintf("session %s is stopped: call %s without session_id to start a new one", id, t.name),
					mcp.Meta{MetaSessionID: id, MetaErrorType: troupe.ErrSessionStopped}), nil
			case info.Status == runtime.SessionPaused:
				return errorResult(fmt.Sprintf("session %s is paused: resume it (troupe sessions resume %s), then send the message again", id, id), meta), nil
			}
		}

		s.log.Info("mcp: session call", "tool", t.name, "session", id, "created", created, "mcp_session", sessionID(req),
			"request", scope.Request, "idempotency_key", scope.Key != "")
		p := s.progressFor(ctx, req)
		if created {
			p.send("session "+id+" started", mcp.Meta{MetaSessionID: id})
		} else {
			p.send("session "+id+" continued", mcp.Meta{MetaSessionID: id})
		}
		// The turn's calls that wait for approval are asked about, or end
		// the wait: the turn goes on, and troupe_run_approve decides them.
		w := s.watchApprovals(req, id, true)
		actx, stopAsk := context.WithCancelCause(wctx)
		defer stopAsk(nil)
		var waiting []troupeclient.Approval
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			w.run(actx, func(list []troupeclient.Approval) { waiting = list; stopAsk(errAwaitingApproval) })
		}()
		follow := func(e troupeclient.Event) {
			if actx.Err() != nil {
				return // nobody waits for the answer any more
			}
			w.event(e)
			if p == nil {
				return
			}
			if e.WorkflowID != id {
				p.event(e) // The turn's agents, their replies as they stream.
				return
			}
			if msg, ok := sessionEventMessage(id, e); ok {
				p.send(msg, nil)
			}
		}
		opts := []troupeclient.SendOption{troupeclient.Following(troupeclient.WithDeltas())}
		if mid := messageID(t.name, id, args.Message, scope); mid != "" {
			opts = append(opts, troupeclient.WithMessageID(mid))
		}
		rec, err := s.runs.Session(id).Ask(actx, args.Message, follow, opts...)
		stopAsk(nil)
		<-watched
		if err != nil {
			if waiting != nil && wctx.Err() == nil {
				p.stop()
				p.settle()
				s.log.Info("mcp: session call answered with the calls that wait for approval", "tool", t.name, "session", id, "approvals", len(waiting))
				var turn string
				if info, err := s.runs.Session(id).Info(ctx); err == nil {
					turn = info.Running
				}
				return s.waitingAnswer(req, id, true, turn, waiting, true), nil
			}
			if wctx.Err() != nil {
				p.stop()
				return sessionInterrupted(wctx, id, s.calls.wasCancelled(cl), true), nil
			}
			return sendErrorResult(t, id, err), nil
		}
		p.settle()
		return turnResult(id, rec), nil
	}
}

// args decodes and checks a session tool's arguments.
func (t *sessionTool) args(raw json.RawMessage) (sessionArgs, error) {
	var args sessionArgs
	if err := decodeArgs(raw, &args); err != nil {
		return args, err
	}
	switch {
	case strings.TrimSpace(args.Message) == "":
		return args, errors.New("message is required and must not be empty")
	case args.SessionID != nil && *args.SessionID == "":
		return args, errors.New("session_id must not be empty: leave it out to start a new session")
	case args.Start != nil && !t.start:
		return args, errors.New(`json: unknown field "start"`)
	case args.Start != nil && args.SessionID != nil:
		return args, errors.New("start sets up a new session: leave it out with session_id")
	}
	return args, nil
}

// newSession creates the session of a call without session_id, or finds
// the one that the same call created before (a retry: the same derived
// id). created is false for the latter. refused, when set, is the call's
// answer: Config.PrepareVars refused the session's variables, or the
// call was cancelled while it readied them.
func (s *Server) newSession(ctx context.Context, t *sessionTool, args sessionArgs, scope requestScope) (id string, created bool, refused *mcp.CallToolResult, err error) {
	// The run variables come from the exposure, as for a run; a plain
	// exposure sees the message as its input.
	start := args.Start
	if !t.start {
		start, _ = json.Marshal(map[string]string{"input": args.Message})
	} else if start == nil {
		start = json.RawMessage("{}")
	}
	run, err := t.agent.agent.Expose.Run(start)
	if err != nil {
		var ae *agents.ToolArgsError
		if errors.As(err, &ae) {
			return "", false, nil, fmt.Errorf("invalid arguments for %s: start: %v", t.name, ae.Err)
		}
		return "", false, nil, fmt.Errorf("%s cannot start a session with these arguments: %v", t.name, err)
	}
	g := t.agent.graph
	id = sessionWorkflowID(g.Name(), t.name, args.Message, args.Start, scope)
	// Neither does the creation depend on the request's context: a
	// cancellation cannot leave it half done.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), startTimeout)
	defer cancel()
	derived := scope != (requestScope{})
	if derived {
		if err := s.checkSession(cctx, t, id); err == nil {
			return id, false, nil, nil
		}
	}
	// Readied under the request's context: a cancellation stops it, and
	// nothing is created.
	vars, err := s.prepareVars(ctx, g.Name(), id, run.Vars)
	if err != nil {
		if ctx.Err() != nil {
			return "", false, errorResult("call cancelled before its message was sent; nothing was sent", mcp.Meta{MetaErrorType: "cancelled"}), nil
		}
		s.log.Warn("mcp: prepare session", "tool", t.name, "session", id, "error", err)
		return "", false, refusedVars(t.name+" cannot start a session", err), nil
	}
	// The creation's own time starts now, whatever readying took.
	cctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), startTimeout)
	defer cancel()
	in := troupeclient.SessionInput{Graph: g.Name(), Agent: t.agent.agent.Name, Vars: vars,
		Name: t.agent.name + ": " + clip(args.Message, sessionNameLen)}
	if _, _, err := s.runs.CreateSession(cctx, in, troupeclient.WithID(id)); err != nil {
		// Another attempt of the same call may have created it since.
		if derived && s.checkSession(cctx, t, id) == nil {
			return id, false, nil, nil
		}
		s.log.Warn("mcp: create session", "tool", t.name, "session", id, "error", err)
		if typ := troupe.ErrorType(err); typ != "" {
			return "", false, nil, fmt.Errorf("could not start a session of %s: %s: %s", t.agent.name, typ, appMessage(err))
		}
		return "", false, nil, fmt.Errorf("could not start a session of %s: %v", t.agent.name, err)
	}
	return id, true, nil, nil
}

// checkSession checks that id is a session that t may continue: one that
// a session tool of a server like this one created ("mcp-session-<graph>-
// <32 hex digits>" of a served graph, at an exposed agent), and of t's
// graph and agent. Any other id is "no session with id X", as an unknown
// one is: a client reaches only the conversations such tools hold, never
// one of `troupe sessions` or of a graph not served. The errors are for
// the client to read.
func (s *Server) checkSession(ctx context.Context, t *sessionTool, id string) error {
	noSession := fmt.Errorf("no session with id %q: call %s without session_id to start one", id, t.name)
	g := s.graphOfSessionID(id)
	if g == nil {
		return noSession
	}
	in, err := s.runs.Session(id).Input(ctx)
	if err != nil {
		if errors.Is(err, troupeclient.ErrNoSession) {
			return noSession
		}
		return fmt.Errorf("could not look session %q up: %w", id, err)
	}
	if in.Graph != g.Name() {
		return noSession
	}
	a, err := g.Agent(in.Agent)
	if in.Agent == "" || err != nil || a.Expose == nil {
		return noSession
	}
	if g != t.agent.graph || a != t.agent.agent {
		other := g.ExposedName(a) + SessionToolSuffix
		return fmt.Errorf("session %q is a conversation with agent %s of graph %s, not with %s of %s: continue it with %s, or call %s without session_id to start a session of %s",
			id, a.Name, g.Name(), t.agent.agent.Name, t.agent.graph.Name(), other, t.name, t.agent.agent.Name)
	}
	return nil
}

// turnResult is a session tool's answer for a turn that ended.
func turnResult(id string, rec troupeclient.TurnRecord) *mcp.CallToolResult {
	n := turnNumber(rec.Turn)
	meta := mcp.Meta{MetaSessionID: id}
	switch rec.Outcome {
	case runtime.TurnAnswered:
		doc, _ := json.Marshal(sessionReply{SessionID: id, Turn: n, Agent: rec.Agent, Reply: structured(rec.Output)})
		return &mcp.CallToolResult{
			Meta:              meta,
			Content:           []mcp.Content{&mcp.TextContent{Text: pretty(doc)}},
			StructuredContent: json.RawMessage(doc),
		}
	case runtime.TurnFailed:
		if rec.ErrorType != "" {
			meta[MetaErrorType] = rec.ErrorType
			return errorResult(fmt.Sprintf("turn %d of session %s failed: %s: %s; the session goes on without it: send the next message", n, id, rec.ErrorType, rec.Error), meta)
		}
		return errorResult(fmt.Sprintf("turn %d of session %s failed: %s; the session goes on without it: send the next message", n, id, rec.Error), meta)
	case runtime.TurnRolledBack:
		return errorResult(fmt.Sprintf("turn %d of session %s was rolled back by a later message (the session's rollback policy): the conversation is as it was before it", n, id), meta)
	}
	return errorResult(fmt.Sprintf("turn %d of session %s ended %s", n, id, rec.Outcome), meta)
}

// sendErrorResult says why a message could not be sent, or its turn's
// end could not be read.
func sendErrorResult(t *sessionTool, id string, err error) *mcp.CallToolResult {
	meta := mcp.Meta{MetaSessionID: id}
	var nf *serviceerror.NotFound
	switch typ := troupe.ErrorType(err); {
	case typ == troupe.ErrSessionStopped:
		meta[MetaErrorType] = typ
		return errorResult(fmt.Sprintf("session %s is stopped: call %s without session_id to start a new one", id, t.name), meta)
	case typ == troupe.ErrSessionBusy:
		meta[MetaErrorType] = typ
		return errorResult(fmt.Sprintf("session %s is busy with a turn and its policy refuses messages meanwhile: send the message again once it has answered", id), meta)
	case typ != "":
		meta[MetaErrorType] = typ
		return errorResult(fmt.Sprintf("session %s refused the message: %s: %s", id, typ, appMessage(err)), meta)
	case errors.As(err, &nf):
		return errorResult(fmt.Sprintf("session %s has ended: call %s without session_id to start a new one", id, t.name), meta)
	}
	return errorResult(fmt.Sprintf("could not send the message to session %s: %v", id, err), meta)
}

// sessionInterrupted answers a call whose wait ended before its turn: the
// answer may not reach anyone, but a client shut out by the server learns
// where its conversation is.
func sessionInterrupted(ctx context.Context, id string, cancelled, sent bool) *mcp.CallToolResult {
	meta := mcp.Meta{MetaSessionID: id}
	what := "the message may not have reached it"
	if sent {
		what = "if the session took the message, its turn goes on, and the answer joins the conversation"
	}
	if cancelled {
		meta[MetaErrorType] = "cancelled"
		return errorResult(fmt.Sprintf("call cancelled: stopped waiting for session %s, which goes on (%s); continue it with session_id %q", id, what, id), meta)
	}
	cause := context.Cause(ctx)
	if cause == nil || errors.Is(cause, context.Canceled) {
		cause = errDisconnected
	}
	return errorResult(fmt.Sprintf("%v before session %s answered; the session goes on (%s): continue it with session_id %q", cause, id, what, id), meta)
}

// sessionEventMessage words an event of session id's turn for a person
// following it: the session's own events as the turn's steps, its agents'
// as in a run.
func sessionEventMessage(id string, e troupe.Event) (string, bool) {
	if e.WorkflowID != id {
		return eventMessage(e)
	}
	switch e.Kind {
	case troupe.EventSessionStarted, troupe.EventContinued:
		return "", false
	case troupe.EventMessage:
		return fmt.Sprintf("turn %d: message taken", e.Turn), true
	case troupe.EventFinal:
		return fmt.Sprintf("turn %d answered by %s", e.Turn, e.Agent), true
	case troupe.EventFailed:
		return fmt.Sprintf("turn %d failed: %s", e.Turn, short(e.Detail)), true
	case troupe.EventTurnRolledBack:
		return fmt.Sprintf("turn %d rolled back", e.Turn), true
	case troupe.EventMessageRefused:
		return "message refused: " + short(e.Detail), true
	case troupe.EventSessionCommand:
		return "session: " + short(e.Detail), true
	case troupe.EventSessionStopped:
		return "session stopped", true
	}
	return eventMessage(e)
}

// turnNumber is the number of turn id "t<n>".
func turnNumber(id string) int {
	var n int
	_, _ = fmt.Sscanf(id, "t%d", &n)
	return n
}
