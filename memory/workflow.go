package memory

// MemoryWorkflow: the scope's single consolidator, steps 3 to 5 of the
// package doc. Its names, messages and payloads are here.

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
)

// Names of the memory workflow, its messages and its activities.
const (
	MemoryWorkflowName = "troupe.Memory"
	// MemoryRolloutSignal tells a scope's workflow a rollout grew
	// (MemoryRollout).
	MemoryRolloutSignal = "troupe.memory-rollout"
	// MemoryFinalSignal asks a scope's workflow for a last phase 2
	// (MemoryFinal): a session of the scope stopped.
	MemoryFinalSignal = "troupe.memory-final"
	// MemoryQuery answers with MemoryStatus.
	MemoryQuery = "troupe.memory"

	MemoryAppendActivityName = "troupe.MemoryAppendRollout"
	MemorySignalActivityName = "troupe.MemorySignal"
	MemoryPhase1ActivityName = "troupe.MemoryPhase1"
	MemoryPhase2ActivityName = "troupe.MemoryPhase2"
)

// ErrMemoryOutput is the error type of a phase whose model answer was
// invalid (a *OutputError): retried for phase 1, fed back to the
// model for phase 2 within its turns.
const ErrMemoryOutput = "troupe.MemoryOutputInvalid"

// versionMemoryRollouts marks the change to runs and sessions that append
// rollouts and signal their memory scope. Runs recorded before it (no
// marker) replay without; runs of agents without memory never ask for it.
const versionMemoryRollouts = "troupe.memory-rollouts"

// MemoryWorkflowID is the workflow id of the memory workflow of scope on
// task queue: "troupe-memory-<scope>" on DefaultTaskQueue (or ""), else
// "troupe-memory-<queue>-<scope>". Each queue's workers hold their own
// blob store, so each queue consolidates its own scopes, as each has its
// own session manager (SessionManagerIDFor).
func MemoryWorkflowID(queue, scope string) string {
	if queue == "" || queue == troupe.DefaultTaskQueue {
		return "troupe-memory-" + scope
	}
	return "troupe-memory-" + queue + "-" + scope
}

// MemorySettings are a memory workflow's settings, fixed when it starts
// (from the worker's MemoryOptions) and carried through continue-as-new.
type MemorySettings struct {
	// Phase1Model and Phase2Model are the model names of the phases.
	Phase1Model string `json:"phase1_model"`
	Phase2Model string `json:"phase2_model"`
	// Parallel bounds the phase-1 activities that run at once.
	Parallel int `json:"parallel"`
	// Newest is how many raw memories, newest first, phase 2 selects.
	Newest int `json:"newest"`
	// Phase2Turns bounds the model turns of one phase 2 (an invalid
	// answer is fed back).
	Phase2Turns int `json:"phase2_turns"`
	// MaxRolloutBytes bounds the rollout text phase 1 reads (head and
	// tail kept).
	MaxRolloutBytes int `json:"max_rollout_bytes"`
	// IdleTimeout is how long the workflow waits with nothing to do
	// before it ends.
	IdleTimeout time.Duration `json:"idle_timeout"`
	// BatchesPerRun bounds the batches of one run of the workflow before
	// it continues as new.
	BatchesPerRun int `json:"batches_per_run"`
}

// MemoryInput starts (or continues) a scope's memory workflow.
type MemoryInput struct {
	// Scope names the memory scope.
	Scope    string         `json:"scope"`
	Settings MemorySettings `json:"settings"`
	// Pending are rollouts signalled and not yet taken, Final a final
	// signal not yet served, and Owed a phase 2 that failed and is still
	// to be done: what a run carries into the next.
	Pending []MemoryRollout `json:"pending,omitempty"`
	Final   bool            `json:"final,omitempty"`
	Owed    bool            `json:"owed,omitempty"`
	// Batches and Phase2s count what the scope's workflow did, over its
	// runs.
	Batches int `json:"batches,omitempty"`
	Phase2s int `json:"phase2s,omitempty"`
}

// MemoryRollout names a rollout of a scope and how many lines it held
// when signalled.
type MemoryRollout struct {
	ID    string `json:"id"`
	Lines int    `json:"lines"`
}

// MemoryFinal asks for a last phase 2; Rollout is the rollout whose end
// asked.
type MemoryFinal struct {
	Rollout string `json:"rollout,omitempty"`
}

// MemoryStatus is where a scope's memory workflow stands.
type MemoryStatus struct {
	Scope string `json:"scope"`
	// Phase is "idle", "phase1" or "phase2".
	Phase string `json:"phase"`
	// Pending counts rollouts waiting for the next batch.
	Pending int  `json:"pending"`
	Final   bool `json:"final,omitempty"`
	Owed    bool `json:"owed,omitempty"`
	// Batches and Phase2s count batches taken and phase 2s that
	// succeeded, over the workflow's runs; Phase2Failures those that failed
	// in this run.
	Batches        int `json:"batches"`
	Phase2s        int `json:"phase2s"`
	Phase2Failures int `json:"phase2_failures,omitempty"`
	// LastError is the last phase's failure, if any.
	LastError string `json:"last_error,omitempty"`
}

