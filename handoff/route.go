package handoff

import (
	"encoding/json"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/telemetry"
	"github.com/troupe-dev/troupe/workflows/budget"
	"github.com/troupe-dev/troupe/workflows/events"
	"github.com/troupe-dev/troupe/workflows/lease"
)

// Route routes a chain of agents joined by handoffs: the agent to start
// runs as a child agent workflow (troupe.AgentWorkflowName), then each
// handoff's target in turn, through the handoff's callback and input
// filter (the handoff activity), until one gives a final output. Its
// fields say what the caller lends the chain; only Spec, Events and
// Prefix are required.
type Route struct {
	// Spec is the run's spec, which says each agent's handoffs.
	Spec *runtime.GraphSpec
	// Events records the chain's events (agent_started, handoff).
	Events *events.Recorder
	// Prefix names the chain's children: Prefix/<n>-<agent>.
	Prefix string
	// Continue, when set, may end the workflow before each child but the
	// first of a call of From, by returning a *workflow.ContinueAsNewError
	// carrying the chain's State (a run's orchestrator).
	Continue func(State) error
	// Sandboxes, a session's, are lent to each sandbox agent of the
	// chain, which gives its lease back.
	Sandboxes *lease.Keeper
	// Control, a session's controls, holds the chain while paused, stops
	// it before its next agent when interrupted, and reaches each agent
	// workflow it starts.
	Control Control
	// Budget, the root's, is lent to each agent of the chain and taken
	// back when the agent ends.
	Budget *budget.Tree
}

// Control is what a chain of agents obeys of a session's controls (the
// session's, or its agent's when it runs agents as tools).
type Control interface {
	// Hold waits while the session is paused.
	Hold(ctx workflow.Context) error
	// Stopping reports whether the chain is to stop before its next
	// agent (the session's user interrupted the turn).
	Stopping() bool
	// Track passes the controls to the child agent workflow id, started
	// as f, once it has started.
	Track(ctx workflow.Context, id string, f workflow.ChildWorkflowFuture)
}

// Run runs agent start as a child workflow, then each handoff target in
// turn, until one gives a final output, on the run's spec. An agent
// routes each of its agent-tool calls (and guardrail agents) with it.
func (r *Route) Run(ctx workflow.Context, start string, in troupe.AgentInput) (*Result, error) {
	return r.From(ctx, State{Current: start, Input: in})
}

func (r *Route) hold(ctx workflow.Context) error {
	if r.Control == nil {
		return nil
	}
	return r.Control.Hold(ctx)
}

func (r *Route) stopping() bool { return r.Control != nil && r.Control.Stopping() }

func (r *Route) track(ctx workflow.Context, id string, f workflow.ChildWorkflowFuture) {
	if r.Control != nil {
		r.Control.Track(ctx, id, f)
	}
}

// Result is the end of a chain of agents joined by handoffs, or the
// chain so far.
type Result struct {
	Agent     string          `json:"agent,omitempty"`
	Output    json.RawMessage `json:"output,omitempty"`
	Path      []string        `json:"path,omitempty"`
	Turns     int             `json:"turns,omitempty"`
	ToolCalls int             `json:"tool_calls,omitempty"`
	Handoffs  int             `json:"handoffs,omitempty"`
	Usage     model.Usage     `json:"usage"`
	// Agents is the chain's usage per agent, its agents-as-tools' and
	// failed agents' included.
	Agents runtime.Usages `json:"agents,omitempty"`
	// Transcript is the conversation at the chain's end.
	Transcript *runtime.TranscriptRef `json:"transcript,omitempty"`
	// Interrupted says the chain stopped on an interrupt (a session's):
	// Agent is the agent at work then, and Transcript and Pending the
	// conversation so far.
	Interrupted bool          `json:"interrupted,omitempty"`
	Pending     []agents.Item `json:"pending,omitempty"`
}

// State is where a chain of agents stands between two of them: the
// agent to start next (its child is the Next-th of the chain) with its
// input, and what the chain did so far. It is all an orchestrator carries
// through continue-as-new.
type State struct {
	Current string            `json:"current"`
	Next    int               `json:"next"`
	Input   troupe.AgentInput `json:"input"`
	Done    Result            `json:"done"`
}

