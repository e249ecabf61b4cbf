package workflows

// A fork's memory, copy-on-write. When a session whose agents have memory
// forks, each of its scopes gets a scope of the fork's own
// (memory.ForkScope(scope, fork id)), initialised by copying the source
// scope's memories/ files (not its rollouts: those are the source's
// conversations) in an activity; the fork's spec names the new scopes,
// and the spec is what the fork's turns, rollouts, instructions and
// workspaces go by, so from the fork on either side's memory changes
// alone. The commands are gated by the version troupe.memory-fork, asked
// only by a fork of a session whose spec has a memory scope.

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe/memory"
	"github.com/troupe-dev/troupe/runtime"
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

// MemoryFork copies the memories/ files of scope From to scope To. A
// retry copies again; the result is the same.
func (a *Activities) MemoryFork(ctx context.Context, in MemoryForkInput) error {
	if err := errors.Join(memory.CheckScope(in.From), memory.CheckScope(in.To)); err != nil {
		return badMemory(err)
	}
	store := a.r.cfg.Store
	keys, _, err := store.List(ctx, memory.Key(in.From, memory.MemoryDir), 0)
	if err != nil {
		return err
	}
	total := 0
	for _, k := range keys {
		data, err := readMemoryFile(ctx, store, k)
		if err != nil {
			return err
		}
		if total += len(data); total > maxForkBytes {
			return temporal.NewNonRetryableApplicationError("memory scope "+in.From+" is too large to fork", ErrPayloadTooLarge, nil)
		}
		if err := store.Put(ctx, memory.Key(in.To, strings.TrimPrefix(k, memory.Prefix(in.From))), data); err != nil {
			return err
		}
	}
	return nil
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

// forkMemory gives a fork forkID of a session with spec its own memory
// scopes: it copies each and returns the spec the fork starts with. A
// spec without memory, or a session recorded before, forks as it did.
func forkMemory(ctx workflow.Context, spec *runtime.GraphSpec, forkID string) (*runtime.GraphSpec, error) {
	scopes := specScopes(spec)
	if len(scopes) == 0 || workflow.GetVersion(ctx, versionMemoryFork, workflow.DefaultVersion, 1) != 1 {
		return spec, nil
	}
	to := map[string]string{}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 5 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 5}, Summary: "copy memory for the fork"})
	var futures []workflow.Future
	for _, s := range scopes {
		to[s] = memory.ForkScope(s, forkID)
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
