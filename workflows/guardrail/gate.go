package guardrail

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/workflows/gate"
)

// Gate is an agent's guardrails at its gate (see the package doc): its
// input guardrails around its first model call, its tool guardrails
// around its turns' calls and on their outputs, its output guardrails on
// its final output. New returns nil for an agent with none, which then
// pays nothing for them.
type Gate struct {
	// screened are the calls of the turn a tool guardrail rejected, by
	// call id.
	screened map[string]*runtime.GuardrailOutcome
}

// New is the guardrails' gate of agent, nil when it has no guardrail.
func New(agent *runtime.AgentSpec) *Gate {
	if len(agent.Guardrails) == 0 {
		return nil
	}
	return &Gate{}
}

// Name names the gate.
func (gt *Gate) Name() string { return "guardrails" }

// AroundModel runs the input guardrails of an agent that answers the
// user's message first, at its first turn: the blocking ones before the
// model call, the others beside it, cancelling it when one trips.
func (gt *Gate) AroundModel(ctx workflow.Context, t *gate.Turn, _ *gate.ModelCall, next func(workflow.Context) error) error {
	mctx, checked, err := gt.guardInput(ctx, t)
	if err != nil {
		return err
	}
	return checked(next(mctx))
}

// AroundCalls checks the turn's calls that tool guardrails check before
// they run: it starts the check, lets the inner gates decide (approvals,
// at once with the check), then takes the verdicts, checking again the
// calls whose decision changed their arguments.
func (gt *Gate) AroundCalls(ctx workflow.Context, t *gate.Turn, calls *gate.Calls, next func(workflow.Context) error) error {
	if gt.guardedByAgents(t, *calls.Dispatch) {
		// The agent is no longer alone in its tree (its tool guardrail
		// agents ask the root too): its root decides, before any starts.
		t.Spawning(ctx)
	}
	screening := gt.startScreen(ctx, t, *calls.Dispatch)
	if err := next(ctx); err != nil {
		return err
	}
	return gt.screen(ctx, t, *calls.Dispatch, screening)
}

// BeforeCall answers a call a tool guardrail rejected.
func (gt *Gate) BeforeCall(_ workflow.Context, _ *gate.Turn, c gate.Call) string {
	if o := gt.rejected(c.Item); o != nil {
		return rejection(o)
	}
	return ""
}

// Checks reports whether tool guardrails check call c's output: its tool
// has some, and no guardrail rejected the call.
func (gt *Gate) Checks(t *gate.Turn, c gate.Call) bool {
	return len(t.Agent.ToolGuardrails(c.Item.Name, false)) > 0 && gt.rejected(c.Item) == nil
}

// AfterCall runs the tool guardrails that check call c's outputs on its
// output: a tripped one ends the agent once the turn's calls are done,
// and the model reads a note instead.
func (gt *Gate) AfterCall(ctx workflow.Context, t *gate.Turn, c gate.Call, output agents.Item) agents.Item {
	key := c.OutputKey
	if key != "" {
		key += "-guarded"
	}
	return gt.after(ctx, t, c.Item, t.Agent.ToolGuardrails(c.Item.Name, false), output, key)
}

// BeforeFinal runs the agent's output guardrails on its final output.
func (gt *Gate) BeforeFinal(ctx workflow.Context, t *gate.Turn, output json.RawMessage) error {
	return gt.guardOutput(ctx, t, output)
}

// Ends reports whether err, an agent tool's, ends its caller too: a
// guardrail tripped, or could not decide.
func Ends(err error) bool {
	t := troupe.ErrorType(err)
	return t == troupe.ErrGuardrailTripped || t == troupe.ErrGuardrailFailed
}

// withheld is what the model reads of an output guardrail withheld.
func withheld(guardrail, message string) string {
	text := "The output of this call was withheld by guardrail " + guardrail + "."
	if message != "" {
		text += " " + message
	}
	return text
}

// guarding reports whether this run runs guardrails (see
// versionGuardrails); call it only where a guardrail would run.
func guarding(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, versionGuardrails, workflow.DefaultVersion, 1) == 1
}

