package memory

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/internal/heartbeat"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/transcript"
	"github.com/troupe-dev/troupe/telemetry"
)

// MemoryAppendInput is the rollout-append activity's input: one run or
// session turn of a rollout of a scope. Its items are read from the blob
// store: those of Transcript past the Start transcript's.
type MemoryAppendInput struct {
	Scope   string `json:"scope"`
	Rollout string `json:"rollout"`
	Line    Line   `json:"line"`
	// Start is the conversation before the turn (nil for a run), and
	// Transcript the conversation at its end (nil when it failed).
	Start      *runtime.TranscriptRef `json:"start,omitempty"`
	Transcript *runtime.TranscriptRef `json:"transcript,omitempty"`
}

// MemorySignalInput is the signal activity's input: a rollout that grew,
// or a final phase 2 asked for.
type MemorySignalInput struct {
	Scope   string         `json:"scope"`
	Rollout *MemoryRollout `json:"rollout,omitempty"`
	Final   *MemoryFinal   `json:"final,omitempty"`
}

// MemoryAppendRollout appends a line to a rollout's JSONL file
// (sessions/<rollout>.jsonl of the scope) and returns the rollout with its
// line count. A line of a Seq the file already holds (a retry) is not
// appended again.
func (c *Consolidation) MemoryAppendRollout(ctx context.Context, in MemoryAppendInput) (*MemoryRollout, error) {
	if err := errors.Join(CheckScope(in.Scope), CheckRolloutID(in.Rollout)); err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), troupe.ErrBadCommand, err)
	}
	line := in.Line
	if in.Transcript != nil {
		items, err := c.turnItems(ctx, in.Start, *in.Transcript)
		if err != nil {
			return nil, err
		}
		line.Items = Generated(items)
	}
	store := c.Store
	key := Key(in.Scope, RolloutPath(in.Rollout))
	data, err := readMemoryFile(ctx, store, key)
	if err != nil && !errors.Is(err, blob.ErrNotFound) {
		return nil, err
	}
	out, n, added, err := AppendLine(data, line)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), troupe.ErrInternal, err)
	}
	if added {
		if err := store.Put(ctx, key, out); err != nil {
			return nil, err
		}
	}
	return &MemoryRollout{ID: in.Rollout, Lines: n}, nil
}

// turnItems are the items of end past those of start, with their outputs
// resolved.
func (c *Consolidation) turnItems(ctx context.Context, start *runtime.TranscriptRef, end runtime.TranscriptRef) ([]agents.Item, error) {
	items, err := c.conversation(ctx, end)
	if err != nil {
		return nil, err
	}
	if start != nil && start.Segments > 0 {
		before, err := c.conversation(ctx, *start)
		if err != nil {
			return nil, err
		}
		if len(before) <= len(items) {
			items = items[len(before):]
		}
	}
	return transcript.ResolveOutputs(ctx, c.Store, items)
}

// MemorySignal signals a scope's memory workflow, starting it if it is not
// running (SignalWithStart, on this activity's task queue, with the
// worker's memory settings).
func (c *Consolidation) MemorySignal(ctx context.Context, in MemorySignalInput) error {
	if err := CheckScope(in.Scope); err != nil {
		return temporal.NewNonRetryableApplicationError(err.Error(), troupe.ErrBadCommand, err)
	}
	name, arg := MemoryRolloutSignal, any(in.Rollout)
	switch {
	case in.Final != nil:
		name, arg = MemoryFinalSignal, *in.Final
	case in.Rollout == nil:
		return temporal.NewNonRetryableApplicationError("a memory signal names a rollout or is final", troupe.ErrBadCommand, nil)
	}
	queue := activity.GetInfo(ctx).TaskQueue
	id := MemoryWorkflowID(queue, in.Scope)
	opts := client.StartWorkflowOptions{
		ID: id, TaskQueue: queue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		StaticSummary:            "memory consolidation of scope " + in.Scope,
	}
	// The scope's workflow outlives the run: its spans are a trace of
	// their own.
	_, err := activity.GetClient(ctx).SignalWithStartWorkflow(telemetry.Detached(ctx), id, name, arg, opts, MemoryWorkflowName,
		MemoryInput{Scope: in.Scope, Settings: c.settings()})
	return err
}

