package memory

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
//
// What the stories call: RecordRun at a run's end (the orchestrator), and
// a session's Feed: Turn after each turn, Flush before it continues as
// new, Final as it stops.

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
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
		return OutcomeAnswered
	case runtime.TurnInterrupted:
		return OutcomeInterrupted
	case runtime.TurnRolledBack:
		return OutcomeRolledBack
	}
	return OutcomeFailed
}

// feedRollout appends a rollout line and signals its scope's workflow,
// as local activities (local) or regular ones. A failure is logged: the
// rollout's next line signals it again, and a run or turn does not fail
// for its memory.
func feedRollout(ctx workflow.Context, in MemoryAppendInput, local bool) {
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

// RunEnd is how a run that gave its final output ended, as its rollout
// line says it.
type RunEnd struct {
	// Agent is the agent that gave the output, and Path the agents the
	// run went through.
	Agent  string
	Output json.RawMessage
	Path   []string
	// Transcript is the conversation at the run's end.
	Transcript *runtime.TranscriptRef
}

// RecordRun records a run (workflow wfID, started with in on spec) that
// ended as its rollout (one line), when its agents have memory: it
// appends the line and signals the scope, as local activities, and logs
// a failure. end is how it ended, nil when it failed with runErr. A run
// records nothing when its spec has no memory scope, when ctx is
// cancelled, or when it started before rollouts did.
func RecordRun(ctx workflow.Context, spec *runtime.GraphSpec, in troupe.RunInput, wfID string, end *RunEnd, runErr error) {
	start := cmp.Or(in.Agent, spec.Entry)
	var path []string
	if end != nil {
		path = end.Path
	}
	scope := memoryScope(spec, path, start)
	if scope == "" || ctx.Err() != nil || !memoryOn(ctx) {
		return
	}
	line := Line{Seq: 1, Workflow: wfID, Agent: start, Input: in.Input, Outcome: OutcomeAnswered, Ended: workflow.Now(ctx).UTC()}
	app := MemoryAppendInput{Scope: scope, Rollout: RolloutID(wfID)}
	if runErr != nil {
		line.Outcome, line.Error = OutcomeFailed, troupe.FailureText(runErr)
	} else {
		line.Agent, line.Output, app.Transcript = end.Agent, end.Output, end.Transcript
	}
	app.Line = line
	feedRollout(ctx, app, true)
}

// Feed is a session's queue of rollout lines on their way to memory. Its
// zero value is an empty queue; it is workflow state, used from the
// session's workflow code only.
type Feed struct {
	queue   []MemoryAppendInput
	running bool
}

// Turn queues a session turn that ended as a line of the session's
// rollout, when its agents (those of spec) have memory; a coroutine feeds
// the queue. session is the session's workflow id, input the message the
// turn answered, start the conversation before the turn and end the one
// at its end (nil when the turn failed or was rolled back).
func (f *Feed) Turn(ctx workflow.Context, spec *runtime.GraphSpec, session, input string, start runtime.TranscriptRef, rec runtime.TurnRecord, end *runtime.TranscriptRef) {
	scope := memoryScope(spec, rec.Path, rec.Agent)
	if scope == "" || !memoryOn(ctx) {
		return
	}
	line := Line{Seq: turnSeq(rec.Turn), Workflow: rec.Workflow, Agent: rec.Agent, Input: input, Output: rec.Output,
		Outcome: memoryOutcome(rec.Outcome), Error: rec.Error, Ended: rec.Ended.UTC()}
	in := MemoryAppendInput{Scope: scope, Rollout: RolloutID(session), Line: line}
	if end != nil {
		in.Start, in.Transcript = &start, end
	}
	f.queue = append(f.queue, in)
	if f.running {
		return
	}
	f.running = true
	workflow.Go(ctx, func(ctx workflow.Context) {
		defer func() { f.running = false }()
		for len(f.queue) > 0 && ctx.Err() == nil {
			next := f.queue[0]
			f.queue = f.queue[1:]
			feedRollout(ctx, next, false)
		}
	})
}

// turnSeq is the number of a session turn by its id ("t3": 3), as
// runtime.SessionMessage numbers them.
func turnSeq(id string) int {
	var n int
	_, _ = fmt.Sscanf(id, "t%d", &n)
	return n
}

// Flush waits for the session's rollouts to be fed (before it continues
// as new or ends). It records nothing when there are none.
func (f *Feed) Flush(ctx workflow.Context) error {
	if !f.running {
		return nil
	}
	return workflow.Await(ctx, func() bool { return !f.running })
}

// Final asks each memory scope of the session's graph (spec) for a last
// phase 2, as the session stops, after the queue is fed; session is the
// session's workflow id. A failure is logged.
func (f *Feed) Final(ctx workflow.Context, spec *runtime.GraphSpec, session string) {
	scopes := memoryScopes(spec)
	if len(scopes) == 0 || !memoryOn(ctx) {
		return
	}
	if err := f.Flush(ctx); err != nil {
		return
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 5}, Summary: "memory: final phase 2"})
	var futures []workflow.Future
	for _, scope := range scopes {
		futures = append(futures, workflow.ExecuteActivity(actx, MemorySignalActivityName,
			MemorySignalInput{Scope: scope, Final: &MemoryFinal{Rollout: RolloutID(session)}}))
	}
	for i, fut := range futures {
		if err := fut.Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Warn("memory scope not told the session stopped", "scope", scopes[i], "error", err)
		}
	}
}
