package agents

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
)

// Guardrails are checks that run beside an agent's work and can end its
// run. There are three kinds:
//
//   - An InputGuardrail checks the user's message an agent answers first
//     (the entry agent of a run, the agent that answers a session's turn,
//     the agent an agent tool runs), before that agent's first model call
//     (Blocking) or in parallel with it.
//   - An OutputGuardrail checks an agent's final output.
//   - A ToolGuardrail checks a tool call before it runs (and may reject it,
//     with a message the model reads) and its output after (and may replace
//     or withhold it).
//
// A guardrail is a Go func, which runs in an activity, or an agent of the
// graph, which runs as a child agent workflow and whose structured output
// is the verdict: a GuardrailVerdict for input and output guardrails, a
// ToolCallVerdict or ToolOutputVerdict for a tool guardrail's check of a
// call or of its output. A guardrail that trips ends the run with the
// error type "troupe.GuardrailTripped", naming the guardrail and its
// reason; what the run did until then (its events, its transcript) stays
// readable. A guardrail that cannot decide (its func fails, after the
// activity's retries; its agent fails or gives no verdict) ends the run
// too, with "troupe.GuardrailFailed": a check that cannot decide lets
// nothing through.

// GuardrailVerdict is what an input or output guardrail decides. An agent
// that serves as a guardrail has it as its output type
// (Output: agents.MustOutput[agents.GuardrailVerdict]()).
type GuardrailVerdict struct {
	// Tripwire: the guardrail trips, and the run ends.
	Tripwire bool `json:"tripwire" jsonschema:"description=True when the checked text must not go on: the run ends."`
	// Reason says why (or why not), for the error and the run's events.
	Reason string `json:"reason" jsonschema:"description=Why the check tripped, or passed, in one sentence."`
}

// Pass is the verdict of a guardrail that lets the run go on.
func Pass() GuardrailVerdict { return GuardrailVerdict{} }

// Trip is the verdict of a guardrail that ends the run, for reason.
func Trip(reason string) GuardrailVerdict { return GuardrailVerdict{Tripwire: true, Reason: reason} }

// InputGuardrail checks the user's message an agent answers first. Set
// exactly one of Func and Agent.
type InputGuardrail struct {
	// Name identifies the guardrail among the agent's guardrails, in
	// errors and events; it must match ^[a-zA-Z0-9_-]{1,64}$.
	Name string
	// Func checks the message. It runs in an activity.
	Func func(ctx context.Context, rc RunContext, input string) (GuardrailVerdict, error)
	// Agent names an agent of the graph that checks the message instead:
	// it runs, as a child workflow, with the message as its input, and its
	// structured output (of type GuardrailVerdict) is the verdict. It must
	// have no guardrails of its own.
	Agent string
	// Blocking runs the guardrail before the agent's first model call, so
	// no model sees a message that trips it. By default it runs in
	// parallel with that call, which is cancelled (its answer discarded)
	// when the guardrail trips: the run waits for no check it does not
	// need to.
	Blocking bool
}

// OutputGuardrail checks an agent's final output, before the agent ends
// with it (and before it reaches a caller: an agent tool's output reaches
// the calling model only once it passed). Set exactly one of Func and
// Agent.
type OutputGuardrail struct {
	// Name identifies the guardrail, as InputGuardrail.Name does.
	Name string
	// Func checks the output: the JSON document of an agent with an output
	// type, a JSON string of the text otherwise. It runs in an activity.
	// CheckOutput builds one that decodes the output into its type.
	Func func(ctx context.Context, rc RunContext, output json.RawMessage) (GuardrailVerdict, error)
	// Agent names an agent of the graph that checks the output instead, as
	// InputGuardrail.Agent does; its input is the output's text.
	Agent string
}

