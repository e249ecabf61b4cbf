package workflows

// Memory in workspaces and tools (issue 11, the memory capability).
//
//   - Materialisation: SandboxCreate, after the workspace is created and any
//     snapshot restored, copies the files of the agent's scope that
//     memory.Materialised names (summary, MEMORY.md, rollout summaries,
//     skills; bounded by memory.MaxWorkspaceBytes and MaxWorkspaceFiles)
//     into memories/ (or memories/<Dir>/) of the workspace, so the store's
//     version is what the agent sees, even after a restore. It records what
//     it wrote (the base) in the store, under memory-workspaces/<sandbox>.
//   - Write-back: SandboxSnapshot, which runs at the end of every turn that
//     used the sandbox and before it is suspended, first writes the
//     agent's edits of MEMORY.md and memory_summary.md back to the store
//     (read-write agents only): regular files, bounded, UTF-8. It is a
//     compare-and-swap, through the scope's generations
//     (memory_generations.go), against phase 2 and the write-backs of
//     other sandboxes: an edit of a file that changed since the base (a
//     phase 2, or another agent's edit) is skipped and logged, and the
//     next materialisation brings the store's version; the edits that
//     stand are written as the scope's next generation only if no other
//     writer claimed it since the check, else the check is made again on
//     what that writer wrote. Phase 2 wins: its generation stands over an
//     edit, and one that finds an edit written back while it ran replaces
//     it and says so (MemoryPhase2Output.Replaced, and its log). Either
//     way the edit's turn is a rollout, which the scope's next phase 2
//     consolidates; and phase 2's files (handbook, summary, skills,
//     selection) are one whole, not mixed with a partial edit. SandboxStop
//     deletes the record.
//   - Plain agents read through the memory_search and memory_read tools.
//
// None of this adds a workflow command: it runs inside activities the
// workflows already call. The scope an activity uses is the one the run
// or session fixed at its start (agents.RunContext.MemoryScope, from the
// spec), else the agent's.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"go.temporal.io/sdk/temporal"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/memory"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// Memory tools of plain agents.
const (
	MemorySearchTool = "memory_search"
	MemoryReadTool   = "memory_read"
)

// memoryScopeOf is the scope agent uses in the run rc: the one fixed for
// the run, else its own.
func memoryScopeOf(agent *agents.Agent, rc agents.RunContext) string {
	if agent.Memory == nil {
		return ""
	}
	return cmp.Or(rc.MemoryScope, agent.Memory.Scope)
}

// memoryWorkspace is what materialisation wrote into a workspace, kept
// in the store for write-back.
type memoryWorkspace struct {
	Scope string `json:"scope"`
	Dir   string `json:"dir,omitempty"`
	// Live: the agent's edits are written back.
	Live bool `json:"live,omitempty"`
	// Base maps each live-updatable path to the hash of the version the
	// workspace has of it ("" for none).
	Base map[string]string `json:"base"`
}

func memoryWorkspaceKey(sandboxID string) string { return "memory-workspaces/" + sandboxID + ".json" }

