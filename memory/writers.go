package memory

// A scope's consolidated memory (MEMORY.md, memory_summary.md, the skills
// and the selection) has two kinds of writer: phase 2, and the write-back
// of agents' live edits, from any number of sandboxes at once. The blob
// store's one conditional write is a create-only one (blob.Store.Create),
// so they take turns through generations (Generation): a numbered
// log of changes, each created once, under generations/ of the scope.
//
//  1. Settle. A writer lists the generations. If the newest is not marked
//     applied, the writer that holds it may still be writing its files:
//     the writer waits for the mark while that writer's window lasts, and
//     memoryTakeover more. Then it takes the generation over: it creates
//     the generation's next takeover (Takeover), which gives it a
//     window of its own, and applies the generation in it. Of writers
//     that race to take over, one creates the takeover; the others wait
//     for its window in turn. Every generation below the newest is
//     applied.
//  2. Decide, on the files as the settled store holds them: a write-back
//     skips a file that changed since its workspace got it; phase 2 builds
//     on what it read when it started.
//  3. Claim generation newest+1 with a create-only write of the whole
//     change, naming the claiming attempt (Writer: its activity, attempt
//     and a nonce) and the end of its window (ApplyBy, memoryApplyWindow
//     on). Of writers that read the same newest, exactly one creates it;
//     the others learn so, and go back to 1 with what it changed. A claim
//     is also void when a generation KeepGenerations newer already stands
//     (its number was one the scope had deleted).
//  4. Apply its own generation, mark it applied, and delete generations
//     older than the kept ones.
//
// Applying (4, or a takeover in 1) writes each file of the generation
// whose content differs, in order, then the mark, within the writer's
// window, the claim's or its takeover's. Before each write the writer
// lists the generations, and stops when another writer applied the
// generation (it is marked, or a newer one is claimed: the newer one is
// the truth), when a later takeover of it exists, or when its window has
// ended by its clock; each request it sends is cut off at the window's
// end (its context's deadline). The window is generous next to one write
// of the store: a writer that runs out of it was stalled (a store that
// hangs, a worker cut off), and fails retryably (ErrMemoryLate), its
// generation left for a taker. A generation is its writer's only in the
// attempt that claimed it: a retried activity that finds its earlier
// attempt's generation unapplied waits out that attempt's window as any
// writer would, since Temporal retries an activity whose heartbeats
// stopped while its attempt may still run.
//
// Files change only after a claim, so whatever a writer read after
// settling on generation n is still current if it creates generation
// n+1: a compare-and-swap of the scope as a whole. A crash leaves at
// most an unapplied generation or takeover (the next writer takes it
// over once its window is over) or a temporary file of the store
// (ignored). A reader that needs the files of one generation (the fork
// copy) settles, reads, and checks that the newest generation is still
// the one it settled on.
//
// What is left rests on clocks and on the store. Windows of one
// generation do not overlap by one clock, and a taker starts
// memoryTakeover after the window before its own ended; a newer
// generation is claimed only after its predecessor is marked. So a
// writer's file lands after another writer went on only when (a) the
// store completes a request that the writer sent within its window more
// than memoryTakeover after that window ended, less the clocks'
// disagreement (an S3 PUT whose body was all sent before the writer cut
// it off, which the server commits that late), or (b) two workers'
// clocks disagree by more than memoryTakeover, and then only if a taker
// applies the generation and a newer one is claimed and applied, all
// between the writer's last listing and its write: one request's span.
// Such a file stays stale until a generation rewrites it. Writes to the
// scope that bypass generations (an operator's, a test's) are taken as
// the files' content: nothing rewrites them but a generation.

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/runtime/blob"
)

const (
	// memoryApplyWindow is how long a writer of a generation (its
	// claimer, or a taker) writes its files; its writes are cut off after
	// it. A healthy writer needs a few requests' time.
	memoryApplyWindow = 30 * time.Second
	// memoryTakeover is how long after a writer's window ends another
	// writer that finds its generation unapplied takes it over: a margin
	// for the clocks of workers that disagree, and for a request the
	// store completes after its writer cut it off.
	memoryTakeover = 30 * time.Second
	// memoryClaims bounds the claims a writer loses in a row before it
	// fails (retryably).
	memoryClaims = 16
)

// ErrMemoryBusy is the error type of a memory write that lost
// memoryClaims claims in a row to other writers; a retry tries again.
const ErrMemoryBusy = "troupe.MemoryBusy"