// From goes on with a chain of agents from rs. Before each child but the
// first of this call, Continue (when not nil) may end the workflow by
// returning a *workflow.ContinueAsNewError carrying the state. A session's
// turn gives its sandboxes (Sandboxes): each sandbox agent of the chain
// is lent its lease and gives it back, and a cancelled turn waits for its
// agents to have ended. A session's controls (Control, nil outside
// sessions) hold the chain while paused, stop it before its next agent
// when interrupted, and reach each agent workflow it starts. The root of
// the tree (a run's orchestrator, a session) gives its budget (Budget,
// nil elsewhere): it lends its ledger to each agent of the chain, the one
// agent of the tree at work, and takes it back when the agent ends.
func (r *Route) From(ctx workflow.Context, rs State) (*Result, error) {
	res := &rs.Done
	current, in := rs.Current, rs.Input
	for n := rs.Next; ; n++ {
		if r.Continue != nil && n > rs.Next {
			if err := r.Continue(State{Current: current, Next: n, Input: in, Done: *res}); err != nil {
				return nil, err
			}
		}
		if err := r.hold(ctx); err != nil {
			return res, err
		}
		if r.stopping() {
			res.Agent, res.Transcript, res.Pending, res.Interrupted = current, &in.Transcript, in.Pending, true
			return res, nil
		}
		l := link{n: n, agent: current, childID: fmt.Sprintf("%s/%d-%s", r.Prefix, n, current)}
		if err := r.begin(ctx, res, l, &in); err != nil {
			return res, err
		}
		ar, err := r.runAgent(ctx, res, l, &in)
		if err != nil {
			return res, err
		}
		if res.tally(current, &ar) {
			return res, nil
		}
		target, err := r.handOff(ctx, res, l, &ar, &in)
		if err != nil {
			return res, err
		}
		current = target
	}
}

// link is the agent of a chain at work: the chain's n-th child, whose
// workflow id is childID (Prefix/<n>-<agent>).
type link struct {
	n       int
	agent   string
	childID string
}

// begin records the start of l's agent in the chain and readies its
// input in: its name, its transcript, whether it checks its input (the
// chain's first agent, with input guardrails) and its sandbox lease (a
// session's), so that the child gets all it needs.
func (r *Route) begin(ctx workflow.Context, res *Result, l link, in *troupe.AgentInput) error {
	in.Agent = l.agent
	if in.Transcript.Key == "" {
		in.Transcript.Key = "transcripts/" + l.childID
	}
	res.Path = append(res.Path, l.agent)
	r.Events.Add(ctx, troupe.Event{Kind: troupe.EventAgentStarted, Agent: l.agent, Child: l.childID})
	in.Session = nil
	in.CheckInput = l.n == 0 && len(r.Spec.Agent(l.agent).GuardrailsOf(agents.GuardrailInput)) > 0
	if a := r.Spec.Agent(l.agent); r.Sandboxes != nil && a != nil && a.Sandbox {
		lent, err := r.Sandboxes.Lend(ctx, l.agent)
		if err != nil {
			return err
		}
		in.Session = lent
	}
	return nil
}

// runAgent runs l's agent as the child agent workflow on in, lending it
// the budget and taking it back when it ends, and takes back the sandbox
// lease it was lent; a failed agent's usage is added to res, since it
// still counts.
func (r *Route) runAgent(ctx workflow.Context, res *Result, l link, in *troupe.AgentInput) (troupe.AgentResult, error) {
	boxes, tb := r.Sandboxes, r.Budget
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: l.childID, WorkflowTaskTimeout: AgentTaskTimeout,
		StaticSummary: "agent " + l.agent, WaitForCancellation: boxes != nil})
	var ar troupe.AgentResult
	in.Budget = tb.Lend(ctx, l.childID)
	child := workflow.ExecuteChildWorkflow(cctx, troupe.AgentWorkflowName, *in)
	in.Budget = nil
	if in.Session != nil {
		// A child that never started got nothing: the lease goes back
		// as lent (a live sandbox is no one's otherwise).
		if err := child.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
			boxes.Unlend(l.agent)
			tb.Ended(ctx, l.childID, nil, err)
			return ar, err
		}
	}
	r.track(ctx, l.childID, child)
	err := child.Get(ctx, &ar)
	tb.Ended(ctx, l.childID, &ar, err)
	if in.Session != nil {
		given := ar.Lease
		if err != nil {
			given = troupe.FailureOf(err).Lease // A failed agent may give its workspace back.
		}
		boxes.Back(ctx, l.agent, given)
	}
	if err != nil {
		res.Failed(err) // A failed agent's usage still counts.
		return ar, err
	}
	return ar, nil
}

// tally adds what agent did (ar) to the chain's result, and reports
// whether the chain ends there: interrupted, or with a final output
// rather than a handoff.
func (res *Result) tally(agent string, ar *troupe.AgentResult) (ended bool) {
	res.Turns += ar.Turns
	res.ToolCalls += ar.ToolCalls
	res.Usage = res.Usage.Add(ar.Usage)
	res.Agents = res.Agents.Add(ar.Agents...)
	if ar.Interrupted {
		res.Agent, res.Transcript, res.Pending, res.Interrupted = agent, &ar.Transcript, ar.Pending, true
		return true
	}
	if ar.Handoff == nil {
		res.Agent, res.Output, res.Transcript = agent, ar.Output, &ar.Transcript
		return true
	}
	return false
}