// MemoryPhase1 runs phase 1 on a rollout: it reads the rollout, asks the
// phase-1 model, and writes the rollout's summary then its raw memory
// (which says phase 1 is done). A raw memory already written for as many
// lines (an attempt that crashed after writing, or the same rollout
// signalled twice) is kept, and the model not asked again; a summary of
// another slug of the rollout is deleted.
func (c *Consolidation) MemoryPhase1(ctx context.Context, in MemoryPhase1Input) (*MemoryPhase1Output, error) {
	if err := errors.Join(CheckScope(in.Scope), CheckRolloutID(in.Rollout.ID)); err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), troupe.ErrBadCommand, err)
	}
	store := c.Store
	data, err := readMemoryFile(ctx, store, Key(in.Scope, RolloutPath(in.Rollout.ID)))
	if err != nil {
		if errors.Is(err, blob.ErrNotFound) {
			return nil, temporal.NewNonRetryableApplicationError(err.Error(), troupe.ErrBadCommand, err)
		}
		return nil, err
	}
	lines, err := ParseLines(data)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), troupe.ErrInternal, err)
	}
	rawKey := Key(in.Scope, RawMemoryPath(in.Rollout.ID))
	if old, err := readMemoryFile(ctx, store, rawKey); err == nil {
		if rm, err := ParseRawMemory(old); err == nil && rm.Lines >= len(lines) {
			return &MemoryPhase1Output{Slug: rm.Slug, Done: true}, nil
		}
	} else if !errors.Is(err, blob.ErrNotFound) {
		return nil, err
	}
	req := model.Request{Model: in.Settings.Phase1Model, Instructions: Phase1Instructions,
		Input: []agents.Item{agents.UserMessage(Phase1Input(in.Rollout.ID, lines, in.Settings.MaxRolloutBytes))}}
	text, err := c.memoryAsk(ctx, req)
	if err != nil {
		return nil, err
	}
	res, err := ParsePhase1(text)
	if err != nil {
		// Another attempt asks again.
		return nil, temporal.NewApplicationErrorWithCause(err.Error(), ErrMemoryOutput, err)
	}
	if res.Empty() {
		return &MemoryPhase1Output{Empty: true}, nil
	}
	rawPath, raw, sumPath, sum, err := Phase1Files(in.Rollout.ID, len(lines), time.Now(), res)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), troupe.ErrInternal, err)
	}
	if err := store.Put(ctx, Key(in.Scope, sumPath), sum); err != nil {
		return nil, err
	}
	keys, _, err := store.List(ctx, Key(in.Scope, RolloutSummariesDir+in.Rollout.ID+"_"), 0)
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		p := strings.TrimPrefix(k, Prefix(in.Scope))
		if p != sumPath && IsRolloutSummaryOf(p, in.Rollout.ID) {
			if err := store.Delete(ctx, k); err != nil {
				return nil, err
			}
		}
	}
	if err := store.Put(ctx, Key(in.Scope, rawPath), raw); err != nil {
		return nil, err
	}
	return &MemoryPhase1Output{Slug: res.Slug}, nil
}

