package workflows

// The session manager is the registry of a namespace's sessions and the
// one door for their lifecycle: a session is created through it (it starts
// the SessionWorkflow as its child, abandoned so that the session outlives
// any one run of the manager), and renamed, paused, resumed and stopped
// through it. Each step is a durable command of the manager's history, so
// a call that a crash interrupts is carried on where it stopped when the
// worker replays it, and calls are applied one after the other, in the
// order the server took them: the registry and the sessions never
// disagree for longer than a signal takes. Sessions tell the manager what
// changed (troupe.session-changed) after each turn and command, so a
// list needs no call to each session.

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/model"
)

// Names of the session manager and its messages.
const (
	SessionManagerWorkflowName = "troupe.SessionManager"
	// SessionManagerID is the workflow id of the manager of the default
	// task queue (see SessionManagerIDFor).
	SessionManagerID = "troupe-sessions"
	// CreateSessionUpdate creates a session (CreateSessionInput →
	// SessionEntry).
	CreateSessionUpdate = "troupe.create-session"
	// LifecycleUpdate runs a command on a session (LifecycleInput →
	// SessionEntry).
	LifecycleUpdate = "troupe.lifecycle"
	// SessionsQuery lists the sessions ([]SessionEntry).
	SessionsQuery = "troupe.sessions"
	// SessionChangedSignal is a session's news for its manager
	// (SessionEntry).
	SessionChangedSignal = "troupe.session-changed"
	// CommandSignal is a command for a session from its manager
	// (SessionCommand).
	CommandSignal = "troupe.command-signal"
	// ForkUpdate forks a session (ForkInput → SessionEntry).
	ForkUpdate = "troupe.fork"
	// ForkFailedSignal is a session's word that a fork of it could not
	// be made (ForkFailure).
	ForkFailedSignal = "troupe.fork-failed"
)

// ForkInput forks the session ID as NewID (empty for a fresh id), named
// Name (empty: the source's name, "(fork)").
type ForkInput struct {
	ID    string `json:"id"`
	NewID string `json:"new_id,omitempty"`
	Name  string `json:"name,omitempty"`
}

// ForkFailure says why the fork NewID could not be made.
type ForkFailure struct {
	NewID string `json:"new_id"`
	Error string `json:"error"`
}

// forkTimeout bounds how long a fork waits for its source to fork: the
// source forks between turns, so a long turn holds it.
const forkTimeout = time.Hour

// SessionManagerIDFor is the workflow id of the session manager of task
// queue: SessionManagerID for DefaultTaskQueue (or ""), else
// "troupe-sessions-<queue>". Each queue has a manager of its own, which
// runs there and starts its sessions there, where the workers that know
// their graphs listen: a manager of another queue could start sessions
// that no worker serves (`troupe mcp serve` runs its own worker on a queue
// of its own) or be served by no worker at all.
func SessionManagerIDFor(queue string) string {
	if queue == "" || queue == DefaultTaskQueue {
		return SessionManagerID
	}
	return SessionManagerID + "-" + queue
}

// ErrUnknownSession is a call for a session the manager does not hold.
const ErrUnknownSession = "troupe.UnknownSession"

// CreateSessionInput creates a session.
type CreateSessionInput struct {
	// ID is the session's workflow id; empty for a fresh one,
	// "session-<graph>-<8 hex>". It must not hold "/".
	ID      string       `json:"id,omitempty"`
	Session SessionInput `json:"session"`
}

// LifecycleInput is a command for the session ID.
type LifecycleInput struct {
	ID      string         `json:"id"`
	Command SessionCommand `json:"command"`
}

// SessionEntry is a session as the manager lists it.
type SessionEntry struct {
	ID     string                `json:"id"`
	Name   string                `json:"name,omitempty"`
	Graph  string                `json:"graph"`
	Agent  string                `json:"agent"`
	Status runtime.SessionStatus `json:"status"`
	Policy runtime.InputPolicy   `json:"policy"`
	Turns  int                   `json:"turns"`
	Usage  model.Usage           `json:"usage"`
	// Backends are the sandbox backends of the session's workspaces.
	Backends     []string  `json:"backends,omitempty"`
	Created      time.Time `json:"created"`
	LastActivity time.Time `json:"last_activity"`
}

// versionManagerBound marks the change to managers that fix their bound
// at their first start (a side effect) rather than read the worker's.
const versionManagerBound = "troupe.manager-bound"

