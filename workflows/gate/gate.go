// Package gate is the one gate around an agent's model calls and tool
// calls: an ordered chain of gates that the agent workflow asks at fixed
// points of its loop. Approvals (package workflows/approval), guardrails
// (workflows/guardrail) and budgets (workflows/budget) are gates; the
// agent workflow knows none of them, only the chain.
//
// The contract, in the order an agent's loop meets the points:
//
//  1. BeforeTurn: before a turn's model call is prepared (its MCP tools
//     listed, its workspace's guidance read). A gate may refuse the call:
//     its error ends the agent (a budget that is spent).
//  2. AroundModel: around the model call itself. A gate may hold the call
//     back (blocking input guardrails), run beside it and cancel it
//     (parallel input guardrails), or fill in what the model activity
//     does for it (a budget's report of the call's usage). Gates nest in
//     chain order: the first is outermost.
//  3. AfterModel: once the call returned and its usage is counted (a
//     budget's report of what the call used).
//  4. AroundCalls: before any call of a turn starts, all at once. A gate
//     may make calls wait (approvals, durably, for as long as it takes),
//     answer them itself (Calls.Answer: a rejection the model reads) or
//     change their arguments, and check them beside the others (tool
//     guardrails start their check, let the inner gates decide, then
//     take its verdicts). Gates nest in chain order.
//  5. BeforeCall: as each call is about to run. A gate may answer it
//     instead (the text the model reads, after "Error: ").
//  6. AfterCall: on each call's output, before the model reads it
//     (output guardrails: replace, withhold, trip). Only the calls that
//     a gate checks (Checks) pay for it: their output is taken in a
//     coroutine of its own.
//  7. BeforeFinal: on the agent's final output, before the agent ends
//     with it (output guardrails).
//  8. BeforeChildren (Spawner): told before the agent starts agent
//     workflows of its own (agents-as-tools, guardrail agents), which
//     may ask the tree's root; a budget gives its ledger back to the root
//     here. Gates tell the chain through Turn.Spawning.
//
// A gate whose first check of a turn's calls is an activity of its own
// (approval policies that decide per call, tool guardrail funcs) may have
// the model activity run it right after the call (Prechecker, in
// precheck.go), so that the common turn takes no activity for it.
//
// A gate implements only the points it needs (each point is an interface
// of its own); the chain keeps one list per point, so a point no gate
// implements costs a nil check, and an agent with no approval policy,
// guardrail or budget has an empty chain: no local activity, no update,
// no signal, no event of theirs. A gate that panics fails the agent with
// a non-retryable troupe.GateFailed error that names it, rather than
// blocking the workflow task. Gates are workflow code: deterministic,
// everything that touches the world an activity; and as every change of
// what workflow code does, a change of what a gate does at a point is
// versioned (workflow.GetVersion) and proven by replaying checked-in
// histories.
package gate

import (
	"encoding/json"
	"reflect"
	"runtime/debug"

	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/workflows/events"
)

// Gate is a gate of the chain; it implements one or more of the points
// below.
type Gate interface {
	// Name names the gate in errors and events: "approvals",
	// "guardrails", "budget".
	Name() string
}

// TurnGate is a gate before a turn's model call is prepared.
type TurnGate interface {
	Gate
	BeforeTurn(ctx workflow.Context, t *Turn, m *ModelCall) error
}

// ModelGate is a gate around the model call: next makes the call (on the
// context it is given, which the gate may cancel) and returns its error.
type ModelGate interface {
	Gate
	AroundModel(ctx workflow.Context, t *Turn, m *ModelCall, next func(workflow.Context) error) error
}

// UsageGate is a gate after the model call, which takes what it used.
type UsageGate interface {
	Gate
	AfterModel(ctx workflow.Context, t *Turn, m *ModelCall)
}

// CallsGate is a gate around the decision on a turn's calls, before any
// starts: next lets the inner gates decide.
type CallsGate interface {
	Gate
	AroundCalls(ctx workflow.Context, t *Turn, calls *Calls, next func(workflow.Context) error) error
}