// MemoryPhase2 runs phase 2 on a scope: it selects the newest raw
// memories, diffs them against the last selection, asks the phase-2 model
// (an invalid answer is fed back, up to Phase2Turns turns), and writes
// MEMORY.md, memory_summary.md and the skills, then the selection, last.
// Nothing changed since the last selection: nothing is asked or written.
func (c *Consolidation) MemoryPhase2(ctx context.Context, in MemoryPhase2Input) (*MemoryPhase2Output, error) {
	if err := CheckScope(in.Scope); err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), troupe.ErrBadCommand, err)
	}
	store := c.Store
	// The scope's single consolidator: a generation of phase 2 left
	// unapplied is this workflow's, of an earlier attempt that crashed or
	// stalled after its claim. Settling applies it, once that attempt's
	// window is over (it may still be writing), so that its selection is
	// read below and its model is not asked again.
	head, err := c.settleMemory(ctx, in.Scope)
	if err != nil {
		return nil, err
	}
	keys, _, err := store.List(ctx, Key(in.Scope, RawMemoriesDir), 0)
	if err != nil {
		return nil, err
	}
	var raws []RawMemory
	for _, k := range keys {
		if !strings.HasSuffix(k, ".md") {
			continue
		}
		data, err := readMemoryFile(ctx, store, k)
		if err != nil {
			return nil, err
		}
		if rm, err := ParseRawMemory(data); err == nil {
			raws = append(raws, rm)
		}
	}
	lastData, err := readMemoryFile(ctx, store, Key(in.Scope, SelectionPath))
	if err != nil && !errors.Is(err, blob.ErrNotFound) {
		return nil, err
	}
	last, err := ParseSelection(lastData)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), troupe.ErrInternal, err)
	}
	selected := Newest(raws, in.Settings.Newest)
	changes := Diff(last, selected)
	out := &MemoryPhase2Output{}
	for _, m := range changes.Added {
		out.Added = append(out.Added, m.RolloutID)
	}
	for _, m := range changes.Kept {
		out.Kept = append(out.Kept, m.RolloutID)
	}
	for _, s := range changes.Removed {
		out.Removed = append(out.Removed, s.RolloutID)
	}
	if changes.Empty() {
		out.Unchanged = true
		return out, nil
	}
	handbook, err := readMemoryFile(ctx, store, Key(in.Scope, HandbookPath))
	if err != nil && !errors.Is(err, blob.ErrNotFound) {
		return nil, err
	}
	removed := map[string]string{}
	for _, s := range changes.Removed {
		if data, err := readMemoryFile(ctx, store, Key(in.Scope, RawMemoryPath(s.RolloutID))); err == nil {
			if rm, err := ParseRawMemory(data); err == nil {
				removed[s.RolloutID] = rm.Text
			}
		}
	}
	conv := []agents.Item{agents.UserMessage(Phase2Input(string(handbook), changes, removed, MaxRawMemoryBytes))}
	var res Phase2Result
	for turn := 1; ; turn++ {
		text, err := c.memoryAsk(ctx, model.Request{Model: in.Settings.Phase2Model, Instructions: Phase2Instructions, Input: conv})
		if err != nil {
			return nil, err
		}
		if res, err = ParsePhase2(text); err == nil {
			break
		}
		if turn >= in.Settings.Phase2Turns {
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("phase 2 gave no valid answer in %d turns: %v", turn, err), ErrMemoryOutput, err)
		}
		conv = append(conv, agents.AssistantMessage(text),
			agents.UserMessage(fmt.Sprintf("Your answer was rejected: %v. Answer again with exactly one JSON object with the fields memory_md, memory_summary and skills.", err)))
	}
	files := Phase2Files(res)
	gen := Generation{By: ByPhase2}
	if activity.IsActivity(ctx) {
		gen.Source = activity.GetInfo(ctx).WorkflowExecution.ID
	}
	add := func(p string, data []byte) {
		gen.Files = append(gen.Files, GenerationFile{Path: p, Data: string(data)})
	}
	add(HandbookPath, files[HandbookPath])
	add(SummaryPath, files[SummaryPath])
	for _, s := range res.Skills {
		add(SkillPath(s.Name), files[SkillPath(s.Name)])
		out.Skills = append(out.Skills, s.Name)
	}
	// Last: the selection says this phase 2 is done.
	add(SelectionPath, SelectionOf(selected, time.Now()).Encode())
	if err := c.commitPhase2(ctx, in.Scope, head.seq, gen, out); err != nil {
		return nil, err
	}
	return out, nil
}