// guardrailOptions are the guardrail activity's: three attempts, a
// minute each.
func guardrailOptions(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: time.Minute, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3}, Summary: summary,
	})
}

// tripped records that a guardrail tripped and returns the error that
// ends the agent.
func (gt *Gate) tripped(ctx workflow.Context, t *gate.Turn, o runtime.GuardrailOutcome, tool string) error {
	trip := troupe.GuardrailTrip{Guardrail: o.Guardrail, Kind: o.Kind, Agent: t.Agent.Name, Workflow: t.Run.WorkflowID, Tool: tool, CallID: o.CallID, Reason: o.Reason}
	t.Events.Add(ctx, troupe.Event{Kind: troupe.EventGuardrailTripped, Agent: t.Agent.Name, Turn: t.Run.Turn, Tool: tool, CallID: o.CallID,
		Detail: troupe.Preview(o.Kind+" guardrail "+o.Guardrail+": "+o.Reason, 300)})
	return temporal.NewNonRetryableApplicationError(trip.Message(), troupe.ErrGuardrailTripped, nil, trip)
}

// undecided is the error of a check that could not decide: err as it is
// when the graph changed, the run's budget is spent or it was cancelled;
// ErrGuardrailFailed otherwise.
func (gt *Gate) undecided(t *gate.Turn, kind string, err error) error {
	if typ := troupe.ErrorType(err); typ == troupe.ErrGraphChanged || typ == troupe.ErrBudgetExceeded || temporal.IsCanceledError(err) {
		return err
	}
	return troupe.NonRetryable(troupe.ErrGuardrailFailed, "%s guardrails of agent %s could not decide: %s", kind, t.Agent.Name, troupe.FailureText(err))
}

// guardInput starts the input guardrails of an agent that answers the
// user's message first, at its first turn: it runs the blocking ones,
// then starts the others. It returns the context for the model call
// (cancelled when one of those trips) and a func that takes the call's
// error and waits for them: it returns the error that ends the agent, a
// trip rather than the call's error (the model's answer is discarded).
func (gt *Gate) guardInput(ctx workflow.Context, t *gate.Turn) (workflow.Context, func(error) error, error) {
	none := func(err error) error { return err }
	gs := t.Agent.GuardrailsOf(agents.GuardrailInput)
	if !t.Input.CheckInput || t.Continued || t.Run.Turn != 1 || len(gs) == 0 || !guarding(ctx) {
		return ctx, none, nil
	}
	input, ref := "", ""
	for _, it := range t.Input.Pending {
		if it.Type == agents.ItemMessage && it.Role == agents.RoleUser {
			// A message stored apart is read where the guardrails run.
			input, ref = it.Content, it.ContentRef
		}
	}
	var blocking, parallel []runtime.GuardrailSpec
	for _, g := range gs {
		if g.Blocking {
			blocking = append(blocking, g)
		} else {
			parallel = append(parallel, g)
		}
	}
	if len(blocking) > 0 {
		if err := gt.check(ctx, t, agents.GuardrailInput, blocking, input, ref, nil); err != nil {
			return ctx, none, err
		}
	}
	if len(parallel) == 0 {
		return ctx, none, nil
	}
	mctx, cancel := workflow.WithCancel(ctx)
	var err error
	done := false
	workflow.Go(ctx, func(gctx workflow.Context) {
		err = gt.check(gctx, t, agents.GuardrailInput, parallel, input, ref, nil)
		done = true
		if err != nil {
			cancel() // The model's answer is not wanted.
		}
	})
	return mctx, func(modelErr error) error {
		if werr := workflow.Await(ctx, func() bool { return done }); werr != nil {
			return werr
		}
		if err != nil {
			return err
		}
		return modelErr
	}, nil
}

// guardOutput runs the agent's output guardrails on its final output.
func (gt *Gate) guardOutput(ctx workflow.Context, t *gate.Turn, output json.RawMessage) error {
	gs := t.Agent.GuardrailsOf(agents.GuardrailOutput)
	if len(gs) == 0 || !guarding(ctx) {
		return nil
	}
	return gt.check(ctx, t, agents.GuardrailOutput, gs, runtime.OutputText(output), "", output)
}