// ErrMemoryLate is the error type of a memory write whose window ended
// (a stalled store, a worker cut off), or that another writer took over,
// before it applied its generation: it wrote nothing more. Its
// generation stands; another writer, or a retry, applies it.
const ErrMemoryLate = "troupe.MemoryLate"

// errGenerationSettled stops a writer whose generation another writer
// applied meanwhile (after taking it over): it is marked, or a newer one
// is claimed.
var errGenerationSettled = errors.New("memory generation applied by another writer")

// memoryHead is where a scope's generations stand.
type memoryHead struct {
	// seq is the newest generation, 0 when the scope has none.
	seq int64
	// applied: the newest generation's files are all written (true when
	// there is none).
	applied bool
	// takeovers is the number of the newest generation's newest takeover
	// (0 for none).
	takeovers int
}

// memoryLease is a writer's window to write one generation's files: its
// claim's (n 0) or its takeover n's, which ends at applyBy.
type memoryLease struct {
	seq     int64
	n       int
	applyBy time.Time
}

// generationKey is the blob key of generation seq of scope.
func generationKey(scope string, seq int64) string {
	return Key(scope, GenerationPath(seq))
}

// memoryHeadOf lists scope's generations.
func (c *Consolidation) memoryHeadOf(ctx context.Context, scope string) (memoryHead, error) {
	h, _, err := c.listGenerations(ctx, scope)
	return h, err
}

