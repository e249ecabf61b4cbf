package memory

// Memory in workspaces (issue 11, the memory capability): what the
// sandbox activities of a worker call.
//
//   - Materialisation: SandboxCreate, after the workspace is created and any
//     snapshot restored, copies the files of the agent's scope that
//     Materialised names (summary, MEMORY.md, rollout summaries,
//     skills; bounded by MaxWorkspaceBytes and MaxWorkspaceFiles)
//     into memories/ (or memories/<Dir>/) of the workspace, so the store's
//     version is what the agent sees, even after a restore (Materialise).
//     It records what it wrote (the base) in the store, under
//     memory-workspaces/<sandbox>.
//   - Write-back: SandboxSnapshot, which runs at the end of every turn that
//     used the sandbox and before it is suspended, first writes the
//     agent's edits of MEMORY.md and memory_summary.md back to the store
//     (read-write agents only; WriteBack): regular files, bounded, UTF-8.
//     It is a compare-and-swap, through the scope's generations
//     (writers.go), against phase 2 and the write-backs of
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
//     deletes the record (Forget).
//   - Plain agents read through the memory_search and memory_read tools
//     (agent.go).
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

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/sandbox"
)

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

// Materialise writes the memory files of agent's scope in the run rc
// into the workspace of s and records the base for write-back. An error
// of s is returned wrapped, for the caller to classify.
func (c *Consolidation) Materialise(ctx context.Context, s sandbox.Session, agent *agents.Agent, rc agents.RunContext) error {
	scope := memoryScopeOf(agent, rc)
	store := c.Store
	keys, _, err := store.List(ctx, Key(scope, MemoryDir), 0)
	if err != nil {
		return err
	}
	var paths []string
	for _, k := range keys {
		if p := strings.TrimPrefix(k, Prefix(scope)); Materialised(p) {
			paths = append(paths, p)
		}
	}
	// What matters most first: the summary, the handbook, the skills, then
	// the rollout summaries, newest (by name) last to be cut.
	rank := func(p string) int {
		switch {
		case p == SummaryPath:
			return 0
		case p == HandbookPath:
			return 1
		case strings.HasPrefix(p, SkillsDir):
			return 2
		}
		return 3
	}
	slices.SortStableFunc(paths, func(x, y string) int { return cmp.Or(cmp.Compare(rank(x), rank(y)), strings.Compare(x, y)) })
	rec := memoryWorkspace{Scope: scope, Dir: agent.Memory.Dir, Live: agent.Memory.UpdatesLive(), Base: map[string]string{}}
	total, files := 0, 0
	for _, p := range paths {
		data, err := readMemoryFile(ctx, store, Key(scope, p))
		if errors.Is(err, blob.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if total+len(data) > MaxWorkspaceBytes || files >= MaxWorkspaceFiles {
			logFor(ctx).Warn("memory files left out of the workspace: over its bound", "scope", scope, "path", p)
			continue
		}
		if err := s.WriteFile(ctx, WorkspacePath(rec.Dir, p), data, 0o644); err != nil {
			return fmt.Errorf("materialise memory %s: %w", p, err)
		}
		total, files = total+len(data), files+1
		if LiveUpdatable(p) {
			rec.Base[p] = Hash(data)
		}
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return store.Put(ctx, memoryWorkspaceKey(s.State().ID), data)
}

// Forget deletes what materialisation recorded of a sandbox that stopped
// (a restored sandbox has a new id and record); best effort.
func (c *Consolidation) Forget(ctx context.Context, sandboxID string) {
	if err := c.Store.Delete(ctx, memoryWorkspaceKey(sandboxID)); err != nil && !errors.Is(err, blob.ErrNotFound) {
		logFor(ctx).Warn("memory workspace record not deleted", "sandbox", sandboxID, "error", err)
	}
}

// WriteBack writes the agent's edits of the live-updatable memory files
// of the workspace of s back to the store, as the comment at the top of
// this file says; a workspace that Materialise did not record, or whose
// agent does not update memory live, writes nothing. It returns the paths
// written and those skipped for a conflict.
func (c *Consolidation) WriteBack(ctx context.Context, s sandbox.Session) (written, conflicts []string, err error) {
	sandboxID := s.State().ID
	key := memoryWorkspaceKey(sandboxID)
	rec, err := c.liveWorkspace(ctx, key)
	if rec == nil || err != nil {
		return nil, nil, err
	}
	edits, paths := workspaceEdits(ctx, s, rec)
	if len(paths) == 0 {
		return nil, nil, nil
	}
	written, conflicts, changed, err := c.claimEdits(ctx, sandboxID, rec, edits, paths)
	if err != nil {
		return nil, nil, err
	}
	for _, p := range conflicts {
		logFor(ctx).Warn("memory edit not written back: the scope's file changed since the workspace got it (a phase 2, or another agent's edit); its version stands",
			"scope", rec.Scope, "path", p)
	}
	if changed {
		out, err := json.Marshal(rec)
		if err != nil {
			return written, conflicts, err
		}
		if err := c.Store.Put(ctx, key, out); err != nil {
			return written, conflicts, err
		}
	}
	return written, conflicts, nil
}

// liveWorkspace reads what materialisation recorded under key, and
// returns nil when there is nothing to write back: no record, one that
// does not parse or names a bad scope or folder, or an agent that does
// not update memory live.
func (c *Consolidation) liveWorkspace(ctx context.Context, key string) (*memoryWorkspace, error) {
	raw, err := readMemoryFile(ctx, c.Store, key)
	if errors.Is(err, blob.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rec memoryWorkspace
	if err := json.Unmarshal(raw, &rec); err != nil || !rec.Live || CheckScope(rec.Scope) != nil || CheckDir(rec.Dir) != nil {
		return nil, nil
	}
	return &rec, nil
}

// workspaceEdits reads the live-updatable files of the workspace of s
// that differ from the base rec records, with their paths in a fixed
// order; a file that is missing, not regular, over its bound, unreadable
// or invalid is left out (and logged when it is there), since only a
// sound edit may replace the store's version.
func workspaceEdits(ctx context.Context, s sandbox.Session, rec *memoryWorkspace) (edits map[string][]byte, paths []string) {
	log := logFor(ctx)
	edits = map[string][]byte{}
	for _, p := range []string{HandbookPath, SummaryPath} {
		wp := WorkspacePath(rec.Dir, p)
		infos, err := s.List(ctx, path.Dir(wp))
		if err != nil {
			continue // No memory folder: nothing to write back.
		}
		i := slices.IndexFunc(infos, func(fi sandbox.FileInfo) bool { return fi.Name == path.Base(wp) })
		if i < 0 {
			continue // A deleted file is not a deletion of memory.
		}
		if fi := infos[i]; !fi.Mode.IsRegular() || fi.Size > int64(MaxBytes(p)) {
			log.Warn("memory file not written back: not a regular file, or over its bound", "scope", rec.Scope, "path", wp, "mode", fi.Mode.String(), "size", fi.Size)
			continue
		}
		data, err := s.ReadFile(ctx, wp)
		if err != nil {
			log.Warn("memory file not written back: unreadable", "scope", rec.Scope, "path", wp, "error", err)
			continue
		}
		if err := CheckLiveUpdate(p, data); err != nil {
			log.Warn("memory file not written back", "scope", rec.Scope, "error", err)
			continue
		}
		if Hash(data) != rec.Base[p] {
			edits[p] = data
			paths = append(paths, p)
		}
	}
	return edits, paths
}

// claimEdits writes the edits (at paths) of sandbox sandboxID back as the
// scope's next generation, and moves rec's base to what the store then
// holds (changed says it moved), so that write-back races neither phase 2
// nor other sandboxes.
//
// A compare-and-swap through the scope's generations (writers.go): on
// the files as the settled store holds them, an edit of a file that
// changed since the workspace got it is a conflict; the others are
// claimed as the next generation, and a lost claim starts over on what
// the winner wrote.
func (c *Consolidation) claimEdits(ctx context.Context, sandboxID string, rec *memoryWorkspace, edits map[string][]byte, paths []string) (written, conflicts []string, changed bool, err error) {
	for range memoryClaims {
		head, err := c.settleMemory(ctx, rec.Scope)
		if err != nil {
			return nil, nil, false, err
		}
		gen := Generation{By: ByWriteBack, Source: sandboxID}
		var stored bool
		gen.Files, conflicts, stored, err = c.checkEdits(ctx, rec, edits, paths)
		if err != nil {
			return nil, nil, false, err
		}
		changed = changed || stored
		if len(gen.Files) == 0 {
			return nil, conflicts, changed, nil
		}
		if err := c.memoryStep(ctx, "write-back: checked", rec.Scope); err != nil {
			return nil, nil, false, err
		}
		won, err := c.claimGeneration(ctx, rec.Scope, head.seq, &gen)
		if err != nil {
			return nil, nil, false, err
		}
		if !won {
			continue
		}
		if err := c.applyClaim(ctx, rec.Scope, gen); err != nil {
			return nil, nil, false, err
		}
		for _, f := range gen.Files {
			written = append(written, f.Path)
			rec.Base[f.Path], changed = Hash(edits[f.Path]), true
		}
		return written, conflicts, changed, nil
	}
	return nil, nil, false, memoryBusy(rec.Scope)
}

// checkEdits compares each edit with the scope's file in the store, the
// check of claimEdits' compare-and-swap: an edit the store already holds
// (an earlier attempt wrote it) moves rec's base (stored), one of a file
// that changed since rec's base is a conflict, and the others are the
// files to claim.
func (c *Consolidation) checkEdits(ctx context.Context, rec *memoryWorkspace, edits map[string][]byte, paths []string) (files []GenerationFile, conflicts []string, stored bool, err error) {
	for _, p := range paths {
		h := Hash(edits[p])
		cur, err := readMemoryFile(ctx, c.Store, Key(rec.Scope, p))
		curHash := ""
		switch {
		case err == nil:
			curHash = Hash(cur)
		case !errors.Is(err, blob.ErrNotFound):
			return nil, nil, false, err
		}
		switch {
		case curHash == h:
			// The store has it (an earlier attempt wrote it).
			rec.Base[p], stored = h, true
		case curHash != rec.Base[p]:
			conflicts = append(conflicts, p)
		default:
			files = append(files, GenerationFile{Path: p, Data: string(edits[p])})
		}
	}
	return files, conflicts, stored, nil
}