// ManagerInput starts (or continues) the session manager.
type ManagerInput struct {
	// Sessions is the registry its previous run carried over, when it
	// carried it whole (runs from before the registry went by pages).
	Sessions []SessionEntry `json:"sessions,omitempty"`
	// Pages are the blob keys of the registry its previous run saved, in
	// order (see registry.go).
	Pages []string `json:"pages,omitempty"`
	// OldPages are the pages the previous run read, which this run drops
	// when it continues as new in turn.
	OldPages []string `json:"old_pages,omitempty"`
	// Bound is the history length at which a run of the manager continues
	// as new: fixed at its first start (the worker's ContinueAfterEvents
	// then) and carried, so no later worker's setting changes a run's
	// commands. Callers leave it 0.
	Bound int `json:"bound,omitempty"`
}

// manager is a running SessionManagerWorkflow.
type manager struct {
	r        *Runner
	sessions []SessionEntry
	// failed are the forks their source could not make, by new id.
	failed map[string]string
}

// SessionManagerWorkflow runs the session manager: see the top of this
// file. It continues as new, carrying its registry by reference (blob
// pages, see registry.go), when its history reaches its bound.
func (r *Runner) SessionManagerWorkflow(ctx workflow.Context, in ManagerInput) error {
	m := &manager{r: r, sessions: in.Sessions, failed: map[string]string{}}
	// The query is answered from the start, so a client that lists the
	// sessions while the registry loads is told to ask again, not that
	// the manager has no such query.
	loading := len(in.Pages) > 0
	if err := workflow.SetQueryHandler(ctx, SessionsQuery, func() ([]SessionEntry, error) {
		if loading {
			return nil, errors.New("the session registry is loading after the manager continued as new: ask again")
		}
		return slices.Clone(m.sessions), nil
	}); err != nil {
		return err
	}
	if loading {
		sessions, err := loadRegistry(ctx, in.Pages)
		if err != nil {
			return err
		}
		m.sessions = append(m.sessions, sessions...)
		loading = false
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, CreateSessionUpdate, m.create, workflow.UpdateHandlerOptions{Validator: m.checkCreate}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, LifecycleUpdate, m.lifecycle, workflow.UpdateHandlerOptions{Validator: m.checkLifecycle}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, ForkUpdate, m.fork, workflow.UpdateHandlerOptions{Validator: m.checkFork}); err != nil {
		return err
	}
	// The main loop takes the signals as they come, so that at the bound
	// none is left half-taken: a goroutine blocked on a channel would be
	// handed a signal it has not applied yet when the run continues.
	failures := workflow.GetSignalChannel(ctx, ForkFailedSignal)
	changed := workflow.GetSignalChannel(ctx, SessionChangedSignal)
	drain := func() {
		for {
			var f ForkFailure
			if !failures.ReceiveAsync(&f) {
				break
			}
			m.failed[f.NewID] = f.Error
		}
		for {
			var e SessionEntry
			if !changed.ReceiveAsync(&e) {
				break
			}
			m.changed(e)
		}
	}
	bound := in.Bound
	if bound == 0 {
		bound = r.cfg.ContinueAfterEvents // Managers from before the bound was fixed.
		if workflow.GetVersion(ctx, versionManagerBound, workflow.DefaultVersion, 1) == 1 {
			if err := workflow.SideEffect(ctx, func(workflow.Context) any { return r.cfg.ContinueAfterEvents }).Get(&bound); err != nil {
				return err
			}
		}
	}
	atBound := func() bool {
		info := workflow.GetInfo(ctx)
		return (info.GetCurrentHistoryLength() >= bound || info.GetContinueAsNewSuggested()) && workflow.AllHandlersFinished(ctx)
	}
	for {
		if err := workflow.Await(ctx, func() bool { return failures.Len() > 0 || changed.Len() > 0 || atBound() }); err != nil {
			return err
		}
		drain()
		if atBound() {
			break
		}
	}
	kept := pruneStopped(m.sessions, keptStopped)
	v := workflow.GetVersion(ctx, versionManagerPages, workflow.DefaultVersion, 2)
	if v == workflow.DefaultVersion {
		return workflow.NewContinueAsNewError(ctx, SessionManagerWorkflowName, ManagerInput{Sessions: kept, Bound: bound})
	}
	next := ManagerInput{Bound: bound}
	if v >= 2 {
		// The pages the previous run read go now, a run later than at
		// version 1, so that a reset of a run to its start still finds
		// the pages it read; and before the save, whose loop below is
		// the last step.
		if err := dropRegistry(ctx, in.OldPages); err != nil {
			return err
		}
		next.OldPages = in.Pages
	}
	for {
		var err error
		if next.Pages, err = saveRegistry(ctx, kept); err != nil {
			return err
		}
		// Signals and updates that came while the pages were saved are
		// taken, and the registry saved again: none is lost.
		if failures.Len() == 0 && changed.Len() == 0 && workflow.AllHandlersFinished(ctx) {
			break
		}
		if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
			return err
		}
		drain()
		kept = pruneStopped(m.sessions, keptStopped)
	}
	if v == 1 {
		if err := dropRegistry(ctx, in.Pages); err != nil {
			return err
		}
	}
	return workflow.NewContinueAsNewError(ctx, SessionManagerWorkflowName, next)
}

