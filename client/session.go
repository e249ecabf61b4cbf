package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/runtime"
)

// The types of sessions, from the vocabulary and the runtime package.
type (
	// SessionInput is what a session starts with: graph, agent, name,
	// input policy, vars.
	SessionInput = troupe.SessionInput
	// SessionEntry is a session as the session manager lists it.
	SessionEntry = troupe.SessionEntry
	// SessionsPageInput asks for one page of sessions: limit, after,
	// status and graph.
	SessionsPageInput = troupe.SessionsPageInput
	// SessionsPage is one page of sessions and the cursor of the next.
	SessionsPage = troupe.SessionsPage
	// SessionInfo is where a session stands, as it says itself.
	SessionInfo = troupe.SessionInfo
	// SendResult is a session's answer to a message: the turn's id, and
	// its record when the caller waited.
	SendResult = troupe.SendResult
	// TurnRecord is a turn that ended: its outcome, answer, usage.
	TurnRecord = runtime.TurnRecord
	// SessionCommand is a lifecycle command: pause, resume, stop,
	// rename, policy, switch (SetBudget sends the budget command).
	SessionCommand = troupe.SessionCommand
)

// CreateSession creates a session of in through the session manager of
// the client's task queue (troupe.SessionManagerIDFor; started there if
// it is not running), which starts the session on that queue, and returns
// its handle and its entry. WithID gives the session's id; without it the
// manager makes one, "session-<graph>-<8 hex>".
func (c *Client) CreateSession(ctx context.Context, in SessionInput, opts ...StartOption) (*Session, SessionEntry, error) {
	var o startOptions
	for _, opt := range opts {
		opt(&o)
	}
	var e SessionEntry
	update := uuid.NewString()
	err := untilTaken(ctx, func() error {
		// An attempt the server holds longer than a create takes, in a
		// burst, is sent again (the same update): the server's long poll
		// would hold it a minute.
		ctx, cancel := context.WithTimeout(ctx, createPatience)
		defer cancel()
		// A start operation is good for one call.
		start := c.cfg.Temporal.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
			ID: troupe.SessionManagerIDFor(c.cfg.TaskQueue), TaskQueue: c.cfg.TaskQueue,
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
			StaticSummary:            "the registry of sessions",
		}, troupe.SessionManagerWorkflowName, troupe.ManagerInput{})
		h, err := c.cfg.Temporal.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
			StartWorkflowOperation: start,
			UpdateOptions: client.UpdateWorkflowOptions{UpdateID: update, UpdateName: troupe.CreateSessionUpdate, WaitForStage: client.WorkflowUpdateStageCompleted,
				Args: []any{troupe.CreateSessionInput{ID: o.id, Session: in}}},
		})
		if err != nil {
			return err
		}
		return h.Get(ctx, &e)
	})
	if err != nil {
		return nil, SessionEntry{}, fmt.Errorf("create session of %s: %w", in.Graph, err)
	}
	return c.Session(e.ID), e, nil
}

// Sessions lists the sessions the session manager of the client's task
// queue holds, stopped ones included, oldest first; none when no session
// was ever created there. It reads them page by page (ListSessions), so
// no one answer holds the whole registry.
func (c *Client) Sessions(ctx context.Context) ([]SessionEntry, error) {
	var all []SessionEntry
	in := SessionsPageInput{Limit: troupe.MaxSessionsPage}
	for {
		page, err := c.ListSessions(ctx, in)
		if err != nil {
			return nil, err
		}
		all = append(all, page.Sessions...)
		if page.Next == "" {
			return all, nil
		}
		in.After = page.Next
	}
}

