package agents

import (
	"context"

	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// Sandbox makes an agent a sandbox agent: its child workflow provisions a
// workspace from Manifest before its first sandbox tool call and stops it
// when the agent ends.
type Sandbox struct {
	// Manifest is the fresh workspace; capabilities may add entries.
	Manifest sandbox.Manifest `json:"manifest"`
	// Options are isolation and resource settings (network off by default).
	Options sandbox.Options `json:"options"`
	// Backend names the sandbox client ("local", "bwrap", "docker"); empty
	// means the worker's default.
	Backend string `json:"backend,omitempty"`
	// ManifestFor, when set, adds entries and environment computed for the
	// run (for example a git_repo entry for the repository named in the
	// run's variables). It runs in the provisioning activity.
	ManifestFor func(ctx context.Context, rc RunContext) (sandbox.Manifest, error) `json:"-"`
}

// Capability is sandbox-native behaviour attached to an agent: tools bound
// to its session, instructions, and manifest additions. The capabilities
// package holds Shell, Filesystem and Compaction; capabilities/skills
// holds Skills.
type Capability interface {
	// Name identifies the capability.
	Name() string
	// Instructions are appended to the agent's instructions; may be empty.
	Instructions() string
	// Tools are added to the agent's tools. Tools that act on the sandbox
	// are built with InSandbox and find their session with
	// sandbox.SessionFrom.
	Tools() []Tool
	// Manifest holds entries and environment added to the agent's manifest.
	Manifest() sandbox.Manifest
}

// A DynamicCapability is a Capability whose instructions are computed for
// each model call rather than fixed when the graph is built: the model
// activity calls DynamicInstructions, with the run's RunContext, in place
// of Instructions, so that they can say what changed since the last turn
// (the skills an agent learnt from earlier work, say). It runs in the
// model activity, never in workflow code; an error fails the model call,
// which is retried as the activity's retry policy says.
type DynamicCapability interface {
	Capability
	DynamicInstructions(ctx context.Context, rc RunContext) (string, error)
}

// Compactor is a Capability that trims an agent's context before each
// model call. Trim must keep the turn structure valid: never a function
// call output without its call.
type Compactor interface {
	Trim(items []Item) []Item
}

// A WindowCompactor is a Compactor whose trim keeps some items of the
// head of the conversation (the task), a note, and every item from one on
// (the tail). Window trims as Trim does and also says what it kept: out is
// the head items (items[i] for each i of head, in order), then the note (a
// user message), then items[from:] with PairCalls applied; or trimmed is
// false and out is items as they were.
//
// The runtime remembers the window in the run's state and, on later
// turns, loads only the head, the note and the items from the tail on
// (PairCalls applied), then trims that again. A turn's cost then stays
// the same however long the conversation has grown, and the model sees a
// context that grows from the trimmed one until the next trim, which also
// keeps the prefix that providers cache.
type WindowCompactor interface {
	Compactor
	Window(items []Item) (out []Item, head []int, from int, trimmed bool)
}

// InSandbox marks a function tool as acting on the agent's sandbox: it
// runs as an activity on the host that holds the sandbox, with the session
// in its context.
func InSandbox() ToolOption {
	return func(t *FunctionTool) { t.sandbox, t.activity = true, true }
}

// NeedsSandbox reports whether the tool acts on the agent's sandbox.
func (t *FunctionTool) NeedsSandbox() bool { return t.sandbox }