// CheckOutput is an output guardrail named name whose check takes the
// agent's final output decoded into T (the agent's output type; string
// for a text agent). An output that does not decode trips it.
func CheckOutput[T any](name string, check func(ctx context.Context, rc RunContext, output T) (GuardrailVerdict, error)) OutputGuardrail {
	return OutputGuardrail{Name: name, Func: func(ctx context.Context, rc RunContext, output json.RawMessage) (GuardrailVerdict, error) {
		v, err := Decode[T](output)
		if err != nil {
			return Trip(fmt.Sprintf("the output does not decode into %s: %v", reflect.TypeFor[T](), err)), nil
		}
		return check(ctx, rc, v)
	}}
}

// ToolGuardrail checks the calls of one of an agent's tools (or all of
// them) before they run, and their outputs before the model reads them.
// It applies to every kind of call a model makes but a handoff: function
// tools, sandbox tools, MCP tools (by the name the model sees) and agent
// tools. Set a check of calls (Before or BeforeAgent), of outputs (After
// or AfterAgent), or both.
//
// A call that needs approval (Approval) runs with the arguments its
// decision gave, and those are what the check of calls checked: it runs
// beside the approval policies, and again when the decision changes the
// arguments. So it may run for a call that then does not run (a human
// rejected it, and its verdict does not count); keep it free of side
// effects.
//
// The checks of a turn's calls run at once, before any call of the turn
// starts: the funcs in one activity, each agent as a child workflow. A
// trip among them ends the run; else a check that could not decide does;
// else a call's first guardrail, in order, that rejects it decides. The
// checks of one call's output run in order, each on the output as the
// ones before left it, until one withholds it or trips; the outputs of
// several calls are checked at once, each as it comes.
type ToolGuardrail struct {
	// Name identifies the guardrail, as InputGuardrail.Name does.
	Name string
	// Tool names the tool, as the model sees it; "" guards every tool of
	// the agent.
	Tool string
	// Before checks a call before it runs. Its verdict may reject the
	// call (Reject) or trip (Tripwire). It runs in an activity.
	Before func(ctx context.Context, call ToolCall) (ToolVerdict, error)
	// BeforeAgent names an agent of the graph that checks calls instead
	// of Before: it runs, as a child workflow, on the call (its input is
	// a ToolCheck, as JSON), and its structured output, of type
	// ToolCallVerdict, is the verdict. It must have no guardrails of its
	// own. Set at most one of Before and BeforeAgent.
	BeforeAgent string
	// After checks a call's output before the model reads it. Its verdict
	// may replace the output (Replace), withhold it (Withhold) or trip. It
	// runs in an activity. An output that is the runtime's report of a
	// failed call (the tool's activity or child workflow failed) is not
	// checked.
	After func(ctx context.Context, call ToolCall, output string) (ToolVerdict, error)
	// AfterAgent names an agent of the graph that checks outputs instead
	// of After, as BeforeAgent does: its input is the call and its output
	// (a ToolCheck with Output), its output type ToolOutputVerdict. Set at
	// most one of After and AfterAgent.
	AfterAgent string
}

// ToolCall is a call a tool guardrail checks.
type ToolCall struct {
	// Run is the run context of the calling agent.
	Run RunContext
	// Tool is the tool's name, as the model sees it.
	Tool string
	// CallID ties the call to its output.
	CallID string
	// Arguments are the call's JSON arguments.
	Arguments json.RawMessage
}

// ToolVerdict is what a tool guardrail decides; the zero value lets the
// call (or its output) through. Fields that do not belong to the check
// (Reject after a call, Replace or Withhold before one) are ignored.
type ToolVerdict struct {
	// Tripwire: the guardrail trips, and the run ends, before any call
	// of the turn starts (Before) or once the turn's calls ended (After).
	Tripwire bool `json:"tripwire,omitempty"`
	// Reason says why, for the error and the run's events.
	Reason string `json:"reason,omitempty"`
	// Reject (Before): the call does not run, and the model reads Message
	// as its output.
	Reject bool `json:"reject,omitempty"`
	// Replace (After): the model reads Message instead of the output.
	Replace bool `json:"replace,omitempty"`
	// Withhold (After): the model reads a note that the output was
	// withheld, with Message when set, instead of the output.
	Withhold bool `json:"withhold,omitempty"`
	// Message is what the model reads instead (Reject, Replace, Withhold).
	Message string `json:"message,omitempty"`
}