// ListSessions returns one page of the sessions the session manager of
// the client's task queue holds, oldest first: at most in.Limit of them
// (troupe.DefaultSessionsPage when 0, troupe.MaxSessionsPage at most),
// after the session in.After (the previous page's Next), of status
// in.Status and graph in.Graph when set. An empty page when no session
// was ever created there. A manager on a worker from before pages lists
// them all and the client pages them itself.
func (c *Client) ListSessions(ctx context.Context, in SessionsPageInput) (SessionsPage, error) {
	if in.Limit < 0 {
		return SessionsPage{}, fmt.Errorf("list sessions: %w", troupe.NonRetryable(troupe.ErrBadCommand, "a limit of %d: it must not be negative", in.Limit))
	}
	id := troupe.SessionManagerIDFor(c.cfg.TaskQueue)
	v, err := c.query(ctx, id, troupe.SessionsPageQuery, in)
	for wait := 10 * time.Millisecond; err != nil && strings.Contains(err.Error(), troupe.RegistryLoading) && wait < 5*time.Second; wait *= 2 {
		// The manager reads its registry back after it continued as new.
		select {
		case <-ctx.Done():
			return SessionsPage{}, fmt.Errorf("list sessions: %w", err)
		case <-time.After(wait):
		}
		v, err = c.query(ctx, id, troupe.SessionsPageQuery, in)
	}
	if err != nil && strings.Contains(err.Error(), "unknown queryType") {
		return c.listAllSessions(ctx, id, in)
	}
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return SessionsPage{Sessions: []SessionEntry{}}, nil
	}
	if err != nil {
		return SessionsPage{}, fmt.Errorf("list sessions: %w", err)
	}
	var page SessionsPage
	return page, v.Get(&page)
}

// listAllSessions pages the whole list of a manager from before pages.
func (c *Client) listAllSessions(ctx context.Context, id string, in SessionsPageInput) (SessionsPage, error) {
	v, err := c.query(ctx, id, troupe.SessionsQuery)
	if err != nil {
		return SessionsPage{}, fmt.Errorf("list sessions: %w", err)
	}
	var es []SessionEntry
	if err := v.Get(&es); err != nil {
		return SessionsPage{}, fmt.Errorf("list sessions: %w", err)
	}
	page, err := troupe.PageSessions(es, in)
	if err != nil {
		return SessionsPage{}, fmt.Errorf("list sessions: %w", err)
	}
	return page, nil
}

// createPatience is how long one attempt of CreateSession waits for the
// manager before it sends the same create again: a create takes well
// under a second, unless the server queued it behind a burst.
const createPatience = 10 * time.Second

// untilTaken calls send, an update of the session manager, again while
// the manager turns it away as it continues as new
// (troupe.ErrManagerContinuing: nothing was done), or while the server
// kept it waiting past its long poll (a burst of updates queues them),
// until ctx ends. send sends the same update id each time, so that one
// the manager took is answered, not done again.
func untilTaken(ctx context.Context, send func() error) error {
	return resend(ctx, send, takenLater)
}

// takenLater reports whether an update of the session manager that failed
// with err may be taken if sent again (the same update id: one the manager
// took is answered, not done again): the manager turned it away as it
// continues as new, or the server kept it waiting past the call's
// patience, or timed it out or turned it away itself while busy (an
// update-with-start's update fails with the server's DeadlineExceeded or
// ResourceExhausted, say too many updates in flight, which the SDK does
// not retry inside a multi-operation).
func takenLater(err error) bool {
	var waited *client.WorkflowUpdateServiceTimeoutOrCanceledError
	var late *serviceerror.DeadlineExceeded
	var busy *serviceerror.ResourceExhausted
	return troupe.ErrorType(err) == troupe.ErrManagerContinuing || errors.As(err, &waited) || errors.Is(err, context.DeadlineExceeded) ||
		errors.As(err, &late) || errors.As(err, &busy)
}

// whileContinuing calls send, an update of the session manager, again
// only while the manager turns it away as it continues as new: an update
// no worker takes in time is its caller's to handle (a removal signals
// instead).
func whileContinuing(ctx context.Context, send func() error) error {
	return resend(ctx, send, func(err error) bool { return troupe.ErrorType(err) == troupe.ErrManagerContinuing })
}