// CallGate is a gate before each call runs: a non-empty answer is what
// the model reads instead of the call's output (after "Error: ").
type CallGate interface {
	Gate
	BeforeCall(ctx workflow.Context, t *Turn, c Call) (answer string)
}

// OutputGate is a gate on each call's output: Checks says whether it
// checks call c's (a call no gate checks is not waited on apart);
// AfterCall returns the output as the model reads it. A gate that cannot
// let the output through ends the agent with Turn.Fail.
type OutputGate interface {
	Gate
	Checks(t *Turn, c Call) bool
	AfterCall(ctx workflow.Context, t *Turn, c Call, output agents.Item) agents.Item
}

// FinalGate is a gate on the agent's final output.
type FinalGate interface {
	Gate
	BeforeFinal(ctx workflow.Context, t *Turn, output json.RawMessage) error
}

// Spawner is told before the agent starts agent workflows of its own.
type Spawner interface {
	Gate
	BeforeChildren(ctx workflow.Context, t *Turn)
}

// Kinds of calls (Call.Kind).
const (
	KindFunction = "function"
	KindSandbox  = "sandbox"
	KindMCP      = "mcp"
	KindAgent    = "agent"
	KindHandoff  = "handoff"
)

// Call is a tool call at the gate: what it calls and what it would run.
type Call struct {
	Item agents.Item
	// Kind is one of the Kind constants.
	Kind string
	// Tool is the agent's tool it calls (not for MCP calls).
	Tool runtime.ToolSpec
	// MCP is the MCP tool it calls (MCP calls).
	MCP *runtime.MCPToolRef
	// OutputKey is where an output too large to inline goes; "" for an
	// output that must stay inline (an agent tool's).
	OutputKey string
}

// ModelCall is a turn's model call at the gate.
type ModelCall struct {
	// Turn is the turn's number.
	Turn int
	// Report, when a gate sets it, has the model activity tell the
	// tree's root what the call used, right after it (a budget's).
	Report *troupe.ModelBudget
	// Usage is what the call used, priced, and Told how the model
	// activity told the root of it (troupe.Told*): set for AfterModel.
	Usage runtime.AgentUsage
	Told  string
}

// Calls are the calls of a turn before any starts, sorted by kind. A
// gate that answers a call takes it out of Dispatch (Answer does both).
type Calls struct {
	Dispatch *runtime.Dispatch
	// Done are the calls answered without running, by call id.
	Done map[string]agents.Item
}

// Answer answers call id with text, which the model reads, and takes
// the call out of the dispatch: it does not run.
func (c *Calls) Answer(t *Turn, call agents.Item, text string) {
	c.Done[call.CallID] = t.Output(call, text)
}

// Turn is what the gates know of the agent at work and what they may do
// in its workflow. The agent workflow keeps one for its run and sets Run
// (its turn) and CallUsage as the turns go.
type Turn struct {
	// Spec is the run's spec, Agent the agent's in it.
	Spec  *runtime.GraphSpec
	Agent *runtime.AgentSpec
	// Input is the agent's input: its graph, its root (RunID), vars and
	// depth. Continued says this run of its workflow continued an
	// earlier one.
	Input     troupe.AgentInput
	Continued bool
	// Run is the run context of the turn at work.
	Run agents.RunContext
	// Events records the agent's events.
	Events *events.Recorder
	// Usage is the agent's own usage, which guardrail agents of its input
	// and output add to; CallUsage the usage of the turn's calls, which
	// agents run for its calls (tool guardrails) add to.
	Usage     *model.Usage
	CallUsage *model.Usage
	// RunAgent runs agent as a child agent workflow (its chain's ids
	// under prefix) on in, which says what it reads (its graph, root,
	// vars, depth and spec are the agent's), adds what it used to usage,
	// and returns its final output.
	RunAgent func(ctx workflow.Context, agent, prefix string, in troupe.AgentInput, usage *model.Usage) (json.RawMessage, error)
	// MCPTool is the agent's MCP tool name as listed, if any.
	MCPTool func(name string) (runtime.MCPToolRef, bool)
	// Stopping reports whether the user interrupted the turn (a
	// session's), so calls that wait are not run.
	Stopping func() bool
	// Prechecked is what the turn's model call checked of its calls for
	// the gates (Chain.Precheck), nil when it checked nothing; the agent
	// workflow sets it with each model call's output, and drops it when
	// the calls wait for a pause first (the checks would be stale).
	Prechecked *Prechecked

	chain *Chain
	fatal *error
}

