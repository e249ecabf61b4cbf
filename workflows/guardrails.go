package workflows

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/transcript"
)

// Guardrails: checks beside an agent's work that can end its run (see
// agents.InputGuardrail, OutputGuardrail, ToolGuardrail).
//
//  1. The run's spec says which guardrails each agent has, of which kind,
//     and how they run (runtime.GuardrailSpec); workflow code branches on
//     that alone. A guardrail that is a Go func runs in the guardrail
//     activity (a local one: GuardrailActivityName), which finds it by
//     name in the graph the worker serves; one that is an agent runs as a
//     child agent workflow (route), whose structured output is the
//     verdict. The funcs of one check run together, in one activity, and
//     beside the agents of that check. A tool guardrail agent's input is
//     the call it checks (agents.ToolCheck, as JSON): a user message for
//     a check of a call; for a check of an output, which may be stored
//     apart, the first segment of its transcript, written by a local
//     activity (GuardrailPromptActivityName).
//  2. Input guardrails check the user's message the first agent of a
//     chain answers (a run's, a session turn's, an agent tool's: the
//     agent input's CheckInput), once, at its first turn: the blocking
//     ones before the model call, the others in parallel with it. When
//     one of those trips, the model call is cancelled, and its answer, if
//     it came, discarded.
//  3. Output guardrails check an agent's final output before the agent
//     ends with it.
//  4. Tool guardrails check the calls of a turn that have any before any
//     call of the turn starts (startScreen, screen): at once with the
//     approval policies' check, and again, once approved, for a call whose
//     decision changed its arguments; a verdict on a call its approval
//     rejected does not count. The funcs of every call run in one
//     activity, and each agent of each call as a child, all at once. A
//     rejected call is answered at the gate with the guardrail's message.
//     Then they check each call's output, as it comes, before the model
//     reads it (checkOutput): in order, consecutive funcs in one activity
//     and each agent as a child, each on the output the ones before left;
//     replaced, withheld, or passed.
//  5. A guardrail that trips records guardrail_tripped in the agent's
//     events and ends the agent with a non-retryable ErrGuardrailTripped
//     (its details a GuardrailTrip), which ends every agent up the chain
//     and the run (a session's turn fails). A check that cannot decide
//     (its func fails after the activity's retries, or its agent fails)
//     ends the run with ErrGuardrailFailed: no check lets through what it
//     did not see.
//
// Version markers (troupe.guardrails) are written only where a guardrail
// runs: runs recorded before guardrails (whose spec has none, or which
// read the graph as served) replay as they ran. Tool guardrail agents add
// theirs (troupe.tool-guardrail-agents) where one runs: the commands of
// tool guardrail funcs are those they were.

// GuardrailActivityName runs an agent's guardrail funcs.
const GuardrailActivityName = "troupe.Guardrails"

// GuardrailPromptActivityName writes the input of a tool guardrail agent
// that checks a call's output (GuardrailPromptInput).
const GuardrailPromptActivityName = "troupe.GuardrailPrompt"

// versionGuardrails marks runs that run guardrails. The marker is written
// only when an agent has a guardrail to run.
const versionGuardrails = "troupe.guardrails"

// versionToolGuardrailAgents marks runs whose tool guardrails run agents
// (agents.ToolGuardrail.BeforeAgent, AfterAgent) as child workflows. The
// marker is written only where such an agent is about to run, after
// troupe.guardrails'. Runs recorded before could name none (their specs
// have none), and tool guardrail funcs take the commands they took; the
// marker shows in history where the new commands begin, and a history
// that lacks it, should one reach a tool guardrail agent, lets nothing
// through (the check could not decide).
const versionToolGuardrailAgents = "troupe.tool-guardrail-agents"

// guardrailEnds reports whether err, an agent tool's, ends its caller
// too: a guardrail tripped, or could not decide.
func guardrailEnds(err error) bool {
	t := troupe.ErrorType(err)
	return t == troupe.ErrGuardrailTripped || t == troupe.ErrGuardrailFailed
}

