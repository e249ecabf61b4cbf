package guardrail

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/transcript"
)

// Activities run the guardrail funcs of the graphs a worker serves, and
// write the input of tool guardrail agents that check a call's output.
type Activities struct {
	// Agent resolves a run's agent in the graph the worker serves now
	// (troupe.ErrGraphChanged when it is no longer there).
	Agent func(graph, name string) (*agents.Graph, *agents.Agent, error)
	// Store holds outputs stored apart; Transcripts the agents'
	// transcripts.
	Store       *blob.Store
	Transcripts *transcript.Transcripts
}

// Register registers the activities on w.
func (a *Activities) Register(w worker.ActivityRegistry) {
	w.RegisterActivityWithOptions(a.Guardrails, activity.RegisterOptions{Name: GuardrailActivityName})
	w.RegisterActivityWithOptions(a.GuardrailPrompt, activity.RegisterOptions{Name: GuardrailPromptActivityName})
}

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
	// InputRef, when set, is the key of the user's message stored apart
	// (troupe.MessageRef), which the activity reads instead of Input.
	InputRef string `json:"input_ref,omitempty"`
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
	items, err := transcript.ResolveOutputs(ctx, a.Store, []agents.Item{in.Result})
	if err != nil {
		return runtime.TranscriptRef{}, err
	}
	check := in.Check
	check.Output = &items[0].Output
	return a.Transcripts.Append(ctx, runtime.TranscriptRef{Key: in.Transcript}, []agents.Item{agents.UserMessage(checkMessage(check))})
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
	_, agent, err := a.Agent(in.Graph, in.Agent)
	if err != nil {
		return nil, err
	}
	ctx = agents.WithRunContext(ctx, in.Run)
	if in.InputRef != "" {
		items, err := transcript.ResolveOutputs(ctx, a.Store, []agents.Item{agents.UserMessageRef(in.InputRef)})
		if err != nil {
			return nil, err
		}
		in.Input, in.InputRef = items[0].Content, ""
	}
	out := &GuardrailOutput{}
	var errs []error
	switch in.Kind {
	case agents.GuardrailInput, agents.GuardrailOutput:
		errs, err = runMessageGuardrails(ctx, agent, in, out)
	case agents.GuardrailToolBefore:
		errs, err = runBeforeCalls(ctx, agent, in, out)
	case agents.GuardrailToolAfter:
		errs, err = a.runAfterCall(ctx, agent, in, out)
	default:
		return nil, troupe.NonRetryable(troupe.ErrInternal, "unknown guardrail kind %q", in.Kind)
	}
	if err != nil {
		return nil, err
	}
	if slices.ContainsFunc(out.Outcomes, func(o runtime.GuardrailOutcome) bool { return o.Action == runtime.GuardrailTrip }) {
		return out, nil // A trip decides; a failure beside it does not matter.
	}
	if err := errors.Join(errs...); err != nil {
		return nil, temporal.NewApplicationError(err.Error(), troupe.ErrGuardrailFailed)
	}
	return out, nil
}

// guardrailGone is the error of a guardrail of in that the agent, as this
// worker serves it now, no longer has: non-retryable, since no retry
// brings it back.
func guardrailGone(in GuardrailInput, name string) error {
	return troupe.NonRetryable(troupe.ErrGraphChanged, "%s guardrail %q of agent %q is no longer in graph %q as this worker serves it; the run started with it", in.Kind, name, in.Agent, in.Graph)
}

// runMessageGuardrails runs the input or output guardrails of in at once,
// each on its own goroutine, adding those that tripped to out in their
// order; it returns each guardrail's failure (nil where it ran), and an
// error that fails the activity whatever tripped (a guardrail gone).
func runMessageGuardrails(ctx context.Context, agent *agents.Agent, in GuardrailInput, out *GuardrailOutput) ([]error, error) {
	checks := make([]func(context.Context) (agents.GuardrailVerdict, error), len(in.Guardrails))
	for i, name := range in.Guardrails {
		if in.Kind == agents.GuardrailInput {
			g, ok := agent.InputGuardrailNamed(name)
			if !ok || g.Func == nil {
				return nil, guardrailGone(in, name)
			}
			checks[i] = func(ctx context.Context) (agents.GuardrailVerdict, error) { return g.Func(ctx, in.Run, in.Input) }
		} else {
			g, ok := agent.OutputGuardrailNamed(name)
			if !ok || g.Func == nil {
				return nil, guardrailGone(in, name)
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
	return failed, nil
}

// runBeforeCalls runs each call's tool guardrails in order before it
// runs, until one decides the call's fate (its outcome goes to out) or
// fails; it returns the failures, and an error that fails the activity
// whatever tripped (a guardrail gone).
func runBeforeCalls(ctx context.Context, agent *agents.Agent, in GuardrailInput, out *GuardrailOutput) ([]error, error) {
	var errs []error
	for _, c := range in.Calls {
		call := toolCall(in.Run, c.Call)
		for _, name := range c.Guardrails {
			g, ok := agent.ToolGuardrailNamed(name)
			if !ok || g.Before == nil {
				return nil, guardrailGone(in, name)
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
	return errs, nil
}

// runAfterCall runs the one call's tool guardrails in order on its output
// (read from the blob store when stored apart), each on what the model
// would read, until one withholds it, trips or fails; when one changed the
// output, out.Result is the output as changed. It returns the failures,
// and an error that fails the activity whatever tripped.
func (a *Activities) runAfterCall(ctx context.Context, agent *agents.Agent, in GuardrailInput, out *GuardrailOutput) ([]error, error) {
	if len(in.Calls) != 1 || in.Result == nil {
		return nil, troupe.NonRetryable(troupe.ErrInternal, "tool_after guardrails need one call and its result")
	}
	c, item := in.Calls[0], *in.Result
	text := item.Output
	if item.OutputRef != "" {
		data, err := a.Store.Get(ctx, item.OutputRef)
		if err != nil {
			return nil, err
		}
		text = string(data)
	}
	var errs []error
	call, changed := toolCall(in.Run, c.Call), false
checks:
	for _, name := range c.Guardrails {
		g, ok := agent.ToolGuardrailNamed(name)
		if !ok || g.After == nil {
			return nil, guardrailGone(in, name)
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
		result, err := a.changedOutput(ctx, in, item, text)
		if err != nil {
			return nil, err
		}
		out.Result = result
	}
	return errs, nil
}

// changedOutput is item with the output text a guardrail gave it, stored
// apart under in.OutputKey when set and too large to inline, else checked
// to fit in a payload, so that no payload grows past Temporal's limit.
func (a *Activities) changedOutput(ctx context.Context, in GuardrailInput, item agents.Item, text string) (*agents.Item, error) {
	item.Output, item.OutputRef = text, ""
	if in.OutputKey != "" {
		var err error
		if item, err = transcript.Offload(ctx, a.Store, in.OutputKey, item); err != nil {
			return nil, err
		}
	} else if err := troupe.CheckPayload("a guardrail's replacement output", len(text)); err != nil {
		return nil, err
	}
	return &item, nil
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