// WorkflowID is the agent's workflow id.
func (t *Turn) WorkflowID() string { return t.Run.WorkflowID }

// Output is the agent's output item for call c, with text.
func (t *Turn) Output(c agents.Item, text string) agents.Item {
	item := agents.FunctionCallOutput(c.CallID, text)
	item.Agent = t.Agent.Name
	return item
}

// Fail ends the agent once the turn's calls are done, with err: the
// first a gate gives for the turn's calls wins.
func (t *Turn) Fail(err error) {
	if t.fatal != nil && *t.fatal == nil {
		*t.fatal = err
	}
}

// Spawning tells the chain's Spawners that the agent is about to start
// agent workflows of its own.
func (t *Turn) Spawning(ctx workflow.Context) {
	if t.chain != nil {
		t.chain.spawning(ctx)
	}
}

// Chain is an agent's gates, in order.
type Chain struct {
	turn    *Turn
	gates   []Gate
	turns   []TurnGate
	models  []ModelGate
	usages  []UsageGate
	calls   []CallsGate
	each    []CallGate
	outputs []OutputGate
	finals  []FinalGate
	spawns  []Spawner
	// prechecks are the gates whose first check of a turn's calls rides
	// with the model call (Precheck).
	prechecks []Prechecker
}

// New is the chain of gates (nil ones left out) for the agent t
// describes. A nil or empty chain lets everything through and costs
// nothing.
func New(t *Turn, gates ...Gate) *Chain {
	c := &Chain{turn: t}
	t.chain = c
	for _, g := range gates {
		if g == nil || isNil(g) {
			continue
		}
		c.gates = append(c.gates, g)
		collect(g, &c.turns)
		collect(g, &c.models)
		collect(g, &c.usages)
		collect(g, &c.calls)
		collect(g, &c.each)
		collect(g, &c.outputs)
		collect(g, &c.finals)
		collect(g, &c.spawns)
		collect(g, &c.prechecks)
	}
	return c
}

// collect adds g to the gates of kind G (to), if it is one.
func collect[G any](g Gate, to *[]G) {
	if k, ok := g.(G); ok {
		*to = append(*to, k)
	}
}

// Empty reports whether the chain has no gate.
func (c *Chain) Empty() bool { return c == nil || len(c.gates) == 0 }

// BeforeTurn asks the gates whether the turn's model call may be
// prepared.
func (c *Chain) BeforeTurn(ctx workflow.Context, m *ModelCall) error {
	if c == nil {
		return nil
	}
	for _, g := range c.turns {
		if err := guard(g, func() error { return g.BeforeTurn(ctx, c.turn, m) }); err != nil {
			return err
		}
	}
	return nil
}

// AroundModel makes the model call with call, through the gates around
// it.
func (c *Chain) AroundModel(ctx workflow.Context, m *ModelCall, call func(workflow.Context) error) error {
	if c == nil || len(c.models) == 0 {
		return call(ctx)
	}
	var at func(i int, ctx workflow.Context) error
	at = func(i int, ctx workflow.Context) error {
		if i == len(c.models) {
			return call(ctx)
		}
		g := c.models[i]
		return guard(g, func() error {
			return g.AroundModel(ctx, c.turn, m, func(ctx workflow.Context) error { return at(i+1, ctx) })
		})
	}
	return at(0, ctx)
}

// AfterModel hands the gates what the model call used.
func (c *Chain) AfterModel(ctx workflow.Context, m *ModelCall) error {
	if c == nil {
		return nil
	}
	for _, g := range c.usages {
		if err := guard(g, func() error { g.AfterModel(ctx, c.turn, m); return nil }); err != nil {
			return err
		}
	}
	return nil
}