// ToolCheck is what a tool guardrail agent (BeforeAgent, AfterAgent of a
// ToolGuardrail) reads: the user message it answers is a ToolCheck as
// JSON, for example
//
//	{"check":"tool_before","guardrail":"no_root","agent":"support","tool":"lookup","call_id":"call_1","arguments":{"key":"root"}}
//	{"check":"tool_after","guardrail":"no_cards","agent":"support","tool":"lookup","call_id":"call_1","arguments":{"key":"7"},"output":"customer 7, card 4111 1111 1111 1111"}
type ToolCheck struct {
	// Check is GuardrailToolBefore (the call is about to run) or
	// GuardrailToolAfter (it ran; Output is what it gave).
	Check string `json:"check"`
	// Guardrail is the guardrail's name; Agent is the agent that calls.
	Guardrail string `json:"guardrail"`
	Agent     string `json:"agent"`
	// Tool is the tool's name, as the calling model sees it; CallID ties
	// the call to its output.
	Tool   string `json:"tool"`
	CallID string `json:"call_id"`
	// Arguments are the call's JSON arguments; when the model's are not
	// valid JSON, a JSON string of their text.
	Arguments json.RawMessage `json:"arguments"`
	// Output (GuardrailToolAfter) is the call's output as the calling
	// model would read it: as the tool guardrails before this one left it.
	Output *string `json:"output,omitempty"`
}

// Actions of a ToolCallVerdict.
const (
	// ToolCallAllow: the call runs.
	ToolCallAllow = "allow"
	// ToolCallReject: the call does not run; the calling model reads the
	// verdict's message as its output.
	ToolCallReject = "reject"
	// ToolCallTrip: the run ends.
	ToolCallTrip = "trip"
)

// ToolCallVerdict is what a tool guardrail agent that checks calls before
// they run (ToolGuardrail.BeforeAgent) decides: such an agent has it as
// its output type (Output: agents.MustOutput[agents.ToolCallVerdict]()).
// Its JSON, which the model gives in strict mode, is one of
//
//	{"action":"allow","message":"","reason":"a read-only lookup"}
//	{"action":"reject","message":"The root key is off limits; ask for another.","reason":"the root key"}
//	{"action":"trip","message":"","reason":"the agent tries to read the root key"}
type ToolCallVerdict struct {
	// Action is ToolCallAllow, ToolCallReject or ToolCallTrip.
	Action string `json:"action" jsonschema:"enum=allow,enum=reject,enum=trip,description=allow: the call runs. reject: the call does not run and the calling agent reads message instead of its output. trip: the call must not run and the whole run ends."`
	// Message is what the calling model reads instead of the call's
	// output (ToolCallReject).
	Message string `json:"message" jsonschema:"description=For reject: what the calling agent reads instead of the call's output (say what it may do instead). Empty otherwise."`
	// Reason says why, for the error and the run's events.
	Reason string `json:"reason" jsonschema:"description=Why the call may run or not in one sentence."`
}

// ToolVerdict is v as a Before func would give it. An unknown action is
// an error: the check could not decide.
func (v ToolCallVerdict) ToolVerdict() (ToolVerdict, error) {
	switch v.Action {
	case ToolCallAllow:
		return ToolVerdict{Reason: v.Reason}, nil
	case ToolCallReject:
		return ToolVerdict{Reject: true, Reason: v.Reason, Message: v.Message}, nil
	case ToolCallTrip:
		return ToolVerdict{Tripwire: true, Reason: v.Reason}, nil
	}
	return ToolVerdict{}, fmt.Errorf("agents: a tool call verdict's action is %q; want %s, %s or %s", v.Action, ToolCallAllow, ToolCallReject, ToolCallTrip)
}

// Actions of a ToolOutputVerdict.
const (
	// ToolOutputKeep: the calling model reads the output.
	ToolOutputKeep = "keep"
	// ToolOutputReplace: the calling model reads the verdict's message
	// instead of the output.
	ToolOutputReplace = "replace"
	// ToolOutputWithhold: the calling model reads a note that the output
	// was withheld, with the verdict's message when set.
	ToolOutputWithhold = "withhold"
	// ToolOutputTrip: the run ends.
	ToolOutputTrip = "trip"
)