// materialiseMemory writes the scope's memory files into the workspace of
// s and records the base for write-back.
func (a *Activities) materialiseMemory(ctx context.Context, s sandbox.Session, agent *agents.Agent, scope string) error {
	store := a.r.cfg.Store
	keys, _, err := store.List(ctx, memory.Key(scope, memory.MemoryDir), 0)
	if err != nil {
		return err
	}
	var paths []string
	for _, k := range keys {
		if p := strings.TrimPrefix(k, memory.Prefix(scope)); memory.Materialised(p) {
			paths = append(paths, p)
		}
	}
	// What matters most first: the summary, the handbook, the skills, then
	// the rollout summaries, newest (by name) last to be cut.
	rank := func(p string) int {
		switch {
		case p == memory.SummaryPath:
			return 0
		case p == memory.HandbookPath:
			return 1
		case strings.HasPrefix(p, memory.SkillsDir):
			return 2
		}
		return 3
	}
	slices.SortStableFunc(paths, func(x, y string) int { return cmp.Or(cmp.Compare(rank(x), rank(y)), strings.Compare(x, y)) })
	rec := memoryWorkspace{Scope: scope, Dir: agent.Memory.Dir, Live: agent.Memory.UpdatesLive(), Base: map[string]string{}}
	total, files := 0, 0
	for _, p := range paths {
		data, err := readMemoryFile(ctx, store, memory.Key(scope, p))
		if errors.Is(err, blob.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if total+len(data) > memory.MaxWorkspaceBytes || files >= memory.MaxWorkspaceFiles {
			logFor(ctx).Warn("memory files left out of the workspace: over its bound", "scope", scope, "path", p)
			continue
		}
		if err := s.WriteFile(ctx, memory.WorkspacePath(rec.Dir, p), data, 0o644); err != nil {
			return sandboxErr(fmt.Errorf("materialise memory %s: %w", p, err))
		}
		total, files = total+len(data), files+1
		if memory.LiveUpdatable(p) {
			rec.Base[p] = memory.Hash(data)
		}
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return store.Put(ctx, memoryWorkspaceKey(s.State().ID), data)
}

// forgetMemory deletes what materialisation recorded of a sandbox that
// stopped (a restored sandbox has a new id and record); best effort.
func (a *Activities) forgetMemory(ctx context.Context, sandboxID string) {
	if err := a.r.cfg.Store.Delete(ctx, memoryWorkspaceKey(sandboxID)); err != nil && !errors.Is(err, blob.ErrNotFound) {
		logFor(ctx).Warn("memory workspace record not deleted", "sandbox", sandboxID, "error", err)
	}
}

// writeBackMemory writes the agent's edits of its workspace's
// live-updatable memory files back to the store, as the package comment
// above says. It returns the paths written and those skipped for a
// conflict.
func (a *Activities) writeBackMemory(ctx context.Context, s sandbox.Session) (written, conflicts []string, err error) {
	store := a.r.cfg.Store
	sandboxID := s.State().ID
	key := memoryWorkspaceKey(sandboxID)
	raw, err := readMemoryFile(ctx, store, key)
	if errors.Is(err, blob.ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var rec memoryWorkspace
	if err := json.Unmarshal(raw, &rec); err != nil || !rec.Live || memory.CheckScope(rec.Scope) != nil || memory.CheckDir(rec.Dir) != nil {
		return nil, nil, nil
	}
	log := logFor(ctx)
	edits := map[string][]byte{}
	var paths []string
	for _, p := range []string{memory.HandbookPath, memory.SummaryPath} {
		wp := memory.WorkspacePath(rec.Dir, p)
		infos, err := s.List(ctx, path.Dir(wp))
		if err != nil {
			continue // No memory folder: nothing to write back.
		}
		i := slices.IndexFunc(infos, func(fi sandbox.FileInfo) bool { return fi.Name == path.Base(wp) })
		if i < 0 {
			continue // A deleted file is not a deletion of memory.
		}
		if fi := infos[i]; !fi.Mode.IsRegular() || fi.Size > int64(memory.MaxBytes(p)) {
			log.Warn("memory file not written back: not a regular file, or over its bound", "scope", rec.Scope, "path", wp, "mode", fi.Mode.String(), "size", fi.Size)
			continue
		}
		data, err := s.ReadFile(ctx, wp)
		if err != nil {
			log.Warn("memory file not written back: unreadable", "scope", rec.Scope, "path", wp, "error", err)
			continue
		}
		if err := memory.CheckLiveUpdate(p, data); err != nil {
			log.Warn("memory file not written back", "scope", rec.Scope, "error", err)
			continue
		}
		if memory.Hash(data) != rec.Base[p] {
			edits[p] = data
			paths = append(paths, p)
		}
	}
	if len(paths) == 0 {
		return nil, nil, nil
	}
	// A compare-and-swap through the scope's generations
	// (memory_generations.go): on the files as the settled store holds
	// them, an edit of a file that changed since the workspace got it is
	// a conflict; the others are claimed as the next generation, and a
	// lost claim starts over on what the winner wrote.
	changed, done := false, false
	for range memoryClaims {
		head, err := a.settleMemory(ctx, rec.Scope)
		if err != nil {
			return nil, nil, err
		}
		gen := memory.Generation{By: memory.ByWriteBack, Source: sandboxID}
		conflicts = nil
		for _, p := range paths {
			h := memory.Hash(edits[p])
			cur, err := readMemoryFile(ctx, store, memory.Key(rec.Scope, p))
			curHash := ""
			switch {
			case err == nil:
				curHash = memory.Hash(cur)
			case !errors.Is(err, blob.ErrNotFound):
				return nil, nil, err
			}
			switch {
			case curHash == h:
				// The store has it (an earlier attempt wrote it).
				rec.Base[p], changed = h, true
			case curHash != rec.Base[p]:
				conflicts = append(conflicts, p)
			default:
				gen.Files = append(gen.Files, memory.GenerationFile{Path: p, Data: string(edits[p])})
			}
		}
		if len(gen.Files) == 0 {
			done = true
			break
		}
		if err := a.memoryStep(ctx, "write-back: checked", rec.Scope); err != nil {
			return nil, nil, err
		}
		won, err := a.claimGeneration(ctx, rec.Scope, head.seq, &gen)
		if err != nil {
			return nil, nil, err
		}
		if !won {
			continue
		}
		if err := a.applyClaim(ctx, rec.Scope, gen); err != nil {
			return nil, nil, err
		}
		for _, f := range gen.Files {
			written = append(written, f.Path)
			rec.Base[f.Path], changed = memory.Hash(edits[f.Path]), true
		}
		done = true
		break
	}
	if !done {
		return nil, nil, memoryBusy(rec.Scope)
	}
	for _, p := range conflicts {
		log.Warn("memory edit not written back: the scope's file changed since the workspace got it (a phase 2, or another agent's edit); its version stands",
			"scope", rec.Scope, "path", p)
	}
	if changed {
		out, err := json.Marshal(rec)
		if err != nil {
			return written, conflicts, err
		}
		if err := store.Put(ctx, key, out); err != nil {
			return written, conflicts, err
		}
	}
	return written, conflicts, nil
}

// MemorySearchArgs are memory_search's arguments.
type MemorySearchArgs struct {
	// Query holds the words a line must all contain.
	Query string `json:"query" jsonschema:"description=Words that a line of MEMORY.md must all contain (case-insensitive)."`
}

// MemoryReadArgs are memory_read's arguments.
type MemoryReadArgs struct {
	// Path is a memory file's path, as memories/MEMORY.md.
	Path string `json:"path" jsonschema:"description=A memory file: memories/MEMORY.md, memories/memory_summary.md, memories/rollout_summaries/<file>.md or memories/skills/<name>/SKILL.md."`
}

// memoryTools are the tools that give a plain agent its scope's memory:
// a grep-like search of MEMORY.md and a read of one memory file, each
// bounded.
func (r *Runner) memoryTools(agent *agents.Agent) []agents.Tool {
	scopeOf := func(ctx context.Context) string {
		rc, _ := agents.RunContextFrom(ctx)
		return memoryScopeOf(agent, rc)
	}
	search := agents.MustFunctionTool(MemorySearchTool,
		"Search your memory handbook (memories/MEMORY.md) for lessons from earlier work: returns the matching lines with their numbers.",
		func(ctx context.Context, args MemorySearchArgs) (string, error) {
			data, err := readMemoryFile(ctx, r.cfg.Store, memory.Key(scopeOf(ctx), memory.HandbookPath))
			if errors.Is(err, blob.ErrNotFound) {
				return "No memory yet.", nil
			}
			if err != nil {
				return "", err
			}
			out := memory.Search(string(data), args.Query, memory.MaxSearchBytes)
			if out == "" {
				return "No line of memories/MEMORY.md matches.", nil
			}
			return out, nil
		})
	read := agents.MustFunctionTool(MemoryReadTool,
		"Read one of your memory files (the handbook, the summary, a rollout summary or a memory skill's SKILL.md).",
		func(ctx context.Context, args MemoryReadArgs) (string, error) {
			p := path.Clean(args.Path)
			if !memory.Materialised(p) {
				return "", fmt.Errorf("%s is not a memory file: read memories/MEMORY.md, memories/memory_summary.md, memories/rollout_summaries/... or memories/skills/<name>/SKILL.md", args.Path)
			}
			data, err := readMemoryFile(ctx, r.cfg.Store, memory.Key(scopeOf(ctx), p))
			if errors.Is(err, blob.ErrNotFound) {
				return "", fmt.Errorf("%s does not exist", p)
			}
			if err != nil {
				return "", err
			}
			return memory.Bound(string(data), memory.MaxSearchBytes), nil
		})
	return []agents.Tool{search, read}
}

// memorySkills are the skills phase 2 wrote in scope, as instructions list
// them.
func (a *Activities) memorySkills(ctx context.Context, scope string) ([]memory.SkillInfo, error) {
	keys, _, err := a.r.cfg.Store.List(ctx, memory.Key(scope, memory.SkillsDir), 0)
	if err != nil {
		return nil, err
	}
	var out []memory.SkillInfo
	for _, k := range keys {
		p := strings.TrimPrefix(k, memory.Prefix(scope))
		name, rest, _ := strings.Cut(strings.TrimPrefix(p, memory.SkillsDir), "/")
		if rest != "SKILL.md" || !memory.SkillNamePattern.MatchString(name) {
			continue
		}
		data, err := readMemoryFile(ctx, a.r.cfg.Store, k)
		if err != nil {
			if errors.Is(err, blob.ErrNotFound) {
				continue
			}
			return nil, err
		}
		out = append(out, memory.ParseSkillInfo(name, []byte(memory.Bound(string(data), memory.MaxSkillBytes))))
		if len(out) >= memory.MaxSkills*4 {
			break
		}
	}
	return out, nil
}

// badMemory is a non-retryable error of a memory request that cannot be
// served.
func badMemory(err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), troupe.ErrBadCommand, err)
}
