package workflows

// A session's commands (pause, resume, stop, rename, policy, switch,
// budget), its forks, and how it shows itself (its info and its manager's
// entry). session.go holds its life: messages and turns.

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/handoff"
	"github.com/troupe-dev/troupe/memory"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/workflows/budget"
	"github.com/troupe-dev/troupe/workflows/lease"
	"github.com/troupe-dev/troupe/workflows/retention"
)

// supportedPolicy returns the input policy named p ("" for the default),
// or why a session cannot take it, as an update's error.
func supportedPolicy(p string) (runtime.InputPolicy, error) {
	policy, err := runtime.ParsePolicy(p)
	if err != nil {
		return "", temporal.NewNonRetryableApplicationError(err.Error(), troupe.ErrBadCommand, nil)
	}
	return policy, nil
}

// checkCommand is the troupe.command update's validator.
func (s *session) checkCommand(c troupe.SessionCommand) error {
	switch c.Op {
	case troupe.CommandPause, troupe.CommandResume, troupe.CommandStop, troupe.CommandRename:
	case troupe.CommandSwitch:
		if !backendName.MatchString(c.Arg) {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("switch: %q is not a sandbox backend's name (local, bwrap, docker, ...)", c.Arg), troupe.ErrBadCommand, nil)
		}
	case troupe.CommandBudget:
		if _, err := s.changedBudget(c.Arg); err != nil {
			return temporal.NewNonRetryableApplicationError("budget: "+err.Error(), troupe.ErrBadBudget, nil)
		}
	case troupe.CommandPolicy:
		if c.Arg == "" {
			return temporal.NewNonRetryableApplicationError("policy: name one of enqueue, reject, interrupt, rollback", troupe.ErrBadCommand, nil)
		}
		if _, err := supportedPolicy(c.Arg); err != nil {
			return err
		}
	default:
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("unknown session command %q", c.Op), troupe.ErrBadCommand, nil)
	}
	if s.st.Stopped {
		return sessionErr(runtime.ErrSessionStopped)
	}
	return nil
}

// command is the troupe.command update.
func (s *session) command(ctx workflow.Context, c troupe.SessionCommand) (troupe.SessionInfo, error) {
	var err error
	switch c.Op {
	case troupe.CommandPause:
		if err = s.st.Pause(); err == nil {
			// No model call, tool or agent starts anywhere in the turn's
			// tree; the workspaces the session holds are suspended.
			s.ctl.apply(ctx, troupe.Control{Op: troupe.ControlPause, Seq: s.ctl.seq + 1})
			if !lease.SnapshotBeforeStop(ctx) {
				s.boxes.SuspendAll()
				break
			}
			// The pause waits for its suspensions: one whose snapshot
			// fails keeps its sandbox up, and the pause does not happen.
			if serr := s.boxes.SuspendEach(ctx, "pause"); serr != nil {
				_ = s.st.Resume()
				s.ctl.apply(ctx, troupe.Control{Op: troupe.ControlResume, Seq: s.ctl.seq + 1})
				return s.commandFailed(ctx, c, serr)
			}
		}
	case troupe.CommandResume:
		if err = s.st.Resume(); err == nil {
			s.ctl.apply(ctx, troupe.Control{Op: troupe.ControlResume, Seq: s.ctl.seq + 1})
		}
	case troupe.CommandRename:
		s.st.Name = c.Arg
	case troupe.CommandPolicy:
		err = s.st.SetPolicy(runtime.InputPolicy(c.Arg))
	case troupe.CommandSwitch:
		// The main loop switches between turns, before the next one.
		s.switchTo = c.Arg
		s.switchAsked++
	case troupe.CommandBudget:
		err = s.setBudget(ctx, c.Arg)
	case troupe.CommandStop:
		for _, m := range s.st.Stop() {
			s.rec.Add(ctx, troupe.Event{Kind: troupe.EventMessageRefused, Turn: turnNumber(m.Turn), Detail: "the session stopped before this message's turn"})
		}
		if s.cancelTurn != nil {
			s.cancelTurn()
		}
	}
	if err != nil {
		return troupe.SessionInfo{}, sessionErr(err)
	}
	detail := c.Op
	if c.Arg != "" {
		detail += " " + c.Arg
	}
	s.rec.Add(ctx, troupe.Event{Kind: troupe.EventSessionCommand, Detail: detail})
	s.changed(ctx)
	return s.info(), nil
}