// resend calls send until it fails in a way again does not take, or ctx
// ends, waiting a little longer each time.
func resend(ctx context.Context, send func() error, again func(error) bool) error {
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		err := send()
		if !again(err) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
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

// SendOption changes how Send and Ask send a message.
type SendOption func(*sendOptions)

type sendOptions struct {
	id     string
	follow []FollowOption
}

// Following has Ask follow the turn with opts (WithDeltas, say); Send
// ignores it.
func Following(opts ...FollowOption) SendOption {
	return func(o *sendOptions) { o.follow = append(o.follow, opts...) }
}

// WithMessageID sends the message under id (its update's id) instead of a
// fresh one. The session's run takes one message per id: a message sent
// again under the id of one it took — a retry after an answer was lost —
// is not queued again, and gets the answer of the first (Temporal keeps
// that answer as long as the session's run, until it continues as new).
// Derive the id from what makes a retry the same request.
func WithMessageID(id string) SendOption {
	return func(o *sendOptions) { o.id = id }
}

// Send sends the session a message. Without wait it returns once the
// session has queued it, with the turn's id and the cursor to follow it
// from; with wait, once the turn has ended, with its record too. A
// message the session refuses fails with an error whose
// troupe.ErrorType is troupe.ErrSessionBusy (the reject policy),
// troupe.ErrSessionStopped, troupe.ErrBudgetExceeded (the session's
// budget is spent: SetBudget raises it) or troupe.ErrBadCommand. A
// message over troupe.MessageInline goes by reference (Config.Inputs); a
// session whose worker cannot take one refuses it, troupe.ErrWorkerTooOld;
// one over troupe.MessageLimit fails with troupe.ErrPayloadTooLarge before
// anything is sent.
func (s *Session) Send(ctx context.Context, message string, wait bool, opts ...SendOption) (SendResult, error) {
	var o sendOptions
	for _, opt := range opts {
		opt(&o)
	}
	in, update := troupe.SendInput{Message: message, Wait: wait}, troupe.SendUpdate
	if len(message) > troupe.MessageInline {
		// Too big to travel inside Temporal: stored, and sent by
		// reference by an update a session on an older worker rejects.
		ref, err := s.c.storeMessage(ctx, s.id, "the message", message)
		if err != nil {
			return SendResult{}, err
		}
		in, update = troupe.SendInput{Ref: ref, Wait: wait}, troupe.SendRefUpdate
	}
	h, err := s.c.cfg.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{UpdateID: o.id, WorkflowID: s.id, UpdateName: update,
		WaitForStage: client.WorkflowUpdateStageCompleted, Args: []any{in}})
	var res SendResult
	if err == nil {
		err = h.Get(ctx, &res)
	}
	if unknownUpdate(err, troupe.SendRefUpdate) {
		return SendResult{}, fmt.Errorf("send to session %s: %w", s.id, troupe.WorkerTooOld(s.c.cfg.TaskQueue, s.id, len(message)))
	}
	if err != nil {
		return SendResult{}, fmt.Errorf("send to session %s: %w", s.id, err)
	}
	// The session continued as new before the turn ended: wait on its
	// next run.
	for wait && res.Continued && res.Record == nil {
		h, err := s.c.cfg.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: s.id, UpdateName: troupe.AwaitUpdate,
			WaitForStage: client.WorkflowUpdateStageCompleted, Args: []any{res.Turn}})
		if err != nil {
			return SendResult{}, fmt.Errorf("wait for turn %s of session %s: %w", res.Turn, s.id, err)
		}
		var again SendResult
		if err := h.Get(ctx, &again); err != nil {
			return SendResult{}, fmt.Errorf("wait for turn %s of session %s: %w", res.Turn, s.id, err)
		}
		res.Record, res.Continued = again.Record, again.Continued
	}
	return res, nil
}

// Ask sends the session a message and waits for its turn to end, calling
// fn with each event of the session and of the turn's agents from the
// message on (fn may be nil), and returns the turn's record. Options are
// Send's; Following(WithDeltas()) has fn get the reply's text as it is
// generated, too.
func (s *Session) Ask(ctx context.Context, message string, fn func(Event), opts ...SendOption) (TurnRecord, error) {
	info, err := s.Info(ctx)
	if err != nil {
		return TurnRecord{}, err
	}
	if fn == nil {
		res, err := s.Send(ctx, message, true, opts...)
		if err != nil {
			return TurnRecord{}, err
		}
		return *res.Record, nil
	}
	fctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	var o sendOptions
	for _, opt := range opts {
		opt(&o)
	}
	go func() { done <- s.FollowFrom(fctx, Cursor{s.id: info.NextEvent - 1}, fn, o.follow...) }()
	res, err := s.Send(ctx, message, true, opts...)
	stop()
	<-done
	if err != nil {
		return TurnRecord{}, err
	}
	return *res.Record, nil
}

// ErrNoSession is the error of Input for an id that names no session: no
// workflow, or one that is not a session.
var ErrNoSession = errors.New("no such session")

