package workflows

// A session is a conversation that lives as long as its user keeps it.
// Its workflow, SessionWorkflow, tells this story:
//
//  1. It takes the graph's spec once, as a run does, and keeps it.
//  2. It waits, with no timer and no live sandbox once their idle timeout
//     has passed, for a message: an update (troupe.send), whose caller gets
//     the turn's id and, if it asks to wait, the turn's outcome; or a
//     signal (troupe.message).
//  3. It runs the turn as a run routes its agents (route): the agent that
//     ended the last turn answers, with the conversation so far; handoffs,
//     agents-as-tools and sandboxes work as in a run. Each agent of the
//     chain is lent the sandbox lease the session keeps for it, and gives
//     it back at its end, or with its failure (a failed turn loses none of
//     the files it wrote): one workspace per agent for the whole session,
//     suspended after its idle timeout and restored on the next command.
//  4. A message that arrives during a turn meets the session's input
//     policy (runtime.InputPolicy): queued, refused, or it rolls the
//     running turn back.
//  5. It continues as new when its history reaches the spec's bound, while
//     idle, carrying its state (runtime.SessionState, by reference) and its
//     recent events.
//  6. Stop ends it: a running turn is cancelled, every sandbox stopped.
//
// Commands (troupe.command) pause and resume it, rename it, change its
// policy and stop it; the troupe.session query says where it stands.

import (
	"errors"
	"fmt"
	"slices"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/handoff"
	"github.com/troupe-dev/troupe/memory"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/workflows/approval"
	"github.com/troupe-dev/troupe/workflows/budget"
	"github.com/troupe-dev/troupe/workflows/events"
	"github.com/troupe-dev/troupe/workflows/lease"
)

// session is a running SessionWorkflow: its state and what carries out
// its effects.
type session struct {
	r     *Runner
	id    string
	in    troupe.SessionInput
	spec  *runtime.GraphSpec
	st    *runtime.SessionState
	rec   *events.Recorder
	boxes *lease.Keeper
	// ctl passes pause, resume and interrupt to the running turn's
	// agents.
	ctl *control
	// cancelTurn cancels the running turn (stop, rollback); rollback says
	// the cancellation is a rollback.
	cancelTurn workflow.CancelFunc
	rollback   bool
	// forks are the fork requests waiting for the turn to end.
	forks []troupe.ForkRequest
	// signals are the session's signal channels.
	signals []signalIn
	// turnsInRun counts the turns of this run.
	turnsInRun int
	// switchTo is the backend a switch asked for, done between turns;
	// switchAsked counts the switches asked, switchDone those done (a
	// later ask covers an earlier one), switchErr why the last failed.
	switchTo                string
	switchAsked, switchDone int
	switchErr               error
	// switchReplies are the replies (troupe.SessionCommand.Reply) the
	// manager waits for, of the switches asked and not yet done.
	switchReplies []string
	// sent are the messages the session took last (carried, then this
	// run's), by update id, at most keptSends of them.
	sent []troupe.SentMessage
	// continuing says the run is about to continue as new: callers
	// waiting on turns are answered Continued, so that it can.
	continuing bool
	// mem feeds the turns' rollouts to memory, off the turns' path.
	mem memory.Feed
	// approvals take the requests and decisions of the running turn's
	// calls that wait (on st.Approvals).
	approvals *approval.Desk
	// budget answers the running turn's agents for the session's budget
	// (st.Budget).
	budget *budget.Tree
	// news is the signal of the session's last news to its manager
	// (changed), until the server took it.
	news workflow.Future
}

