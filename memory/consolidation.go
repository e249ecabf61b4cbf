package memory

// The room's struct: what a worker configures of memory, and what it
// registers.

import (
	"context"
	"log/slog"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/capabilities/skills"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/transcript"
)

// Consolidation is a worker's memory: it registers MemoryWorkflow and its
// activities (Register, RegisterWorkflows), and serves what the workflows
// and the sandbox activities of the same worker ask of memory (an agent's
// instructions and tools, materialisation and write-back). Set its fields,
// then use it, from any goroutine: it changes none of them.
// workflows.NewRunner builds the one of a Runner from its Config.
type Consolidation struct {
	// Store holds the memory scopes' files and the transcripts the
	// rollouts are read from. Required.
	Store *blob.Store
	// Transcripts reads the conversation of a run or turn for its rollout
	// line; nil reads them from Store without a cache.
	Transcripts *transcript.Transcripts
	// Model answers both phases, unless Options.Model is set.
	Model model.Model
	// DefaultModel is the model name of phase 2 when Options.Phase2Model
	// is empty; when both are, "gpt-4.1".
	DefaultModel string
	// Options are the worker's memory options.
	Options MemoryOptions
	// ModelTimeout bounds one model call, and a phase's activity (three
	// times as long); the default is 5 minutes.
	ModelTimeout time.Duration
	// HeartbeatTimeout is how soon a phase's activity on a dead worker is
	// retried; the default is 30 seconds.
	HeartbeatTimeout time.Duration
	// Learnt is the cache of learnt skills that every agent's skills
	// capability bound to its memory scope shares (learnt.go); with nil,
	// each bound capability keeps a cache of its own, and what is wrong
	// with a listing is logged at every call.
	Learnt *skills.LearntCache

	// memoryHook and clock are tests' (export_test.go): a hook at the
	// steps of the memory writers (writers.go), and the clock they go by.
	memoryHook func(ctx context.Context, step, scope string) error
	clock      func() time.Time
}

// MemoryOptions configure memory consolidation on a worker
// (workflows.Config.Memory, Consolidation.Options).
// Every field's zero value works. The settings but Model are fixed for a
// scope's workflow when it starts (MemorySettings).
type MemoryOptions struct {
	// Model answers both phases; the default is the worker's model
	// (Consolidation.Model, workflows.Config.Model).
	Model model.Model
	// Phase1Model is the model name of phase 1, a lightweight model; the
	// default is "gpt-4.1-mini".
	Phase1Model string
	// Phase2Model is the model name of phase 2, a stronger model; the
	// default is the worker's default model (Consolidation.DefaultModel,
	// workflows.Config.DefaultModel).
	Phase2Model string
	// Parallel bounds the phase-1 activities of a scope that run at once;
	// the default is 4.
	Parallel int
	// Newest is how many raw memories, newest first, phase 2 consolidates;
	// the default is 64.
	Newest int
	// Phase2Turns bounds the model turns of one phase 2, an invalid
	// answer being fed back; the default is 3.
	Phase2Turns int
	// MaxRolloutBytes bounds the rollout text phase 1 reads, head and tail
	// kept; the default is 64 KiB.
	MaxRolloutBytes int
	// IdleTimeout is how long a scope's workflow waits with nothing to do
	// before it ends; the default is 10 minutes.
	IdleTimeout time.Duration
	// BatchesPerRun bounds the batches of one run of a scope's workflow
	// before it continues as new; the default is 50.
	BatchesPerRun int
}

// Register registers the memory activities on w, under their names
// (MemoryAppendActivityName, ...).
func (c *Consolidation) Register(w worker.ActivityRegistry) {
	w.RegisterActivityWithOptions(c.MemoryAppendRollout, activity.RegisterOptions{Name: MemoryAppendActivityName})
	w.RegisterActivityWithOptions(c.MemorySignal, activity.RegisterOptions{Name: MemorySignalActivityName})
	w.RegisterActivityWithOptions(c.MemoryPhase1, activity.RegisterOptions{Name: MemoryPhase1ActivityName})
	w.RegisterActivityWithOptions(c.MemoryPhase2, activity.RegisterOptions{Name: MemoryPhase2ActivityName})
	w.RegisterActivityWithOptions(c.MemoryFork, activity.RegisterOptions{Name: MemoryForkActivityName})
}

// RegisterWorkflows registers MemoryWorkflow on w, as MemoryWorkflowName.
func (c *Consolidation) RegisterWorkflows(w worker.WorkflowRegistry) {
	w.RegisterWorkflowWithOptions(c.MemoryWorkflow, workflow.RegisterOptions{Name: MemoryWorkflowName})
}

// settings are the settings a scope's workflow starts with.
func (c *Consolidation) settings() MemorySettings {
	o := c.Options
	s := MemorySettings{Phase1Model: o.Phase1Model, Phase2Model: o.Phase2Model, Parallel: o.Parallel, Newest: o.Newest,
		Phase2Turns: o.Phase2Turns, MaxRolloutBytes: o.MaxRolloutBytes, IdleTimeout: o.IdleTimeout, BatchesPerRun: o.BatchesPerRun}
	if s.Phase2Model == "" {
		s.Phase2Model = c.DefaultModel
	}
	return s.withDefaults()
}

// model is the model that answers both phases.
func (c *Consolidation) model() model.Model {
	if c.Options.Model != nil {
		return c.Options.Model
	}
	return c.Model
}

// modelTimeout and heartbeatTimeout are the timeouts, defaults filled.
func (c *Consolidation) modelTimeout() time.Duration {
	if c.ModelTimeout <= 0 {
		return 5 * time.Minute
	}
	return c.ModelTimeout
}

func (c *Consolidation) heartbeatTimeout() time.Duration {
	if c.HeartbeatTimeout <= 0 {
		return 30 * time.Second
	}
	return c.HeartbeatTimeout
}

// conversation is the conversation of a transcript, whole.
func (c *Consolidation) conversation(ctx context.Context, ref runtime.TranscriptRef) ([]agents.Item, error) {
	t := c.Transcripts
	if t == nil {
		t = transcript.NewTranscripts(c.Store)
	}
	ref.View = nil
	items, _, err := t.LoadView(ctx, ref, nil)
	return items, err
}

// logFor is the activity's logger, or the process's outside an activity.
func logFor(ctx context.Context) log.Logger {
	if activity.IsActivity(ctx) {
		return activity.GetLogger(ctx)
	}
	return log.NewStructuredLogger(slog.Default())
}