// Input returns what the session started with: its graph, the agent that
// answered first, its first name and policy, its vars. Carry is left out.
// It reads the session's history, so it needs no worker.
func (s *Session) Input(ctx context.Context) (SessionInput, error) {
	it := s.c.cfg.Temporal.GetWorkflowHistory(ctx, s.id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return SessionInput{}, fmt.Errorf("session %s: %w", s.id, ErrNoSession)
	}
	first, err := it.Next()
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return SessionInput{}, fmt.Errorf("session %s: %w", s.id, ErrNoSession)
	}
	if err != nil {
		return SessionInput{}, fmt.Errorf("session %s: %w", s.id, err)
	}
	started := first.GetWorkflowExecutionStartedEventAttributes()
	if typ := started.GetWorkflowType().GetName(); typ != troupe.SessionWorkflowName {
		return SessionInput{}, fmt.Errorf("session %s: %w (a %q workflow)", s.id, ErrNoSession, typ)
	}
	var in SessionInput
	if err := s.c.cfg.DataConverter.FromPayloads(started.GetInput(), &in); err != nil {
		return SessionInput{}, fmt.Errorf("session %s: input: %w", s.id, err)
	}
	in.Carry = nil // where an earlier run stood: not what the session started with
	return in, nil
}

// Info returns where the session stands, as it says itself.
func (s *Session) Info(ctx context.Context) (SessionInfo, error) {
	v, err := s.c.query(ctx, s.id, troupe.SessionQuery)
	if err != nil {
		return SessionInfo{}, fmt.Errorf("session %s: %w", s.id, err)
	}
	var info SessionInfo
	return info, v.Get(&info)
}

// Command runs a lifecycle command on the session, through the session
// manager of the client's task queue (the one door for the lifecycle), and
// returns its entry.
func (s *Session) Command(ctx context.Context, cmd SessionCommand) (SessionEntry, error) {
	var e SessionEntry
	update := uuid.NewString()
	err := untilTaken(ctx, func() error {
		h, err := s.c.cfg.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: troupe.SessionManagerIDFor(s.c.cfg.TaskQueue), UpdateID: update, UpdateName: troupe.LifecycleUpdate,
			WaitForStage: client.WorkflowUpdateStageCompleted, Args: []any{troupe.LifecycleInput{ID: s.id, Command: cmd}}})
		if err != nil {
			return err
		}
		return h.Get(ctx, &e)
	})
	if err != nil {
		return SessionEntry{}, fmt.Errorf("%s session %s: %w", cmd.Op, s.id, err)
	}
	return e, nil
}

// Fork forks the session, through the session manager, into a new
// session named name (empty: the source's name, "(fork)"): the
// conversation (copy-on-write) and every workspace (from a fresh
// snapshot) as they stand after the running turn, and the session's
// settings; independent from then on. It returns the fork's handle and
// entry once the fork has started.
func (s *Session) Fork(ctx context.Context, name string) (*Session, SessionEntry, error) {
	var e SessionEntry
	update := uuid.NewString()
	err := untilTaken(ctx, func() error {
		h, err := s.c.cfg.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: troupe.SessionManagerIDFor(s.c.cfg.TaskQueue), UpdateID: update, UpdateName: troupe.ForkUpdate,
			WaitForStage: client.WorkflowUpdateStageCompleted, Args: []any{troupe.ForkInput{ID: s.id, Name: name}}})
		if err != nil {
			return err
		}
		return h.Get(ctx, &e)
	})
	if err != nil {
		return nil, SessionEntry{}, fmt.Errorf("fork session %s: %w", s.id, err)
	}
	return s.c.Session(e.ID), e, nil
}

// SwitchBackend moves every workspace of the session to backend (local,
// bwrap, docker, ...), between turns: each is snapshotted and stopped,
// and restored on backend by its next command. The conversation is
// unchanged. A backend the workers do not serve fails the next command
// that needs a sandbox, with a clear error; switch again to go on.
func (s *Session) SwitchBackend(ctx context.Context, backend string) (SessionEntry, error) {
	return s.Command(ctx, SessionCommand{Op: troupe.CommandSwitch, Arg: backend})
}

// SetBudget changes the session's budget as change says, from its next
// model call on: limits as agents.Budget.Change takes them ("cost=2",
// "model_calls=100,cost=1"; those change does not name keep their value,
// 0 lifts one) or "off", which lifts them all. What the session spent so
// far counts against the new budget; a session whose budget was spent
// takes messages again once the change leaves some. It returns where the
// session stands then (SessionInfo.Budget: the budget, and what was spent
// of it).
//
// The session itself takes the change (a budget is none of the
// registry's business, unlike the commands of Command), so that a change
// it cannot keep fails here, with an error whose troupe.ErrorType is
// troupe.ErrBadBudget: a bad limit, or a cost limit for a graph with a
// model that has no price.
func (s *Session) SetBudget(ctx context.Context, change string) (SessionInfo, error) {
	h, err := s.c.cfg.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: s.id, UpdateName: troupe.CommandUpdate,
		WaitForStage: client.WorkflowUpdateStageCompleted, Args: []any{SessionCommand{Op: troupe.CommandBudget, Arg: change}}})
	if err != nil {
		return SessionInfo{}, fmt.Errorf("budget of session %s: %w", s.id, err)
	}
	var info SessionInfo
	if err := h.Get(ctx, &info); err != nil {
		return SessionInfo{}, fmt.Errorf("budget of session %s: %w", s.id, err)
	}
	return info, nil
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