// check runs input or output guardrails gs on text (the user's message,
// or the final output's text; output is the final output's document; ref,
// when set, the key of a user's message stored apart, instead of text):
// the funcs in one activity, the agents as children, all at once. The
// first of gs that tripped ends the agent; else the first that could not
// decide does.
func (gt *Gate) check(ctx workflow.Context, t *gate.Turn, kind string, gs []runtime.GuardrailSpec, text, ref string, output json.RawMessage) error {
	outcomes := make([]*runtime.GuardrailOutcome, len(gs))
	failures := make([]error, len(gs))
	var funcs []string
	for _, g := range gs {
		if g.Agent == "" {
			funcs = append(funcs, g.Name)
		}
	}
	var fut workflow.Future
	if len(funcs) > 0 {
		in := GuardrailInput{Graph: t.Input.Graph, Agent: t.Agent.Name, Run: t.Run, Kind: kind, Guardrails: funcs, Input: text, InputRef: ref, Output: output}
		if kind == agents.GuardrailOutput {
			in.Input = ""
		}
		fut = workflow.ExecuteLocalActivity(guardrailOptions(ctx, kind+" guardrails of "+t.Agent.Name), GuardrailActivityName, in)
	}
	if slices.ContainsFunc(gs, func(g runtime.GuardrailSpec) bool { return g.Agent != "" }) {
		// The agent is no longer alone in its tree: its root decides.
		t.Spawning(ctx)
	}
	wg := workflow.NewWaitGroup(ctx)
	for i, g := range gs {
		if g.Agent == "" {
			continue
		}
		wg.Add(1)
		workflow.Go(ctx, func(gctx workflow.Context) {
			defer wg.Done()
			outcomes[i], failures[i] = gt.askAgent(gctx, t, kind, g, text, ref)
		})
	}
	if fut != nil {
		var out GuardrailOutput
		err := fut.Get(ctx, &out)
		for i, g := range gs {
			if g.Agent != "" {
				continue
			}
			if err != nil {
				failures[i] = err
			}
			for _, o := range out.Outcomes {
				if o.Guardrail == g.Name {
					outcomes[i] = &o
				}
			}
		}
	}
	wg.Wait(ctx)
	for _, o := range outcomes {
		if o != nil && o.Action == runtime.GuardrailTrip {
			return gt.tripped(ctx, t, *o, "")
		}
	}
	for _, err := range failures {
		if err != nil {
			return gt.undecided(t, kind, err)
		}
	}
	return nil
}

// askAgent runs guardrail g, an agent, on text (or the message stored
// apart under ref), and reads its verdict.
func (gt *Gate) askAgent(ctx workflow.Context, t *gate.Turn, kind string, g runtime.GuardrailSpec, text, ref string) (*runtime.GuardrailOutcome, error) {
	item := agents.UserMessage(text)
	if ref != "" {
		item = agents.UserMessageRef(ref)
	}
	in := troupe.AgentInput{Pending: []agents.Item{item}}
	output, err := t.RunAgent(ctx, g.Agent, fmt.Sprintf("%s/%s-guardrail-%s", t.Run.WorkflowID, kind, g.Name), in, t.Usage)
	if err != nil {
		return nil, err
	}
	var v agents.GuardrailVerdict
	if err := json.Unmarshal(output, &v); err != nil {
		return nil, troupe.NonRetryable(troupe.ErrGuardrailFailed, "guardrail agent %s gave no verdict: %v", g.Agent, err)
	}
	if !v.Tripwire {
		return nil, nil
	}
	return &runtime.GuardrailOutcome{Guardrail: g.Name, Kind: kind, Action: runtime.GuardrailTrip, Reason: v.Reason}, nil
}

