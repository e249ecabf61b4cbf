package workflows

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/mcp"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/workflows/approval"
	"github.com/troupe-dev/troupe/workflows/budget"
	"github.com/troupe-dev/troupe/workflows/events"
	"github.com/troupe-dev/troupe/workflows/gate"
	"github.com/troupe-dev/troupe/workflows/guardrail"
	"github.com/troupe-dev/troupe/workflows/lease"
)

// AgentWorkflow runs one agent until it gives a final output or hands off:
// model turn, then the turn's tool calls in parallel, then the next turn.
// Its state is one runtime.AgentState, whose transitions decide what comes
// next; the workflow only carries out the effects (the model turn, the
// calls) and records the events.
//
// Between turns the agent is held while its session is paused, ends when
// the user interrupted it, and continues as new when its run is long.
func (r *Runner) AgentWorkflow(ctx workflow.Context, in AgentWorkflowInput) (*troupe.AgentResult, error) {
	a, err := r.startAgent(ctx, in)
	if err != nil {
		return nil, err
	}
	// The turn the previous run was about to take, or the first.
	next := runtime.Next{Action: runtime.CallModel, Turn: a.st.Turn}
	if in.Carry == nil {
		next = a.st.Begin(a.agent)
	}
	for {
		switch next.Action {
		case runtime.CallModel:
			if err := a.calls.ctl.hold(ctx, a.calls.sb); err != nil {
				return a.fail(ctx, err)
			}
			if a.calls.ctl.stopping() {
				res := a.result()
				res.Interrupted, res.Pending = true, a.st.Pending
				return a.finish(ctx, troupe.Event{Kind: troupe.EventInterrupted, Turn: next.Turn, Detail: "interrupted by the user before turn " + fmt.Sprint(next.Turn)}, res, nil)
			}
			if a.canContinue && r.timeToContinue(ctx, a.spec, a.turnsInRun) {
				err := r.continueAsNew(ctx, in, a.st, a.calls, a.rec)
				if _, ok := err.(*workflow.ContinueAsNewError); ok {
					return nil, err
				}
				return a.fail(ctx, err) // Cancelled while a suspend finished: the sandbox is stopped.
			}
			next, err = a.modelTurn(ctx, next.Turn)
		case runtime.RunCalls:
			next, err = a.runCalls(ctx, next.Calls)
		default:
			return a.end(ctx, next)
		}
		if err != nil {
			return a.fail(ctx, err)
		}
	}
}

// agentRun is one run of an agent's workflow: the agent, its state, the
// recorder of its events, and the calls and gates of its turns.
type agentRun struct {
	r     *Runner
	in    AgentWorkflowInput
	spec  *runtime.GraphSpec
	agent *runtime.AgentSpec
	rec   *events.Recorder
	st    *runtime.AgentState
	rc    agents.RunContext
	calls *turnCalls
	// kept is whether a session keeps the agent's sandbox between runs.
	kept bool
	// canContinue is whether the run may continue as new (runs recorded
	// before agents continued as new never do); turnsInRun counts its
	// turns.
	canContinue bool
	turnsInRun  int
}

