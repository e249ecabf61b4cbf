package capabilities

import (
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// capability is a Capability made of fixed parts.
type capability struct {
	name         string
	instructions string
	tools        []agents.Tool
	manifest     sandbox.Manifest
}

func (c *capability) Name() string               { return c.name }
func (c *capability) Instructions() string       { return c.instructions }
func (c *capability) Tools() []agents.Tool       { return c.tools }
func (c *capability) Manifest() sandbox.Manifest { return c.manifest }

// Default returns a sandbox agent's default capabilities: Shell,
// Filesystem and Compaction with the default CompactionConfig. An agent
// that lists capabilities of its own replaces this list, so it should
// include the defaults it still wants.
func Default() []agents.Capability {
	return []agents.Capability{Shell(), Filesystem(), Compaction(CompactionConfig{})}
}