// keptStopped bounds the stopped sessions a manager keeps listing: the
// registry is carried through continue-as-new (a few hundred bytes a
// session, read back into the next run's history), so it forgets the stopped sessions that were last active
// longest ago beyond this many. Their workflows and data stay as
// retention keeps them.
const keptStopped = 500

// pruneStopped returns sessions without the stopped ones beyond the
// newest max (by last activity), in their order.
func pruneStopped(sessions []SessionEntry, max int) []SessionEntry {
	var stopped []time.Time
	for _, e := range sessions {
		if e.Status == runtime.SessionStopped {
			stopped = append(stopped, e.LastActivity)
		}
	}
	if len(stopped) <= max {
		return sessions
	}
	slices.SortFunc(stopped, func(a, b time.Time) int { return b.Compare(a) })
	cut := stopped[max-1] // The oldest activity kept.
	out := make([]SessionEntry, 0, len(sessions))
	kept := 0
	for _, e := range sessions {
		if e.Status == runtime.SessionStopped {
			if e.LastActivity.Before(cut) || kept == max {
				continue
			}
			kept++
		}
		out = append(out, e)
	}
	return out
}

func (m *manager) find(id string) int {
	return slices.IndexFunc(m.sessions, func(e SessionEntry) bool { return e.ID == id })
}

func (m *manager) checkCreate(ctx workflow.Context, in CreateSessionInput) error {
	switch {
	case in.Session.Graph == "":
		return temporal.NewNonRetryableApplicationError("a session needs a graph", ErrBadCommand, nil)
	case in.ID != "" && m.find(in.ID) >= 0:
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("session %s exists", in.ID), ErrBadCommand, nil)
	case strings.Contains(in.ID, "/"):
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("session id %q holds a /", in.ID), ErrBadCommand, nil)
	case in.Session.Carry != nil:
		return temporal.NewNonRetryableApplicationError("a new session carries nothing", ErrBadCommand, nil)
	}
	_, err := supportedPolicy(string(in.Session.Policy))
	return err
}

// create starts the session as an abandoned child and registers it once
// it has started; a session that could not start is not registered.
func (m *manager) create(ctx workflow.Context, in CreateSessionInput) (SessionEntry, error) {
	id := in.ID
	if id == "" {
		var suffix string
		if err := workflow.SideEffect(ctx, func(workflow.Context) any { return uuid.NewString()[:8] }).Get(&suffix); err != nil {
			return SessionEntry{}, err
		}
		id = "session-" + in.Session.Graph + "-" + suffix
	}
	now := workflow.Now(ctx)
	in.Session.Manager = workflow.GetInfo(ctx).WorkflowExecution.ID
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID: id, ParentClosePolicy: enumspb.PARENT_CLOSE_POLICY_ABANDON,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		StaticSummary:         "session of " + in.Session.Graph, WorkflowTaskTimeout: agentTaskTimeout,
	})
	if err := workflow.ExecuteChildWorkflow(cctx, SessionWorkflowName, in.Session).GetChildWorkflowExecution().Get(ctx, nil); err != nil {
		return SessionEntry{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("start session %s: %v", id, err), ErrBadCommand, err)
	}
	policy, _ := runtime.ParsePolicy(string(in.Session.Policy))
	e := SessionEntry{ID: id, Name: in.Session.Name, Graph: in.Session.Graph, Agent: in.Session.Agent, Status: runtime.SessionIdle,
		Policy: policy, Created: now, LastActivity: now}
	if i := m.find(id); i >= 0 { // The session's news came first.
		e = m.sessions[i]
		e.Created = now
		m.sessions[i] = e
		return e, nil
	}
	m.sessions = append(m.sessions, e)
	return e, nil
}