// startAgent sets up a run of the agent's workflow: its spec, its state
// (new, or carried from the previous run), its event recorder, its sandbox
// and MCP tools, and its gates.
func (r *Runner) startAgent(ctx workflow.Context, in AgentWorkflowInput) (*agentRun, error) {
	spec, agent, err := r.agentSpec(in.AgentInput)
	if err != nil {
		return nil, err
	}
	traceAgent(ctx, in.Graph, agent.Name)
	a := &agentRun{r: r, in: in, spec: spec, agent: agent}
	a.canContinue = workflow.GetVersion(ctx, versionContinueAsNew, workflow.DefaultVersion, 1) == 1
	carry := in.Carry
	if carry == nil {
		carry = &AgentCarry{}
	}
	rec, err := events.NewRecorder(ctx, carry.Events, carry.NextEvent, carry.Pages, r.cfg.Events)
	if err != nil {
		return nil, err
	}
	a.rec = rec
	wfID := workflow.GetInfo(ctx).WorkflowExecution.ID
	// The memory scope is the spec's: fixed at the run's or session's
	// start, a fork's own after a fork.
	// The first run id tells the agent's calls' idempotency keys from
	// those of another execution of a reused workflow id; it is data of
	// the activities' inputs, no command.
	a.rc = agents.RunContext{WorkflowID: wfID, RunID: in.RunID, Agent: agent.Name, Vars: in.Vars, MemoryScope: cmp.Or(agent.MemoryReadScope, agent.MemoryScope),
		Execution: workflow.GetInfo(ctx).FirstRunID}
	transcript := in.Transcript
	if transcript.Key == "" {
		transcript.Key = "transcripts/" + wfID
	}
	st := runtime.NewAgentState(agent.Name, transcript, in.Pending)
	if in.Carry != nil {
		st = &carry.State
		// Carries from before the lease and the catalog were part of the
		// state held them beside it.
		if st.Lease == nil {
			st.Lease = carry.Lease
		}
		if st.MCP == nil && !st.MCPLost {
			st.MCP, st.MCPLost = carry.MCP, carry.MCPLost
		}
	} else {
		rec.Add(ctx, troupe.Event{Kind: troupe.EventAgentStarted, Agent: agent.Name})
	}
	a.st = st
	calls := &turnCalls{r: r, rec: rec, spec: spec, agent: agent, in: in.AgentInput, ctl: newControl(ctx, true)}
	calls.ctl.paused, calls.ctl.interrupted = carry.Paused, carry.Interrupted
	a.calls = calls
	// A session's agent takes the sandbox its session keeps for it.
	a.kept = in.Session != nil
	if a.kept && in.Carry == nil && in.Session.Lease != nil {
		l := *in.Session.Lease
		st.Lease = &l
	}
	if agent.Sandbox {
		calls.sb = lease.NewLife(r.leaseSettings(), rec, in.Graph, agent.Name, wfID, a.rc)
		if a.kept {
			calls.sb.KeptBy(in.Session.ID, in.Session.Backend)
		} else {
			calls.sb.On(in.Backend) // An agent-tool's of a switched session.
		}
		if st.Lease != nil {
			calls.sb.Take(ctx, st.Lease) // An idle sandbox's timer starts again.
		}
		// A reaper asks whether the agent still owns its sandbox
		// (lease.KeepOwned).
		if err := lease.SetHeldQuery(ctx, calls.sb.Held); err != nil {
			return nil, err
		}
	}
	if len(agent.MCPServers) > 0 {
		calls.mt = mcp.NewTools(r.mcpSettings(), agent, in.AgentInput, &a.rc, st.MCP, st.MCPLost)
	}
	// The agent's gates: its guardrails, its approval policies and its
	// share of the run's budget, each only if it has them.
	calls.budget, calls.tree = budget.NewAgent(ctx, spec, in.AgentInput, wfID, agent, carry.Budget), &st.Agents
	calls.turn = &gate.Turn{Spec: spec, Agent: agent, Input: in.AgentInput, Continued: in.Carry != nil, Run: a.rc, Events: rec,
		Usage: &st.Usage, RunAgent: calls.runAgent, MCPTool: calls.mt.Ref, Stopping: calls.ctl.stopping}
	calls.chain = gate.New(calls.turn, guardrail.New(agent), approval.New(agent), calls.budget)
	return a, nil
}