// SessionWorkflow runs a session: see the top of this file.
func (r *Runner) SessionWorkflow(ctx workflow.Context, in troupe.SessionInput) (*troupe.SessionInfo, error) {
	s := &session{r: r, id: workflow.GetInfo(ctx).WorkflowExecution.ID, in: in}
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	if err := s.handle(ctx); err != nil {
		return nil, err
	}
	for {
		s.continuing = s.timeToContinue(ctx)
		err := workflow.Await(ctx, func() bool {
			return len(s.forks) > 0 || s.switchTo != "" || s.st.Ready() || s.st.Stopped || s.timeToContinue(ctx) && workflow.AllHandlersFinished(ctx)
		})
		switch {
		case err != nil || ctx.Err() != nil:
			// The workflow was cancelled: it stops as on a stop command,
			// its sandboxes stopped, and ends cancelled.
			s.st.Stop()
			dctx, cancel := workflow.NewDisconnectedContext(ctx)
			defer cancel()
			_, _ = s.end(dctx)
			return nil, temporal.NewCanceledError()
		case s.st.Stopped:
			return s.end(ctx)
		case len(s.forks) > 0:
			req := s.forks[0]
			s.forks = s.forks[1:]
			s.fork(ctx, req)
		case s.switchTo != "":
			s.switchBackend(ctx)
		case s.timeToContinue(ctx) && workflow.AllHandlersFinished(ctx):
			// Between turns, even with messages queued (they are carried):
			// a long queue does not grow one run's history unbounded.
			if s.drain(ctx) {
				continue // Signals came in: they are taken first.
			}
			if err := s.mem.Flush(ctx); err != nil {
				return nil, err
			}
			if err := s.boxes.Settle(ctx); err != nil {
				return nil, err
			}
			if err := s.rec.SavePage(ctx); err != nil {
				return nil, err
			}
			s.newsTaken(ctx)
			// Settling and saving block: what came in meanwhile is taken
			// first, and the idle timers run again.
			if s.drain(ctx) || len(s.forks) > 0 || s.switchTo != "" || !workflow.AllHandlersFinished(ctx) {
				s.boxes.Rearm()
				continue
			}
			return nil, s.continueAsNew(ctx)
		case s.st.Ready():
			if err := s.turn(ctx); err != nil {
				return nil, err
			}
		}
	}
}

// begin sets the session up: from its carry, or from its input.
func (s *session) begin(ctx workflow.Context) error {
	var err error
	if f := s.in.Fork; f != nil && s.in.Carry == nil {
		if f.Spec == nil {
			return troupe.NonRetryable(troupe.ErrInternal, "session %s forked without its graph's spec", s.id)
		}
		s.spec, s.st = f.Spec, &f.State
		s.st.LastActivity = workflow.Now(ctx)
		if s.rec, err = events.NewRecorder(ctx, nil, 1, nil, s.r.cfg.Events); err != nil {
			return err
		}
		s.rec.Add(ctx, troupe.Event{Kind: troupe.EventSessionStarted, Agent: s.st.Agent, Detail: "forked from " + f.From + ": " + sessionDetails(s.in.Graph, s.st)})
		s.boxes = lease.NewKeeper(ctx, s.r.leaseSettings(), s.rec, s.id, s.in.Graph, s.st)
		s.ctl = newControl(ctx, false)
		s.changed(ctx) // The manager registers the fork.
		return nil
	}
	if c := s.in.Carry; c != nil {
		if c.Spec == nil {
			return troupe.NonRetryable(troupe.ErrInternal, "session %s continued without its graph's spec", s.id)
		}
		s.spec, s.st, s.sent = c.Spec, &c.State, c.Sent
		if s.rec, err = events.NewRecorder(ctx, c.Events, c.NextEvent, c.Pages, s.r.cfg.Events); err != nil {
			return err
		}
	} else {
		if s.spec, _, err = s.r.pin(ctx, troupe.RunInput{Graph: s.in.Graph, MaxHandoffs: s.in.MaxHandoffs, Budget: s.in.Budget}); err != nil {
			return err
		}
		start := s.in.Agent
		if start == "" {
			start = s.spec.Entry
		}
		if s.spec.Agent(start) == nil {
			return troupe.NonRetryable(troupe.ErrUnknownAgent, "%v %q in graph %s", agents.ErrUnknownAgent, start, s.in.Graph)
		}
		policy, err := supportedPolicy(string(s.in.Policy))
		if err != nil {
			return err
		}
		s.st = runtime.NewSessionState(s.in.Name, start, policy)
		s.st.LastActivity, s.st.Budget = workflow.Now(ctx), runtime.NewBudgetLedger(s.spec.Budget)
		if s.rec, err = events.NewRecorder(ctx, nil, 1, nil, s.r.cfg.Events); err != nil {
			return err
		}
		s.rec.Add(ctx, troupe.Event{Kind: troupe.EventSessionStarted, Agent: start, Detail: sessionDetails(s.in.Graph, s.st)})
	}
	s.boxes = lease.NewKeeper(ctx, s.r.leaseSettings(), s.rec, s.id, s.in.Graph, s.st)
	s.ctl = newControl(ctx, false)
	s.ctl.paused = s.st.Paused
	workflow.SetCurrentDetails(ctx, sessionDetails(s.in.Graph, s.st))
	return nil
}