// BeforeCalls has the gates decide on a turn's calls before any starts.
// fatal is where the turn's calls keep the error that ends the agent once
// they are done (Turn.Fail).
func (c *Chain) BeforeCalls(ctx workflow.Context, calls *Calls, fatal *error) error {
	if c == nil {
		return nil
	}
	c.turn.fatal = fatal
	if len(c.calls) == 0 {
		return nil
	}
	var at func(i int, ctx workflow.Context) error
	at = func(i int, ctx workflow.Context) error {
		if i == len(c.calls) {
			return nil
		}
		g := c.calls[i]
		return guard(g, func() error {
			return g.AroundCalls(ctx, c.turn, calls, func(ctx workflow.Context) error { return at(i+1, ctx) })
		})
	}
	return at(0, ctx)
}

// BeforeCall is the answer a gate gives call instead of letting it run,
// "" to let it run. A gate that panics answers with its failure, and
// ends the agent once the turn's calls are done.
func (c *Chain) BeforeCall(ctx workflow.Context, call Call) string {
	if c == nil {
		return ""
	}
	for _, g := range c.each {
		var why string
		if err := guard(g, func() error { why = g.BeforeCall(ctx, c.turn, call); return nil }); err != nil {
			c.turn.Fail(err)
			return troupe.FailureText(err)
		}
		if why != "" {
			return why
		}
	}
	return ""
}

// Checks reports whether a gate checks call's output.
func (c *Chain) Checks(call Call) bool {
	if c == nil {
		return false
	}
	for _, g := range c.outputs {
		if g.Checks(c.turn, call) {
			return true
		}
	}
	return false
}

// AfterCall is call's output as the model reads it, once the gates that
// check it have.
func (c *Chain) AfterCall(ctx workflow.Context, call Call, output agents.Item) agents.Item {
	if c == nil {
		return output
	}
	for _, g := range c.outputs {
		if !g.Checks(c.turn, call) {
			continue
		}
		in := output
		if err := guard(g, func() error { output = g.AfterCall(ctx, c.turn, call, in); return nil }); err != nil {
			c.turn.Fail(err)
			return c.turn.Output(call.Item, "Error: the output of this call was withheld: "+troupe.FailureText(err))
		}
	}
	return output
}

// CheckOutput is f, the future of call's output, checked by the gates
// that check it as soon as it is set (in a coroutine of its own); f
// itself when none does. A failed call's error passes as it is.
func (c *Chain) CheckOutput(ctx workflow.Context, call Call, f workflow.Future) workflow.Future {
	if !c.Checks(call) {
		return f
	}
	checked, set := workflow.NewFuture(ctx)
	workflow.Go(ctx, func(gctx workflow.Context) {
		var item agents.Item
		if err := f.Get(gctx, &item); err != nil {
			set.Set(nil, err) // A failed call's report is the runtime's, not the tool's.
			return
		}
		set.Set(c.AfterCall(gctx, call, item), nil)
	})
	return checked
}

// BeforeFinal has the gates check the agent's final output.
func (c *Chain) BeforeFinal(ctx workflow.Context, output json.RawMessage) error {
	if c == nil {
		return nil
	}
	for _, g := range c.finals {
		if err := guard(g, func() error { return g.BeforeFinal(ctx, c.turn, output) }); err != nil {
			return err
		}
	}
	return nil
}

// Spawning tells the Spawners the agent is about to start agent
// workflows of its own.
func (c *Chain) Spawning(ctx workflow.Context) { c.spawning(ctx) }

func (c *Chain) spawning(ctx workflow.Context) {
	if c == nil {
		return
	}
	for _, g := range c.spawns {
		if err := guard(g, func() error { g.BeforeChildren(ctx, c.turn); return nil }); err != nil {
			c.turn.Fail(err)
		}
	}
}

// guard runs a gate's step, turning a panic into a troupe.GateFailed
// error that names the gate.
func guard(g Gate, step func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			workflowStack := string(debug.Stack())
			err = troupe.NonRetryable(troupe.ErrGateFailed, "gate %s panicked: %v\n%s", g.Name(), p, workflowStack)
		}
	}()
	return step()
}

// isNil reports whether g holds a nil pointer (a gate an agent does not
// have, as its constructor returns it).
func isNil(g Gate) bool {
	v := reflect.ValueOf(g)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