// askToolAgent runs tool guardrail g's agent on call c: its check of the
// call (result nil) or of the call's output, result (as the model would
// read it). It returns the verdict's outcome, nil when the call or its
// output goes through. round tells a check of a call again (once its
// approval changed its arguments) from the first.
func (gt *Gate) askToolAgent(ctx workflow.Context, t *gate.Turn, g runtime.GuardrailSpec, c agents.Item, result *agents.Item, round string) (*runtime.GuardrailOutcome, error) {
	before := result == nil
	kind, agent := agents.GuardrailToolBefore, g.BeforeAgent
	if !before {
		kind, agent = agents.GuardrailToolAfter, g.AfterAgent
	}
	if workflow.GetVersion(ctx, versionToolGuardrailAgents, workflow.DefaultVersion, 1) != 1 {
		return nil, troupe.NonRetryable(troupe.ErrGuardrailFailed, "tool guardrail %s: this run's history ran no tool guardrail agents", g.Name)
	}
	prefix := fmt.Sprintf("%s/t%d.%s-%s%s-guardrail-%s", t.Run.WorkflowID, t.Run.Turn, c.CallID, kind, round, g.Name)
	check := toolCheck(kind, g.Name, t.Agent.Name, c)
	var in troupe.AgentInput
	if before {
		in.Pending = []agents.Item{agents.UserMessage(checkMessage(check))}
	} else {
		// The output may be stored apart: the activity reads it, and
		// writes the message where the guardrail agent's transcript
		// begins (route's key for its first agent).
		pi := GuardrailPromptInput{Check: check, Result: *result, Transcript: "transcripts/" + prefix + "/0-" + agent}
		lctx := guardrailOptions(ctx, "the input of tool guardrail "+g.Name)
		if err := workflow.ExecuteLocalActivity(lctx, GuardrailPromptActivityName, pi).Get(ctx, &in.Transcript); err != nil {
			return nil, err
		}
	}
	output, err := t.RunAgent(ctx, agent, prefix, in, t.CallUsage)
	if err != nil {
		return nil, err
	}
	var v agents.ToolVerdict
	if before {
		var cv agents.ToolCallVerdict
		if err = json.Unmarshal(output, &cv); err == nil {
			v, err = cv.ToolVerdict()
		}
	} else {
		var ov agents.ToolOutputVerdict
		if err = json.Unmarshal(output, &ov); err == nil {
			v, err = ov.ToolVerdict()
		}
	}
	if err != nil {
		return nil, troupe.NonRetryable(troupe.ErrGuardrailFailed, "tool guardrail agent %s gave no verdict: %v", agent, err)
	}
	return runtime.ToolOutcome(g.Name, c.CallID, before, v), nil
}

// guardedCall is a call and the tool guardrails that check it before it
// runs, in order.
type guardedCall struct {
	call       agents.Item
	guardrails []runtime.GuardrailSpec
}

// screening is a check of a turn's calls by the tool guardrails that
// check calls before they run, under way: the funcs' in one activity,
// each agent's as a child workflow.
type screening struct {
	calls  []guardedCall
	future workflow.Future // the funcs' activity; nil when no call has a func
	// ready is what the funcs found when the model call checked the calls
	// (gate.Prechecked), which then takes no activity.
	ready  *GuardrailOutput
	checks []*agentCheck // the agents', each set when its child ended
	wg     workflow.WaitGroup
}

// agentCheck is a tool guardrail agent's check of a call.
type agentCheck struct {
	callID, guardrail string
	outcome           *runtime.GuardrailOutcome
	err               error
}

// startScreen starts the check of the turn's calls in d that have tool
// guardrails checking them before they run, before their approvals: the
// check and the approval policies run at once, and a call whose approval
// changed its arguments is checked again (screen). Nil when no call has
// any. The usage of guardrail agents is added to usage.
func (gt *Gate) startScreen(ctx workflow.Context, t *gate.Turn, d runtime.Dispatch) *screening {
	calls := gt.guardedCalls(t, d)
	if len(calls) == 0 || !guarding(ctx) {
		return nil
	}
	return gt.screenCalls(ctx, t, calls, "")
}

// guardedCalls are the calls of d that tool guardrails check before they
// run, each with those guardrails.
func (gt *Gate) guardedCalls(t *gate.Turn, d runtime.Dispatch) []guardedCall {
	var calls []guardedCall
	for _, list := range [][]agents.Item{d.Functions, d.MCP, d.AgentTools} {
		for _, c := range list {
			if gs := t.Agent.ToolGuardrails(c.Name, true); len(gs) > 0 {
				calls = append(calls, guardedCall{call: c, guardrails: gs})
			}
		}
	}
	return calls
}