// sessionDetails is what the Web UI shows of a session.
func sessionDetails(graph string, st *runtime.SessionState) string {
	name := st.Name
	if name == "" {
		name = "(unnamed)"
	}
	return fmt.Sprintf("session %s of %s: %s, %d turns, next answered by %s", name, graph, st.Status(), st.Turns, st.Agent)
}

// handle sets the handlers of the session's updates, signal and query.
func (s *session) handle(ctx workflow.Context) error {
	err := workflow.SetUpdateHandlerWithOptions(ctx, troupe.SendUpdate, s.send, workflow.UpdateHandlerOptions{
		Validator: func(ctx workflow.Context, in troupe.SendInput) error {
			if _, ok := s.sentBefore(ctx); ok {
				return nil // Taken already: answered as it was then.
			}
			return sessionErr(s.st.CheckMessage(in.Message))
		},
	})
	if err != nil {
		return err
	}
	// A message stored apart comes by an update of its own, which a
	// worker that does not know references rejects, unknown, rather than
	// run a turn on its preview.
	err = workflow.SetUpdateHandlerWithOptions(ctx, troupe.SendRefUpdate, s.send, workflow.UpdateHandlerOptions{
		Validator: func(ctx workflow.Context, in troupe.SendInput) error {
			if in.Ref == nil || in.Ref.Key == "" {
				return temporal.NewNonRetryableApplicationError("a message by reference without its reference", troupe.ErrBadCommand, nil)
			}
			if _, ok := s.sentBefore(ctx); ok {
				return nil
			}
			return sessionErr(s.st.CheckMessage(in.Ref.Preview))
		},
	})
	if err != nil {
		return err
	}
	err = workflow.SetUpdateHandler(ctx, troupe.AwaitUpdate, func(ctx workflow.Context, turn string) (troupe.SendResult, error) {
		return s.await(ctx, troupe.SendResult{Turn: turn})
	})
	if err != nil {
		return err
	}
	err = workflow.SetUpdateHandlerWithOptions(ctx, troupe.CommandUpdate, s.commandUpdate, workflow.UpdateHandlerOptions{
		Validator: func(ctx workflow.Context, c troupe.SessionCommand) error { return s.checkCommand(c) },
	})
	if err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, troupe.SessionQuery, func() (troupe.SessionInfo, error) { return s.info(), nil }); err != nil {
		return err
	}
	// A reaper asks which sandboxes the session still owns (lease.KeepOwned).
	if err := lease.SetHeldQuery(ctx, func() []lease.Held {
		if s.boxes == nil {
			return nil
		}
		return s.boxes.Held()
	}); err != nil {
		return err
	}
	approvals, err := approval.NewDesk(ctx, &s.st.Approvals, s.changed)
	if err != nil {
		return err
	}
	s.approvals = approvals
	if s.budget, err = budget.NewTree(ctx, &s.st.Budget, true, s.rec, "session", budget.SessionHint); err != nil {
		return err
	}
	// Fork requests (from the manager) wait for the turn to end;
	// commands come from the manager; signalled messages have no caller
	// to refuse, so a refused one is an event.
	s.signals = []signalIn{
		{workflow.GetSignalChannel(ctx, troupe.ForkSignal), func(ctx workflow.Context, c workflow.ReceiveChannel) bool {
			var req troupe.ForkRequest
			if !c.ReceiveAsync(&req) {
				return false
			}
			if s.st.Paused && s.st.Running != nil {
				// A fork waits for the turn to end, which a pause holds.
				s.forkFailed(ctx, req, errors.New("the session is paused in the middle of a turn: resume it, or fork once the turn has ended"))
				return true
			}
			s.forks = append(s.forks, req)
			return true
		}},
		{workflow.GetSignalChannel(ctx, troupe.CommandSignal), func(ctx workflow.Context, c workflow.ReceiveChannel) bool {
			var cmd troupe.SessionCommand
			if !c.ReceiveAsync(&cmd) {
				return false
			}
			err := s.checkCommand(cmd)
			if err != nil {
				s.rec.Add(ctx, troupe.Event{Kind: troupe.EventSessionCommand, Detail: fmt.Sprintf("%s refused: %v", cmd.Op, err)})
			} else if _, err = s.command(ctx, cmd); err == nil && cmd.Op == troupe.CommandSwitch && cmd.Reply != "" {
				s.switchReplies = append(s.switchReplies, cmd.Reply) // Answered once switched.
				return true
			}
			s.reply(ctx, cmd.Reply, err)
			return true
		}},
		{workflow.GetSignalChannel(ctx, troupe.MessageSignal), func(ctx workflow.Context, c workflow.ReceiveChannel) bool {
			var in troupe.SendInput
			if !c.ReceiveAsync(&in) {
				return false
			}
			if _, err := s.submit(ctx, in); err != nil {
				s.rec.Add(ctx, troupe.Event{Kind: troupe.EventMessageRefused, Detail: fmt.Sprintf("%v: %s", err, troupe.Preview(in.Text(), 200))})
			}
			return true
		}},
	}
	for _, sig := range s.signals {
		workflow.Go(ctx, func(gctx workflow.Context) {
			for {
				workflow.NewSelector(gctx).AddReceive(sig.ch, func(c workflow.ReceiveChannel, _ bool) { sig.take(gctx, c) }).Select(gctx)
				if gctx.Err() != nil {
					return
				}
			}
		})
	}
	return nil
}