// commandUpdate is the troupe.command update: the command, and for a
// switch its outcome, once the session made it between turns (on code
// from versionSnapshotBeforeStop on): a switch whose snapshots fail
// fails with troupe.ErrSnapshotFailed, its sandboxes up on the backend
// they were on.
func (s *session) commandUpdate(ctx workflow.Context, c troupe.SessionCommand) (troupe.SessionInfo, error) {
	info, err := s.command(ctx, c)
	if err != nil || c.Op != troupe.CommandSwitch || !lease.SnapshotBeforeStop(ctx) {
		return info, err
	}
	asked := s.switchAsked
	if err := workflow.Await(ctx, func() bool { return s.switchDone >= asked || s.st.Stopped }); err != nil {
		return troupe.SessionInfo{}, err
	}
	switch {
	case s.switchDone < asked:
		return troupe.SessionInfo{}, sessionErr(runtime.ErrSessionStopped)
	case s.switchDone == asked && s.switchErr != nil:
		return troupe.SessionInfo{}, s.switchErr
	}
	return s.info(), nil
}

// reply tells the manager how the command it asked a reply to (reply,
// when set) ended: err, or nil.
func (s *session) reply(ctx workflow.Context, reply string, err error) {
	if reply == "" || s.in.Manager == "" {
		return
	}
	o := troupe.CommandOutcome{Reply: reply}
	if err != nil {
		o.Error, o.Type = err.Error(), troupe.ErrorType(err)
		var ae *temporal.ApplicationError
		if errors.As(err, &ae) {
			o.Error = ae.Message()
		}
	}
	_ = workflow.SignalExternalWorkflow(ctx, s.in.Manager, "", troupe.CommandDoneSignal, o)
}

// commandFailed ends command c, which failed with err (a typed error that
// says why, such as troupe.ErrSnapshotFailed) after it changed nothing:
// an event says so, and the manager hears where the session stands.
func (s *session) commandFailed(ctx workflow.Context, c troupe.SessionCommand, err error) (troupe.SessionInfo, error) {
	s.rec.Add(ctx, troupe.Event{Kind: troupe.EventSessionCommand, Detail: fmt.Sprintf("%s failed: %s", strings.TrimSpace(c.Op+" "+c.Arg), troupe.FailureText(err))})
	s.changed(ctx)
	return troupe.SessionInfo{}, err
}

// changed shows what changed: in the Web UI's current details, and to
// the session's manager, if any (a signal it need not wait for).
func (s *session) changed(ctx workflow.Context) {
	workflow.SetCurrentDetails(ctx, sessionDetails(s.in.Graph, s.st))
	if s.in.Manager == "" {
		return
	}
	s.news = workflow.SignalExternalWorkflow(ctx, s.in.Manager, "", troupe.SessionChangedSignal, s.entry())
}

// versionNewsBeforeContinue marks the change to sessions that wait, before
// they continue as new, until the server took their last news to the
// manager. The server drops a signal whose sender closed before the
// signal went out, so news sent in the run's last workflow tasks (a
// turn's end, when the history reached its bound with that turn) was
// lost, and the manager listed the session a turn behind, still
// thinking, until its next turn. The marker is written at each
// continue-as-new after news.
const versionNewsBeforeContinue = "troupe.news-before-continue"

// newsTaken waits until the server took the session's last news to its
// manager (or refused it: a manager gone), on code from
// versionNewsBeforeContinue on.
func (s *session) newsTaken(ctx workflow.Context) {
	if s.news == nil || workflow.GetVersion(ctx, versionNewsBeforeContinue, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return
	}
	_ = s.news.Get(ctx, nil)
	s.news = nil
}