// handOff carries out the handoff that l's agent ended with (ar): it
// checks it against the spec, records it, and passes the conversation to
// in through the handoff's hooks (traced), returning the target, the
// chain's next agent.
func (r *Route) handOff(ctx workflow.Context, res *Result, l link, ar *troupe.AgentResult, in *troupe.AgentInput) (string, error) {
	h, err := r.handoffTool(res, l.agent, ar, in.Graph)
	if err != nil {
		return "", err
	}
	res.Handoffs++
	r.Events.Add(ctx, troupe.Event{Kind: troupe.EventHandoff, Agent: l.agent, Tool: h.Name, Detail: l.agent + " → " + h.Target})
	in.Transcript, in.Pending = ar.Transcript, ar.Pending
	hctx, hspan := traceHandoff(ctx, l.agent, l.childID, h)
	if h.Hooks {
		err = r.runHooks(ctx, hctx, l, h, ar, in)
	}
	hspan.End(ctx, err)
	if err != nil {
		return "", err
	}
	return h.Target, nil
}

// handoffTool is the handoff tool that agent ended with (ar), checked
// first against the chain's bound on handoffs and then against agent's
// handoffs in the spec, since graph (the input's) may have changed since
// the agent ran.
func (r *Route) handoffTool(res *Result, agent string, ar *troupe.AgentResult, graph string) (runtime.ToolSpec, error) {
	maxHandoffs := r.Spec.MaxHandoffs
	if res.Handoffs >= maxHandoffs {
		return runtime.ToolSpec{}, troupe.NonRetryable(troupe.ErrMaxHandoffs, "the run exceeded %d handoffs (last: %s → %s)", maxHandoffs, agent, ar.Handoff.Name)
	}
	var h runtime.ToolSpec
	if a := r.Spec.Agent(agent); a != nil {
		h = a.Tool(ar.Handoff.Name)
	}
	if h.Kind != agents.ToolHandoff {
		return runtime.ToolSpec{}, troupe.NonRetryable(troupe.ErrGraphChanged, "agent %s handed off with %q, which is not one of its handoffs in graph %s", agent, ar.Handoff.Name, graph)
	}
	return h, nil
}

// runHooks runs handoff h's callback and input filter (the handoff local
// activity, in the handoff's span hctx) on the conversation l's agent
// ended with (ar), and gives in the conversation they return, which the
// target starts from.
func (r *Route) runHooks(ctx, hctx workflow.Context, l link, h runtime.ToolSpec, ar *troupe.AgentResult, in *troupe.AgentInput) error {
	lctx := workflow.WithLocalActivityOptions(hctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: time.Minute, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3},
		Summary: "handoff " + l.agent + " → " + h.Target,
	})
	hi := ActivityInput{Graph: r.Spec.Graph, From: l.agent, Tool: h.Name, Transcript: ar.Transcript, Pending: ar.Pending,
		Run:    agents.RunContext{WorkflowID: l.childID, RunID: in.RunID, Agent: l.agent, Turn: ar.Turns, Vars: in.Vars},
		NewKey: fmt.Sprintf("transcripts/%s/%d-%s", r.Prefix, l.n+1, h.Target)}
	var ho ActivityOutput
	if err := workflow.ExecuteLocalActivity(lctx, ActivityName, hi).Get(ctx, &ho); err != nil {
		return err
	}
	in.Transcript, in.Pending = ho.Transcript, ho.Pending
	return nil
}

// Failed adds what a failed agent carries back to the chain's usage: a
// failed agent's usage still counts.
func (res *Result) Failed(err error) {
	u := troupe.FailureOf(err).Usage
	res.Usage = res.Usage.Add(u.Total())
	res.Agents = res.Agents.Add(u...)
}

// traceHandoff starts the span of a handoff from agent from (whose
// workflow was childID) over tool h: from the handoff to the start of its
// target, its hooks (callback, input filter) included.
func traceHandoff(ctx workflow.Context, from, childID string, h runtime.ToolSpec) (workflow.Context, *telemetry.WorkflowSpan) {
	return telemetry.StartWorkflowSpan(ctx, fmt.Sprintf("handoff %s → %s", from, h.Target), "handoff/"+childID,
		telemetry.WithAttributes(attribute.String("troupe.handoff.from", from), attribute.String("troupe.handoff.to", h.Target),
			telemetry.AttrToolName.String(h.Name)))
}

// AgentTaskTimeout is the workflow task timeout of agent workflows. While
// a model call runs as a local activity, the SDK holds the workflow task
// and extends it at 80% of this timeout; a cancellation or a signal waits
// for that extension, up to 2.4 s. A query (the events that MCP progress
// and `troupe run` show) rides on the task the extension opens and is
// answered when that task ends, so it can wait two extensions, up to
// 4.8 s. The server's default of 10 s made them wait up to 8 and 16 s; 3 s
// costs three more history events per 2.4 s of model call.
const AgentTaskTimeout = 3 * time.Second