// signalIn is a signal channel of the session and how it takes one
// signal from it (false when none is there).
type signalIn struct {
	ch   workflow.ReceiveChannel
	take func(workflow.Context, workflow.ReceiveChannel) bool
}

// drain takes the signals that came in and were not taken yet, before the
// session continues as new (which would lose them), and reports whether
// there were any.
func (s *session) drain(ctx workflow.Context) bool {
	s.approvals.Drain(ctx) // Late news of an ended turn: nothing waits.
	s.budget.Drain(ctx)
	any := false
	for _, sig := range s.signals {
		for sig.take(ctx, sig.ch) {
			any = true
		}
	}
	return any
}

// sessionErr is a transition's refusal as the update's caller gets it.
func sessionErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, runtime.ErrSessionBusy):
		return temporal.NewNonRetryableApplicationError(err.Error(), troupe.ErrSessionBusy, nil)
	case errors.Is(err, runtime.ErrSessionStopped):
		return temporal.NewNonRetryableApplicationError(err.Error(), troupe.ErrSessionStopped, nil)
	case errors.Is(err, runtime.ErrBudgetSpent):
		return temporal.NewNonRetryableApplicationError(err.Error(), troupe.ErrBudgetExceeded, nil)
	}
	return temporal.NewNonRetryableApplicationError(err.Error(), troupe.ErrBadCommand, nil)
}

// submit queues a message and preempts the running turn as the policy
// says.
func (s *session) submit(ctx workflow.Context, in troupe.SendInput) (troupe.SendResult, error) {
	msg := runtime.SessionMessage{Text: in.Message}
	if in.Ref != nil {
		// Stored apart: the session carries its key and its start.
		msg = runtime.SessionMessage{Text: in.Ref.Preview, Ref: in.Ref.Key, Size: in.Ref.Size}
		if msg.Text == "" || msg.Ref == "" {
			return troupe.SendResult{}, temporal.NewNonRetryableApplicationError("a message by reference without its reference or preview", troupe.ErrBadCommand, nil)
		}
	} else if err := troupe.CheckPayload("the message", len(in.Message)); err != nil {
		return troupe.SendResult{}, err
	}
	ahead := len(s.st.Queue)
	if s.st.Running != nil {
		ahead++
	}
	cursor := troupe.Cursor{s.id: s.rec.Next() - 1}
	m, p, err := s.st.SubmitMessage(msg, workflow.Now(ctx))
	if err != nil {
		return troupe.SendResult{}, sessionErr(err)
	}
	s.rec.Add(ctx, troupe.Event{Kind: troupe.EventMessage, Turn: turnNumber(m.Turn), Detail: troupe.Preview(msg.Text, 200)})
	switch {
	case p == runtime.PreemptRollback && s.cancelTurn != nil:
		s.rollback = true
		s.cancelTurn()
	case p == runtime.PreemptInterrupt:
		s.ctl.apply(ctx, troupe.Control{Op: troupe.ControlInterrupt})
	}
	return troupe.SendResult{Turn: m.Turn, Ahead: ahead, Cursor: cursor}, nil
}