// listGenerations lists scope's generations: the head, and the keys of
// each generation, its takeovers and its mark by seq.
func (c *Consolidation) listGenerations(ctx context.Context, scope string) (memoryHead, map[int64][]string, error) {
	keys, _, err := c.Store.List(ctx, Key(scope, GenerationsDir), 0)
	if err != nil {
		return memoryHead{}, nil, err
	}
	var h memoryHead
	applied := map[int64]bool{}
	takeovers := map[int64]int{}
	bySeq := map[int64][]string{}
	for _, k := range keys {
		p := k[len(Prefix(scope)):]
		if seq, n, ok := ParseTakeoverPath(p); ok {
			bySeq[seq] = append(bySeq[seq], k)
			takeovers[seq] = max(takeovers[seq], n)
			continue
		}
		seq, mark, ok := ParseGenerationPath(p)
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
	h.takeovers = takeovers[h.seq]
	return h, bySeq, nil
}

// readGeneration reads generation seq of scope; a missing one (deleted
// as old) gives an error wrapping blob.ErrNotFound.
func (c *Consolidation) readGeneration(ctx context.Context, scope string, seq int64) (Generation, error) {
	data, err := readMemoryFile(ctx, c.Store, generationKey(scope, seq))
	if err != nil {
		return Generation{}, err
	}
	g, err := ParseGeneration(data)
	if err != nil {
		return Generation{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("scope %s: %v", scope, err), troupe.ErrInternal, err)
	}
	return g, nil
}

// leaseOf reads the newest generation of scope's head h, unapplied, and
// the window its writer has now: its claim's, or its newest takeover's.
// A generation deleted since the listing gives an error wrapping
// blob.ErrNotFound.
func (c *Consolidation) leaseOf(ctx context.Context, scope string, h memoryHead) (Generation, memoryLease, error) {
	g, err := c.readGeneration(ctx, scope, h.seq)
	if err != nil {
		return g, memoryLease{}, err
	}
	l := memoryLease{seq: g.Seq, applyBy: g.ApplyBy}
	if h.takeovers > 0 {
		data, err := readMemoryFile(ctx, c.Store, Key(scope, TakeoverPath(h.seq, h.takeovers)))
		if err != nil {
			return g, l, err
		}
		t, err := ParseTakeover(data)
		if err != nil {
			return g, l, temporal.NewNonRetryableApplicationError(fmt.Sprintf("scope %s: %v", scope, err), troupe.ErrInternal, err)
		}
		l.n, l.applyBy = t.N, t.ApplyBy
	}
	return g, l, nil
}

// settleMemory returns scope's head once its newest generation is
// applied (step 1 of the top of this file): it waits for that
// generation's writer while its window lasts, and memoryTakeover more,
// then takes the generation over.
func (c *Consolidation) settleMemory(ctx context.Context, scope string) (memoryHead, error) {
	wait := 50 * time.Millisecond
	for {
		h, err := c.memoryHeadOf(ctx, scope)
		if err != nil || h.applied {
			return h, err
		}
		g, l, err := c.leaseOf(ctx, scope, h)
		if errors.Is(err, blob.ErrNotFound) {
			continue // Deleted as old since the listing: list again.
		}
		if err != nil {
			return h, err
		}
		if !c.now().Before(l.applyBy.Add(memoryTakeover)) {
			applied, err := c.takeOver(ctx, scope, g, l)
			if err != nil {
				return h, err
			}
			if applied {
				h.applied = true
				return h, nil
			}
			continue // Another writer took it over first, or applied it.
		}
		// Its writer is within its window: it is writing, or it crashed
		// (or stalled) and the window will end.
		if err := c.memoryStep(ctx, "wait", scope); err != nil {
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

// takeOver creates takeover cur.n+1 of g, whose writer's window cur is
// over, and, if it won it, applies g within the takeover's own window.
// It reports whether it applied g: false when another writer took it
// over first, or applied it meanwhile.
func (c *Consolidation) takeOver(ctx context.Context, scope string, g Generation, cur memoryLease) (bool, error) {
	t := Takeover{Version: 1, Seq: g.Seq, N: cur.n + 1, Writer: memoryWriter(ctx), At: c.now().UTC()}
	t.ApplyBy = t.At.Add(memoryApplyWindow)
	data, err := t.Encode()
	if err != nil {
		return false, temporal.NewNonRetryableApplicationError(err.Error(), troupe.ErrInternal, err)
	}
	won, err := c.createOnce(ctx, Key(scope, TakeoverPath(t.Seq, t.N)), data)
	if err != nil || !won {
		return false, err
	}
	logFor(ctx).Info("memory generation taken over: its writer's window ended before it applied it",
		"scope", scope, "generation", g.Seq, "by", g.By, "writer", g.Writer, "takeover", t.N)
	if err := c.memoryStep(ctx, "took over "+g.By, scope); err != nil {
		return false, err
	}
	err = c.applyGeneration(ctx, scope, g, memoryLease{seq: t.Seq, n: t.N, applyBy: t.ApplyBy})
	if errors.Is(err, errGenerationSettled) {
		return false, nil
	}
	return err == nil, err
}

// claimGeneration creates g as generation base+1 of scope (step 3); it
// reports false when another writer's generation came first.
func (c *Consolidation) claimGeneration(ctx context.Context, scope string, base int64, g *Generation) (bool, error) {
	g.Version, g.Seq = 1, base+1
	g.Writer = memoryWriter(ctx)
	g.At = c.now().UTC()
	g.ApplyBy = g.At.Add(memoryApplyWindow)
	data, err := g.Encode()
	if err != nil {
		return false, temporal.NewNonRetryableApplicationError(err.Error(), troupe.ErrInternal, err)
	}
	won, err := c.createOnce(ctx, generationKey(scope, g.Seq), data)
	if err != nil || !won {
		return false, err
	}
	// The number was free, but it may have been freed: the scope deleted
	// it as old, and generations KeepGenerations newer stand. Then this
	// claim is void (the old ones' deletion removes it in turn).
	h, err := c.memoryHeadOf(ctx, scope)
	if err != nil {
		return false, err
	}
	return h.seq < g.Seq+KeepGenerations, nil
}

// createOnce creates key with data, a generation or takeover naming its
// writer; it reports false when another writer's came first. A create
// that the store completed though its answer was lost, so that the
// client's retry of the request found the key taken, is this writer's
// still: the key holds its data, nonce and all.
func (c *Consolidation) createOnce(ctx context.Context, key string, data []byte) (bool, error) {
	err := c.Store.Create(ctx, key, data)
	if errors.Is(err, blob.ErrExists) {
		cur, err := readMemoryFile(ctx, c.Store, key)
		return err == nil && bytes.Equal(cur, data), nil
	}
	return err == nil, err
}

// applyClaim applies the caller's own claim g (step 4). A claim that
// another writer took over and applied, the caller having stalled,
// counts as applied.
func (c *Consolidation) applyClaim(ctx context.Context, scope string, g Generation) error {
	if err := c.memoryStep(ctx, "claimed "+g.By, scope); err != nil {
		return err
	}
	err := c.applyGeneration(ctx, scope, g, memoryLease{seq: g.Seq, applyBy: g.ApplyBy})
	if errors.Is(err, errGenerationSettled) {
		logFor(ctx).Warn("memory generation applied by another writer: its writer's window ended first", "scope", scope, "generation", g.Seq, "by", g.By)
		return nil
	}
	return err
}

// applyGeneration writes g's files that differ from the store's, in
// order, then marks g applied and deletes the generations older than the
// kept ones, all within window l: it checks l before each file
// (mayWrite), and its requests are cut off at l's end. It returns
// errGenerationSettled when another writer applied g meanwhile, and an
// ErrMemoryLate error when l ended, or g was taken over, before g was
// applied.
func (c *Consolidation) applyGeneration(ctx context.Context, scope string, g Generation, l memoryLease) error {
	store := c.Store
	// l's end by this worker's clock, on the time the context goes by.
	wctx, cancel := context.WithDeadline(ctx, time.Now().Add(l.applyBy.Sub(c.now())))
	defer cancel()
	cut := func(err error) error {
		if err != nil && wctx.Err() != nil && ctx.Err() == nil {
			return memoryLate(scope, l, false)
		}
		return err
	}
	for _, f := range g.Files {
		if err := c.mayWrite(ctx, scope, l); err != nil {
			return err
		}
		key := Key(scope, f.Path)
		cur, err := readMemoryFile(wctx, store, key)
		if err == nil && string(cur) == f.Data {
			continue
		}
		if err != nil && !errors.Is(err, blob.ErrNotFound) {
			return cut(err)
		}
		if err := store.Put(wctx, key, []byte(f.Data)); err != nil {
			return cut(err)
		}
		if err := c.memoryStep(ctx, "wrote "+f.Path, scope); err != nil {
			return err
		}
	}
	if err := c.mayWrite(ctx, scope, l); err != nil {
		return err
	}
	if err := store.Put(wctx, Key(scope, AppliedPath(g.Seq)), nil); err != nil {
		return cut(err)
	}
	c.dropOldGenerations(ctx, scope, g.Seq)
	return nil
}

// mayWrite reports whether the writer of window l may write a file of
// its generation (or its mark) now: nil when the generation is unapplied and the
// newest, not taken over since l, and l has not ended by this worker's
// clock; else errGenerationSettled (another writer applied it) or an
// ErrMemoryLate error.
func (c *Consolidation) mayWrite(ctx context.Context, scope string, l memoryLease) error {
	h, err := c.memoryHeadOf(ctx, scope)
	if err != nil {
		return err
	}
	switch {
	case h.seq > l.seq || (h.seq == l.seq && h.applied):
		return errGenerationSettled
	case h.seq < l.seq:
		// Deleted, by none of the writers here (they delete only old
		// generations): write nothing.
		return temporal.NewApplicationError(fmt.Sprintf("memory scope %s: generation %d is gone", scope, l.seq), troupe.ErrInternal)
	case h.takeovers > l.n:
		return memoryLate(scope, l, true)
	case !c.now().Before(l.applyBy):
		return memoryLate(scope, l, false)
	}
	return nil
}

// memoryLate is the error of the writer of window l that stopped
// applying its generation: its window ended, or it was taken over.
func memoryLate(scope string, l memoryLease, takenOver bool) error {
	why := "its window ended at " + l.applyBy.UTC().Format(time.RFC3339)
	if takenOver {
		why = "another writer took it over"
	}
	return temporal.NewApplicationError(fmt.Sprintf("memory scope %s: generation %d not applied by this writer: %s; another writer applies it",
		scope, l.seq, why), ErrMemoryLate)
}

// memoryWriter names this attempt as the writer of a generation or a
// takeover: its activity and attempt, and a nonce that tells it from any
// other, even one of the same attempt number.
func memoryWriter(ctx context.Context) string {
	w := rand.Text()
	if activity.IsActivity(ctx) {
		info := activity.GetInfo(ctx)
		w = fmt.Sprintf("%s/%s#%d/%s", info.WorkflowExecution.ID, info.ActivityID, info.Attempt, w)
	}
	return w
}

// dropOldGenerations deletes the generations of scope (and their marks)
// KeepGenerations or more older than seq; best effort.
func (c *Consolidation) dropOldGenerations(ctx context.Context, scope string, seq int64) {
	_, bySeq, err := c.listGenerations(ctx, scope)
	if err != nil {
		logFor(ctx).Warn("old memory generations not deleted", "scope", scope, "error", err)
		return
	}
	var old []int64
	for s := range bySeq {
		if s <= seq-KeepGenerations {
			old = append(old, s)
		}
	}
	slices.Sort(old)
	for _, s := range old {
		for _, k := range bySeq[s] {
			if err := c.Store.Delete(ctx, k); err != nil {
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
func (c *Consolidation) now() time.Time {
	if c.clock != nil {
		return c.clock()
	}
	return time.Now()
}

// memoryStep runs the test hook (SetMemoryHook) at a step of the memory
// writers: it may hold the writer there, or fail it as a crash would.
// Production has none.
func (c *Consolidation) memoryStep(ctx context.Context, step, scope string) error {
	if c.memoryHook == nil {
		return nil
	}
	return c.memoryHook(ctx, step, scope)
}