// GuardrailInput asks the guardrail activity to run guardrail funcs of an
// agent: on the user's message (input), the agent's final output
// (output), the calls of a turn (tool_before), or one call's output
// (tool_after).
type GuardrailInput struct {
	Graph string            `json:"graph"`
	Agent string            `json:"agent"`
	Run   agents.RunContext `json:"run"`
	// Kind is agents.GuardrailInput, GuardrailOutput, GuardrailToolBefore
	// or GuardrailToolAfter.
	Kind string `json:"kind"`
	// Guardrails name the input or output guardrails to run.
	Guardrails []string `json:"guardrails,omitempty"`
	// Input is the user's message (input).
	Input string `json:"input,omitempty"`
	// Output is the agent's final output (output).
	Output json.RawMessage `json:"output,omitempty"`
	// Calls are the calls to check, each with its guardrails in order
	// (tool_before; tool_after: the one call whose Result it is).
	Calls []GuardrailCall `json:"calls,omitempty"`
	// Result is the call's output (tool_after), by reference when large.
	Result *agents.Item `json:"result,omitempty"`
	// OutputKey, when set, is where an output a guardrail replaced goes
	// when too large to inline (tool_after).
	OutputKey string `json:"output_key,omitempty"`
}

// GuardrailCall is a call for tool guardrails to check.
type GuardrailCall struct {
	Call       agents.Item `json:"call"`
	Guardrails []string    `json:"guardrails"`
}

// GuardrailOutput is what the guardrails did, past passing.
type GuardrailOutput struct {
	// Outcomes are the guardrails that tripped, or acted on a call or its
	// output, in order.
	Outcomes []runtime.GuardrailOutcome `json:"outcomes,omitempty"`
	// Result is the call's output as the model reads it (tool_after),
	// when a guardrail changed it.
	Result *agents.Item `json:"result,omitempty"`
}

// GuardrailPromptInput asks the guardrail prompt activity to write the
// input of a tool guardrail agent that checks a call's output: Check, with
// the output Result holds (read from the blob store when stored apart), as
// the user message of the first segment of the transcript Transcript. The
// output travels by reference, so no payload grows with it.
type GuardrailPromptInput struct {
	// Check is the check, without its output.
	Check agents.ToolCheck `json:"check"`
	// Result is the call's output as the model would read it.
	Result agents.Item `json:"result"`
	// Transcript is the key of the guardrail agent's transcript.
	Transcript string `json:"transcript"`
}

// GuardrailPrompt writes a tool guardrail agent's input (see
// GuardrailPromptInput) and returns its transcript.
func (a *Activities) GuardrailPrompt(ctx context.Context, in GuardrailPromptInput) (runtime.TranscriptRef, error) {
	items, err := transcript.ResolveOutputs(ctx, a.r.cfg.Store, []agents.Item{in.Result})
	if err != nil {
		return runtime.TranscriptRef{}, err
	}
	check := in.Check
	check.Output = &items[0].Output
	return a.r.transcripts.Append(ctx, runtime.TranscriptRef{Key: in.Transcript}, []agents.Item{agents.UserMessage(checkMessage(check))})
}

// toolCheck is what tool guardrail g of agent checks of call c (kind:
// agents.GuardrailToolBefore or GuardrailToolAfter), without the output.
func toolCheck(kind, guardrail, agent string, c agents.Item) agents.ToolCheck {
	args := json.RawMessage(cmp.Or(c.Arguments, "{}"))
	if !json.Valid(args) {
		args, _ = json.Marshal(c.Arguments) // The model's text, as it was.
	}
	return agents.ToolCheck{Check: kind, Guardrail: guardrail, Agent: agent, Tool: c.Name, CallID: c.CallID, Arguments: args}
}

