package workflows

// A scope's consolidated memory (MEMORY.md, memory_summary.md, the skills
// and the selection) has two kinds of writer: phase 2, and the write-back
// of agents' live edits, from any number of sandboxes at once. The blob
// store's one conditional write is a create-only one (blob.Store.Create),
// so they take turns through generations (memory.Generation): a numbered
// log of changes, each created once, under generations/ of the scope.
//
//  1. Settle. A writer lists the generations. If the newest is not marked
//     applied, its writer may still be writing its files: the writer waits
//     for the mark, and applies the generation itself when it is its own
//     (an earlier attempt that crashed) or past its ApplyBy plus
//     memoryTakeover (its writer crashed, or is cut off). Applying writes
//     each file of the generation whose content differs, in order, then
//     the mark. Every generation below the newest is applied.
//  2. Decide, on the files as the settled store holds them: a write-back
//     skips a file that changed since its workspace got it; phase 2 builds
//     on what it read when it started.
//  3. Claim generation newest+1 with a create-only write of the whole
//     change. Of writers that read the same newest, exactly one creates
//     it; the others learn so, and go back to 1 with what it changed. A
//     claim is also void when a generation KeepGenerations newer already
//     stands (its number was one the scope had deleted).
//  4. Apply its own generation, within memoryApplyWindow of the claim (its
//     context's deadline, so that a writer that stalls does not write after
//     others took over), mark it applied, and delete generations older than
//     the kept ones.
//
// Files change only after a claim, so whatever a writer read after
// settling on generation n is still current if it creates generation
// n+1: a compare-and-swap of the scope as a whole. A crash leaves at
// most an unapplied generation (the next writer applies it) or a
// temporary file of the store (ignored). A reader that needs the files
// of one generation (the fork copy) settles, reads, and checks that the
// newest generation is still the one it settled on.
//
// What is left rests on clocks: a writer that stalls past its window and
// memoryTakeover (or an S3 request of it that the server completes that
// late) could still write a file of its generation after others applied
// a newer one; that file stays stale until a generation rewrites it.
// Writes to the scope that bypass generations (an operator's, a test's)
// are taken as the files' content: nothing rewrites them but a
// generation.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/troupe-dev/troupe/memory"
	"github.com/troupe-dev/troupe/runtime/blob"
)

const (
	// memoryApplyWindow is how long after its claim the writer of a
	// generation writes its files; its writes are cut off after it.
	memoryApplyWindow = 30 * time.Second
	// memoryTakeover is how long after a generation's ApplyBy another
	// writer that finds it unapplied applies it itself: a margin for the
	// clocks of workers that disagree.
	memoryTakeover = 30 * time.Second
	// memoryClaims bounds the claims a writer loses in a row before it
	// fails (retryably).
	memoryClaims = 16
)

// ErrMemoryBusy is the error type of a memory write that lost
// memoryClaims claims in a row to other writers; a retry tries again.
const ErrMemoryBusy = "troupe.MemoryBusy"

// memoryHead is where a scope's generations stand.
type memoryHead struct {
	// seq is the newest generation, 0 when the scope has none.
	seq int64
	// applied: the newest generation's files are all written (true when
	// there is none).
	applied bool
}

// generationKey is the blob key of generation seq of scope.
func generationKey(scope string, seq int64) string {
	return memory.Key(scope, memory.GenerationPath(seq))
}

// memoryHeadOf lists scope's generations.
func (a *Activities) memoryHeadOf(ctx context.Context, scope string) (memoryHead, error) {
	h, _, err := a.listGenerations(ctx, scope)
	return h, err
}

// listGenerations lists scope's generations: the head, and the keys of
// each generation and mark by seq.
func (a *Activities) listGenerations(ctx context.Context, scope string) (memoryHead, map[int64][]string, error) {
	keys, _, err := a.r.cfg.Store.List(ctx, memory.Key(scope, memory.GenerationsDir), 0)
	if err != nil {
		return memoryHead{}, nil, err
	}
	var h memoryHead
	applied := map[int64]bool{}
	bySeq := map[int64][]string{}
	for _, k := range keys {
		seq, mark, ok := memory.ParseGenerationPath(k[len(memory.Prefix(scope)):])
		if !ok {
			continue
		}
		bySeq[seq] = append(bySeq[seq], k)
		if mark {
			applied[seq] = true
		} else {
			h.seq = max(h.seq, seq)
		}
	}
	h.applied = h.seq == 0 || applied[h.seq]
	return h, bySeq, nil
}

// readGeneration reads generation seq of scope; a missing one (deleted
// as old) gives an error wrapping blob.ErrNotFound.
func (a *Activities) readGeneration(ctx context.Context, scope string, seq int64) (memory.Generation, error) {
	data, err := readMemoryFile(ctx, a.r.cfg.Store, generationKey(scope, seq))
	if err != nil {
		return memory.Generation{}, err
	}
	g, err := memory.ParseGeneration(data)
	if err != nil {
		return memory.Generation{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("scope %s: %v", scope, err), ErrInternal, err)
	}
	return g, nil
}

