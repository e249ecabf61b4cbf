package client

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/workflows"
)

// The types of sessions, from the workflows and runtime packages.
type (
	// SessionInput is what a session starts with: graph, agent, name,
	// input policy, vars.
	SessionInput = workflows.SessionInput
	// SessionEntry is a session as the session manager lists it.
	SessionEntry = workflows.SessionEntry
	// SessionInfo is where a session stands, as it says itself.
	SessionInfo = workflows.SessionInfo
	// SendResult is a session's answer to a message: the turn's id, and
	// its record when the caller waited.
	SendResult = workflows.SendResult
	// TurnRecord is a turn that ended: its outcome, answer, usage.
	TurnRecord = runtime.TurnRecord
	// SessionCommand is a lifecycle command: pause, resume, stop,
	// rename, policy.
	SessionCommand = workflows.SessionCommand
)

// CreateSession creates a session of in through the session manager
// (started on the client's task queue if it is not running) and returns
// its handle and its entry. WithID gives the session's id; without it the
// manager makes one, "session-<graph>-<8 hex>".
func (c *Client) CreateSession(ctx context.Context, in SessionInput, opts ...StartOption) (*Session, SessionEntry, error) {
	var o startOptions
	for _, opt := range opts {
		opt(&o)
	}
	start := c.cfg.Temporal.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID: workflows.SessionManagerID, TaskQueue: c.cfg.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		StaticSummary:            "the registry of sessions",
	}, workflows.SessionManagerWorkflowName, workflows.ManagerInput{})
	h, err := c.cfg.Temporal.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{UpdateName: workflows.CreateSessionUpdate, WaitForStage: client.WorkflowUpdateStageCompleted,
			Args: []any{workflows.CreateSessionInput{ID: o.id, Session: in}}},
	})
	if err != nil {
		return nil, SessionEntry{}, fmt.Errorf("create session of %s: %w", in.Graph, err)
	}
	var e SessionEntry
	if err := h.Get(ctx, &e); err != nil {
		return nil, SessionEntry{}, fmt.Errorf("create session of %s: %w", in.Graph, err)
	}
	return c.Session(e.ID), e, nil
}

// Sessions lists the sessions the session manager holds, stopped ones
// included, oldest first; none when no session was ever created.
func (c *Client) Sessions(ctx context.Context) ([]SessionEntry, error) {
	v, err := c.cfg.Temporal.QueryWorkflow(ctx, workflows.SessionManagerID, "", workflows.SessionsQuery)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	var es []SessionEntry
	return es, v.Get(&es)
}

// Session returns the handle of session id. It does not check that the
// session exists; Info does.
func (c *Client) Session(id string) *Session { return &Session{c: c, id: id} }

// Session is the handle of one session.
type Session struct {
	c  *Client
	id string
}

// ID returns the session's id (its workflow id).
func (s *Session) ID() string { return s.id }

// Send sends the session a message. Without wait it returns once the
// session has queued it, with the turn's id and the cursor to follow it
// from; with wait, once the turn has ended, with its record too. A
// message the session refuses fails with an error whose
// workflows.ErrorType is workflows.ErrSessionBusy (the reject policy),
// workflows.ErrSessionStopped or workflows.ErrBadCommand.
func (s *Session) Send(ctx context.Context, message string, wait bool) (SendResult, error) {
	h, err := s.c.cfg.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: s.id, UpdateName: workflows.SendUpdate,
		WaitForStage: client.WorkflowUpdateStageCompleted, Args: []any{workflows.SendInput{Message: message, Wait: wait}}})
	if err != nil {
		return SendResult{}, fmt.Errorf("send to session %s: %w", s.id, err)
	}
	var res SendResult
	if err := h.Get(ctx, &res); err != nil {
		return SendResult{}, fmt.Errorf("send to session %s: %w", s.id, err)
	}
	return res, nil
}

// Ask sends the session a message and waits for its turn to end, calling
// fn with each event of the session and of the turn's agents from the
// message on (fn may be nil), and returns the turn's record. WithDeltas
// has fn get the reply's text as it is generated, too.
func (s *Session) Ask(ctx context.Context, message string, fn func(Event), opts ...FollowOption) (TurnRecord, error) {
	info, err := s.Info(ctx)
	if err != nil {
		return TurnRecord{}, err
	}
	if fn == nil {
		res, err := s.Send(ctx, message, true)
		if err != nil {
			return TurnRecord{}, err
		}
		return *res.Record, nil
	}
	fctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.FollowFrom(fctx, Cursor{s.id: info.NextEvent - 1}, fn, opts...) }()
	res, err := s.Send(ctx, message, true)
	stop()
	<-done
	if err != nil {
		return TurnRecord{}, err
	}
	return *res.Record, nil
}

// Info returns where the session stands, as it says itself.
func (s *Session) Info(ctx context.Context) (SessionInfo, error) {
	v, err := s.c.cfg.Temporal.QueryWorkflow(ctx, s.id, "", workflows.SessionQuery)
	if err != nil {
		return SessionInfo{}, fmt.Errorf("session %s: %w", s.id, err)
	}
	var info SessionInfo
	return info, v.Get(&info)
}

// Command runs a lifecycle command on the session, through the session
// manager (the one door for the lifecycle), and returns its entry.
func (s *Session) Command(ctx context.Context, cmd SessionCommand) (SessionEntry, error) {
	h, err := s.c.cfg.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: workflows.SessionManagerID, UpdateName: workflows.LifecycleUpdate,
		WaitForStage: client.WorkflowUpdateStageCompleted, Args: []any{workflows.LifecycleInput{ID: s.id, Command: cmd}}})
	if err != nil {
		return SessionEntry{}, fmt.Errorf("%s session %s: %w", cmd.Op, s.id, err)
	}
	var e SessionEntry
	if err := h.Get(ctx, &e); err != nil {
		return SessionEntry{}, fmt.Errorf("%s session %s: %w", cmd.Op, s.id, err)
	}
	return e, nil
}

// FollowFrom calls fn with each event of the session and of the agents of
// its turns after cursor, until ctx is done (see Run.Follow; WithDeltas
// adds the turns' text as it is generated).
func (s *Session) FollowFrom(ctx context.Context, cursor Cursor, fn func(Event), opts ...FollowOption) error {
	return s.c.Run(s.id).FollowFrom(ctx, cursor, fn, opts...)
}

// Result waits for the session to end (after a stop) and returns where it
// stood.
func (s *Session) Result(ctx context.Context) (SessionInfo, error) {
	var info SessionInfo
	err := s.c.cfg.Temporal.GetWorkflow(ctx, s.id, "").Get(ctx, &info)
	return info, err
}