// RemoveSessionResult says what RemoveSession removed, and what waits.
type RemoveSessionResult = troupe.RemoveSessionResult

// removedReason is the reason RemoveSession terminates a session's
// workflows with: a session terminated with it was removed already.
const removedReason = "troupe: session removed"

// acceptPatience bounds how long RemoveSession waits for a worker to take
// its update in before it leaves the removal to the manager by signal: a
// worker that polled a minute ago may be gone.
const acceptPatience = 10 * time.Second

// RemoveSession removes session id, whatever state it is in: running a
// turn, idle, paused, stopped, or stuck (a graph no worker serves, a
// workflow that fails every task). It terminates the session's workflow
// and those of its turns' agents (no worker needed), then has the session
// manager of the client's task queue drop it from its registry and remove
// its sandboxes and blob data (troupe.RemoveSessionUpdate). When no worker
// serves the queue it does not wait for one: it signals the manager
// instead (troupe.RemoveSessionSignal), which does the rest when a worker
// runs, and the result's Pending says so. Data a fork of the session
// still shares stays until the fork is done with it.
//
// An id that names no session (unknown, or removed already) fails with an
// error that wraps ErrNoSession and whose troupe.ErrorType is
// troupe.ErrUnknownSession, with a result whose Found is false; one that
// names another kind of workflow fails the same way and is left alone.
func (c *Client) RemoveSession(ctx context.Context, id string) (RemoveSessionResult, error) {
	res := RemoveSessionResult{ID: id}
	if id == "" || strings.Contains(id, "/") {
		return res, fmt.Errorf("remove session %q: %w", id, troupe.NonRetryable(troupe.ErrBadCommand, "a session id is not empty and holds no /"))
	}
	closed, already, err := c.terminateSession(ctx, id, &res)
	if err != nil {
		return res, err
	}
	signalled, err := c.unlist(ctx, id, &res)
	if err != nil {
		return res, err
	}
	// A session that closed (stopped) without a removal is found when the
	// registry lists it, or when no worker can say whether it does.
	res.Found = res.Found || closed && !already && signalled
	if !res.Found {
		why := "no session %s"
		if already {
			why = "no session %s: it was removed already"
		}
		return res, noSession(fmt.Sprintf(why, id))
	}
	return res, nil
}

// noSessionError is RemoveSession's error for an id that names no
// session: it reads as its message and the type, and is both ErrNoSession
// and a troupe.ErrUnknownSession application error.
type noSessionError struct {
	msg string
	app error
}

func noSession(msg string) error {
	return &noSessionError{msg: msg, app: troupe.NonRetryable(troupe.ErrUnknownSession, "%s", msg)}
}

func (e *noSessionError) Error() string   { return e.msg + " (" + troupe.ErrUnknownSession + ")" }
func (e *noSessionError) Unwrap() []error { return []error{ErrNoSession, e.app} }