// ToolOutputVerdict is what a tool guardrail agent that checks calls'
// outputs (ToolGuardrail.AfterAgent) decides: such an agent has it as its
// output type (Output: agents.MustOutput[agents.ToolOutputVerdict]()).
// Its JSON, which the model gives in strict mode, is one of
//
//	{"action":"keep","message":"","reason":"nothing private in it"}
//	{"action":"replace","message":"customer 7, card [redacted]","reason":"a card number"}
//	{"action":"withhold","message":"It holds card numbers.","reason":"card numbers"}
//	{"action":"trip","message":"","reason":"the output holds credentials"}
type ToolOutputVerdict struct {
	// Action is ToolOutputKeep, ToolOutputReplace, ToolOutputWithhold or
	// ToolOutputTrip.
	Action string `json:"action" jsonschema:"enum=keep,enum=replace,enum=withhold,enum=trip,description=keep: the calling agent reads the output. replace: it reads message instead. withhold: it reads a note that the output was withheld and message. trip: the whole run ends."`
	// Message is what the calling model reads instead of the output
	// (ToolOutputReplace), or with the note that it was withheld
	// (ToolOutputWithhold).
	Message string `json:"message" jsonschema:"description=For replace: the text the calling agent reads instead of the output. For withhold: a note it reads with the notice that the output was withheld (may be empty). Empty otherwise."`
	// Reason says why, for the error and the run's events.
	Reason string `json:"reason" jsonschema:"description=Why the output may be read or not in one sentence."`
}

// ToolVerdict is v as an After func would give it. An unknown action is
// an error: the check could not decide.
func (v ToolOutputVerdict) ToolVerdict() (ToolVerdict, error) {
	switch v.Action {
	case ToolOutputKeep:
		return ToolVerdict{Reason: v.Reason}, nil
	case ToolOutputReplace:
		return ToolVerdict{Replace: true, Reason: v.Reason, Message: v.Message}, nil
	case ToolOutputWithhold:
		return ToolVerdict{Withhold: true, Reason: v.Reason, Message: v.Message}, nil
	case ToolOutputTrip:
		return ToolVerdict{Tripwire: true, Reason: v.Reason}, nil
	}
	return ToolVerdict{}, fmt.Errorf("agents: a tool output verdict's action is %q; want %s, %s, %s or %s", v.Action, ToolOutputKeep, ToolOutputReplace, ToolOutputWithhold, ToolOutputTrip)
}

// RejectCall is the verdict of a Before check that keeps the call from
// running; the model reads message.
func RejectCall(message string) ToolVerdict { return ToolVerdict{Reject: true, Message: message} }

// ReplaceOutput is the verdict of an After check that gives the model
// output instead of the call's.
func ReplaceOutput(output string) ToolVerdict { return ToolVerdict{Replace: true, Message: output} }

// WithholdOutput is the verdict of an After check that keeps the call's
// output from the model, telling it why.
func WithholdOutput(reason string) ToolVerdict {
	return ToolVerdict{Withhold: true, Reason: reason, Message: reason}
}

// TripTool is the verdict of a tool check that ends the run, for reason.
func TripTool(reason string) ToolVerdict { return ToolVerdict{Tripwire: true, Reason: reason} }

// Guardrail kinds, as errors and events name them.
const (
	GuardrailInput      = "input"
	GuardrailOutput     = "output"
	GuardrailToolBefore = "tool_before"
	GuardrailToolAfter  = "tool_after"
)

// InputGuardrailNamed returns the agent's input guardrail named name.
func (a *Agent) InputGuardrailNamed(name string) (InputGuardrail, bool) {
	for _, g := range a.InputGuardrails {
		if g.Name == name {
			return g, true
		}
	}
	return InputGuardrail{}, false
}

