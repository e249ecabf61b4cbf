package workflows

import (
	"cmp"

	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/workflows/budget"
)

// A run keeps the graph it started with: the orchestrator takes the
// graph's spec (runtime.GraphSpec) once, in a side effect recorded in its
// history, and hands it to every agent workflow of the run in its input.
// Workflow code branches on that spec only, never on the graph the worker
// serves now, so a worker redeployed with an edited graph replays and
// continues runs in flight on what they started with. Activities still
// resolve Go funcs (instructions, tools, filters, extractors) by name in
// the graph served now; what they no longer find is, for a tool or an
// extractor, an error the model sees, and for an agent or a handoff's
// hooks, troupe.GraphChanged: never a quiet run without it.
//
// Everything workflow code branches on is in the spec: each agent's
// limits, sandbox and MCP servers, its tools by kind (function, sandbox,
// agent, handoff, with their targets, timeouts, extractors and handoff
// hooks), its approval policies, guardrails and memory scope, the run's
// budget and prices, and the worker settings that change control flow
// (MaxHandoffs, MaxToolDepth, ModelActivities, ModelRateLimitWait). So:
//
//	edited since the run started   what the run does
//	a tool gained                  not offered to the model: the run's spec lacks
//	                               it (a call of it anyway is an unknown tool, and
//	                               the model is told so)
//	a tool lost (its func gone)    a call of it gets the tool error "tool X is no
//	                               longer available…"; the run goes on
//	an input filter or callback    not run: the run's handoff had none
//	gained
//	a filter or callback lost      the handoff fails with troupe.GraphChanged (the
//	                               target would read an unfiltered conversation)
//	an approval predicate lost     the call waits for a decision, as when the
//	                               predicate fails
//	an extractor lost              the call's output is the tool error "output
//	                               extractor of X failed: … no longer in graph …"
//	an agent lost                  the agent's next activity fails with
//	                               troupe.GraphChanged naming it: a handoff chain
//	                               fails the run; an agent tool's call is a tool error
//	instructions, model, schemas   used from the graph served now (activities)
//	skills (capabilities/skills)   the index, load_skill and read_skill serve the
//	                               skills the worker loaded at its start, and
//	                               the memory skills as the store holds them
//	                               at each call

// versionPinnedGraph marks the change to runs that keep their graph's
// spec. Runs started before it (no marker in their history) replay on the
// graph as it is served, as they always did.
const versionPinnedGraph = "troupe.pinned-graph"

// pinned is the side effect that fixes a run's spec, or the reason there
// is none (and its error type, when not troupe.UnknownAgent).
type pinned struct {
	Spec    *runtime.GraphSpec `json:"spec,omitempty"`
	Err     string             `json:"error,omitempty"`
	ErrType string             `json:"error_type,omitempty"`
}

// pin returns the spec the run branches on, and whether it is fixed for
// the run (in its history) or, for runs from before pinning, taken from
// the graph served now.
func (r *Runner) pin(ctx workflow.Context, in troupe.RunInput) (*runtime.GraphSpec, bool, error) {
	if workflow.GetVersion(ctx, versionPinnedGraph, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		spec, err := r.liveSpec(in.Graph, in.MaxHandoffs)
		return spec, false, err
	}
	var p pinned
	err := workflow.SideEffect(ctx, func(workflow.Context) any {
		spec, err := r.liveSpec(in.Graph, in.MaxHandoffs)
		if err != nil {
			return pinned{Err: err.Error()}
		}
		// The run's budget: its own, or the graph's default.
		spec.Budget = r.graphs[in.Graph].Budget()
		if in.Budget != nil {
			spec.Budget = budget.OrNil(*in.Budget)
		}
		if err := budget.Check(spec, spec.Budget); err != nil {
			return pinned{Err: err.Error(), ErrType: troupe.ErrBadBudget}
		}
		spec.MaxConcurrentCalls = max(in.MaxConcurrentCalls, 0)
		return pinned{Spec: spec}
	}).Get(&p)
	if err != nil {
		return nil, false, err
	}
	if p.Err != "" {
		return nil, false, troupe.NonRetryable(cmp.Or(p.ErrType, troupe.ErrUnknownAgent), "%s", p.Err)
	}
	return p.Spec, true, nil
}

// liveSpec is the spec of the graph as this worker serves it, with the
// worker's settings; maxHandoffs, when not 0, overrides the worker's.
func (r *Runner) liveSpec(graph string, maxHandoffs int) (*runtime.GraphSpec, error) {
	g, err := r.graph(graph)
	if err != nil {
		return nil, err
	}
	if maxHandoffs == 0 {
		maxHandoffs = r.cfg.MaxHandoffs
	}
	prices, unpriced := budget.Prices(g, r.cfg.Prices, r.cfg.DefaultModel)
	return runtime.SpecOf(g, runtime.RunSettings{MaxHandoffs: maxHandoffs, MaxToolDepth: r.cfg.MaxToolDepth, ModelActivities: r.cfg.ModelActivities,
		ModelRateLimitWait: r.cfg.ModelRateLimitWait, ContinueAfterTurns: r.cfg.ContinueAfterTurns, ContinueAfterEvents: r.cfg.ContinueAfterEvents, Prices: prices, Unpriced: unpriced}), nil
}

// agentSpec returns the run's spec and agent in's spec: the run's own, or
// for an agent of a run from before pinning, the graph's as served now.
// An agent the spec does not hold fails with troupe.GraphChanged.
func (r *Runner) agentSpec(in troupe.AgentInput) (*runtime.GraphSpec, *runtime.AgentSpec, error) {
	spec := in.Spec
	if spec == nil {
		var err error
		if spec, err = r.liveSpec(in.Graph, 0); err != nil {
			return nil, nil, err
		}
		for i := range spec.Agents {
			spec.Agents[i].MaxConcurrentCalls = 0 // Its turns ran every call at once.
		}
	}
	a := spec.Agent(in.Agent)
	if a == nil {
		return nil, nil, troupe.NonRetryable(troupe.ErrGraphChanged, "agent %q is not in graph %q as this worker serves it", in.Agent, in.Graph)
	}
	return spec, a, nil
}
