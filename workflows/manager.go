package workflows

// The session manager is the registry of a namespace's sessions and the
// one door for their lifecycle: a session is created through it (it starts
// the SessionWorkflow as its child, abandoned so that the session outlives
// any one run of the manager), and renamed, paused, resumed, stopped and
// removed through it (remove.go). Each step is a durable command of the
// manager's history, so a call that a crash interrupts is carried on where
// it stopped when the worker replays it, and calls are applied one after
// the other, in the order the server took them: the registry and the
// sessions never disagree for longer than a signal takes. Sessions tell
// the manager what changed (troupe.session-changed) after each turn and
// command, so a list needs no call to each session.

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/handoff"
	"github.com/troupe-dev/troupe/runtime"
)

// forkTimeout bounds how long a fork waits for its source to fork: the
// source forks between turns, so a long turn holds it.
const forkTimeout = time.Hour

// versionCommandOutcome marks the change to managers that wait for a
// session's word of how a pause or a switch ended (troupe.CommandOutcome),
// so that one whose snapshot failed fails for its caller. The marker is
// written at each pause or switch.
const versionCommandOutcome = "troupe.command-outcome"

// commandTimeout bounds how long a manager waits for a session's word of
// a command: the snapshots of its workspaces take seconds, as a rule.
const commandTimeout = 2 * time.Minute

// versionManagerBound marks the change to managers that fix their bound
// at their first start (a side effect) rather than read the worker's.
const versionManagerBound = "troupe.manager-bound"

// manager is a running SessionManagerWorkflow.
type manager struct {
	r        *Runner
	sessions []troupe.SessionEntry
	// failed are the forks their source could not make, by new id.
	failed map[string]troupe.ForkFailure
	// loading is whether the registry is still being read from the pages
	// the previous run left: the query says to ask again, updates wait.
	loading bool
	// failures and news are the channels of the forks that failed and of
	// the sessions' news (troupe.session-changed); removals that of the
	// removals signalled when no worker served the queue; done that of
	// the outcomes of the commands the manager waits on.
	failures, news, removals, done workflow.ReceiveChannel
	// removed are the sessions this run removed, whose late news it
	// drops; removing counts the signalled removals under way.
	removed  map[string]bool
	removing int
	// outcomes are the commands the manager waits on, by reply (nil
	// until their session answers).
	outcomes map[string]*troupe.CommandOutcome
	// bound is the history length at which the run continues as new.
	bound int
	// created are the sessions the last runs created, forked or
	// commanded, by update id, at most keptSends of them
	// (troupe.CreatedSession).
	created []troupe.CreatedSession
}

// SessionManagerWorkflow runs the session manager: see the top of this
// file. It continues as new, carrying its registry by reference (blob
// pages, see registry.go), when its history reaches its bound.
func (r *Runner) SessionManagerWorkflow(ctx workflow.Context, in troupe.ManagerInput) error {
	m := &manager{r: r, sessions: in.Sessions, failed: map[string]troupe.ForkFailure{}, removed: map[string]bool{},
		outcomes: map[string]*troupe.CommandOutcome{}, loading: len(in.Pages) > 0, created: in.Created}
	if err := m.setHandlers(ctx); err != nil {
		return err
	}
	if err := m.load(ctx, in.Pages); err != nil {
		return err
	}
	// The main loop takes the signals as they come, so that at the bound
	// none is left half-taken: a goroutine blocked on a channel would be
	// handed a signal it has not applied yet when the run continues.
	m.failures = workflow.GetSignalChannel(ctx, troupe.ForkFailedSignal)
	m.news = workflow.GetSignalChannel(ctx, troupe.SessionChangedSignal)
	m.removals = workflow.GetSignalChannel(ctx, troupe.RemoveSessionSignal)
	m.done = workflow.GetSignalChannel(ctx, troupe.CommandDoneSignal)
	if err := m.fixBound(ctx, in.Bound); err != nil {
		return err
	}
	if err := m.listen(ctx); err != nil {
		return err
	}
	return m.continueAsNew(ctx, in)
}