// OutputGuardrailNamed returns the agent's output guardrail named name.
func (a *Agent) OutputGuardrailNamed(name string) (OutputGuardrail, bool) {
	for _, g := range a.OutputGuardrails {
		if g.Name == name {
			return g, true
		}
	}
	return OutputGuardrail{}, false
}

// ToolGuardrailNamed returns the agent's tool guardrail named name.
func (a *Agent) ToolGuardrailNamed(name string) (ToolGuardrail, bool) {
	for _, g := range a.ToolGuardrails {
		if g.Name == name {
			return g, true
		}
	}
	return ToolGuardrail{}, false
}

// hasGuardrails reports whether the agent has any guardrail.
func (a *Agent) hasGuardrails() bool {
	return len(a.InputGuardrails)+len(a.OutputGuardrails)+len(a.ToolGuardrails) > 0
}

// checkGuardrails validates the agent's guardrails against the graph and
// its tools (refs, indexed already).
func (g *Graph) checkGuardrails(a *Agent, refs map[string]ToolRef) []error {
	var errs []error
	fail := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("agent %q: guardrail %q: "+format, append([]any{a.Name, name}, args...)...))
	}
	names := map[string]bool{}
	named := func(name string) bool {
		if err := checkName("guardrail", name); err != nil {
			errs = append(errs, fmt.Errorf("agent %q: %w", a.Name, err))
			return false
		}
		if names[name] {
			fail(name, "two guardrails of the agent have this name")
			return false
		}
		names[name] = true
		return true
	}
	// agent checks guardrail name's agent: one of the graph but a, of
	// output type verdict, with no guardrails of its own.
	agent := func(name, agent string, verdict reflect.Type) {
		ga, ok := g.agents[agent]
		switch {
		case !ok:
			fail(name, "runs unknown agent %q", agent)
		case agent == a.Name:
			fail(name, "an agent cannot be its own guardrail")
		case ga.Output == nil || ga.Output.typ != verdict:
			fail(name, "agent %q must have the output type %s", agent, verdict)
		case ga.hasGuardrails():
			fail(name, "agent %q has guardrails of its own; a guardrail agent may have none", agent)
		}
	}
	// checker checks a guardrail that is a func or an agent.
	checker := func(name string, hasFunc bool, ag string) {
		switch {
		case hasFunc == (ag != ""):
			fail(name, "set exactly one of Func and Agent")
		case ag != "":
			agent(name, ag, reflect.TypeFor[GuardrailVerdict]())
		}
	}
	for _, ig := range a.InputGuardrails {
		if named(ig.Name) {
			checker(ig.Name, ig.Func != nil, ig.Agent)
		}
	}
	for _, og := range a.OutputGuardrails {
		if named(og.Name) {
			checker(og.Name, og.Func != nil, og.Agent)
		}
	}
	for _, tg := range a.ToolGuardrails {
		if !named(tg.Name) {
			continue
		}
		before, after := tg.Before != nil || tg.BeforeAgent != "", tg.After != nil || tg.AfterAgent != ""
		switch {
		case !before && !after:
			fail(tg.Name, "set Before or BeforeAgent, After or AfterAgent, or both")
		case tg.Before != nil && tg.BeforeAgent != "":
			fail(tg.Name, "set at most one of Before and BeforeAgent")
		case tg.After != nil && tg.AfterAgent != "":
			fail(tg.Name, "set at most one of After and AfterAgent")
		}
		if tg.BeforeAgent != "" {
			agent(tg.Name, tg.BeforeAgent, reflect.TypeFor[ToolCallVerdict]())
		}
		if tg.AfterAgent != "" {
			agent(tg.Name, tg.AfterAgent, reflect.TypeFor[ToolOutputVerdict]())
		}
		switch {
		case tg.Tool == "":
		case refs[tg.Tool].Kind == ToolHandoff:
			fail(tg.Name, "%q is a handoff, which tool guardrails do not check", tg.Tool)
		case refs[tg.Tool].Kind == ToolUnknown && len(a.MCPServers) == 0:
			// MCP tools are known only once their servers list them.
			fail(tg.Name, "guards unknown tool %q", tg.Tool)
		}
	}
	return errs
}