func (m *manager) checkLifecycle(ctx workflow.Context, in LifecycleInput) error {
	i := m.find(in.ID)
	if i < 0 {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("no session %s", in.ID), ErrUnknownSession, nil)
	}
	if m.sessions[i].Status == runtime.SessionStopped {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("session %s is stopped", in.ID), ErrSessionStopped, nil)
	}
	s := session{st: &runtime.SessionState{}}
	return s.checkCommand(in.Command)
}

// lifecycle sends the session its command and records the outcome in
// the registry at once (the session's news confirms it).
func (m *manager) lifecycle(ctx workflow.Context, in LifecycleInput) (SessionEntry, error) {
	if err := workflow.SignalExternalWorkflow(ctx, in.ID, "", CommandSignal, in.Command).Get(ctx, nil); err != nil {
		return SessionEntry{}, err
	}
	i := m.find(in.ID)
	e := &m.sessions[i]
	switch in.Command.Op {
	case CommandPause:
		e.Status = runtime.SessionPaused
	case CommandResume:
		e.Status = runtime.SessionIdle
	case CommandStop:
		e.Status = runtime.SessionStopped
	case CommandRename:
		e.Name = in.Command.Arg
	case CommandPolicy:
		e.Policy = runtime.InputPolicy(in.Command.Arg)
	case CommandSwitch:
		e.Backends = []string{in.Command.Arg}
	}
	e.LastActivity = workflow.Now(ctx)
	return *e, nil
}

func (m *manager) checkFork(ctx workflow.Context, in ForkInput) error {
	if err := m.checkLifecycle(ctx, LifecycleInput{ID: in.ID, Command: SessionCommand{Op: CommandRename}}); err != nil {
		return err
	}
	switch {
	case in.NewID != "" && m.find(in.NewID) >= 0:
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("session %s exists", in.NewID), ErrBadCommand, nil)
	case strings.Contains(in.NewID, "/"):
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("session id %q holds a /", in.NewID), ErrBadCommand, nil)
	}
	return nil
}

// fork asks the session to fork itself (it does so between turns) and
// answers once the fork has started and told the manager so, or the
// session said why it could not.
func (m *manager) fork(ctx workflow.Context, in ForkInput) (SessionEntry, error) {
	id := in.NewID
	if id == "" {
		var suffix string
		if err := workflow.SideEffect(ctx, func(workflow.Context) any { return uuid.NewString()[:8] }).Get(&suffix); err != nil {
			return SessionEntry{}, err
		}
		id = in.ID + "-fork-" + suffix
	}
	req := ForkRequest{NewID: id, Name: in.Name, Manager: workflow.GetInfo(ctx).WorkflowExecution.ID}
	if err := workflow.SignalExternalWorkflow(ctx, in.ID, "", ForkSignal, req).Get(ctx, nil); err != nil {
		return SessionEntry{}, err
	}
	ok, err := workflow.AwaitWithTimeout(ctx, forkTimeout, func() bool { return m.find(id) >= 0 || m.failed[id] != "" })
	switch {
	case err != nil:
		return SessionEntry{}, err
	case !ok:
		return SessionEntry{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("session %s did not fork within %s (a turn still running?)", in.ID, forkTimeout), ErrBadCommand, nil)
	case m.failed[id] != "":
		why := m.failed[id]
		delete(m.failed, id)
		return SessionEntry{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("fork of session %s failed: %s", in.ID, why), ErrBadCommand, nil)
	}
	return m.sessions[m.find(id)], nil
}

// changed takes a session's news.
func (m *manager) changed(e SessionEntry) {
	i := m.find(e.ID)
	if i < 0 {
		m.sessions = append(m.sessions, e)
		return
	}
	e.Created = m.sessions[i].Created
	if m.sessions[i].Status == runtime.SessionStopped {
		e.Status = runtime.SessionStopped // Late news of a stopped session.
	}
	m.sessions[i] = e
}
