package workflows

// Memory skills offered by the Skills capability (issue 11): an agent
// that reads memory and has a Lazy or Text skills capability gets, when
// the worker takes its graph, a copy of that capability bound to its
// memory scope (skills.WithLearnt). The copy reads the skills phase 2
// wrote (memories/skills/<name>/ of the scope) from the blob store at
// every model call, for its index, and at every load_skill or read_skill
// call, all in those activities: nothing of it is in workflow code, and a
// skill phase 2 writes between two turns is in the next turn's index.
// Such an agent's memory instructions no longer list the memory skills;
// an agent without a skills capability (or with an Eager one only) keeps
// them there.

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/capabilities/skills"
	"github.com/troupe-dev/troupe/memory"
	"github.com/troupe-dev/troupe/runtime/blob"
)

// memoryLearnt is skills.Learnt over an agent's memory scope: the scope
// of the call (agents.RunContext's, else the agent's), in the store
// itself, never its read cache (phase 2 rewrites the files).
type memoryLearnt struct {
	store *blob.Store
	agent *agents.Agent
}

// List implements skills.Learnt: the files under the scope's
// memories/skills/, at most memory.MaxWorkspaceFiles of them (what a
// workspace gets of a scope at most).
func (m memoryLearnt) List(ctx context.Context) ([]skills.LearntFile, error) {
	rc, _ := agents.RunContextFrom(ctx)
	scope := memoryScopeOf(m.agent, rc)
	if err := memory.CheckScope(scope); err != nil {
		return nil, err
	}
	prefix := memory.Key(scope, memory.SkillsDir)
	keys, more, err := m.store.List(ctx, prefix, memory.MaxWorkspaceFiles)
	if err != nil {
		return nil, err
	}
	if more {
		logFor(ctx).Warn("memory skills past the listing's bound are not offered", "agent", m.agent.Name, "scope", scope, "bound", memory.MaxWorkspaceFiles)
	}
	out := make([]skills.LearntFile, 0, len(keys))
	for _, k := range keys {
		out = append(out, skills.LearntFile{Path: strings.TrimPrefix(k, prefix), Open: func(ctx context.Context) (io.ReadCloser, error) {
			return m.store.Open(ctx, k)
		}})
	}
	return out, nil
}

// Skipped implements skills.Learnt: a memory skill left out is logged; it
// never fails the call.
func (m memoryLearnt) Skipped(ctx context.Context, err error) {
	if errors.Is(err, skills.ErrDuplicate) {
		logFor(ctx).Info("memory skill not offered: a bundled skill has its name and wins", "agent", m.agent.Name, "error", err)
		return
	}
	logFor(ctx).Warn("memory skill not offered: it breaks a rule of skills", "agent", m.agent.Name, "error", err)
}

// logFor is the activity's logger, or the process's outside an activity.
func logFor(ctx context.Context) log.Logger {
	if activity.IsActivity(ctx) {
		return activity.GetLogger(ctx)
	}
	return log.NewStructuredLogger(slog.Default())
}

// withLearntSkills binds the skills capability of each agent that reads
// memory to its memory scope (see the file's comment).
func (r *Runner) withLearntSkills(g *agents.Graph) (*agents.Graph, error) {
	var all []*agents.Agent
	changed := false
	for _, a := range g.Agents() {
		if a.Memory.Reads() {
			if caps, ok := skills.WithLearnt(a.Capabilities, memoryLearnt{store: r.cfg.Store, agent: a}); ok {
				c := *a
				c.Capabilities = caps
				a, changed = &c, true
			}
		}
		all = append(all, a)
	}
	if !changed {
		return g, nil
	}
	return agents.NewGraph(g.Name(), g.Entry(), all...)
}

// offersMemorySkills reports whether agent's skills capability offers its
// memory skills, so that its memory instructions do not list them again.
func offersMemorySkills(agent *agents.Agent) bool {
	return slices.ContainsFunc(agent.Capabilities, func(c agents.Capability) bool {
		sc, ok := c.(*skills.Capability)
		return ok && sc.OffersLearnt()
	})
}