// send is the troupe.send update.
func (s *session) send(ctx workflow.Context, in troupe.SendInput) (troupe.SendResult, error) {
	res, again := s.sentBefore(ctx)
	if !again {
		var err error
		if res, err = s.submit(ctx, in); err != nil {
			return res, err
		}
		if id := workflow.GetCurrentUpdateInfo(ctx).ID; id != "" {
			s.sent = append(s.sent, troupe.SentMessage{Update: id, Result: res})
			if len(s.sent) > keptSends {
				s.sent = slices.Clone(s.sent[len(s.sent)-keptSends:])
			}
		}
	}
	if !in.Wait {
		return res, nil
	}
	return s.await(ctx, res)
}

// keptSends bounds the messages a session remembers by update id
// (troupe.SentMessage): a client sends an update again within seconds,
// while its first request waits, so the last runs' messages are enough.
const keptSends = 256

// sentBefore returns the result a message sent by the running update
// got when the session took it, if it did: the update was sent again,
// after the run that took it continued as new (troupe.SentMessage).
func (s *session) sentBefore(ctx workflow.Context) (troupe.SendResult, bool) {
	id := workflow.GetCurrentUpdateInfo(ctx).ID
	if id == "" {
		return troupe.SendResult{}, false
	}
	for _, m := range slices.Backward(s.sent) {
		if m.Update == id {
			return m.Result, true
		}
	}
	return troupe.SendResult{}, false
}

// await waits for res's turn to end and puts its record in res. When the
// session is about to continue as new, it answers Continued at once: a
// caller waiting keeps the run from ending, so it waits again on the next
// run (AwaitUpdate).
func (s *session) await(ctx workflow.Context, res troupe.SendResult) (troupe.SendResult, error) {
	var rec runtime.TurnRecord
	ok := false
	if err := workflow.Await(ctx, func() bool {
		rec, ok = s.st.Record(res.Turn)
		return ok || s.continuing && !s.st.Stopped || !s.queuedOrRunning(res.Turn)
	}); err != nil {
		return res, err
	}
	n := turnNumber(res.Turn)
	switch {
	case ok:
		res.Record = &rec
	case s.st.Stopped:
		return res, temporal.NewNonRetryableApplicationError(fmt.Sprintf("the session stopped before turn %s was answered", res.Turn), troupe.ErrSessionStopped, nil)
	case n < 1 || n > s.st.NextTurn:
		return res, temporal.NewNonRetryableApplicationError(fmt.Sprintf("no turn %s in this session", res.Turn), troupe.ErrBadCommand, nil)
	case s.continuing:
		res.Continued = true
	default:
		return res, temporal.NewNonRetryableApplicationError(fmt.Sprintf("turn %s ended longer ago than the session keeps records (its events hold it)", res.Turn), troupe.ErrBadCommand, nil)
	}
	return res, nil
}

func (s *session) queuedOrRunning(turn string) bool {
	if s.st.Running != nil && s.st.Running.Turn == turn {
		return true
	}
	return slices.ContainsFunc(s.st.Queue, func(m runtime.SessionMessage) bool { return m.Turn == turn })
}

func turnNumber(id string) int {
	var n int
	_, _ = fmt.Sscanf(id, "t%d", &n)
	return n
}