// guardedByAgents reports whether a tool guardrail agent checks a call of
// d, before it runs or after.
func (gt *Gate) guardedByAgents(t *gate.Turn, d runtime.Dispatch) bool {
	for _, list := range [][]agents.Item{d.Functions, d.MCP, d.AgentTools} {
		for _, c := range list {
			for _, before := range []bool{true, false} {
				if slices.ContainsFunc(t.Agent.ToolGuardrails(c.Name, before), func(g runtime.GuardrailSpec) bool { return g.BeforeAgent != "" || g.AfterAgent != "" }) {
					return true
				}
			}
		}
	}
	return false
}

// screenCalls starts the checks of calls: the funcs of all of them in one
// activity (the calls that have none left out), then each agent of each
// call as a child workflow, in a coroutine of its own.
func (gt *Gate) screenCalls(ctx workflow.Context, t *gate.Turn, calls []guardedCall, round string) *screening {
	sc := &screening{calls: calls, wg: workflow.NewWaitGroup(ctx)}
	var funcs []GuardrailCall
	for _, c := range calls {
		var names []string
		for _, g := range c.guardrails {
			if g.BeforeAgent == "" {
				names = append(names, g.Name)
			}
		}
		if len(names) > 0 {
			funcs = append(funcs, GuardrailCall{Call: c.call, Guardrails: names})
		}
	}
	if len(funcs) > 0 {
		if out, ok := prechecked(t, funcs); ok {
			sc.ready = &out
		} else {
			in := GuardrailInput{Graph: t.Input.Graph, Agent: t.Agent.Name, Run: t.Run, Kind: agents.GuardrailToolBefore, Calls: funcs}
			sc.future = workflow.ExecuteLocalActivity(guardrailOptions(ctx, "tool guardrails of "+t.Agent.Name), GuardrailActivityName, in)
		}
	}
	for _, c := range calls {
		for _, g := range c.guardrails {
			if g.BeforeAgent == "" {
				continue
			}
			ac := &agentCheck{callID: c.call.CallID, guardrail: g.Name}
			sc.checks = append(sc.checks, ac)
			sc.wg.Add(1)
			workflow.Go(ctx, func(gctx workflow.Context) {
				defer sc.wg.Done()
				ac.outcome, ac.err = gt.askToolAgent(gctx, t, g, c.call, nil, round)
			})
		}
	}
	return sc
}

// Precheck has the model call run the tool guardrail funcs that check a
// call before it runs (gate.Precheck), in the agent's order.
func (gt *Gate) Precheck(t *gate.Turn, p *gate.Precheck) {
	for _, g := range t.Agent.GuardrailsOf(runtime.GuardrailTool) {
		if g.Before && g.BeforeAgent == "" {
			p.Guardrails = append(p.Guardrails, gate.PrecheckGuardrail{Name: g.Name, Tool: g.Tool})
		}
	}
}

// prechecked is what the funcs found of calls when the turn's model call
// checked them all, on their arguments now, with the guardrails each has
// now; false when it did not.
func prechecked(t *gate.Turn, calls []GuardrailCall) (GuardrailOutput, bool) {
	var out GuardrailOutput
	for _, c := range calls {
		cc := t.Prechecked.Call(c.Call.CallID, c.Call.Arguments)
		if cc == nil || !slices.Equal(cc.Guardrails, c.Guardrails) {
			return GuardrailOutput{}, false
		}
		out.Outcomes = append(out.Outcomes, cc.Outcomes...)
	}
	return out, true
}