// load reads the registry from the pages the previous run left, if it
// left any, and lets the calls that waited for it in.
func (m *manager) load(ctx workflow.Context, pages []string) error {
	if !m.loading {
		return nil
	}
	sessions, err := loadRegistry(ctx, pages)
	if err != nil {
		return err
	}
	m.sessions = append(m.sessions, sessions...)
	m.loading = false
	return nil
}

// listen takes the signals as they come until the run reaches its bound
// with no update half-handled, so that the run can continue as new.
func (m *manager) listen(ctx workflow.Context) error {
	for {
		if err := workflow.Await(ctx, func() bool { return m.signalled() || m.atBound(ctx) }); err != nil {
			return err
		}
		m.drain(ctx)
		if m.atBound(ctx) {
			return nil
		}
	}
}

// setHandlers sets the manager's query and updates before the registry
// loads, so that a call that comes meanwhile is told to wait or ask again
// rather than that the manager has no such handler.
func (m *manager) setHandlers(ctx workflow.Context) error {
	// The query is answered from the start, so a client that lists the
	// sessions while the registry loads is told to ask again, not that
	// the manager has no such query.
	if err := workflow.SetQueryHandler(ctx, troupe.SessionsQuery, func() ([]troupe.SessionEntry, error) {
		if m.loading {
			return nil, errors.New(troupe.RegistryLoading)
		}
		return slices.Clone(m.sessions), nil
	}); err != nil {
		return err
	}
	// The page query likewise: a page is what a client asks for, never
	// the whole registry, whose payload would pass the bound at some
	// thousands of sessions.
	if err := workflow.SetQueryHandler(ctx, troupe.SessionsPageQuery, func(in troupe.SessionsPageInput) (troupe.SessionsPage, error) {
		if m.loading {
			return troupe.SessionsPage{}, errors.New(troupe.RegistryLoading)
		}
		return troupe.PageSessions(m.sessions, in)
	}); err != nil {
		return err
	}
	// So are the updates: one that comes while the registry loads waits
	// for it, rather than being refused as unknown.
	if err := setLoadedUpdate(ctx, troupe.CreateSessionUpdate, m.closing, &m.loading, m.checkCreate, m.create, m.serves); err != nil {
		return err
	}
	if err := setLoadedUpdate(ctx, troupe.LifecycleUpdate, m.closing, &m.loading, m.checkLifecycle, m.lifecycle, nil); err != nil {
		return err
	}
	if err := setLoadedUpdate(ctx, troupe.RemoveSessionUpdate, m.closing, &m.loading, m.checkRemove, m.remove, nil); err != nil {
		return err
	}
	return setLoadedUpdate(ctx, troupe.ForkUpdate, m.closing, &m.loading, m.checkFork, m.fork, nil)
}

// fixBound sets the run's bound: the one an earlier run fixed and
// carried, else the worker's, fixed in a side effect at the first start so
// that a redeploy that changes it cannot change a running manager's.
func (m *manager) fixBound(ctx workflow.Context, bound int) error {
	m.bound = bound
	if m.bound != 0 {
		return nil
	}
	m.bound = m.r.cfg.ContinueAfterEvents // Managers from before the bound was fixed.
	if workflow.GetVersion(ctx, versionManagerBound, workflow.DefaultVersion, 1) == 1 {
		return workflow.SideEffect(ctx, func(workflow.Context) any { return m.r.cfg.ContinueAfterEvents }).Get(&m.bound)
	}
	return nil
}

// atBound is whether the run should continue as new now: its history is
// long enough, and no update is half-handled.
func (m *manager) atBound(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return (info.GetCurrentHistoryLength() >= m.bound || info.GetContinueAsNewSuggested()) && m.settled(ctx)
}

// signalled is whether a signal waits to be taken.
func (m *manager) signalled() bool {
	return m.failures.Len() > 0 || m.news.Len() > 0 || m.removals.Len() > 0 || m.done.Len() > 0
}

