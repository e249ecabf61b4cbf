// Package memory holds Troupe's memory whole: an agent with
// agents.MemoryConfig reads lessons from earlier work and feeds its runs
// and session turns to a memory scope, which a background workflow
// consolidates in two phases. The package holds the layout of a scope,
// the rollout lines that feed it, the prompts of both phases, the strict
// parsing of what the model answers and the files each phase writes (plain
// Go), and the worker's side of it: MemoryWorkflow and its activities,
// the generations its writers take turns by, what a run or session does
// at a turn's end, a fork's copy, the learnt skills, and the memory of
// workspaces. A worker's Consolidation registers the workflow and its
// activities and serves its other workflows and activities;
// workflows.NewRunner builds it from its Config (Memory: MemoryOptions).
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
// The contract, in the order a run meets it:
//
//  1. Scope. The scope an agent uses is fixed for the run or session at
//     its start, in its spec (runtime.AgentSpec.MemoryScope and
//     MemoryReadScope), and reaches activities as agents.RunContext's
//     MemoryScope; the graph's MemoryConfig.Scope is only the default.
//     [CheckGraph] (NewRunner) refuses a scope that cannot name files, an
//     unknown mode, and a sandbox agent that reads memory without the shell
//     (exec_command) or updates it live without the filesystem
//     (apply_patch), naming the agent and what is missing.
//  2. Rollouts. A rollout is a session (or a run without a session): each
//     of its turns appends one [Line] to its JSONL file ([AppendLine]),
//     numbered, so an append retried after a crash adds nothing; the
//     workflow then signals the scope's workflow, starting it if it is not
//     running (MemorySignal, a SignalWithStart from an activity, the only
//     way to start-or-signal). The user's turn awaits neither: a run
//     appends after its final output, as local activities ([RecordRun]);
//     a session feeds its turns from a coroutine of its own once each is
//     answered, waits for them only before it continues as new or ends,
//     and asks for a final phase 2 when it stops ([Feed]). Those commands
//     are versioned (troupe.memory-rollouts) and issued only by runs whose
//     spec has a memory scope, so a graph without memory records what it
//     always did (feed.go).
//  3. The scope's workflow. One MemoryWorkflow per memory scope of a task
//     queue (workflow id [MemoryWorkflowID]) is the scope's single
//     consolidator. It waits (no timer but its idle timeout) for rollouts
//     ([MemoryRolloutSignal], a [MemoryRollout]) and for the final signal
//     ([MemoryFinalSignal], sent when a session stops), and takes every
//     rollout signalled so far as one batch. It continues as new after
//     MemorySettings.BatchesPerRun batches (or when its history grows),
//     carrying only the rollouts not yet taken (ids and line counts) and
//     whether a phase 2 is owed; after MemorySettings.IdleTimeout with
//     nothing to do it ends, and the next rollout starts it again.
//     [MemoryQuery] answers where it stands ([MemoryStatus]).
//  4. Phase 1 runs on each rollout of the batch, as activities,
//     MemorySettings.Parallel at a time (troupe.MemoryPhase1). It reads
//     the rollout, bounded with its head and tail kept ([Bound]), asks a
//     lightweight model with [Phase1Instructions], and parses the answer
//     strictly ([ParsePhase1]): exactly the fields rollout_slug,
//     rollout_summary and raw_memory, all empty meaning the rollout taught
//     nothing. [Phase1Files] renders the raw memory and the rollout summary
//     it writes, keyed by the rollout id, so a retried phase 1 rewrites the
//     same files, and one that finds them written for as many lines asks
//     no model again.
//  5. Phase 2 runs when phase 1 wrote something, or on the final signal,
//     one at a time (troupe.MemoryPhase2): signals that arrive meanwhile
//     wait for the next batch. It takes the newest raw memories
//     ([Newest]), diffs them against the last selection ([Diff]: added,
//     kept, removed; removal is how memory forgets), asks a stronger model
//     with [Phase2Instructions] and [Phase2Input] (an invalid answer is fed
//     back, within MemorySettings.Phase2Turns), and parses its answer
//     strictly ([ParsePhase2]). Its files (handbook, summary, skills, and
//     the selection last) are written as one generation, only when it
//     succeeds, so a failed phase 2 leaves the scope as it was and is owed;
//     an attempt retried after it claimed its generation finishes writing
//     it and asks no model again.
//  6. Generations. The consolidated files (MEMORY.md, the summary, the
//     selection, the skills) change only as a [Generation]: a numbered,
//     whole change that one writer creates once with the store's
//     create-only write (blob.Store.Create: phase 2's files, or an agent's
//     live edit written back) and then applies, within a window; a writer
//     whose window ended is taken over ([Takeover]). It is a
//     compare-and-swap of the scope: whichever writer loses a race learns
//     it, re-checks on what the winner wrote, and never overwrites it
//     unseen. Phase 2 wins over a live edit written back while it ran: it
//     replaces it and reports it (MemoryPhase2Output.Replaced). A writer
//     that crashed after its claim leaves its generation unapplied; the
//     next writer applies it (a retried phase 2 at once, others once the
//     crashed writer's window is over, about a minute), so nothing waits
//     forever (writers.go). [ParseGenerationPath], [ParseTakeoverPath] and
//     [Consolidated] say which names and paths belong to them.
//  7. Read. The model activity puts the summary (bounded) in the agent's
//     instructions ([Consolidation.Instructions]), says where the handbook
//     is, and lists the memory skills phase 2 wrote
//     (memories/skills/<name>/SKILL.md: name, description, path; bounded).
//     An agent that also has a Lazy or Text skills capability gets the
//     memory skills from that capability instead
//     ([Consolidation.WithLearntSkills], at NewRunner, binds it to the
//     agent's scope with skills.WithLearnt): it lists memories/skills/ in
//     the store at each model call, for its index (after the bundled
//     skills, marked as learnt; a bundled skill of one name wins), reading
//     only the SKILL.md files the worker's cache lacks (by each file's MD5,
//     or size and time), and at each load_skill (which copies one into
//     .agents/skills/<name>/ through the sandbox tool activity) and
//     read_skill call, which read that skill's files. Each is validated as
//     a bundled skill is; one whose SKILL.md is not valid is left out of
//     the index, one whose other files are not fails its load with the
//     reason, each logged once per version, and the turn goes on
//     (learnt.go). Plain agents get the memory_search (grep-like over
//     MEMORY.md) and memory_read (one memory file) tools, both bounded
//     ([Consolidation.WithTools]).
//  8. Materialise. SandboxCreate, after creating the workspace and any
//     restore, writes the scope's summary, MEMORY.md, rollout summaries and
//     skills (never raw memories, the selection or rollouts; at most
//     [MaxWorkspaceBytes] and [MaxWorkspaceFiles]) under memories/, or
//     memories/<Dir>/ for an agent with MemoryConfig.Dir, and records the
//     hashes it wrote (memory-workspaces/<sandbox id>.json in the store;
//     [Consolidation.Materialise]).
//  9. Live update. SandboxSnapshot, which runs after every turn that used
//     the sandbox and before a suspension or a fork, first writes a
//     read-write agent's edits of MEMORY.md and memory_summary.md back to
//     the scope as a generation ([Consolidation.WriteBack]): regular files
//     only, bounded, UTF-8, nothing else of the workspace. A file the
//     store changed since it was materialised (a phase 2, another agent's
//     edit) is not overwritten: the edit is skipped and logged, and the
//     turn's rollout reaches the next phase 2 anyway (materialise.go).
//  10. Fork. A fork of a session with memory copies each scope's memories/
//     files to a scope of its own ([ForkScope]) in an activity, and starts
//     with a spec that names the new scopes ([Fork]); after the fork,
//     either side's memory changes alone. The copy is of one generation:
//     it reads again when a writer claimed a generation while it read, and
//     waits for one that is being written. Versioned troupe.memory-fork,
//     asked only when the spec has a memory scope (fork.go).
//
// Everything the model writes is validated before it is written: sizes are
// bounded, slugs and skill names follow [SlugPattern] and [SkillNamePattern],
// and a skill's SKILL.md must carry its name and a description in its front
// matter. Errors of a model's answer are *[OutputError]s wrapping one of the
// sentinel errors ([ErrNotJSON], [ErrFields], [ErrBadSlug], [ErrTooLarge],
// [ErrBadSkill], [ErrEmpty]), so a caller can feed them back to the model;
// at the activity boundary they are application errors of type
// [ErrMemoryOutput] (phase 1 is retried; phase 2 feeds them back within its
// turns).
//
// Determinism: the workflow side (MemoryWorkflow, [RecordRun], [Feed],
// [Fork]) is workflow code; a change of the commands it issues must be
// versioned, and the histories checked in under testdata/memory-histories
// (recorded by package e2e) replay in this package's tests to prove it.
package memory