// checkMessage is the text of the user message a tool guardrail agent
// answers: the check, as JSON.
func checkMessage(c agents.ToolCheck) string {
	data, _ := json.Marshal(c) // Cannot fail: its fields are text and valid JSON.
	return string(data)
}

// Guardrails runs guardrail funcs (see GuardrailInput). A guardrail that
// trips answers at once; one that fails (an error or a panic) fails the
// activity, retryably, unless another tripped.
func (a *Activities) Guardrails(ctx context.Context, in GuardrailInput) (*GuardrailOutput, error) {
	_, agent, err := a.r.agent(in.Graph, in.Agent)
	if err != nil {
		return nil, err
	}
	ctx = agents.WithRunContext(ctx, in.Run)
	gone := func(name string) error {
		return troupe.NonRetryable(troupe.ErrGraphChanged, "%s guardrail %q of agent %q is no longer in graph %q as this worker serves it; the run started with it", in.Kind, name, in.Agent, in.Graph)
	}
	out := &GuardrailOutput{}
	var errs []error
	switch in.Kind {
	case agents.GuardrailInput, agents.GuardrailOutput:
		checks := make([]func(context.Context) (agents.GuardrailVerdict, error), len(in.Guardrails))
		for i, name := range in.Guardrails {
			if in.Kind == agents.GuardrailInput {
				g, ok := agent.InputGuardrailNamed(name)
				if !ok || g.Func == nil {
					return nil, gone(name)
				}
				checks[i] = func(ctx context.Context) (agents.GuardrailVerdict, error) { return g.Func(ctx, in.Run, in.Input) }
			} else {
				g, ok := agent.OutputGuardrailNamed(name)
				if !ok || g.Func == nil {
					return nil, gone(name)
				}
				checks[i] = func(ctx context.Context) (agents.GuardrailVerdict, error) { return g.Func(ctx, in.Run, in.Output) }
			}
		}
		verdicts := make([]agents.GuardrailVerdict, len(checks))
		failed := make([]error, len(checks))
		var wg sync.WaitGroup
		for i, check := range checks {
			wg.Go(func() {
				failed[i] = guard(in.Guardrails[i], func() (err error) { verdicts[i], err = check(ctx); return err })
			})
		}
		wg.Wait()
		for i, v := range verdicts {
			if failed[i] == nil && v.Tripwire {
				out.Outcomes = append(out.Outcomes, runtime.GuardrailOutcome{Guardrail: in.Guardrails[i], Kind: in.Kind, Action: runtime.GuardrailTrip, Reason: v.Reason})
			}
		}
		errs = failed
	case agents.GuardrailToolBefore:
		for _, c := range in.Calls {
			call := toolCall(in.Run, c.Call)
			for _, name := range c.Guardrails {
				g, ok := agent.ToolGuardrailNamed(name)
				if !ok || g.Before == nil {
					return nil, gone(name)
				}
				var v agents.ToolVerdict
				if err := guard(name, func() (err error) { v, err = g.Before(ctx, call); return err }); err != nil {
					errs = append(errs, err)
					break
				}
				if o := runtime.ToolOutcome(name, c.Call.CallID, true, v); o != nil {
					out.Outcomes = append(out.Outcomes, *o)
					break // The call's fate is decided.
				}
			}
		}
	case agents.GuardrailToolAfter:
		if len(in.Calls) != 1 || in.Result == nil {
			return nil, troupe.NonRetryable(troupe.ErrInternal, "tool_after guardrails need one call and its result")
		}
		c, item := in.Calls[0], *in.Result
		text := item.Output
		if item.OutputRef != "" {
			data, err := a.r.cfg.Store.Get(ctx, item.OutputRef)
			if err != nil {
				return nil, err
			}
			text = string(data)
		}
		call, changed := toolCall(in.Run, c.Call), false
	checks:
		for _, name := range c.Guardrails {
			g, ok := agent.ToolGuardrailNamed(name)
			if !ok || g.After == nil {
				return nil, gone(name)
			}
			var v agents.ToolVerdict
			if err := guard(name, func() (err error) { v, err = g.After(ctx, call, text); return err }); err != nil {
				errs = append(errs, err)
				break
			}
			o := runtime.ToolOutcome(name, c.Call.CallID, false, v)
			if o == nil {
				continue
			}
			out.Outcomes = append(out.Outcomes, *o)
			switch o.Action {
			case runtime.GuardrailReplace:
				text, changed = v.Message, true // Later guardrails check what the model would read.
			case runtime.GuardrailWithhold:
				text, changed = withheld(name, v.Message), true
				break checks
			default:
				break checks
			}
		}
		if changed {
			item.Output, item.OutputRef = text, ""
			if in.OutputKey != "" {
				if item, err = transcript.Offload(ctx, a.r.cfg.Store, in.OutputKey, item); err != nil {
					return nil, err
				}
			} else if err := troupe.CheckPayload("a guardrail's replacement output", len(text)); err != nil {
				return nil, err
			}
			out.Result = &item
		}
	default:
		return nil, troupe.NonRetryable(troupe.ErrInternal, "unknown guardrail kind %q", in.Kind)
	}
	if slices.ContainsFunc(out.Outcomes, func(o runtime.GuardrailOutcome) bool { return o.Action == runtime.GuardrailTrip }) {
		return out, nil // A trip decides; a failure beside it does not matter.
	}
	if err := errors.Join(errs...); err != nil {
		return nil, temporal.NewApplicationError(err.Error(), troupe.ErrGuardrailFailed)
	}
	return out, nil
}