// settled is whether no update is half-handled and no signalled removal
// under way.
func (m *manager) settled(ctx workflow.Context) bool {
	return workflow.AllHandlersFinished(ctx) && m.removing == 0
}

// drain applies every signal received and not yet taken, the failed forks
// first, so that none is left half-taken when the run continues.
func (m *manager) drain(ctx workflow.Context) {
	for {
		var f troupe.ForkFailure
		if !m.failures.ReceiveAsync(&f) {
			break
		}
		m.failed[f.NewID] = f
	}
	for {
		var o troupe.CommandOutcome
		if !m.done.ReceiveAsync(&o) {
			break
		}
		if _, waiting := m.outcomes[o.Reply]; waiting {
			m.outcomes[o.Reply] = &o
		}
	}
	for {
		var e troupe.SessionEntry
		if !m.news.ReceiveAsync(&e) {
			break
		}
		m.changed(workflow.Now(ctx), e)
	}
	for {
		var in troupe.RemoveSessionInput
		if !m.removals.ReceiveAsync(&in) {
			break
		}
		m.removeSignalled(ctx, in)
	}
}

// closing is whether the run is past its bound and about to continue as
// new once the updates under way finish: it takes no new one. Only
// validators ask, which never run on replay, so it may read the bound the
// worker was started with rather than the run's.
func (m *manager) closing(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return m.bound > 0 && info.GetCurrentHistoryLength() >= m.bound || info.GetContinueAsNewSuggested()
}

// setLoadedUpdate sets the manager's update name, checked by check and
// carried out by handle, so that it may come while the registry loads
// (*loading): its validator, which cannot tell yet whether a session
// exists, lets it in; its handler waits for the load and checks it then,
// failing it as the validator would have refused it.
//
// admit, when not nil, is what only the worker that takes the update in
// can tell (the graphs it serves): its validator asks it, loading or not.
// A validator never runs on replay, so admit may read what a redeploy
// changes; check, which the handler may run, may not.
func setLoadedUpdate[In, Out any](ctx workflow.Context, name string, closing func(workflow.Context) bool, loading *bool,
	check func(workflow.Context, In) error, handle func(workflow.Context, In) (Out, error), admit func(In) error) error {
	return workflow.SetUpdateHandlerWithOptions(ctx, name, func(ctx workflow.Context, in In) (Out, error) {
		if *loading {
			var none Out
			if err := workflow.Await(ctx, func() bool { return !*loading }); err != nil {
				return none, err
			}
			if err := check(ctx, in); err != nil {
				return none, err
			}
		}
		return handle(ctx, in)
	}, workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, in In) error {
		if admit != nil {
			if err := admit(in); err != nil {
				return err
			}
		}
		if closing(ctx) {
			// A burst of updates would otherwise keep some always under
			// way, and the run from ever continuing as new: its history
			// would grow to the server's limit. Turned away, an update
			// leaves no trace, and its client sends it again.
			return temporal.NewApplicationError("the session manager is continuing as new: send again", troupe.ErrManagerContinuing)
		}
		if *loading {
			return nil
		}
		return check(ctx, in)
	}})
}

// serves refuses a session of a graph this worker does not serve: it
// would start, fail at once, and stay listed with nothing to answer it
// (the workers of a queue serve the same graphs).
func (m *manager) serves(in troupe.CreateSessionInput) error {
	if in.Session.Graph == "" {
		return nil // checkCreate says so.
	}
	if _, ok := m.r.graphs[in.Session.Graph]; !ok {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("no graph %q: the workers of this queue serve %s",
			in.Session.Graph, strings.Join(m.r.graphNames(), ", ")), troupe.ErrUnknownGraph, nil)
	}
	return nil
}

func (m *manager) find(id string) int {
	return slices.IndexFunc(m.sessions, func(e troupe.SessionEntry) bool { return e.ID == id })
}