// settleMemory returns scope's head once its newest generation is
// applied (step 1 of the top of this file): it waits for that
// generation's writer, or applies the generation itself when mine
// reports it as its own or its writer's time is up.
func (a *Activities) settleMemory(ctx context.Context, scope string, mine func(memory.Generation) bool) (memoryHead, error) {
	wait := 50 * time.Millisecond
	for {
		h, err := a.memoryHeadOf(ctx, scope)
		if err != nil || h.applied {
			return h, err
		}
		g, err := a.readGeneration(ctx, scope, h.seq)
		if errors.Is(err, blob.ErrNotFound) {
			continue // Deleted as old since the listing: list again.
		}
		if err != nil {
			return h, err
		}
		if mine(g) || !a.now().Before(g.ApplyBy.Add(memoryTakeover)) {
			if err := a.applyGeneration(ctx, scope, g, false); err != nil {
				return h, err
			}
			h.applied = true
			return h, nil
		}
		// Its writer is within its window: it is writing, or it crashed
		// and the window will end.
		if err := a.memoryStep(ctx, "wait", scope); err != nil {
			return h, err
		}
		if activity.IsActivity(ctx) {
			activity.RecordHeartbeat(ctx)
		}
		select {
		case <-ctx.Done():
			return h, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// claimGeneration creates g as generation base+1 of scope (step 3); it
// reports false when another writer's generation came first.
func (a *Activities) claimGeneration(ctx context.Context, scope string, base int64, g *memory.Generation) (bool, error) {
	g.Version, g.Seq = 1, base+1
	g.At = a.now().UTC()
	g.ApplyBy = g.At.Add(memoryApplyWindow)
	data, err := g.Encode()
	if err != nil {
		return false, temporal.NewNonRetryableApplicationError(err.Error(), ErrInternal, err)
	}
	err = a.r.cfg.Store.Create(ctx, generationKey(scope, g.Seq), data)
	if errors.Is(err, blob.ErrExists) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	// The number was free, but it may have been freed: the scope deleted
	// it as old, and generations KeepGenerations newer stand. Then this
	// claim is void (the old ones' deletion removes it in turn).
	h, err := a.memoryHeadOf(ctx, scope)
	if err != nil {
		return false, err
	}
	return h.seq < g.Seq+memory.KeepGenerations, nil
}

// applyGeneration writes g's files that differ from the store's, in
// order, then marks g applied. own: g is the caller's claim, whose writes
// end at its ApplyBy, and which then deletes the generations older than
// the kept ones.
func (a *Activities) applyGeneration(ctx context.Context, scope string, g memory.Generation, own bool) error {
	store := a.r.cfg.Store
	if own {
		if err := a.memoryStep(ctx, "claimed "+g.By, scope); err != nil {
			return err
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, g.ApplyBy)
		defer cancel()
	}
	for _, f := range g.Files {
		key := memory.Key(scope, f.Path)
		cur, err := readMemoryFile(ctx, store, key)
		if err == nil && string(cur) == f.Data {
			continue
		}
		if err != nil && !errors.Is(err, blob.ErrNotFound) {
			return err
		}
		if err := store.Put(ctx, key, []byte(f.Data)); err != nil {
			return err
		}
		if err := a.memoryStep(ctx, "wrote "+f.Path, scope); err != nil {
			return err
		}
	}
	if err := store.Put(ctx, memory.Key(scope, memory.AppliedPath(g.Seq)), nil); err != nil {
		return err
	}
	if own {
		a.dropOldGenerations(ctx, scope, g.Seq)
	}
	return nil
}

// dropOldGenerations deletes the generations of scope (and their marks)
// KeepGenerations or more older than seq; best effort.
func (a *Activities) dropOldGenerations(ctx context.Context, scope string, seq int64) {
	_, bySeq, err := a.listGenerations(ctx, scope)
	if err != nil {
		logFor(ctx).Warn("old memory generations not deleted", "scope", scope, "error", err)
		return
	}
	var old []int64
	for s := range bySeq {
		if s <= seq-memory.KeepGenerations {
			old = append(old, s)
		}
	}
	slices.Sort(old)
	for _, s := range old {
		for _, k := range bySeq[s] {
			if err := a.r.cfg.Store.Delete(ctx, k); err != nil {
				logFor(ctx).Warn("old memory generation not deleted", "scope", scope, "key", k, "error", err)
				return
			}
		}
	}
}

// memoryBusy is the error of a memory write that lost too many claims.
func memoryBusy(scope string) error {
	return temporal.NewApplicationError(fmt.Sprintf("memory scope %s: lost %d claims in a row to other writers", scope, memoryClaims), ErrMemoryBusy)
}

// now is the time by the worker's clock (a test's, with SetMemoryClock).
func (a *Activities) now() time.Time {
	if a.clock != nil {
		return a.clock()
	}
	return time.Now()
}

// memoryStep runs the test hook (SetMemoryHook) at a step of the memory
// writers: it may hold the writer there, or fail it as a crash would.
// Production has none.
func (a *Activities) memoryStep(ctx context.Context, step, scope string) error {
	if a.memoryHook == nil {
		return nil
	}
	return a.memoryHook(ctx, step, scope)
}