// entry is the session as its manager lists it.
func (s *session) entry() troupe.SessionEntry {
	st := s.st
	e := troupe.SessionEntry{ID: s.id, Name: st.Name, Graph: s.in.Graph, Agent: st.Agent, Status: st.Status(), Policy: st.Policy,
		Turns: st.Turns, Usage: st.Usage, LastActivity: st.LastActivity}
	for _, sb := range s.boxes.Describe() {
		if sb.Backend != "" && !slices.Contains(e.Backends, sb.Backend) {
			e.Backends = append(e.Backends, sb.Backend)
		}
	}
	if st.Backend != "" && !slices.Contains(e.Backends, st.Backend) {
		e.Backends = append(e.Backends, st.Backend)
	}
	return e
}

// backendName is what a sandbox backend's name looks like.
var backendName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// fork forks the session between turns, as req asks: each live workspace
// is snapshotted (it stays live), the blob data the fork shares is kept
// for as long as the fork needs it, and the fork starts as an abandoned
// child (it outlives this session) with the conversation forked and each
// workspace to be restored from its snapshot. The fork tells the manager
// it exists; a fork that cannot start is reported to the manager, which
// answers its caller with the error.
func (s *session) fork(ctx workflow.Context, req troupe.ForkRequest) {
	leases, err := s.boxes.SnapshotEach(ctx)
	if err != nil {
		s.forkFailed(ctx, req, err)
		return
	}
	st := *s.st
	st.Queue, st.Running, st.Paused, st.Stopped, st.LastActivity = nil, nil, false, false, workflow.Now(ctx)
	st.Recent = slices.Clone(st.Recent)
	st.Pending = slices.Clone(st.Pending)
	st.Name = req.Name
	if st.Name == "" {
		st.Name = cmp.Or(s.st.Name, s.id) + " (fork)"
	}
	st.Transcript = s.st.Transcript.Fork("transcripts/" + req.NewID + "/forked")
	st.Leases = nil
	for _, l := range leases {
		l.Lease.Forfeit() // A fork's agents restore from the snapshot.
		st.Leases = append(st.Leases, l)
	}
	keep := retention.KeepInput{For: req.NewID, Runs: sharedRuns(st)}
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 5}, Summary: "keep the blob data the fork shares"})
	if err := workflow.ExecuteLocalActivity(lctx, retention.KeepActivityName, keep).Get(ctx, nil); err != nil {
		s.forkFailed(ctx, req, err)
		return
	}
	spec, err := memory.Fork(ctx, s.spec, req.NewID)
	if err != nil {
		s.forkFailed(ctx, req, err)
		return
	}
	in := troupe.SessionInput{Graph: s.in.Graph, Agent: st.Agent, Name: st.Name, Policy: st.Policy, Vars: s.in.Vars, MaxHandoffs: s.in.MaxHandoffs,
		Manager: cmp.Or(req.Manager, s.in.Manager), Fork: &troupe.SessionImage{From: s.id, Spec: spec, State: st}}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID: req.NewID, ParentClosePolicy: enums.PARENT_CLOSE_POLICY_ABANDON,
		WorkflowIDReusePolicy: enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		StaticSummary:         "session of " + s.in.Graph + " forked from " + s.id, WorkflowTaskTimeout: handoff.AgentTaskTimeout,
	})
	if err := workflow.ExecuteChildWorkflow(cctx, troupe.SessionWorkflowName, in).GetChildWorkflowExecution().Get(ctx, nil); err != nil {
		s.forkFailed(ctx, req, err)
		return
	}
	s.rec.Add(ctx, troupe.Event{Kind: troupe.EventSessionForked, Agent: s.st.Agent, Detail: "forked as " + req.NewID})
}

// forkFailed tells the manager a fork could not be made.
func (s *session) forkFailed(ctx workflow.Context, req troupe.ForkRequest, err error) {
	s.rec.Add(ctx, troupe.Event{Kind: troupe.EventSessionCommand, Detail: fmt.Sprintf("fork as %s failed: %v", req.NewID, err)})
	if m := cmp.Or(req.Manager, s.in.Manager); m != "" {
		_ = workflow.SignalExternalWorkflow(ctx, m, "", troupe.ForkFailedSignal, troupe.ForkFailure{NewID: req.NewID, Error: troupe.FailureText(err), Type: forkErrorType(err)})
	}
}