// MemoryPhase1Input is the phase-1 activity's input.
type MemoryPhase1Input struct {
	Scope    string         `json:"scope"`
	Rollout  MemoryRollout  `json:"rollout"`
	Settings MemorySettings `json:"settings"`
}

// MemoryPhase1Output is what phase 1 did for a rollout: wrote its files
// (Slug), found nothing worth keeping (Empty), or found its files already
// written for as many lines (Done: a retry, or a rollout signalled twice).
type MemoryPhase1Output struct {
	Slug  string `json:"slug,omitempty"`
	Empty bool   `json:"empty,omitempty"`
	Done  bool   `json:"done,omitempty"`
}

// MemoryPhase2Input is the phase-2 activity's input.
type MemoryPhase2Input struct {
	Scope    string         `json:"scope"`
	Settings MemorySettings `json:"settings"`
}

// MemoryPhase2Output is what phase 2 did: the selection's changes by
// rollout id, the skills written, Unchanged when nothing changed since
// the last selection (no model call, no file written), and the live
// edits it replaced.
type MemoryPhase2Output struct {
	Added     []string `json:"added,omitempty"`
	Kept      []string `json:"kept,omitempty"`
	Removed   []string `json:"removed,omitempty"`
	Skills    []string `json:"skills,omitempty"`
	Unchanged bool     `json:"unchanged,omitempty"`
	// Replaced are the files of agents' live edits, written back while
	// phase 2 ran, that its consolidation replaced (phase 2 wins; the
	// edits' turns reach a later phase 2 through their rollouts).
	Replaced []string `json:"replaced,omitempty"`
}

// memoryRun is a running MemoryWorkflow.
type memoryRun struct {
	in       MemoryInput
	status   MemoryStatus
	pending  []MemoryRollout
	rollouts workflow.ReceiveChannel
	finals   workflow.ReceiveChannel
}

// MemoryWorkflow consolidates a memory scope: see steps 3 to 5 of the
// package doc.
func (c *Consolidation) MemoryWorkflow(ctx workflow.Context, in MemoryInput) (*MemoryStatus, error) {
	if err := CheckScope(in.Scope); err != nil {
		return nil, troupe.NonRetryable(troupe.ErrBadCommand, "%v", err)
	}
	in.Settings = in.Settings.withDefaults()
	m := &memoryRun{in: in, pending: in.Pending,
		status:   MemoryStatus{Scope: in.Scope, Phase: "idle", Final: in.Final, Owed: in.Owed, Batches: in.Batches, Phase2s: in.Phase2s},
		rollouts: workflow.GetSignalChannel(ctx, MemoryRolloutSignal),
		finals:   workflow.GetSignalChannel(ctx, MemoryFinalSignal),
	}
	if err := workflow.SetQueryHandler(ctx, MemoryQuery, func() (MemoryStatus, error) {
		st := m.status
		st.Pending = len(m.pending)
		return st, nil
	}); err != nil {
		return nil, err
	}
	workflow.SetCurrentDetails(ctx, "memory scope "+in.Scope)
	batchesInRun := 0
	for {
		m.drain(ctx)
		if m.timeToContinue(ctx, batchesInRun) {
			next := m.in
			next.Pending, next.Final, next.Owed = m.pending, m.status.Final, m.status.Owed
			next.Batches, next.Phase2s = m.status.Batches, m.status.Phase2s
			return nil, workflow.NewContinueAsNewError(ctx, MemoryWorkflowName, next)
		}
		if len(m.pending) == 0 && !m.status.Final {
			if !m.idle(ctx) {
				// Nothing came within the idle timeout: the workflow ends,
				// and the scope's next rollout starts it again.
				st := m.status
				return &st, nil
			}
			continue
		}
		batch := m.pending
		m.pending = nil
		final := m.status.Final
		m.status.Final = false
		wrote := m.phase1(ctx, c, batch)
		if wrote || final || m.status.Owed {
			m.phase2(ctx, c)
		}
		m.status.Batches++
		batchesInRun++
	}
}

// withDefaults fills the settings left zero.
func (s MemorySettings) withDefaults() MemorySettings {
	if s.Phase1Model == "" {
		s.Phase1Model = "gpt-4.1-mini"
	}
	if s.Phase2Model == "" {
		s.Phase2Model = "gpt-4.1"
	}
	if s.Parallel <= 0 {
		s.Parallel = 4
	}
	if s.Newest <= 0 {
		s.Newest = 64
	}
	if s.Phase2Turns <= 0 {
		s.Phase2Turns = 3
	}
	if s.MaxRolloutBytes <= 0 {
		s.MaxRolloutBytes = 64 << 10
	}
	if s.IdleTimeout <= 0 {
		s.IdleTimeout = 10 * time.Minute
	}
	if s.BatchesPerRun <= 0 {
		s.BatchesPerRun = 50
	}
	return s
}