// modelTurn takes the model turn numbered turn, through the agent's gates,
// and moves the state on with its output.
func (a *agentRun) modelTurn(ctx workflow.Context, turn int) (runtime.Next, error) {
	a.turnsInRun++
	a.rc.Turn = turn
	calls, st, rc := a.calls, a.st, a.rc
	// The Web UI's current details: continue-as-new keeps no static summary.
	workflow.SetCurrentDetails(ctx, "agent "+a.agent.Name+", turn "+strconv.Itoa(turn))
	calls.turn.Run = rc
	m := gate.ModelCall{Turn: rc.Turn}
	if err := calls.chain.BeforeTurn(ctx, &m); err != nil {
		return runtime.Next{}, err // The tree's budget is spent, say.
	}
	if err := calls.mt.Refresh(ctx); err != nil {
		return runtime.Next{}, err
	}
	calls.sb.ReadGuidance(ctx)
	var mo ModelOutput
	precheck := calls.chain.Precheck(ctx)
	if err := calls.chain.AroundModel(ctx, &m, func(mctx workflow.Context) error {
		return a.r.callModel(mctx, a.rec, a.spec, ModelInput{Graph: a.in.Graph, Agent: a.agent.Name, Run: rc, Transcript: st.Transcript, Pending: st.Pending,
			MCPTools: calls.mt.Specs(), Pinned: a.in.Spec != nil, Tools: a.agent.ToolNames(), Guidance: calls.sb.Guidance(),
			Budget: m.Report, Precheck: precheck}, &mo)
	}); err != nil {
		return runtime.Next{}, err
	}
	calls.turn.Prechecked = mo.Prechecked
	detail := mo.Text
	if len(mo.Step.Calls) > 0 {
		detail = strconv.Itoa(len(mo.Step.Calls)) + " tool call(s)"
	}
	a.rec.Add(ctx, troupe.Event{Kind: troupe.EventTurn, Agent: a.agent.Name, Turn: rc.Turn, Detail: detail})
	next := st.ModelDone(a.agent, mo.Transcript, mo.Step, mo.Usage)
	if err := calls.count(ctx, st, rc.Turn, &mo); err != nil {
		return runtime.Next{}, err
	}
	if next.Correction != "" {
		a.rec.Add(ctx, troupe.Event{Kind: troupe.EventOutputInvalid, Agent: a.agent.Name, Turn: rc.Turn, Detail: next.Correction})
	}
	return next, nil
}

// runCalls carries out a turn's tool calls and moves the state on with
// their outputs; once the user interrupted, it answers them instead.
func (a *agentRun) runCalls(ctx workflow.Context, calls []agents.Item) (runtime.Next, error) {
	if a.calls.ctl != nil && a.calls.ctl.paused {
		a.calls.turn.Prechecked = nil // Checked before the pause: the gates check again after it.
	}
	if err := a.calls.ctl.hold(ctx, a.calls.sb); err != nil {
		return runtime.Next{}, err
	}
	if a.calls.ctl.stopping() {
		// The calls are answered, not run, so the conversation the next
		// turn takes up stays whole.
		var outputs []agents.Item
		for _, c := range calls {
			outputs = append(outputs, a.calls.output(c, "Error: not run: the user interrupted the turn"))
		}
		return a.st.CallsDone(a.agent, outputs, nil, model.Usage{}), nil
	}
	outputs, handoff, usage, err := a.calls.run(ctx, a.rc, calls)
	if err != nil {
		return runtime.Next{}, err
	}
	return a.st.CallsDone(a.agent, outputs, handoff, usage), nil
}

