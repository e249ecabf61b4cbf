package workflows

// How rollouts reach memory. A run or session turn whose agents have
// memory (runtime.AgentSpec.MemoryScope, from agents.MemoryConfig) is a
// rollout line of its scope: the workflow appends it (MemoryAppendRollout)
// and signals the scope's workflow, starting it if need be (MemorySignal:
// SignalWithStart from an activity; workflow code cannot start-or-signal,
// and a signal to a workflow that is not running would be lost). These
// new commands are gated by the version troupe.memory-rollouts, asked
// only when the run's spec has a memory scope, so runs and sessions
// without memory record exactly the commands they did before, and runs
// recorded before replay without them.
//
// A user's turn never waits for it: a session queues its rollouts and
// feeds them from a coroutine of its own once the turn's answer is
// recorded, one after the other (so the appends of one rollout stay in
// order), and waits for the queue only before it continues as new or
// ends. A run appends after its final output, as local activities (a few
// milliseconds before its result, no server round trip); consolidation
// itself runs in the scope's workflow.

import (
	"cmp"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/memory"
	"github.com/troupe-dev/troupe/runtime"
)

// memoryScope is the memory scope of a run or turn: that of the first
// agent of path (the agents it went through) with one, else of agent.
func memoryScope(spec *runtime.GraphSpec, path []string, agent string) string {
	for _, name := range append(slices.Clip(path), agent) {
		if a := spec.Agent(name); a != nil && a.MemoryScope != "" {
			return a.MemoryScope
		}
	}
	return ""
}

// memoryScopes are the memory scopes of a spec's agents, in order.
func memoryScopes(spec *runtime.GraphSpec) []string {
	var out []string
	for _, a := range spec.Agents {
		if a.MemoryScope != "" && !slices.Contains(out, a.MemoryScope) {
			out = append(out, a.MemoryScope)
		}
	}
	return out
}

// memoryOn reports whether this run records memory rollouts: runs that
// started before memory did not (their histories have no marker).
func memoryOn(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, versionMemoryRollouts, workflow.DefaultVersion, 1) == 1
}

// memoryOutcome is a turn's outcome as a rollout line says it.
func memoryOutcome(outcome string) string {
	switch outcome {
	case runtime.TurnAnswered:
		return memory.OutcomeAnswered
	case runtime.TurnInterrupted:
		return memory.OutcomeInterrupted
	case runtime.TurnRolledBack:
		return memory.OutcomeRolledBack
	}
	return memory.OutcomeFailed
}

// feedRollout appends a rollout line and signals its scope's workflow,
// as local activities (local) or regular ones. A failure is logged: the
// rollout's next line signals it again, and a run or turn does not fail
// for its memory.
func (r *Runner) feedRollout(ctx workflow.Context, in MemoryAppendInput, local bool) {
	run := func(name, summary string, arg, out any) error {
		if local {
			lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: time.Minute,
				RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3}, Summary: summary})
			return workflow.ExecuteLocalActivity(lctx, name, arg).Get(ctx, out)
		}
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 5}, Summary: summary})
		return workflow.ExecuteActivity(actx, name, arg).Get(ctx, out)
	}
	var ref MemoryRollout
	if err := run(MemoryAppendActivityName, "memory: append rollout "+in.Rollout, in, &ref); err != nil {
		workflow.GetLogger(ctx).Warn("memory rollout not appended", "scope", in.Scope, "rollout", in.Rollout, "error", err)
		return
	}
	if err := run(MemorySignalActivityName, "memory: signal scope "+in.Scope, MemorySignalInput{Scope: in.Scope, Rollout: &ref}, nil); err != nil {
		workflow.GetLogger(ctx).Warn("memory scope not signalled", "scope", in.Scope, "rollout", in.Rollout, "error", err)
	}
}

// runRollout records a run that ended as its rollout (one line), when
// its agents have memory.
func (r *Runner) runRollout(ctx workflow.Context, spec *runtime.GraphSpec, in troupe.RunInput, wfID string, rr *routeResult, runErr error) {
	start := cmp.Or(in.Agent, spec.Entry)
	var path []string
	if rr != nil {
		path = rr.Path
	}
	scope := memoryScope(spec, path, start)
	if scope == "" || ctx.Err() != nil || !memoryOn(ctx) {
		return
	}
	line := memory.Line{Seq: 1, Workflow: wfID, Agent: start, Input: in.Input, Outcome: memory.OutcomeAnswered, Ended: workflow.Now(ctx).UTC()}
	app := MemoryAppendInput{Scope: scope, Rollout: memory.RolloutID(wfID)}
	if runErr != nil {
		line.Outcome, line.Error = memory.OutcomeFailed, troupe.FailureText(runErr)
	} else {
		line.Agent, line.Output, app.Transcript = rr.Agent, rr.Output, rr.Transcript
	}
	app.Line = line
	r.feedRollout(ctx, app, true)
}

// memoryFeed is a session's queue of rollout lines on their way to
// memory.
type memoryFeed struct {
	queue   []MemoryAppendInput
	running bool
}

// turnRollout queues a session turn that ended as a line of the session's
// rollout, when its agents have memory; a coroutine feeds the queue.
func (s *session) turnRollout(ctx workflow.Context, input string, start runtime.TranscriptRef, rec runtime.TurnRecord, end *runtime.TranscriptRef) {
	scope := memoryScope(s.spec, rec.Path, rec.Agent)
	if scope == "" || !memoryOn(ctx) {
		return
	}
	line := memory.Line{Seq: turnNumber(rec.Turn), Workflow: rec.Workflow, Agent: rec.Agent, Input: input, Output: rec.Output,
		Outcome: memoryOutcome(rec.Outcome), Error: rec.Error, Ended: rec.Ended.UTC()}
	in := MemoryAppendInput{Scope: scope, Rollout: memory.RolloutID(s.id), Line: line}
	if end != nil {
		in.Start, in.Transcript = &start, end
	}
	s.mem.queue = append(s.mem.queue, in)
	if s.mem.running {
		return
	}
	s.mem.running = true
	workflow.Go(ctx, func(ctx workflow.Context) {
		defer func() { s.mem.running = false }()
		for len(s.mem.queue) > 0 && ctx.Err() == nil {
			next := s.mem.queue[0]
			s.mem.queue = s.mem.queue[1:]
			s.r.feedRollout(ctx, next, false)
		}
	})
}

// flushMemory waits for the session's rollouts to be fed (before it
// continues as new or ends). It records nothing when there are none.
func (s *session) flushMemory(ctx workflow.Context) error {
	if !s.mem.running {
		return nil
	}
	return workflow.Await(ctx, func() bool { return !s.mem.running })
}

// finalMemory asks each memory scope of the session's graph for a last
// phase 2, as the session stops.
func (s *session) finalMemory(ctx workflow.Context) {
	scopes := memoryScopes(s.spec)
	if len(scopes) == 0 || !memoryOn(ctx) {
		return
	}
	if err := s.flushMemory(ctx); err != nil {
		return
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 5}, Summary: "memory: final phase 2"})
	var futures []workflow.Future
	for _, scope := range scopes {
		futures = append(futures, workflow.ExecuteActivity(actx, MemorySignalActivityName,
			MemorySignalInput{Scope: scope, Final: &MemoryFinal{Rollout: memory.RolloutID(s.id)}}))
	}
	for i, f := range futures {
		if err := f.Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Warn("memory scope not told the session stopped", "scope", scopes[i], "error", err)
		}
	}
}