func (m *manager) checkCreate(ctx workflow.Context, in troupe.CreateSessionInput) error {
	if _, ok := m.actedBefore(ctx); ok {
		return nil // Done already: answered as it stands.
	}
	if m.createdBy(ctx) >= 0 {
		return nil
	}
	switch {
	case in.Session.Graph == "":
		return temporal.NewNonRetryableApplicationError("a session needs a graph", troupe.ErrBadCommand, nil)
	case in.ID != "" && m.find(in.ID) >= 0:
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("session %s exists", in.ID), troupe.ErrBadCommand, nil)
	case strings.Contains(in.ID, "/"):
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("session id %q holds a /", in.ID), troupe.ErrBadCommand, nil)
	case in.Session.Carry != nil:
		return temporal.NewNonRetryableApplicationError("a new session carries nothing", troupe.ErrBadCommand, nil)
	}
	_, err := supportedPolicy(string(in.Session.Policy))
	return err
}

// create creates a session (start), once per update: a create sent again
// after the run that took it continued as new gets the session it made.
func (m *manager) create(ctx workflow.Context, in troupe.CreateSessionInput) (troupe.SessionEntry, error) {
	if id, ok := m.actedBefore(ctx); ok {
		return m.answerAgain(id)
	}
	if i := m.createdBy(ctx); i >= 0 {
		return m.sessions[i], nil
	}
	e, err := m.start(ctx, in)
	if err == nil {
		m.remember(ctx, e.ID)
	}
	return e, err
}

// createdBy returns the index of the session the running update created
// or forked in an earlier run (troupe.SessionEntry.Request), or -1: the server
// hands an update to the manager's next run when its client lost the
// answer as the run closed, long after the runs that actedBefore
// remembers when creates come in bursts.
func (m *manager) createdBy(ctx workflow.Context) int {
	u := workflow.GetCurrentUpdateInfo(ctx).ID
	if u == "" {
		return -1
	}
	return slices.IndexFunc(m.sessions, func(e troupe.SessionEntry) bool { return e.Request == u })
}

// actedBefore returns the session the running update created, forked or
// commanded, if it did: the update was sent again, after the run that
// took it continued as new (troupe.CreatedSession). The server knows an
// update's id within one run only.
func (m *manager) actedBefore(ctx workflow.Context) (string, bool) {
	u := workflow.GetCurrentUpdateInfo(ctx).ID
	if u == "" {
		return "", false
	}
	for _, c := range slices.Backward(m.created) {
		if c.Update == u {
			return c.ID, true
		}
	}
	return "", false
}

// remember records that the running update acted on session id, so that
// the update sent again to a later run is answered, not done twice.
func (m *manager) remember(ctx workflow.Context, id string) {
	u := workflow.GetCurrentUpdateInfo(ctx).ID
	if u == "" {
		return
	}
	m.created = append(m.created, troupe.CreatedSession{Update: u, ID: id})
	if len(m.created) > keptSends {
		m.created = slices.Clone(m.created[len(m.created)-keptSends:])
	}
}

// answerAgain answers an update done before (actedBefore) with session
// id as it stands now.
func (m *manager) answerAgain(id string) (troupe.SessionEntry, error) {
	if i := m.find(id); i >= 0 {
		return m.sessions[i], nil
	}
	return troupe.SessionEntry{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("session %s, which this request acted on, was removed since", id), troupe.ErrUnknownSession, nil)
}