// commitPhase2 claims gen as the scope's next generation after base, the
// one phase 2 read, and applies it. Phase 2 wins over live edits written
// back meanwhile: it claims again on top of them, replacing their files,
// and says so (out.Replaced, and the log); the turns that made them reach
// a later phase 2 through their rollouts. A generation of another phase 2
// meanwhile (an attempt of this activity that outlived its timeout) did
// this one's work: this answer is dropped.
func (c *Consolidation) commitPhase2(ctx context.Context, scope string, base int64, gen Generation, out *MemoryPhase2Output) error {
	log := logFor(ctx)
	for range memoryClaims {
		if err := c.memoryStep(ctx, "phase 2: answered", scope); err != nil {
			return err
		}
		won, err := c.claimGeneration(ctx, scope, base, &gen)
		if err != nil {
			return err
		}
		if won {
			if len(out.Replaced) > 0 {
				log.Warn("memory phase 2 replaced live edits written back while it ran; the turns that made them reach the next phase 2 through their rollouts",
					"scope", scope, "paths", out.Replaced)
			}
			return c.applyClaim(ctx, scope, gen)
		}
		head, err := c.settleMemory(ctx, scope)
		if err != nil {
			return err
		}
		for seq := base + 1; seq <= head.seq; seq++ {
			g, err := c.readGeneration(ctx, scope, seq)
			if errors.Is(err, blob.ErrNotFound) {
				continue // Deleted as old: its files are in the newer ones'.
			}
			if err != nil {
				return err
			}
			if g.By == ByPhase2 {
				log.Warn("memory phase 2 dropped its answer: another phase 2 of the scope wrote a generation meanwhile", "scope", scope, "generation", seq)
				return nil
			}
			for _, p := range g.Paths() {
				if !slices.Contains(out.Replaced, p) {
					out.Replaced = append(out.Replaced, p)
				}
			}
		}
		base = head.seq
	}
	return memoryBusy(scope)
}

// maxMemoryFile bounds a memory file read whole (a rollout is the
// largest).
const maxMemoryFile = 64 << 20

// readMemoryFile reads a memory scope's file from the store itself,
// never from the store's read cache: memory files are rewritten (a
// rollout grows, phase 2 rewrites the handbook), possibly by another
// worker, and the cache holds only content that never changes. A missing
// file gives an error wrapping blob.ErrNotFound.
func readMemoryFile(ctx context.Context, store *blob.Store, key string) ([]byte, error) {
	rc, err := store.Open(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxMemoryFile+1))
	if err != nil {
		return nil, fmt.Errorf("memory: read %s: %w", key, err)
	}
	if len(data) > maxMemoryFile {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("memory file %s is larger than %d bytes", key, maxMemoryFile), troupe.ErrPayloadTooLarge, nil)
	}
	return data, nil
}

// memoryAsk asks the memory model and returns the text of its answer.
func (c *Consolidation) memoryAsk(ctx context.Context, req model.Request) (string, error) {
	m := c.model()
	cctx, chat := telemetry.StartChat(ctx, "openai", req.Model)
	resp, err := heartbeat.While(ctx, func() (*model.Response, error) { return m.Respond(cctx, req) })
	telemetry.EndResponse(chat, resp, err)
	if err != nil {
		if source, ok := model.ScenarioNoMatch(err); ok {
			return "", troupe.ScenarioNoMatch(source, err)
		}
		if ctx.Err() != nil || model.IsRetryable(err) {
			return "", temporal.NewApplicationErrorWithCause(model.ErrorMessage(err), troupe.ErrModelRetryable, err)
		}
		return "", temporal.NewNonRetryableApplicationError(err.Error(), troupe.ErrModel, err)
	}
	var text string
	for _, it := range resp.Output {
		if it.Type == agents.ItemMessage && it.Role == agents.RoleAssistant {
			text = it.Content
		}
	}
	return text, nil
}