// turn runs the next message's turn.
func (s *session) turn(ctx workflow.Context) error {
	m, err := s.st.StartTurn()
	if err != nil {
		return troupe.NonRetryable(troupe.ErrInternal, "%v", err)
	}
	s.turnsInRun++
	s.changed(ctx)
	n := turnNumber(m.Turn)
	prefix := s.id + "/" + m.Turn
	tctx, cancel := workflow.WithCancel(ctx)
	tctx, span := traceTurn(tctx, s.id, m.Turn)
	s.cancelTurn, s.rollback = cancel, false
	defer func() { s.cancelTurn = nil }()
	startLeases := s.boxes.Leases()
	startTranscript := s.st.Transcript
	s.ctl.interrupted = false
	// What an interrupted turn left to say goes first.
	pending := append(append([]agents.Item(nil), s.st.Pending...), m.Item())
	// Every sandbox the turn starts, at any depth, is on the backend the
	// session switched to, if it did.
	in := troupe.AgentInput{Graph: s.in.Graph, RunID: s.id, Vars: s.in.Vars, Transcript: s.st.Transcript, Pending: pending, Spec: s.spec, Backend: s.st.Backend}
	rr, err := s.route(tctx, handoff.State{Current: s.st.Agent, Input: in}, prefix)
	span.End(ctx, err)
	// No call of the turn waits any more, however it ended.
	s.approvals.Drain(ctx)
	s.st.Approvals.Forget(prefix + "/")
	rec := runtime.TurnRecord{Turn: m.Turn, Message: troupe.Preview(m.Text, 200), Workflow: prefix, Started: m.At, Ended: workflow.Now(ctx)}
	agent, transcript, left := s.st.Agent, s.st.Transcript, s.st.Pending
	if rr != nil {
		rec.Path, rec.ModelTurns, rec.Usage = rr.Path, rr.Turns, rr.Usage
		rec.Agents, rec.Cost = rr.Agents, rr.Agents.Cost()
	}
	switch {
	case err == nil && rr.Interrupted:
		// What the turn did is kept: the next message is answered with it.
		rec.Outcome, rec.Agent = runtime.TurnInterrupted, rr.Agent
		agent, transcript, left = rr.Agent, *rr.Transcript, rr.Pending
		s.rec.Add(ctx, troupe.Event{Kind: troupe.EventInterrupted, Agent: rr.Agent, Turn: n, Detail: "a new message interrupted the turn: what it did is kept"})
	case err == nil:
		left = nil
		rec.Outcome, rec.Agent, rec.Output = runtime.TurnAnswered, rr.Agent, rr.Output
		agent, transcript = rr.Agent, *rr.Transcript
		s.rec.Add(ctx, troupe.Event{Kind: troupe.EventFinal, Agent: rr.Agent, Turn: n, Detail: troupe.Preview(string(rr.Output), 200)})
	case s.rollback:
		// The turn's agents stopped the sandboxes they held; those given
		// back during the turn are stopped here; each workspace restarts
		// from its snapshot at the turn's start. The conversation goes on
		// from the turn's start under a key of its own, so no segment the
		// turn wrote is written again (a worker may have read it).
		s.boxes.Restore(ctx, startLeases)
		transcript = s.st.Transcript.Fork("transcripts/" + prefix + "/rolled-back")
		rec.Outcome, rec.Agent = runtime.TurnRolledBack, s.st.Agent
		s.rec.Add(ctx, troupe.Event{Kind: troupe.EventTurnRolledBack, Agent: s.st.Agent, Turn: n, Detail: "a new message rolled the turn back: the conversation and workspaces are as they were before it"})
	default:
		// A failed turn leaves the conversation as it was before it. The
		// failing agent stopped its sandbox: its workspace goes back to
		// the snapshot it was lent with; agents the turn passed through
		// before keep what they gave back.
		rec.Outcome, rec.Agent, rec.Error, rec.ErrorType = runtime.TurnFailed, s.st.Agent, troupe.FailureText(err), troupe.ErrorType(err)
		if s.st.Stopped {
			rec.Error = "the session stopped during the turn"
		}
		s.rec.Add(ctx, troupe.Event{Kind: troupe.EventFailed, Agent: s.st.Agent, Turn: n, Detail: rec.Error})
	}
	rec.Ended = workflow.Now(ctx)
	if err := s.st.TurnEnded(rec, agent, transcript); err != nil {
		return troupe.NonRetryable(troupe.ErrInternal, "%v", err)
	}
	s.st.Pending = left
	s.changed(ctx)
	var end *runtime.TranscriptRef
	if rec.Outcome == runtime.TurnAnswered || rec.Outcome == runtime.TurnInterrupted {
		end = &transcript
	}
	s.mem.Turn(ctx, s.spec, s.id, m.Text, startTranscript, rec, end)
	return nil
}