// start starts the session as an abandoned child and registers it once
// it has started; a session that could not start is not registered.
func (m *manager) start(ctx workflow.Context, in troupe.CreateSessionInput) (troupe.SessionEntry, error) {
	id := in.ID
	if id == "" {
		var suffix string
		if err := workflow.SideEffect(ctx, func(workflow.Context) any { return uuid.NewString()[:8] }).Get(&suffix); err != nil {
			return troupe.SessionEntry{}, err
		}
		id = troupe.SessionID(in.Session.Graph, suffix)
	}
	now := workflow.Now(ctx)
	in.Session.Manager = workflow.GetInfo(ctx).WorkflowExecution.ID
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID: id, ParentClosePolicy: enumspb.PARENT_CLOSE_POLICY_ABANDON,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		StaticSummary:         "session of " + in.Session.Graph, WorkflowTaskTimeout: handoff.AgentTaskTimeout,
	})
	if err := workflow.ExecuteChildWorkflow(cctx, troupe.SessionWorkflowName, in.Session).GetChildWorkflowExecution().Get(ctx, nil); err != nil {
		return troupe.SessionEntry{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("start session %s: %v", id, err), troupe.ErrBadCommand, err)
	}
	policy, _ := runtime.ParsePolicy(string(in.Session.Policy))
	e := troupe.SessionEntry{ID: id, Name: in.Session.Name, Graph: in.Session.Graph, Agent: in.Session.Agent, Status: runtime.SessionIdle,
		Policy: policy, Created: now, LastActivity: now, Request: workflow.GetCurrentUpdateInfo(ctx).ID}
	if i := m.find(id); i >= 0 { // The session's news came first.
		e = m.sessions[i]
		e.Created, e.Request = now, workflow.GetCurrentUpdateInfo(ctx).ID
		m.sessions[i] = e
		return e, nil
	}
	m.sessions = append(m.sessions, e)
	return e, nil
}

func (m *manager) checkLifecycle(ctx workflow.Context, in troupe.LifecycleInput) error {
	if _, ok := m.actedBefore(ctx); ok {
		return nil // Done already: answered as it stands.
	}
	i := m.find(in.ID)
	if i < 0 {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("no session %s", in.ID), troupe.ErrUnknownSession, nil)
	}
	if m.sessions[i].Status == runtime.SessionStopped {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("session %s is stopped", in.ID), troupe.ErrSessionStopped, nil)
	}
	s := session{st: &runtime.SessionState{}}
	return s.checkCommand(in.Command)
}

// lifecycle sends the session its command and records the outcome in
// the registry at once (the session's news confirms it). A pause, and a
// switch of a session between turns, wait for the session's word of how
// they ended (on code from versionCommandOutcome on): each needs a
// snapshot of every workspace, and one that fails fails the command
// (troupe.ErrSnapshotFailed, saying why and what to do).
func (m *manager) lifecycle(ctx workflow.Context, in troupe.LifecycleInput) (troupe.SessionEntry, error) {
	if id, ok := m.actedBefore(ctx); ok {
		return m.answerAgain(id)
	}
	i := m.find(in.ID)
	op := in.Command.Op
	wait := i >= 0 && (op == troupe.CommandPause || op == troupe.CommandSwitch && m.sessions[i].Status == runtime.SessionIdle) &&
		workflow.GetVersion(ctx, versionCommandOutcome, workflow.DefaultVersion, 1) == 1
	if wait {
		in.Command.Reply = workflow.GetCurrentUpdateInfo(ctx).ID
		m.outcomes[in.Command.Reply] = nil
		defer delete(m.outcomes, in.Command.Reply)
	}
	if err := workflow.SignalExternalWorkflow(ctx, in.ID, "", troupe.CommandSignal, in.Command).Get(ctx, nil); err != nil {
		return troupe.SessionEntry{}, err
	}
	if wait {
		// A session that does not answer in time (a switch that waits
		// for a turn after all) is taken at its word as before: its news
		// tells the registry where it stands.
		if _, err := workflow.AwaitWithTimeout(ctx, commandTimeout, func() bool { return m.outcomes[in.Command.Reply] != nil }); err != nil {
			return troupe.SessionEntry{}, err
		}
		if o := m.outcomes[in.Command.Reply]; o != nil && o.Error != "" {
			return troupe.SessionEntry{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s session %s: %s", op, in.ID, o.Error), cmp.Or(o.Type, troupe.ErrBadCommand), nil)
		}
	}
	i = m.find(in.ID)
	e := &m.sessions[i]
	switch in.Command.Op {
	case troupe.CommandPause:
		e.Status = runtime.SessionPaused
	case troupe.CommandResume:
		e.Status = runtime.SessionIdle
	case troupe.CommandStop:
		e.Status = runtime.SessionStopped
	case troupe.CommandRename:
		e.Name = in.Command.Arg
	case troupe.CommandPolicy:
		e.Policy = runtime.InputPolicy(in.Command.Arg)
	case troupe.CommandSwitch:
		e.Backends = []string{in.Command.Arg}
	}
	e.LastActivity = workflow.Now(ctx)
	m.remember(ctx, in.ID)
	return *e, nil
}

func (m *manager) checkFork(ctx workflow.Context, in troupe.ForkInput) error {
	if _, ok := m.actedBefore(ctx); ok || m.createdBy(ctx) >= 0 {
		return nil // Done already: answered as it stands.
	}
	if err := m.checkLifecycle(ctx, troupe.LifecycleInput{ID: in.ID, Command: troupe.SessionCommand{Op: troupe.CommandRename}}); err != nil {
		return err
	}
	switch {
	case in.NewID != "" && m.find(in.NewID) >= 0:
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("session %s exists", in.NewID), troupe.ErrBadCommand, nil)
	case strings.Contains(in.NewID, "/"):
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("session id %q holds a /", in.NewID), troupe.ErrBadCommand, nil)
	}
	return nil
}