// wait waits for sc's checks. It returns their outcomes, the calls' in
// order and each call's in the order of its guardrails; the agents'
// checks that could not decide; and the funcs' activity's failure.
func (sc *screening) wait(ctx workflow.Context) ([]runtime.GuardrailOutcome, []*agentCheck, error) {
	var out GuardrailOutput
	var err error
	switch {
	case sc.ready != nil:
		out = *sc.ready
	case sc.future != nil:
		err = sc.future.Get(ctx, &out)
	}
	sc.wg.Wait(ctx)
	var outcomes []runtime.GuardrailOutcome
	var failed []*agentCheck
	for _, c := range sc.calls {
		for _, g := range c.guardrails {
			if g.BeforeAgent == "" {
				for _, o := range out.Outcomes {
					if o.CallID == c.call.CallID && o.Guardrail == g.Name {
						outcomes = append(outcomes, o)
					}
				}
				continue
			}
			for _, ac := range sc.checks {
				switch {
				case ac.callID != c.call.CallID || ac.guardrail != g.Name:
				case ac.err != nil:
					failed = append(failed, ac)
				case ac.outcome != nil:
					outcomes = append(outcomes, *ac.outcome)
				}
			}
		}
	}
	return outcomes, failed, err
}

// screen takes the verdicts of sc (started by startScreen) on the turn's
// calls in d, once approved, before any call starts; it checks again the
// calls whose approval changed their arguments. A call one rejects is
// answered at the gate (its verdict in gt.screened); one that trips ends
// the agent, as one that could not decide does. Verdicts on calls the
// approvals rejected do not count.
func (gt *Gate) screen(ctx workflow.Context, t *gate.Turn, d runtime.Dispatch, sc *screening) error {
	gt.screened = nil
	if sc == nil {
		return nil
	}
	current := gt.guardedCalls(t, d)
	outcomes, failed, err := sc.wait(ctx)
	checked := map[string]string{} // call id → arguments checked
	for _, c := range sc.calls {
		checked[c.call.CallID] = c.call.Arguments
	}
	var again []guardedCall
	for _, c := range current {
		if args, ok := checked[c.call.CallID]; !ok || args != c.call.Arguments {
			again = append(again, c)
		}
	}
	// What was said of calls that do not run, or run with other
	// arguments, does not count.
	stale := func(id string) bool { return callNamed(current, id) == "" || callNamed(again, id) != "" }
	outcomes = slices.DeleteFunc(outcomes, func(o runtime.GuardrailOutcome) bool { return stale(o.CallID) })
	failed = slices.DeleteFunc(failed, func(ac *agentCheck) bool { return stale(ac.callID) })
	if err != nil {
		return gt.screenFailed(ctx, t, current, outcomes, err)
	}
	if len(again) > 0 {
		more, moreFailed, err := gt.screenCalls(ctx, t, again, "-again").wait(ctx)
		if err != nil {
			return gt.screenFailed(ctx, t, current, more, err)
		}
		outcomes, failed = append(outcomes, more...), append(failed, moreFailed...)
	}
	for _, o := range outcomes {
		if o.Action == runtime.GuardrailTrip {
			return gt.tripped(ctx, t, o, callNamed(current, o.CallID))
		}
	}
	if len(failed) > 0 {
		return gt.undecided(t, agents.GuardrailToolBefore, failed[0].err)
	}
	for _, o := range outcomes {
		if o.Action == runtime.GuardrailReject && gt.screened[o.CallID] == nil {
			if gt.screened == nil {
				gt.screened = map[string]*runtime.GuardrailOutcome{}
			}
			gt.screened[o.CallID] = &o
			t.Events.Add(ctx, troupe.Event{Kind: troupe.EventGuardrailApplied, Agent: t.Agent.Name, Turn: t.Run.Turn, Tool: callNamed(current, o.CallID), CallID: o.CallID,
				Detail: troupe.Preview(o.Guardrail+" rejected the call: "+cmpReason(o), 300)})
		}
	}
	return nil
}

// screenFailed is the error that ends the agent when the funcs checking
// its calls failed (err): a trip among the verdicts of the agents that
// checked them beside the funcs, outcomes, ends it as a trip.
func (gt *Gate) screenFailed(ctx workflow.Context, t *gate.Turn, current []guardedCall, outcomes []runtime.GuardrailOutcome, err error) error {
	for _, o := range outcomes {
		if o.Action == runtime.GuardrailTrip {
			return gt.tripped(ctx, t, o, callNamed(current, o.CallID))
		}
	}
	return gt.undecided(t, agents.GuardrailToolBefore, err)
}

// rejected is the outcome of the tool guardrail that rejected call c
// this turn, or nil.
func (gt *Gate) rejected(c agents.Item) *runtime.GuardrailOutcome { return gt.screened[c.CallID] }