// end ends the agent as next says: with its final output, a handoff, or a
// failure.
func (a *agentRun) end(ctx workflow.Context, next runtime.Next) (*troupe.AgentResult, error) {
	switch next.Action {
	case runtime.Finish:
		if err := a.calls.chain.BeforeFinal(ctx, next.Output); err != nil {
			return a.fail(ctx, err)
		}
		res := a.result()
		res.Output = next.Output
		return a.finish(ctx, troupe.Event{Kind: troupe.EventFinal, Turn: a.rc.Turn, Detail: troupe.Preview(string(next.Output), 200)}, res, nil)
	case runtime.HandOff:
		res := a.result()
		res.Handoff, res.Pending = next.Handoff, a.st.Pending
		return a.finish(ctx, troupe.Event{Kind: troupe.EventHandoff, Turn: a.rc.Turn, Tool: next.Handoff.Name,
			Detail: a.agent.Name + " → " + a.agent.Tool(next.Handoff.Name).Target}, res, nil)
	case runtime.Fail:
		typ := troupe.ErrMaxTurns
		if next.Failure.Kind == runtime.FailOutputInvalid {
			typ = troupe.ErrOutputInvalid
		}
		return a.fail(ctx, troupe.NonRetryable(typ, "%s", next.Failure.Message))
	default:
		return a.fail(ctx, troupe.NonRetryable(troupe.ErrInternal, "agent %s: unknown next action %d", a.agent.Name, next.Action))
	}
}

// result is the agent's result as its state has it.
func (a *agentRun) result() *troupe.AgentResult {
	st := a.st
	return &troupe.AgentResult{Agent: a.agent.Name, Transcript: st.Transcript, Turns: st.Turn, ToolCalls: st.ToolCalls, Usage: st.Usage, Agents: st.Agents}
}

// fail ends the agent with err.
func (a *agentRun) fail(ctx workflow.Context, err error) (*troupe.AgentResult, error) {
	return a.finish(ctx, troupe.Event{Kind: troupe.EventFailed, Detail: troupe.FailureText(err)}, nil, err)
}

// finish ends the agent however it ends (output, handoff, failure,
// cancellation) with event e: its sandbox is stopped first, so the last
// event is the agent's own and a follower that stops there misses nothing.
func (a *agentRun) finish(ctx workflow.Context, e troupe.Event, res *troupe.AgentResult, err error) (*troupe.AgentResult, error) {
	calls := a.calls
	var given *runtime.SandboxLease
	switch {
	case calls.sb != nil && a.kept && err == nil:
		res.Lease = calls.sb.Release(ctx) // The session keeps the sandbox.
	case calls.sb != nil && a.kept && lease.KeepsFailedWorkspace(ctx, err):
		// The session keeps the workspace as the failure left it.
		given = calls.sb.Release(ctx)
	case calls.sb != nil:
		calls.sb.End(ctx)
	}
	// The result, or the failure, carries the lease, the usage and the
	// root's budget ledger (when lent to the agent) back to the caller;
	// the root has the reports of the agent's calls first.
	loan := calls.budget.GiveBack()
	if err == nil {
		res.Budget = loan
	}
	err = troupe.WithFailure(err, given, a.st.Agents, loan)
	calls.budget.Flush(ctx)
	e.Agent = a.agent.Name
	a.rec.Add(ctx, e)
	return res, err
}

// versionContinueAsNew marks the change to agent workflows that continue
// as new (a version marker first thing in each run).
const versionContinueAsNew = "troupe.continue-as-new"

// versionCancelNotContinued marks the change to agent workflows that end
// cancelled, rather than continue as new, when cancelled at a turn
// boundary.
const versionCancelNotContinued = "troupe.cancel-not-continued"

// timeToContinue reports whether this run of an agent workflow should
// continue as new before its next turn: it has taken the run's bound of
// turns, its history has reached the run's bound of events, or the server
// suggests it.
func (r *Runner) timeToContinue(ctx workflow.Context, spec *runtime.GraphSpec, turnsInRun int) bool {
	if turnsInRun == 0 {
		return false // Every run takes a turn, so no run continues straight away.
	}
	info := workflow.GetInfo(ctx)
	return spec.ContinueAfterTurns > 0 && turnsInRun >= spec.ContinueAfterTurns ||
		spec.ContinueAfterEvents > 0 && info.GetCurrentHistoryLength() >= spec.ContinueAfterEvents ||
		info.GetContinueAsNewSuggested()
}

