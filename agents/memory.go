package agents

// MemoryConfig gives an agent memory, shared by everything of one memory
// scope. It reads the scope's memory: the compact summary
// (memories/memory_summary.md, bounded) goes into the agent's
// instructions at each turn, with a pointer to the handbook
// (memories/MEMORY.md). It generates memory: each run that the agent
// starts at or ends, and each session turn it answers, is appended as a
// rollout to the scope, whose memory workflow consolidates it in the
// background (package memory, MemoryWorkflow in package workflows). A
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
