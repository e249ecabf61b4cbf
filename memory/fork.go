package memory

// A fork's memory, copy-on-write. When a session whose agents have memory
// forks, each of its scopes gets a scope of the fork's own
// (ForkScope(scope, fork id)), initialised by copying the source
// scope's memories/ files (not its rollouts: those are the source's
// conversations) in an activity: the files of one generation of the
// source (writers.go), never a phase 2's new handbook with the
// summary or selection it replaced. The fork's spec names the new scopes,
// and the spec is what the fork's turns, rollouts, instructions and
// workspaces go by, so from the fork on either side's memory changes
// alone. The commands are gated by the version troupe.memory-fork, asked
// only by a fork of a session whose spec has a memory scope.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/blob"
)

// versionMemoryFork marks the change to forks of sessions with memory:
// the fork gets scopes of its own, copied from its source's.
const versionMemoryFork = "troupe.memory-fork"

// MemoryForkActivityName copies a memory scope's files for a fork.
const MemoryForkActivityName = "troupe.MemoryFork"

// MemoryForkInput is the fork-copy activity's input.
type MemoryForkInput struct {
	// From is the source's scope, To the fork's.
	From string `json:"from"`
	To   string `json:"to"`
}

// maxForkBytes bounds what a fork copies of one scope.
const maxForkBytes = 64 << 20

// memoryCopies bounds the fork copy's attempts at one generation.
const memoryCopies = 16

// MemoryFork copies the memories/ files of scope From to scope To: the
// files of one generation of From (writers.go). It settles on
// From's newest generation, reads the files, and checks that the newest
// is still the one it settled on; if a writer claimed another meanwhile
// (a phase 2, a live edit), it reads again. Files of To that the copy
// does not hold (an earlier attempt's, of another generation) are
// deleted. A retry copies again; the result is one generation of From.
func (c *Consolidation) MemoryFork(ctx context.Context, in MemoryForkInput) error {
	if err := errors.Join(CheckScope(in.From), CheckScope(in.To)); err != nil {
		return badMemory(err)
	}
	store := c.Store
	for range memoryCopies {
		head, err := c.settleMemory(ctx, in.From)
		if err != nil {
			return err
		}
		files, err := c.readScopeFiles(ctx, in.From)
		if err != nil {
			return err
		}
		after, err := c.memoryHeadOf(ctx, in.From)
		if err != nil {
			return err
		}
		if after.seq != head.seq {
			continue // A writer claimed a generation while this one was read.
		}
		for p, data := range files {
			if err := store.Put(ctx, Key(in.To, p), data); err != nil {
				return err
			}
		}
		keys, _, err := store.List(ctx, Key(in.To, MemoryDir), 0)
		if err != nil {
			return err
		}
		for _, k := range keys {
			if _, ok := files[strings.TrimPrefix(k, Prefix(in.To))]; !ok {
				if err := store.Delete(ctx, k); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return temporal.NewApplicationError(fmt.Sprintf("memory scope %s changed under each of %d copies", in.From, memoryCopies), ErrMemoryBusy)
}

// readScopeFiles reads scope's memories/ files, by path, bounded by
// maxForkBytes. A file deleted since the listing (phase 1 replacing a
// rollout summary) is left out.
func (c *Consolidation) readScopeFiles(ctx context.Context, scope string) (map[string][]byte, error) {
	store := c.Store
	keys, _, err := store.List(ctx, Key(scope, MemoryDir), 0)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	total := 0
	for _, k := range keys {
		data, err := readMemoryFile(ctx, store, k)
		if errors.Is(err, blob.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if total += len(data); total > maxForkBytes {
			return nil, temporal.NewNonRetryableApplicationError("memory scope "+scope+" is too large to fork", troupe.ErrPayloadTooLarge, nil)
		}
		p := strings.TrimPrefix(k, Prefix(scope))
		files[p] = data
		if err := c.memoryStep(ctx, "fork: read "+p, scope); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// specScopes are the memory scopes a spec's agents read or feed, in
// order.
func specScopes(spec *runtime.GraphSpec) []string {
	var out []string
	for _, a := range spec.Agents {
		for _, s := range []string{a.MemoryScope, a.MemoryReadScope} {
			if s != "" && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

// Fork gives a fork forkID of a session with spec its own memory scopes:
// it copies each (MemoryFork activities, at once) and returns the spec
// the fork starts with. A spec without memory, or a session recorded
// before, forks as it did (spec itself).
func Fork(ctx workflow.Context, spec *runtime.GraphSpec, forkID string) (*runtime.GraphSpec, error) {
	scopes := specScopes(spec)
	if len(scopes) == 0 || workflow.GetVersion(ctx, versionMemoryFork, workflow.DefaultVersion, 1) != 1 {
		return spec, nil
	}
	to := map[string]string{}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 5 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 5}, Summary: "copy memory for the fork"})
	var futures []workflow.Future
	for _, s := range scopes {
		to[s] = ForkScope(s, forkID)
		futures = append(futures, workflow.ExecuteActivity(actx, MemoryForkActivityName, MemoryForkInput{From: s, To: to[s]}))
	}
	for _, f := range futures {
		if err := f.Get(ctx, nil); err != nil {
			return nil, err
		}
	}
	out := *spec
	out.Agents = slices.Clone(spec.Agents)
	for i := range out.Agents {
		a := &out.Agents[i]
		if a.MemoryScope != "" {
			a.MemoryScope = to[a.MemoryScope]
		}
		if a.MemoryReadScope != "" {
			a.MemoryReadScope = to[a.MemoryReadScope]
		}
	}
	return &out, nil
}