// fork asks the session to fork itself (it does so between turns) and
// answers once the fork has started and told the manager so, or the
// session said why it could not.
func (m *manager) fork(ctx workflow.Context, in troupe.ForkInput) (troupe.SessionEntry, error) {
	if id, ok := m.actedBefore(ctx); ok {
		return m.answerAgain(id)
	}
	if i := m.createdBy(ctx); i >= 0 {
		return m.sessions[i], nil
	}
	id := in.NewID
	if id == "" {
		var suffix string
		if err := workflow.SideEffect(ctx, func(workflow.Context) any { return uuid.NewString()[:8] }).Get(&suffix); err != nil {
			return troupe.SessionEntry{}, err
		}
		id = in.ID + "-fork-" + suffix
	}
	req := troupe.ForkRequest{NewID: id, Name: in.Name, Manager: workflow.GetInfo(ctx).WorkflowExecution.ID}
	if err := workflow.SignalExternalWorkflow(ctx, in.ID, "", troupe.ForkSignal, req).Get(ctx, nil); err != nil {
		return troupe.SessionEntry{}, err
	}
	ok, err := workflow.AwaitWithTimeout(ctx, forkTimeout, func() bool { return m.find(id) >= 0 || m.failed[id].Error != "" })
	switch {
	case err != nil:
		return troupe.SessionEntry{}, err
	case !ok:
		return troupe.SessionEntry{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("session %s did not fork within %s (a turn still running?)", in.ID, forkTimeout), troupe.ErrBadCommand, nil)
	case m.failed[id].Error != "":
		f := m.failed[id]
		delete(m.failed, id)
		return troupe.SessionEntry{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("fork of session %s failed: %s", in.ID, f.Error), cmp.Or(f.Type, troupe.ErrBadCommand), nil)
	}
	m.remember(ctx, id)
	// The fork's entry names the update that made it, as a created
	// session's does, for when it is sent again past the creates
	// remembered (createdBy).
	i := m.find(id)
	m.sessions[i].Request = workflow.GetCurrentUpdateInfo(ctx).ID
	return m.sessions[i], nil
}

// changed takes a session's news, at now. A session the registry first
// hears of by its news (a fork) was created then.
func (m *manager) changed(now time.Time, e troupe.SessionEntry) {
	if m.removed[e.ID] {
		return // Late news of a session removed.
	}
	i := m.find(e.ID)
	if i < 0 {
		if e.Created.IsZero() {
			e.Created = now
		}
		m.sessions = append(m.sessions, e)
		return
	}
	e.Created, e.Request = m.sessions[i].Created, m.sessions[i].Request
	if m.sessions[i].Status == runtime.SessionStopped {
		e.Status = runtime.SessionStopped // Late news of a stopped session.
	}
	m.sessions[i] = e
}