// add takes a rollout signal: a rollout signalled twice before its batch
// is taken once, with its latest line count.
func (m *memoryRun) add(ref MemoryRollout) {
	if CheckRolloutID(ref.ID) != nil {
		return
	}
	for i := range m.pending {
		if m.pending[i].ID == ref.ID {
			m.pending[i].Lines = max(m.pending[i].Lines, ref.Lines)
			return
		}
	}
	m.pending = append(m.pending, ref)
}

// drain takes every signal that arrived, and reports whether there was
// any.
func (m *memoryRun) drain(ctx workflow.Context) bool {
	got := false
	for {
		var ref MemoryRollout
		if !m.rollouts.ReceiveAsync(&ref) {
			break
		}
		m.add(ref)
		got = true
	}
	for {
		var f MemoryFinal
		if !m.finals.ReceiveAsync(&f) {
			break
		}
		m.status.Final, got = true, true
	}
	return got
}

// idle waits for a signal, up to the idle timeout, and reports whether
// one came.
func (m *memoryRun) idle(ctx workflow.Context) bool {
	m.status.Phase = "idle"
	tctx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	got := false
	sel := workflow.NewSelector(ctx)
	sel.AddReceive(m.rollouts, func(c workflow.ReceiveChannel, _ bool) {
		var ref MemoryRollout
		c.Receive(ctx, &ref)
		m.add(ref)
		got = true
	})
	sel.AddReceive(m.finals, func(c workflow.ReceiveChannel, _ bool) {
		var f MemoryFinal
		c.Receive(ctx, &f)
		m.status.Final, got = true, true
	})
	sel.AddFuture(workflow.NewTimer(tctx, m.in.Settings.IdleTimeout), func(workflow.Future) {})
	sel.Select(ctx)
	// A signal that came with the timer is not lost: the workflow does
	// not end with signals unread.
	return m.drain(ctx) || got
}

// timeToContinue reports whether the run has done its batches or its
// history has grown.
func (m *memoryRun) timeToContinue(ctx workflow.Context, batches int) bool {
	info := workflow.GetInfo(ctx)
	return batches >= m.in.Settings.BatchesPerRun || info.GetCurrentHistoryLength() >= memoryHistoryBound || info.GetContinueAsNewSuggested()
}

// memoryHistoryBound bounds the history of one run of a memory workflow.
const memoryHistoryBound = 10000

// phase1 runs phase 1 on each rollout of batch, Parallel at a time, and
// reports whether any wrote a raw memory. A rollout whose phase 1 fails
// is left (its next line signals it again).
func (m *memoryRun) phase1(ctx workflow.Context, c *Consolidation, batch []MemoryRollout) bool {
	m.status.Phase = "phase1"
	wrote := false
	sel := workflow.NewSelector(ctx)
	// done is not the loop's variable: the callbacks count on the one the
	// loop tests (a for clause's variable is one per iteration).
	running, next, done := 0, 0, 0
	for done < len(batch) {
		for running < m.in.Settings.Parallel && next < len(batch) {
			ref := batch[next]
			actx := workflow.WithActivityOptions(ctx, c.memoryActivityOptions("phase 1 of rollout "+ref.ID))
			f := workflow.ExecuteActivity(actx, MemoryPhase1ActivityName, MemoryPhase1Input{Scope: m.in.Scope, Rollout: ref, Settings: m.in.Settings})
			sel.AddFuture(f, func(f workflow.Future) {
				running--
				done++
				var out MemoryPhase1Output
				if err := f.Get(ctx, &out); err != nil {
					m.status.LastError = fmt.Sprintf("phase 1 of rollout %s: %s", ref.ID, troupe.FailureText(err))
					workflow.GetLogger(ctx).Warn("memory phase 1 failed", "scope", m.in.Scope, "rollout", ref.ID, "error", err)
					return
				}
				if out.Slug != "" {
					wrote = true
				}
			})
			running++
			next++
		}
		sel.Select(ctx)
	}
	return wrote
}

// phase2 runs phase 2 once; a failure leaves it owed.
func (m *memoryRun) phase2(ctx workflow.Context, c *Consolidation) {
	m.status.Phase = "phase2"
	defer func() { m.status.Phase = "idle" }()
	actx := workflow.WithActivityOptions(ctx, c.memoryActivityOptions("phase 2 of scope "+m.in.Scope))
	var out MemoryPhase2Output
	if err := workflow.ExecuteActivity(actx, MemoryPhase2ActivityName, MemoryPhase2Input{Scope: m.in.Scope, Settings: m.in.Settings}).Get(ctx, &out); err != nil {
		m.status.Owed = true
		m.status.Phase2Failures++
		m.status.LastError = "phase 2: " + troupe.FailureText(err)
		workflow.GetLogger(ctx).Warn("memory phase 2 failed", "scope", m.in.Scope, "error", err)
		return
	}
	m.status.Owed = false
	if !out.Unchanged {
		m.status.Phase2s++
	}
}

// memoryActivityOptions are the options of a phase's activity: a model
// call or several, heartbeating, retried a few times.
func (c *Consolidation) memoryActivityOptions(summary string) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: 3 * c.modelTimeout(),
		HeartbeatTimeout:    c.heartbeatTimeout(),
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3, InitialInterval: time.Second},
		Summary:             summary,
	}
}
