package agents

// MemoryConfig gives an agent memory, shared by everything of one memory
// scope. It reads the scope's memory: the compact summary
// (memories/memory_summary.md, bounded) goes into the agent's
// instructions at each turn, with a pointer to the handbook
// (memories/MEMORY.md), and the memory skills consolidation found (which
// the agent's Skills capability offers, when it has a Lazy or Text one:
// see capabilities/skills.WithLearnt). A sandbox agent finds the scope's
// files in its workspace under memories/ (its Dir, if set) and, in
// read-write mode, may fix them with apply_patch:
// its edits of MEMORY.md and memory_summary.md go back to the scope at the
// end of its turn; a sandbox agent that reads needs the shell capability,
// one that updates live the filesystem capability (checked when a worker
// loads the graph). A plain agent reads through the memory_search and
// memory_read tools. It generates memory: each run that the agent
// starts at or ends, and each session turn it answers, is appended as a
// rollout to the scope, whose memory workflow consolidates it in the
// background (package memory: MemoryWorkflow, run by every worker). A
// user's turn never waits for consolidation. Mode keeps one of the two.
type MemoryConfig struct {
	// Scope names the memory scope: the agents, sessions and runs that
	// share lessons share a scope. It must match
	// ^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$ (checked when a worker loads the
	// graph).
	Scope string
	// Mode is MemoryReadWrite (the default, ""), MemoryReadOnly or
	// MemoryGenerateOnly.
	Mode MemoryMode
	// Dir, when set, is where the scope's files land in the agent's
	// workspace: memories/<Dir>/ (memory_summary.md, MEMORY.md,
	// rollout_summaries/, skills/) rather than memories/, so several
	// agents keep separate memories in one workspace. It is one lower-case
	// path element (memory.DirPattern). The blob store's layout is the
	// scope's (memory/<Scope>/memories/...) whatever Dir says: two agents
	// with separate memories have separate scopes.
	Dir string
}

// WorkspaceDir is the workspace folder the agent's memory files land in:
// "memories/" or "memories/<Dir>/".
func (m *MemoryConfig) WorkspaceDir() string {
	if m == nil || m.Dir == "" {
		return "memories/"
	}
	return "memories/" + m.Dir + "/"
}

// UpdatesLive reports whether the agent's edits of its workspace's
// MEMORY.md and memory_summary.md are written back to the scope (read-write
// mode, in a sandbox).
func (m *MemoryConfig) UpdatesLive() bool {
	return m != nil && m.Mode == MemoryReadWrite
}

// MemoryMode says what an agent does with its memory.
type MemoryMode string

// Memory modes.
const (
	// MemoryReadWrite reads the scope's memory and feeds it rollouts.
	MemoryReadWrite MemoryMode = ""
	// MemoryReadOnly reads the scope's memory and feeds it nothing.
	MemoryReadOnly MemoryMode = "read-only"
	// MemoryGenerateOnly feeds the scope rollouts and reads nothing.
	MemoryGenerateOnly MemoryMode = "generate-only"
)

// Reads reports whether the agent's instructions get the memory summary.
func (m *MemoryConfig) Reads() bool {
	return m != nil && (m.Mode == MemoryReadWrite || m.Mode == MemoryReadOnly)
}

// Generates reports whether the agent's runs and turns feed the scope.
func (m *MemoryConfig) Generates() bool {
	return m != nil && (m.Mode == MemoryReadWrite || m.Mode == MemoryGenerateOnly)
}
