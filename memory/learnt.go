package memory

// Memory skills offered by the Skills capability (issue 11): an agent
// that reads memory and has a Lazy or Text skills capability gets, when
// the worker takes its graph, a copy of that capability bound to its
// memory scope (skills.WithLearnt). The copy lists the skills phase 2
// wrote (memories/skills/<name>/ of the scope) in the blob store at every
// model call, for its index, and at every load_skill or read_skill call,
// all in those activities: nothing of it is in workflow code, and a skill
// phase 2 writes between two turns is in the next turn's index. Such an
// agent's memory instructions no longer list the memory skills; an agent
// without a skills capability (or with an Eager one only) keeps them
// there.
//
// A model call costs one listing of the scope's skills: the listing gives
// each file's version (its key with its MD5, or its size and time), and
// the worker's cache of learnt skills (Consolidation.Learnt, shared by
// all its agents) keeps what each version of a SKILL.md makes of its skill, so
// only the SKILL.md files that changed since (a new generation's, an
// operator's) are read. A skill's other files are read when it is
// loaded. What is wrong with a skill, or with a listing, is logged once
// per version of it.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/capabilities/skills"
	"github.com/troupe-dev/troupe/runtime/blob"
)

// learntSettled is how long after it was written a file whose listing
// gives no hash of its content (a file:// store's) is taken to be
// settled: a file's time is only as fine as its file system's clock
// (some milliseconds; two seconds on some), so a rewrite of as many bytes
// within that time could keep the time it had. A file written within it
// has no version (it is read whenever it is needed) until it settles.
const learntSettled = 2 * time.Second

// memoryLearnt is skills.Learnt over an agent's memory scope: the scope
// of the call (agents.RunContext's, else the agent's), in the store
// itself, never its read cache (phase 2 rewrites the files).
type memoryLearnt struct {
	store *blob.Store
	agent *agents.Agent
	// cache is the worker's cache of learnt skills, which also remembers
	// what List logged; nil logs it every time.
	cache *skills.LearntCache
	// now is the worker's clock; nil means time.Now.
	now func() time.Time
}

// List implements skills.Learnt: the files under the scope's
// memories/skills/, at most MaxWorkspaceFiles of them (what a
// workspace gets of a scope at most), each with its version.
func (m memoryLearnt) List(ctx context.Context) ([]skills.LearntFile, error) {
	rc, _ := agents.RunContextFrom(ctx)
	scope := memoryScopeOf(m.agent, rc)
	if err := CheckScope(scope); err != nil {
		return nil, err
	}
	prefix := Key(scope, SkillsDir)
	objs, more, err := m.store.ListObjects(ctx, prefix, MaxWorkspaceFiles)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	if m.now != nil {
		now = m.now()
	}
	out := make([]skills.LearntFile, 0, len(objs))
	for _, o := range objs {
		out = append(out, skills.LearntFile{Path: strings.TrimPrefix(o.Key, prefix), Version: learntVersion(o, now), Open: func(ctx context.Context) (io.ReadCloser, error) {
			return m.store.Open(ctx, o.Key)
		}})
	}
	if more && m.once("past bound", scope, out) {
		logFor(ctx).Warn("memory skills past the listing's bound are not offered", "agent", m.agent.Name, "scope", scope, "bound", MaxWorkspaceFiles)
	}
	return out, nil
}

// learntVersion is the version of a listed file (see
// skills.LearntFile.Version): its key, size and MD5, or, from a store
// that gives no MD5, its key, size and time once settled; "" before.
func learntVersion(o blob.Object, now time.Time) string {
	if len(o.MD5) > 0 {
		return fmt.Sprintf("%s %d md5:%x", o.Key, o.Size, o.MD5)
	}
	if now.Sub(o.ModTime) < learntSettled {
		return ""
	}
	return fmt.Sprintf("%s %d t:%d", o.Key, o.Size, o.ModTime.UnixNano())
}

// once reports whether what (of scope, at the listing files) is new to the
// worker's cache, so that it is logged once per version of the listing.
func (m memoryLearnt) once(what, scope string, files []skills.LearntFile) bool {
	if m.cache == nil {
		return true
	}
	h := sha256.New()
	for _, f := range files {
		if f.Version == "" {
			return true
		}
		h.Write([]byte(f.Version + "\x00"))
	}
	return m.cache.Once("memory " + what + "\x00" + scope + "\x00" + hex.EncodeToString(h.Sum(nil)))
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

// learntOf is the lister of agent's learnt skills.
func (c *Consolidation) learntOf(agent *agents.Agent) memoryLearnt {
	return memoryLearnt{store: c.Store, agent: agent, cache: c.Learnt}
}

// WithLearntSkills binds the skills capability of each agent of g that
// reads memory to its memory scope (see the comment at the top of this
// file): the copies list the scope in c.Store and share c.Learnt.
func (c *Consolidation) WithLearntSkills(g *agents.Graph) (*agents.Graph, error) {
	var all []*agents.Agent
	changed := false
	for _, a := range g.Agents() {
		if a.Memory.Reads() {
			if caps, ok := skills.WithLearnt(a.Capabilities, c.learntOf(a), skills.SharedCache(c.Learnt)); ok {
				cp := *a
				cp.Capabilities = caps
				a, changed = &cp, true
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