// terminateSession terminates session id's workflow and the workflows of
// its turns that run, and records them in res (Found when it ran). closed
// reports a session whose workflow had closed; already one that an
// earlier removal terminated.
func (c *Client) terminateSession(ctx context.Context, id string, res *RemoveSessionResult) (closed, already bool, err error) {
	d, err := c.cfg.Temporal.DescribeWorkflowExecution(ctx, id, "")
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return false, false, nil // Only the registry may hold it.
	case err != nil:
		return false, false, fmt.Errorf("remove session %s: %w", id, err)
	}
	info := d.GetWorkflowExecutionInfo()
	if typ := info.GetType().GetName(); typ != troupe.SessionWorkflowName {
		return false, false, noSession(fmt.Sprintf("%s is a %q workflow, not a session: left alone", id, typ))
	}
	if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return true, info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED && c.removedBefore(ctx, id), nil
	}
	res.Found = true
	// Its turns' workflows close with it (they are children that the
	// server terminates with their parent); they are terminated here too,
	// so that none runs, and holds its sandbox, once this returns.
	tree := []string{id}
	for i := 0; i < len(tree); i++ {
		if i > 0 {
			if d, err = c.cfg.Temporal.DescribeWorkflowExecution(ctx, tree[i], ""); err != nil {
				continue // Closed and gone meanwhile.
			}
		}
		for _, ch := range d.GetPendingChildren() {
			tree = append(tree, ch.GetWorkflowId())
		}
	}
	// Deepest first: a parent terminated first would have the server
	// terminate its children (their parent-close policy) before this
	// could, and the result would miss them.
	for _, wf := range slices.Backward(tree) {
		err := c.cfg.Temporal.TerminateWorkflow(ctx, wf, "", removedReason)
		switch {
		case err == nil:
			res.Terminated = append(res.Terminated, wf)
		case errors.As(err, &nf): // Closed meanwhile.
		default:
			return false, false, fmt.Errorf("remove session %s: terminate %s: %w", id, wf, err)
		}
	}
	return false, false, nil
}

// removedBefore reports whether the terminated session id was terminated
// by a removal.
func (c *Client) removedBefore(ctx context.Context, id string) bool {
	it := c.cfg.Temporal.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return false
		}
		if t := e.GetWorkflowExecutionTerminatedEventAttributes(); t != nil {
			return t.GetReason() == removedReason
		}
	}
	return false
}

// unlist has the session manager drop session id from its registry and
// remove its sandboxes and blob data: by update, when a worker takes it
// within acceptPatience; else by signal (signalled), which the manager
// takes when a worker runs.
func (c *Client) unlist(ctx context.Context, id string, res *RemoveSessionResult) (signalled bool, err error) {
	manager := troupe.SessionManagerIDFor(c.cfg.TaskQueue)
	in := troupe.RemoveSessionInput{ID: id}
	var nf *serviceerror.NotFound
	if queueServed(ctx, c.cfg.Temporal, c.cfg.TaskQueue) {
		var h client.WorkflowUpdateHandle
		var done RemoveSessionResult
		err := whileContinuing(ctx, func() error {
			actx, cancel := context.WithTimeout(ctx, acceptPatience)
			var err error
			h, err = c.cfg.Temporal.UpdateWorkflow(actx, client.UpdateWorkflowOptions{WorkflowID: manager, UpdateName: troupe.RemoveSessionUpdate,
				WaitForStage: client.WorkflowUpdateStageAccepted, Args: []any{in}})
			cancel()
			if err != nil {
				return err
			}
			// Turned away or done: either way, h has its outcome.
			if err := h.Get(ctx, &done); troupe.ErrorType(err) == troupe.ErrManagerContinuing {
				return err
			}
			return nil
		})
		switch {
		case errors.As(err, &nf):
			return false, nil // No manager: no session was ever created on this queue.
		case err == nil:
			if err := h.Get(ctx, &done); err != nil {
				return false, fmt.Errorf("remove session %s: %w", id, err)
			}
			res.Found = res.Found || done.Found
			res.Unlisted, res.Sandboxes, res.Blobs, res.Pending = done.Unlisted, done.Sandboxes, done.Blobs, append(res.Pending, done.Pending...)
			return false, nil
		case ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) && !isDeadline(err):
			return false, fmt.Errorf("remove session %s: %w", id, err)
		}
		// No worker took it in: the manager takes the signal when one runs.
	}
	err = c.cfg.Temporal.SignalWorkflow(ctx, manager, "", troupe.RemoveSessionSignal, in)
	switch {
	case errors.As(err, &nf):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("remove session %s: %w", id, err)
	}
	res.Pending = append(res.Pending, fmt.Sprintf("no worker serves task queue %s: the session manager drops it from its list, and its sandboxes and blob data are removed, when `troupe dev` or `troupe worker` runs", c.cfg.TaskQueue))
	return true, nil
}

// isDeadline reports whether err is the server's deadline, which an
// update's wait for a worker may end with rather than the context's.
func isDeadline(err error) bool {
	var de *serviceerror.DeadlineExceeded
	return errors.As(err, &de)
}

// queueServed reports whether a worker polled queue's workflow tasks
// within pollerFresh; true when the server cannot say, so that the caller
// tries.
func queueServed(ctx context.Context, c client.Client, queue string) bool {
	pollers, err := freshPollers(ctx, c, queue)
	return err != nil || len(pollers) > 0
}