// guard runs a guardrail func, turning a panic into its error.
func guard(name string, check func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("guardrail %s panicked: %v\n%s", name, p, debug.Stack())
		}
	}()
	if err := check(); err != nil {
		return fmt.Errorf("guardrail %s: %w", name, err)
	}
	return nil
}

func toolCall(rc agents.RunContext, c agents.Item) agents.ToolCall {
	args := c.Arguments
	if args == "" {
		args = "{}"
	}
	return agents.ToolCall{Run: rc, Tool: c.Name, CallID: c.CallID, Arguments: json.RawMessage(args)}
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
func (t *turnCalls) tripped(ctx workflow.Context, rc agents.RunContext, o runtime.GuardrailOutcome, tool string) error {
	trip := troupe.GuardrailTrip{Guardrail: o.Guardrail, Kind: o.Kind, Agent: t.agent.Name, Workflow: rc.WorkflowID, Tool: tool, CallID: o.CallID, Reason: o.Reason}
	t.rec.add(ctx, troupe.Event{Kind: troupe.EventGuardrailTripped, Agent: t.agent.Name, Turn: rc.Turn, Tool: tool, CallID: o.CallID,
		Detail: troupe.Preview(o.Kind+" guardrail "+o.Guardrail+": "+o.Reason, 300)})
	return temporal.NewNonRetryableApplicationError(trip.Message(), troupe.ErrGuardrailTripped, nil, trip)
}

// undecided is the error of a check that could not decide: err as it is
// when the graph changed, the run's budget is spent or it was cancelled;
// ErrGuardrailFailed otherwise.
func (t *turnCalls) undecided(kind string, err error) error {
	if typ := troupe.ErrorType(err); typ == troupe.ErrGraphChanged || typ == troupe.ErrBudgetExceeded || temporal.IsCanceledError(err) {
		return err
	}
	return troupe.NonRetryable(troupe.ErrGuardrailFailed, "%s guardrails of agent %s could not decide: %s", kind, t.agent.Name, troupe.FailureText(err))
}

// guardInput starts the input guardrails of an agent that answers the
// user's message first, at its first turn: it runs the blocking ones,
// then starts the others. It returns the context for the model call
// (cancelled when one of those trips) and a func that takes the call's
// error and waits for them: it returns the error that ends the agent, a
// trip rather than the call's error (the model's answer is discarded).
func (t *turnCalls) guardInput(ctx workflow.Context, rc agents.RunContext, st *runtime.AgentState) (workflow.Context, func(error) error, error) {
	none := func(err error) error { return err }
	gs := t.agent.GuardrailsOf(agents.GuardrailInput)
	if !t.in.CheckInput || t.continued || rc.Turn != 1 || len(gs) == 0 || !guarding(ctx) {
		return ctx, none, nil
	}
	input := ""
	for _, it := range t.in.Pending {
		if it.Type == agents.ItemMessage && it.Role == agents.RoleUser {
			input = it.Content
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
		if err := t.check(ctx, rc, st, agents.GuardrailInput, blocking, input, nil); err != nil {
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
		err = t.check(gctx, rc, st, agents.GuardrailInput, parallel, input, nil)
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
func (t *turnCalls) guardOutput(ctx workflow.Context, rc agents.RunContext, st *runtime.AgentState, output json.RawMessage) error {
	gs := t.agent.GuardrailsOf(agents.GuardrailOutput)
	if len(gs) == 0 || !guarding(ctx) {
		return nil
	}
	return t.check(ctx, rc, st, agents.GuardrailOutput, gs, toolOutputText(output), output)
}

// check runs input or output guardrails gs on text (the user's message,
// or the final output's text; output is the final output's document):
// the funcs in one activity, the agents as children, all at once. The
// first of gs that tripped ends the agent; else the first that could not
// decide does.
func (t *turnCalls) check(ctx workflow.Context, rc agents.RunContext, st *runtime.AgentState, kind string, gs []runtime.GuardrailSpec, text string, output json.RawMessage) error {
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
		in := GuardrailInput{Graph: t.in.Graph, Agent: t.agent.Name, Run: rc, Kind: kind, Guardrails: funcs, Input: text, Output: output}
		if kind == agents.GuardrailOutput {
			in.Input = ""
		}
		fut = workflow.ExecuteLocalActivity(guardrailOptions(ctx, kind+" guardrails of "+t.agent.Name), GuardrailActivityName, in)
	}
	if slices.ContainsFunc(gs, func(g runtime.GuardrailSpec) bool { return g.Agent != "" }) {
		// The agent is no longer alone in its tree: its root decides.
		t.budget.release(ctx)
	}
	wg := workflow.NewWaitGroup(ctx)
	for i, g := range gs {
		if g.Agent == "" {
			continue
		}
		wg.Add(1)
		workflow.Go(ctx, func(gctx workflow.Context) {
			defer wg.Done()
			outcomes[i], failures[i] = t.askAgent(gctx, rc, st, kind, g, text)
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
			return t.tripped(ctx, rc, *o, "")
		}
	}
	for _, err := range failures {
		if err != nil {
			return t.undecided(kind, err)
		}
	}
	return nil
}

// askAgent runs guardrail g, an agent, on text, and reads its verdict.
func (t *turnCalls) askAgent(ctx workflow.Context, rc agents.RunContext, st *runtime.AgentState, kind string, g runtime.GuardrailSpec, text string) (*runtime.GuardrailOutcome, error) {
	in := troupe.AgentInput{Pending: []agents.Item{agents.UserMessage(text)}}
	output, err := t.askGuardrail(ctx, g.Agent, fmt.Sprintf("%s/%s-guardrail-%s", rc.WorkflowID, kind, g.Name), in, &st.Usage)
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

// askGuardrail runs agent, a guardrail, as a child agent workflow (its
// chain's ids under prefix) on in, which says what it reads, and returns
// its structured output. Its usage is added to usage: a guardrail agent's
// usage is the agent's, as an agent tool's is.
func (t *turnCalls) askGuardrail(ctx workflow.Context, agent, prefix string, in troupe.AgentInput, usage *model.Usage) (json.RawMessage, error) {
	in.Graph, in.RunID, in.Vars, in.Depth, in.Spec = t.in.Graph, t.in.RunID, t.in.Vars, t.in.Depth+1, t.in.Spec
	rr, err := t.r.route(ctx, t.rec, t.spec, agent, in, prefix, nil)
	var failed model.Usage
	var spent error // A spent budget is err itself, which undecided passes on.
	t.countTool(rr, err, &failed, &spent)
	if err != nil {
		*usage = usage.Add(failed)
		return nil, err
	}
	*usage = usage.Add(rr.Usage)
	return rr.Output, nil
}

// askToolAgent runs tool guardrail g's agent on call c: its check of the
// call (result nil) or of the call's output, result (as the model would
// read it). It returns the verdict's outcome, nil when the call or its
// output goes through. round tells a check of a call again (once its
// approval changed its arguments) from the first.
func (t *turnCalls) askToolAgent(ctx workflow.Context, rc agents.RunContext, g runtime.GuardrailSpec, c agents.Item, result *agents.Item, round string, usage *model.Usage) (*runtime.GuardrailOutcome, error) {
	before := result == nil
	kind, agent := agents.GuardrailToolBefore, g.BeforeAgent
	if !before {
		kind, agent = agents.GuardrailToolAfter, g.AfterAgent
	}
	if workflow.GetVersion(ctx, versionToolGuardrailAgents, workflow.DefaultVersion, 1) != 1 {
		return nil, troupe.NonRetryable(troupe.ErrGuardrailFailed, "tool guardrail %s: this run's history ran no tool guardrail agents", g.Name)
	}
	prefix := fmt.Sprintf("%s/t%d.%s-%s%s-guardrail-%s", rc.WorkflowID, rc.Turn, c.CallID, kind, round, g.Name)
	check := toolCheck(kind, g.Name, t.agent.Name, c)
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
	output, err := t.askGuardrail(ctx, agent, prefix, in, usage)
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
	checks []*agentCheck   // the agents', each set when its child ended
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
func (t *turnCalls) startScreen(ctx workflow.Context, rc agents.RunContext, d runtime.Dispatch, usage *model.Usage) *screening {
	calls := t.guardedCalls(d)
	if len(calls) == 0 || !guarding(ctx) {
		return nil
	}
	return t.screenCalls(ctx, rc, calls, "", usage)
}

// guardedCalls are the calls of d that tool guardrails check before they
// run, each with those guardrails.
func (t *turnCalls) guardedCalls(d runtime.Dispatch) []guardedCall {
	var calls []guardedCall
	for _, list := range [][]agents.Item{d.Functions, d.MCP, d.AgentTools} {
		for _, c := range list {
			if gs := t.agent.ToolGuardrails(c.Name, true); len(gs) > 0 {
				calls = append(calls, guardedCall{call: c, guardrails: gs})
			}
		}
	}
	return calls
}

// guardedByAgents reports whether a tool guardrail agent checks a call of
// d, before it runs or after.
func (t *turnCalls) guardedByAgents(d runtime.Dispatch) bool {
	for _, list := range [][]agents.Item{d.Functions, d.MCP, d.AgentTools} {
		for _, c := range list {
			for _, before := range []bool{true, false} {
				if slices.ContainsFunc(t.agent.ToolGuardrails(c.Name, before), func(g runtime.GuardrailSpec) bool { return g.BeforeAgent != "" || g.AfterAgent != "" }) {
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
func (t *turnCalls) screenCalls(ctx workflow.Context, rc agents.RunContext, calls []guardedCall, round string, usage *model.Usage) *screening {
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
		in := GuardrailInput{Graph: t.in.Graph, Agent: t.agent.Name, Run: rc, Kind: agents.GuardrailToolBefore, Calls: funcs}
		sc.future = workflow.ExecuteLocalActivity(guardrailOptions(ctx, "tool guardrails of "+t.agent.Name), GuardrailActivityName, in)
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
				ac.outcome, ac.err = t.askToolAgent(gctx, rc, g, c.call, nil, round, usage)
			})
		}
	}
	return sc
}

// wait waits for sc's checks. It returns their outcomes, the calls' in
// order and each call's in the order of its guardrails; the agents'
// checks that could not decide; and the funcs' activity's failure.
func (sc *screening) wait(ctx workflow.Context) ([]runtime.GuardrailOutcome, []*agentCheck, error) {
	var out GuardrailOutput
	var err error
	if sc.future != nil {
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
// answered at the gate (its verdict in t.screened); one that trips ends
// the agent, as one that could not decide does. Verdicts on calls the
// approvals rejected do not count.
func (t *turnCalls) screen(ctx workflow.Context, rc agents.RunContext, d runtime.Dispatch, sc *screening, usage *model.Usage) error {
	t.screened = nil
	if sc == nil {
		return nil
	}
	current := t.guardedCalls(d)
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
		return t.screenFailed(ctx, rc, current, outcomes, err)
	}
	if len(again) > 0 {
		more, moreFailed, err := t.screenCalls(ctx, rc, again, "-again", usage).wait(ctx)
		if err != nil {
			return t.screenFailed(ctx, rc, current, more, err)
		}
		outcomes, failed = append(outcomes, more...), append(failed, moreFailed...)
	}
	for _, o := range outcomes {
		if o.Action == runtime.GuardrailTrip {
			return t.tripped(ctx, rc, o, callNamed(current, o.CallID))
		}
	}
	if len(failed) > 0 {
		return t.undecided(agents.GuardrailToolBefore, failed[0].err)
	}
	for _, o := range outcomes {
		if o.Action == runtime.GuardrailReject && t.screened[o.CallID] == nil {
			if t.screened == nil {
				t.screened = map[string]*runtime.GuardrailOutcome{}
			}
			t.screened[o.CallID] = &o
			t.rec.add(ctx, troupe.Event{Kind: troupe.EventGuardrailApplied, Agent: t.agent.Name, Turn: rc.Turn, Tool: callNamed(current, o.CallID), CallID: o.CallID,
				Detail: troupe.Preview(o.Guardrail+" rejected the call: "+cmpReason(o), 300)})
		}
	}
	return nil
}

// screenFailed is the error that ends the agent when the funcs checking
// its calls failed (err): a trip among the verdicts of the agents that
// checked them beside the funcs, outcomes, ends it as a trip.
func (t *turnCalls) screenFailed(ctx workflow.Context, rc agents.RunContext, current []guardedCall, outcomes []runtime.GuardrailOutcome, err error) error {
	for _, o := range outcomes {
		if o.Action == runtime.GuardrailTrip {
			return t.tripped(ctx, rc, o, callNamed(current, o.CallID))
		}
	}
	return t.undecided(agents.GuardrailToolBefore, err)
}

// rejected is the outcome of the tool guardrail that rejected call c
// this turn, or nil.
func (t *turnCalls) rejected(c agents.Item) *runtime.GuardrailOutcome { return t.screened[c.CallID] }

// rejection is what the model reads of a call a guardrail rejected (after
// the gate's "Error: ").
func rejection(o *runtime.GuardrailOutcome) string {
	text := "guardrail " + o.Guardrail + " rejected this call; it was not run."
	if o.Message != "" {
		text += " " + o.Message
	}
	return text
}

// checkOutput is f, the future of call c's output, checked by the tool
// guardrails that check c's outputs as soon as it is set: a tripped one
// sets *fatal (first come), and the model reads a note instead. The usage
// of guardrail agents is added to usage.
func (t *turnCalls) checkOutput(ctx workflow.Context, rc agents.RunContext, c agents.Item, f workflow.Future, fatal *error, usage *model.Usage) workflow.Future {
	gs := t.agent.ToolGuardrails(c.Name, false)
	if len(gs) == 0 || t.rejected(c) != nil {
		return f
	}
	checked, set := workflow.NewFuture(ctx)
	workflow.Go(ctx, func(gctx workflow.Context) {
		var item agents.Item
		if err := f.Get(gctx, &item); err != nil {
			set.Set(nil, err) // A failed call's report is the runtime's, not the tool's.
			return
		}
		set.Set(t.after(gctx, rc, c, gs, item, t.outputKey(rc, c)+"-guarded", fatal, usage), nil)
	})
	return checked
}

// after runs tool guardrails gs on call c's output item, in order, and
// returns what the model reads: consecutive funcs in one activity, each
// agent as a child workflow, each on the output as the ones before left
// it, until one withholds it or trips.
func (t *turnCalls) after(ctx workflow.Context, rc agents.RunContext, c agents.Item, gs []runtime.GuardrailSpec, item agents.Item, key string, fatal *error, usage *model.Usage) agents.Item {
	if !guarding(ctx) {
		return item
	}
	for len(gs) > 0 {
		var out GuardrailOutput
		var err error
		if g := gs[0]; g.AfterAgent != "" {
			gs = gs[1:]
			var o *runtime.GuardrailOutcome
			if o, err = t.askToolAgent(ctx, rc, g, c, &item, "", usage); o != nil {
				out.Outcomes = []runtime.GuardrailOutcome{*o}
				switch o.Action {
				case runtime.GuardrailReplace:
					r := t.output(c, o.Message)
					out.Result = &r
				case runtime.GuardrailWithhold:
					r := t.output(c, withheld(g.Name, o.Message))
					out.Result = &r
				}
			}
		} else {
			n := slices.IndexFunc(gs, func(g runtime.GuardrailSpec) bool { return g.AfterAgent != "" })
			if n < 0 {
				n = len(gs)
			}
			in := GuardrailInput{Graph: t.in.Graph, Agent: t.agent.Name, Run: rc, Kind: agents.GuardrailToolAfter,
				Calls: []GuardrailCall{{Call: c, Guardrails: guardrailNames(gs[:n])}}, Result: &item, OutputKey: key}
			gs = gs[n:]
			err = workflow.ExecuteLocalActivity(guardrailOptions(ctx, "tool guardrails of "+c.Name), GuardrailActivityName, in).Get(ctx, &out)
		}
		if err != nil {
			if *fatal == nil {
				*fatal = t.undecided(agents.GuardrailToolAfter, err)
			}
			return t.output(c, "Error: the output of this call was withheld: its guardrails could not check it.")
		}
		done := false
		for _, o := range out.Outcomes {
			switch o.Action {
			case runtime.GuardrailTrip:
				err := t.tripped(ctx, rc, o, c.Name)
				if *fatal == nil {
					*fatal = err
				}
				return t.output(c, "Error: the output of this call was withheld: guardrail "+o.Guardrail+" tripped.")
			case runtime.GuardrailReplace:
				t.rec.add(ctx, troupe.Event{Kind: troupe.EventGuardrailApplied, Agent: t.agent.Name, Turn: rc.Turn, Tool: c.Name, CallID: c.CallID,
					Detail: troupe.Preview(o.Guardrail+" replaced the output: "+cmpReason(o), 300)})
			case runtime.GuardrailWithhold:
				t.rec.add(ctx, troupe.Event{Kind: troupe.EventGuardrailApplied, Agent: t.agent.Name, Turn: rc.Turn, Tool: c.Name, CallID: c.CallID,
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

// checkAgentOutput is checkOutput for an agent tool's output text, in
// the tool's coroutine.
func (t *turnCalls) checkAgentOutput(ctx workflow.Context, rc agents.RunContext, c agents.Item, output string, fatal *error, usage *model.Usage) string {
	gs := t.agent.ToolGuardrails(c.Name, false)
	if len(gs) == 0 {
		return output
	}
	return t.after(ctx, rc, c, gs, t.output(c, output), "", fatal, usage).Output
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