// continueAsNew ends this run of the agent's workflow with its state
// carried into the next: between turns, with no call running and the
// sandbox not being suspended (it stays up, its lease carried).
func (r *Runner) continueAsNew(ctx workflow.Context, in AgentWorkflowInput, st *runtime.AgentState, calls *turnCalls, rec *events.Recorder) error {
	// A cancellation does not pass to the next run: end here (runs from
	// before this check continued, and replay so).
	if ctx.Err() != nil && workflow.GetVersion(ctx, versionCancelNotContinued, workflow.DefaultVersion, 1) == 1 {
		return temporal.NewCanceledError()
	}
	if sb := calls.sb; sb != nil {
		if err := sb.Hold(ctx); err != nil {
			return err
		}
		st.Lease = sb.Lease()
	}
	if mt := calls.mt; mt != nil {
		st.MCP, st.MCPLost = mt.State()
	}
	carry := &AgentCarry{State: *st}
	// The page first: a cancellation while it is saved ends the run
	// before any event says it continues.
	if err := rec.SavePage(ctx); err != nil {
		return err
	}
	rec.Add(ctx, troupe.Event{Kind: troupe.EventContinued, Agent: st.Agent, Turn: st.Turn,
		Detail: fmt.Sprintf("history of %d events: continuing as new before turn %d", workflow.GetInfo(ctx).GetCurrentHistoryLength(), st.Turn)})
	carry.Events, carry.NextEvent, carry.Pages = rec.Carry()
	// The controls go along, those still in the signal channel included.
	calls.ctl.drain(ctx)
	carry.Paused, carry.Interrupted = calls.ctl.paused, calls.ctl.interrupted
	next := in
	next.Transcript, next.Pending, next.Carry, next.Budget = st.Transcript, nil, carry, nil
	carry.Budget = calls.budget.Carry(ctx)
	return workflow.NewContinueAsNewError(ctx, troupe.AgentWorkflowName, next)
}

// Model calls are retried on a schedule the workflow keeps, so that each
// retry is an event a follower sees ("model unreachable: …; retry 3 of 10
// in 4s"): 10 attempts, 1 s apart at first, doubling up to a minute, about
// four minutes in all.
const (
	modelAttempts     = 10
	modelFirstBackoff = time.Second
	modelMaxBackoff   = time.Minute
)

// modelBackoff is the wait after the attempt-th failed model call.
func modelBackoff(attempt int) time.Duration {
	d := modelFirstBackoff << min(attempt-1, 16)
	return min(d, modelMaxBackoff)
}