// rejection is what the model reads of a call a guardrail rejected (after
// the gate's "Error: ").
func rejection(o *runtime.GuardrailOutcome) string {
	text := "guardrail " + o.Guardrail + " rejected this call; it was not run."
	if o.Message != "" {
		text += " " + o.Message
	}
	return text
}

// after runs tool guardrails gs on call c's output item, in order, and
// returns what the model reads: consecutive funcs in one activity, each
// agent as a child workflow, each on the output as the ones before left
// it, until one withholds it or trips.
func (gt *Gate) after(ctx workflow.Context, t *gate.Turn, c agents.Item, gs []runtime.GuardrailSpec, item agents.Item, key string) agents.Item {
	if !guarding(ctx) {
		return item
	}
	for len(gs) > 0 {
		var out GuardrailOutput
		var err error
		if g := gs[0]; g.AfterAgent != "" {
			gs = gs[1:]
			var o *runtime.GuardrailOutcome
			if o, err = gt.askToolAgent(ctx, t, g, c, &item, ""); o != nil {
				out.Outcomes = []runtime.GuardrailOutcome{*o}
				switch o.Action {
				case runtime.GuardrailReplace:
					r := t.Output(c, o.Message)
					out.Result = &r
				case runtime.GuardrailWithhold:
					r := t.Output(c, withheld(g.Name, o.Message))
					out.Result = &r
				}
			}
		} else {
			n := slices.IndexFunc(gs, func(g runtime.GuardrailSpec) bool { return g.AfterAgent != "" })
			if n < 0 {
				n = len(gs)
			}
			in := GuardrailInput{Graph: t.Input.Graph, Agent: t.Agent.Name, Run: t.Run, Kind: agents.GuardrailToolAfter,
				Calls: []GuardrailCall{{Call: c, Guardrails: guardrailNames(gs[:n])}}, Result: &item, OutputKey: key}
			gs = gs[n:]
			err = workflow.ExecuteLocalActivity(guardrailOptions(ctx, "tool guardrails of "+c.Name), GuardrailActivityName, in).Get(ctx, &out)
		}
		if err != nil {
			t.Fail(gt.undecided(t, agents.GuardrailToolAfter, err))
			return t.Output(c, "Error: the output of this call was withheld: its guardrails could not check it.")
		}
		done := false
		for _, o := range out.Outcomes {
			switch o.Action {
			case runtime.GuardrailTrip:
				t.Fail(gt.tripped(ctx, t, o, c.Name))
				return t.Output(c, "Error: the output of this call was withheld: guardrail "+o.Guardrail+" tripped.")
			case runtime.GuardrailReplace:
				t.Events.Add(ctx, troupe.Event{Kind: troupe.EventGuardrailApplied, Agent: t.Agent.Name, Turn: t.Run.Turn, Tool: c.Name, CallID: c.CallID,
					Detail: troupe.Preview(o.Guardrail+" replaced the output: "+cmpReason(o), 300)})
			case runtime.GuardrailWithhold:
				t.Events.Add(ctx, troupe.Event{Kind: troupe.EventGuardrailApplied, Agent: t.Agent.Name, Turn: t.Run.Turn, Tool: c.Name, CallID: c.CallID,
					Detail: troupe.Preview(o.Guardrail+" withheld the output: "+cmpReason(o), 300)})
				done = true // No later guardrail checks a note.
			}
		}
		if out.Result != nil {
			item = *out.Result
		}
		if done {
			break
		}
	}
	return item
}

func guardrailNames(gs []runtime.GuardrailSpec) []string {
	names := make([]string, len(gs))
	for i, g := range gs {
		names[i] = g.Name
	}
	return names
}

// callNamed is the tool name of the call with id among calls.
func callNamed(calls []guardedCall, id string) string {
	for _, c := range calls {
		if c.call.CallID == id {
			return c.call.Name
		}
	}
	return ""
}

// cmpReason is an outcome's reason, or its message when it gave none.
func cmpReason(o runtime.GuardrailOutcome) string {
	if o.Reason != "" {
		return o.Reason
	}
	return strings.TrimSpace(o.Message)
}