// forkErrorType is the type a fork that failed with err fails with at
// its manager: troupe.ErrSnapshotFailed for a workspace that could not be
// snapshotted (the caller can mend that), else the manager's default.
func forkErrorType(err error) string {
	if troupe.ErrorType(err) == troupe.ErrSnapshotFailed {
		return troupe.ErrSnapshotFailed
	}
	return ""
}

// sharedRuns are the runs (sessions) whose blob data a session state
// refers to: its transcript's bases and its workspaces' snapshots.
func sharedRuns(st runtime.SessionState) []string {
	var runs []string
	add := func(key, area string) {
		if rest, ok := strings.CutPrefix(key, area); ok {
			if run := troupe.RunOf(rest); run != "" && !slices.Contains(runs, run) {
				runs = append(runs, run)
			}
		}
	}
	for _, b := range st.Transcript.Bases {
		add(b.Key, "transcripts/")
	}
	for _, l := range st.Leases {
		add(l.Lease.Snapshot, "snapshots/")
	}
	return runs
}

// info is the session as its query answers.
func (s *session) info() troupe.SessionInfo {
	st := s.st
	in := troupe.SessionInfo{ID: s.id, Graph: s.in.Graph, Name: st.Name, Status: st.Status(), Agent: st.Agent, Policy: st.Policy, Backend: st.Backend,
		Turns: st.Turns, Queued: len(st.Queue), Usage: st.Usage, LastActivity: st.LastActivity,
		Recent: append([]runtime.TurnRecord(nil), st.Recent...), NextEvent: s.rec.Next()}
	if st.Running != nil {
		in.Running = st.Running.Turn
	}
	in.Sandboxes = s.boxes.Describe()
	in.Agents, in.Cost, in.Budget = st.Agents, st.Agents.Cost(), st.Budget.Report()
	return in
}

// switchBackend moves every workspace to the backend asked for, between
// turns: each live one is snapshotted and stopped (its next command
// restores it there). Every sandbox a later turn starts is on it too,
// at any depth: the turn's input carries it (AgentInput.Backend).
func (s *session) switchBackend(ctx workflow.Context) {
	to := s.switchTo
	s.switchTo = ""
	asked := s.switchAsked
	replies := s.switchReplies
	s.switchReplies = nil
	err := s.boxes.SuspendEach(ctx, "switch to "+to)
	s.switchDone, s.switchErr = asked, err
	if err != nil {
		s.rec.Add(ctx, troupe.Event{Kind: troupe.EventSessionCommand, Detail: fmt.Sprintf("switch to %s failed: %v", to, err)})
		if troupe.ErrorType(err) == troupe.ErrSnapshotFailed {
			s.changed(ctx) // The manager took the switch as done.
		}
	} else {
		s.st.Backend = to
		s.rec.Add(ctx, troupe.Event{Kind: troupe.EventSessionCommand, Detail: "switched to " + to})
		s.changed(ctx)
	}
	for _, r := range replies {
		s.reply(ctx, r, err)
	}
}

// changedBudget is the session's budget as the budget command's arg
// changes it (nil: no budget), or why it cannot be.
func (s *session) changedBudget(arg string) (*agents.Budget, error) {
	var cur agents.Budget
	if s.st.Budget != nil {
		cur = s.st.Budget.Budget
	}
	b, err := cur.Change(arg)
	if err != nil {
		return nil, err
	}
	nb := budget.OrNil(b)
	if s.spec == nil {
		return nb, nil // The manager's check: the session checks the prices.
	}
	return nb, budget.Check(s.spec, nb)
}

// setBudget changes the session's budget (the budget command): the
// ledger takes it at once, and the turns that start after ask under it.
// A session that had no budget starts one with what it spent so far.
func (s *session) setBudget(ctx workflow.Context, arg string) error {
	nb, err := s.changedBudget(arg)
	if err != nil {
		return err
	}
	spec := *s.spec
	spec.Budget = nb
	s.spec = &spec
	if s.st.Budget == nil {
		if nb == nil {
			return nil
		}
		s.st.Budget = &runtime.BudgetLedger{Agents: s.st.Agents, Calls: int64(s.st.Usage.Requests)}
	}
	var b agents.Budget
	if nb != nil {
		b = *nb
	}
	s.st.Budget.SetBudget(b)
	s.budget.Changed(ctx)
	return nil
}
