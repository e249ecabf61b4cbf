package memory

// What an agent with memory gets (issue 11, the memory capability), all
// in activities: its scope's summary and memory skills in its
// instructions, and, for a plain agent (no sandbox), the memory_search and
// memory_read tools; and what a graph's agents must have for it, which
// workflows.NewRunner checks.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"go.temporal.io/sdk/temporal"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/blob"
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

// Instructions are what an agent that reads its memory gets in its
// instructions, in the run rc: the scope's summary, bounded, where the
// handbook is (in the workspace of a sandbox agent, through the memory
// tools for a plain one), and the memory skills phase 2 found (name and
// description, bounded), unless its skills capability offers them
// (learnt.go); nothing while the scope has neither. The model activity
// appends them to the agent's instructions.
func (c *Consolidation) Instructions(ctx context.Context, agent *agents.Agent, rc agents.RunContext) (string, error) {
	scope := memoryScopeOf(agent, rc)
	data, err := readMemoryFile(ctx, c.Store, Key(scope, SummaryPath))
	if err != nil && !errors.Is(err, blob.ErrNotFound) {
		return "", err
	}
	summary := strings.TrimSpace(Bound(string(data), MaxSummaryBytes))
	var skills []SkillInfo
	if !offersMemorySkills(agent) {
		if skills, err = c.memorySkills(ctx, scope); err != nil {
			return "", err
		}
	}
	if summary == "" && len(skills) == 0 {
		return "", nil
	}
	sandboxed := agent.Sandbox != nil
	dir := agent.Memory.WorkspaceDir()
	var b strings.Builder
	b.WriteString("\n\n## Memory\n")
	if summary != "" {
		where := "search " + dir + "MEMORY.md for more (for example with grep -n)"
		if !sandboxed {
			where = "search your handbook with the " + MemorySearchTool + " tool, and read a memory file with " + MemoryReadTool
		}
		b.WriteString("Lessons from earlier work with this user and project (" + dir + "memory_summary.md). " +
			"Follow them unless the user says otherwise; when earlier work looks relevant, " + where + ".\n")
		if sandboxed && agent.Memory.UpdatesLive() {
			b.WriteString("When you find a lesson there stale or wrong, fix it in " + dir + "MEMORY.md or " + dir +
				"memory_summary.md with apply_patch; your fix is kept when your turn ends.\n")
		}
		b.WriteString("\n" + summary + "\n")
	}
	if len(skills) > 0 {
		b.WriteString("\n### Memory skills\nProcedures learnt from earlier work. When a task matches one, read its SKILL.md first and follow it.\n")
		b.WriteString(SkillIndex(skills, func(name string) string {
			if !sandboxed {
				return MemoryReadTool + " " + SkillPath(name)
			}
			return WorkspacePath(agent.Memory.Dir, SkillPath(name))
		}))
	}
	return strings.TrimRight(b.String(), "\n"), nil
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
func (c *Consolidation) memoryTools(agent *agents.Agent) []agents.Tool {
	scopeOf := func(ctx context.Context) string {
		rc, _ := agents.RunContextFrom(ctx)
		return memoryScopeOf(agent, rc)
	}
	search := agents.MustFunctionTool(MemorySearchTool,
		"Search your memory handbook (memories/MEMORY.md) for lessons from earlier work: returns the matching lines with their numbers.",
		func(ctx context.Context, args MemorySearchArgs) (string, error) {
			data, err := readMemoryFile(ctx, c.Store, Key(scopeOf(ctx), HandbookPath))
			if errors.Is(err, blob.ErrNotFound) {
				return "No memory yet.", nil
			}
			if err != nil {
				return "", err
			}
			out := Search(string(data), args.Query, MaxSearchBytes)
			if out == "" {
				return "No line of memories/MEMORY.md matches.", nil
			}
			return out, nil
		})
	read := agents.MustFunctionTool(MemoryReadTool,
		"Read one of your memory files (the handbook, the summary, a rollout summary or a memory skill's SKILL.md).",
		func(ctx context.Context, args MemoryReadArgs) (string, error) {
			p := path.Clean(args.Path)
			if !Materialised(p) {
				return "", fmt.Errorf("%s is not a memory file: read memories/MEMORY.md, memories/memory_summary.md, memories/rollout_summaries/... or memories/skills/<name>/SKILL.md", args.Path)
			}
			data, err := readMemoryFile(ctx, c.Store, Key(scopeOf(ctx), p))
			if errors.Is(err, blob.ErrNotFound) {
				return "", fmt.Errorf("%s does not exist", p)
			}
			if err != nil {
				return "", err
			}
			return Bound(string(data), MaxSearchBytes), nil
		})
	return []agents.Tool{search, read}
}

// memorySkills are the skills phase 2 wrote in scope, as instructions list
// them.
func (c *Consolidation) memorySkills(ctx context.Context, scope string) ([]SkillInfo, error) {
	keys, _, err := c.Store.List(ctx, Key(scope, SkillsDir), 0)
	if err != nil {
		return nil, err
	}
	var out []SkillInfo
	for _, k := range keys {
		p := strings.TrimPrefix(k, Prefix(scope))
		name, rest, _ := strings.Cut(strings.TrimPrefix(p, SkillsDir), "/")
		if rest != "SKILL.md" || !SkillNamePattern.MatchString(name) {
			continue
		}
		data, err := readMemoryFile(ctx, c.Store, k)
		if err != nil {
			if errors.Is(err, blob.ErrNotFound) {
				continue
			}
			return nil, err
		}
		out = append(out, ParseSkillInfo(name, []byte(Bound(string(data), MaxSkillBytes))))
		if len(out) >= MaxSkills*4 {
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

// CheckGraph checks the memory of g's agents: a scope that can name
// files, a known mode, a workspace folder (Dir) that is one element, and
// what reading and live update need of a sandbox agent: a shell
// (exec_command, to search its memory files) and a filesystem
// (apply_patch, to fix them). Its errors name the graph and the agent.
func CheckGraph(g *agents.Graph) error {
	for _, a := range g.Agents() {
		m := a.Memory
		if m == nil {
			continue
		}
		fail := func(format string, args ...any) error {
			return fmt.Errorf("graph %s, agent %s: "+format, append([]any{g.Name(), a.Name}, args...)...)
		}
		if err := CheckScope(m.Scope); err != nil {
			return fail("%w", err)
		}
		if !m.Reads() && !m.Generates() {
			return fail("unknown memory mode %q (read-only, generate-only, or empty for both)", m.Mode)
		}
		if err := CheckDir(m.Dir); err != nil {
			return fail("%w", err)
		}
		if a.Sandbox == nil {
			continue
		}
		has := func(tool string) bool {
			return slices.ContainsFunc(g.ToolSpecs(a.Name), func(t agents.ToolSpec) bool { return t.Name == tool })
		}
		if m.Reads() && !has("exec_command") {
			return fail("memory mode %q reads memory in the sandbox, which needs the shell capability (tool exec_command): add capabilities.Shell(), or use memory mode generate-only", cmp.Or(string(m.Mode), "read-write"))
		}
		if m.UpdatesLive() && !has("apply_patch") {
			return fail("memory mode read-write updates memory live in the sandbox, which needs the filesystem capability (tool apply_patch): add capabilities.Filesystem(), or use memory mode read-only")
		}
	}
	return nil
}

// WithTools gives each plain agent (no sandbox) of g that reads memory the
// memory_search and memory_read tools, which read its scope in c.Store.
func (c *Consolidation) WithTools(g *agents.Graph) (*agents.Graph, error) {
	var all []*agents.Agent
	changed := false
	for _, a := range g.Agents() {
		if a.Sandbox == nil && a.Memory.Reads() {
			cp := *a
			cp.Tools = append(slices.Clip(cp.Tools), c.memoryTools(a)...)
			a, changed = &cp, true
		}
		all = append(all, a)
	}
	if !changed {
		return g, nil
	}
	return agents.NewGraph(g.Name(), g.Entry(), all...)
}