// callModel takes one model turn, retrying what can be retried.
func (r *Runner) callModel(ctx workflow.Context, rec *events.Recorder, spec *runtime.GraphSpec, in ModelInput, out *ModelOutput) error {
	// Runs recorded before model calls became local activities by default
	// replay on the regular-activity path.
	local := workflow.GetVersion(ctx, versionLocalModelCalls, workflow.DefaultVersion, 1) == 1 && !spec.ModelActivities
	// Runs recorded before retries were events let the SDK retry.
	retryEvents := workflow.GetVersion(ctx, versionModelRetryEvents, workflow.DefaultVersion, 1) == 1
	retry := &temporal.RetryPolicy{InitialInterval: modelFirstBackoff, BackoffCoefficient: 2, MaximumInterval: modelMaxBackoff, MaximumAttempts: modelAttempts}
	if retryEvents {
		retry = &temporal.RetryPolicy{MaximumAttempts: 1}
	}
	call := func() error {
		if local {
			lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
				StartToCloseTimeout: r.cfg.ModelTimeout, RetryPolicy: retry, Summary: modelSummary(in),
			})
			return workflow.ExecuteLocalActivity(lctx, ModelActivityName, in).Get(ctx, out)
		}
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: r.cfg.ModelTimeout,
			HeartbeatTimeout:    r.cfg.HeartbeatTimeout,
			RetryPolicy:         retry,
			Summary:             modelSummary(in),
		})
		return workflow.ExecuteActivity(actx, ModelActivityName, in).Get(ctx, out)
	}
	if !retryEvents {
		return call()
	}
	// Rate limits are waited out apart from the attempts, within the
	// run's bound (a spec from before it has the default).
	patience := cmp.Or(spec.ModelRateLimitWait, DefaultModelRateLimitWait)
	var throttled int
	var firstThrottled time.Time
	for attempt := 1; ; {
		err := call()
		if err == nil || !retryable(err) || ctx.Err() != nil {
			return err
		}
		if troupe.ErrorType(err) == troupe.ErrModelRateLimited {
			throttled++
			now := workflow.Now(ctx)
			if firstThrottled.IsZero() {
				firstThrottled = now
			}
			wait := modelBackoff(throttled)
			var ae *temporal.ApplicationError
			if errors.As(err, &ae) && ae.NextRetryDelay() > 0 {
				wait = ae.NextRetryDelay()
			}
			if now.Add(wait).Sub(firstThrottled) > patience {
				return temporal.NewNonRetryableApplicationError(fmt.Sprintf("model rate-limited for %s (%d times), past the run's bound of %s: %s",
					now.Sub(firstThrottled).Round(time.Second), throttled, patience, troupe.Preview(rootCause(err), 300)), troupe.ErrModelRateLimited, err)
			}
			rec.Add(ctx, troupe.Event{Kind: troupe.EventModelRetry, Agent: in.Agent, Turn: in.Run.Turn,
				Detail: fmt.Sprintf("model rate-limited: %s; retry in %s (rate limits do not count against the %d attempts)", troupe.Preview(rootCause(err), 300), wait, modelAttempts)})
			if err := workflow.Sleep(ctx, wait); err != nil {
				return err
			}
			continue
		}
		unreachable := troupe.ErrorType(err) == troupe.ErrModelRetryable
		if attempt == modelAttempts {
			if !unreachable {
				return err
			}
			var ae *temporal.ApplicationError
			msg := err.Error()
			if errors.As(err, &ae) {
				msg = ae.Message()
			}
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s after %d attempts", msg, attempt), troupe.ErrModelRetryable, err)
		}
		what := "model call failed" // The blob store, say.
		if unreachable {
			what = "model unreachable"
		}
		wait := modelBackoff(attempt)
		rec.Add(ctx, troupe.Event{Kind: troupe.EventModelRetry, Agent: in.Agent, Turn: in.Run.Turn,
			Detail: fmt.Sprintf("%s: %s; retry %d of %d in %s", what, troupe.Preview(rootCause(err), 300), attempt+1, modelAttempts, wait)})
		if err := workflow.Sleep(ctx, wait); err != nil {
			return err
		}
		attempt++
	}
}

// modelSummary is what the Web UI shows of a model call.
func modelSummary(in ModelInput) string {
	return "model turn " + strconv.Itoa(in.Run.Turn) + " of " + in.Agent
}

// retryable reports whether an activity's failure may pass on a retry: a
// retryable application error, a timeout, or a panic (as the SDK's own
// retries take it).
func retryable(err error) bool {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return !ae.NonRetryable()
	}
	var te *temporal.TimeoutError
	var pe *temporal.PanicError
	return errors.As(err, &te) || errors.As(err, &pe)
}

// rootCause is what went wrong in a failed model call, without the
// layers that carried it: the cause the model activity sent along
// ("connection refused"), or the innermost message of err's chain.
func rootCause(err error) string {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) && ae.HasDetails() {
		var cause string
		if ae.Details(&cause) == nil && cause != "" {
			return cause
		}
	}
	return model.Innermost(err)
}

// versionModelRetryEvents marks the change of model calls to retries the
// workflow schedules (timers between attempts), each an event.
const versionModelRetryEvents = "troupe.model-retry-events"

// versionLocalModelCalls marks the change of model calls from regular to
// local activities by default.
const versionLocalModelCalls = "troupe.local-model-calls"
