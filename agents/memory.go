package agents

// MemoryConfig opts an agent into memory generation: each run that the
// agent starts at or ends, and each session turn it answers, is appended
// as a rollout to the memory scope named, whose memory workflow
// consolidates it in the background (package memory, MemoryWorkflow in
// package workflows). A user's turn never waits for consolidation.
//
// Reading the memory (its summary in the instructions) is the memory
// capability's job, not this setting's.
type MemoryConfig struct {
	// Scope names the memory scope: the agents, sessions and runs that
	// share lessons share a scope. It must match
	// ^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$ (checked when a worker loads the
	// graph).
	Scope string
}
