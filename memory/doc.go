// Package memory holds Troupe's two-phase memory consolidation as plain Go:
// the layout of a memory scope, the rollout lines that feed it, the prompts
// of both phases, the strict parsing of what the model answers, and the
// files each phase writes. It imports no Temporal package; MemoryWorkflow in
// package workflows runs these steps as activities.
//
// A memory scope is a set of files, held in the blob store (the source of
// truth) under [Prefix](scope) and materialised into workspaces:
//
//	sessions/<rollout_id>.jsonl                   one Line per run or session turn
//	memories/raw_memories/<rollout_id>.md         phase 1: what a rollout taught
//	memories/rollout_summaries/<rollout_id>_<slug>.md
//	memories/phase_two_selection.json             phase 2: the raw memories it used
//	memories/MEMORY.md                            phase 2: the grep-friendly handbook
//	memories/memory_summary.md                    phase 2: compact, bounded
//	memories/skills/<name>/SKILL.md               phase 2: procedures it found
//	generations/<seq>.json, <seq>.applied         how the consolidated files changed
//
// The contract a caller relies on:
//
//  1. A rollout is a session (or a run without a session): each of its
//     turns appends one [Line] to its JSONL file ([AppendLine]), numbered, so
//     an append retried after a crash adds nothing.
//  2. Phase 1 reads one rollout, bounded with its head and tail kept
//     ([Bound]), asks a lightweight model with [Phase1Instructions], and
//     parses the answer strictly ([ParsePhase1]): exactly the fields
//     rollout_slug, rollout_summary and raw_memory, all empty meaning the
//     rollout taught nothing. [Phase1Files] renders the two files it writes,
//     keyed by the rollout id, so a retried phase 1 rewrites the same files.
//  3. Phase 2 takes the newest raw memories ([Newest]), diffs them against
//     the last selection ([Diff]: added, kept, removed; removal is how memory
//     forgets), asks a stronger model with [Phase2Instructions] and
//     [Phase2Input], and parses its answer strictly ([ParsePhase2]). The
//     selection file is written last, and only when the phase succeeded, so
//     a failed phase 2 leaves the scope as it was.
//  4. The consolidated files (MEMORY.md, the summary, the selection, the
//     skills) change only as a [Generation]: a numbered, whole change that
//     one writer creates once (phase 2's files, or an agent's live edit
//     written back) and then applies, within a window; a writer whose
//     window ended is taken over ([Takeover]). [ParseGenerationPath],
//     [ParseTakeoverPath] and [Consolidated] say which names and paths
//     belong to them.
//
// Everything the model writes is validated before it is written: sizes are
// bounded, slugs and skill names follow [SlugPattern] and [SkillNamePattern],
// and a skill's SKILL.md must carry its name and a description in its front
// matter. Errors of a model's answer are *[OutputError]s wrapping one of the
// sentinel errors ([ErrNotJSON], [ErrFields], [ErrBadSlug], [ErrTooLarge],
// [ErrBadSkill], [ErrEmpty]), so a caller can feed them back to the model.
package memory