// timeToContinue reports whether the session's history has reached its
// bound (or the server suggests continuing as new).
func (s *session) timeToContinue(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return s.turnsInRun >= sessionTurnsPerRun ||
		s.spec.ContinueAfterEvents > 0 && info.GetCurrentHistoryLength() >= s.spec.ContinueAfterEvents || info.GetContinueAsNewSuggested()
}

// sessionTurnsPerRun bounds the turns of one run of a session. The server
// keeps each update a run took (a message, a command) in the run's state
// until the run ends, and writes that state at every step: a run of many
// turns made each turn dearer (a turn at 1,000 took 1.7 times a turn at
// 10 with the history bound alone).
const sessionTurnsPerRun = 100

// continueAsNew carries the session, idle, into its next run.
func (s *session) continueAsNew(ctx workflow.Context) error {
	s.rec.Add(ctx, troupe.Event{Kind: troupe.EventContinued, Agent: s.st.Agent,
		Detail: fmt.Sprintf("history of %d events: continuing as new after turn %d", workflow.GetInfo(ctx).GetCurrentHistoryLength(), s.st.Turns)})
	next := s.in
	next.Fork = nil // The state carried holds what the fork gave.
	next.Carry = &troupe.SessionCarry{Spec: s.spec, State: *s.st, Sent: s.sent}
	next.Carry.Events, next.Carry.NextEvent, next.Carry.Pages = s.rec.Carry()
	return workflow.NewContinueAsNewError(ctx, troupe.SessionWorkflowName, next)
}

// end stops the session's sandboxes and ends it.
func (s *session) end(ctx workflow.Context) (*troupe.SessionInfo, error) {
	for _, req := range s.forks {
		s.forkFailed(ctx, req, errors.New("the session stopped"))
	}
	s.forks = nil
	for _, r := range s.switchReplies {
		s.reply(ctx, r, sessionErr(runtime.ErrSessionStopped))
	}
	s.switchReplies = nil
	s.boxes.StopAll(ctx)
	s.mem.Final(ctx, s.spec, s.id)
	s.rec.Add(ctx, troupe.Event{Kind: troupe.EventSessionStopped, Agent: s.st.Agent, Detail: fmt.Sprintf("after %d turns", s.st.Turns)})
	s.changed(ctx)
	// The callers waiting on turns are told before the workflow ends, and
	// fork requests that came in meanwhile are answered.
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return nil, err
	}
	s.drain(ctx)
	for _, req := range s.forks {
		s.forkFailed(ctx, req, errors.New("the session stopped"))
	}
	s.forks = nil
	info := s.info()
	return &info, nil
}

// route runs a session's turn from rs, unless the session's budget is
// spent: then the turn fails at once, starting no agent.
func (s *session) route(ctx workflow.Context, rs handoff.State, prefix string) (*handoff.Result, error) {
	if why := s.st.Budget.Spent(); why != "" {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("the session's budget is spent (%s): %s", why, budget.SessionHint),
			troupe.ErrBudgetExceeded, nil, s.st.Budget.Report())
	}
	budgeted := s.spec.Budget != nil
	rr, err := (&handoff.Route{Spec: s.spec, Events: s.rec, Prefix: prefix, Sandboxes: s.boxes, Control: s.ctl, Budget: s.budget}).From(ctx, rs)
	if l := s.st.Budget; !budgeted && l != nil && rr != nil {
		// A budget set during the turn, whose agents did not report:
		// what they used counts now.
		for _, u := range rr.Agents {
			l.Count(u)
		}
		l.Calls += int64(rr.Usage.Requests)
	}
	s.budget.Settle(ctx) // No agent of the turn lives.
	return rr, err
}
