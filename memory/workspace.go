package memory

// What of a scope reaches a workspace or a plain agent's tools, and what
// comes back: plain Go, so the rules are tested without a sandbox.

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Bounds of what a workspace gets of a scope.
const (
	// MaxWorkspaceBytes bounds the bytes of memory files one workspace
	// gets; files past it (the oldest rollout summaries last) are left out.
	MaxWorkspaceBytes = 1 << 20
	// MaxWorkspaceFiles bounds the memory files one workspace gets.
	MaxWorkspaceFiles = 256
	// MaxSkillIndexBytes bounds the skill list that goes into instructions.
	MaxSkillIndexBytes = 4 << 10
	// MaxSearchBytes bounds a memory_search answer.
	MaxSearchBytes = 16 << 10
)

// DirPattern is what an agent's memory directory (agents.MemoryConfig.Dir)
// looks like: one lower-case path element.
var DirPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,59}$`)

// CheckDir reports whether dir can name an agent's memory directory in a
// workspace: empty (memories/ itself) or one element matching DirPattern
// that is not one of the scope's own folders.
func CheckDir(dir string) error {
	if dir == "" {
		return nil
	}
	if !DirPattern.MatchString(dir) {
		return fmt.Errorf("%w: memory dir %q must match %s", ErrBadName, dir, DirPattern)
	}
	switch dir {
	case "skills", "raw_memories", "rollout_summaries":
		return fmt.Errorf("%w: memory dir %q is a folder of the scope's own", ErrBadName, dir)
	}
	return nil
}

// WorkspacePath maps a scope's path (memories/...) to where it lands in a
// workspace for an agent whose memory directory is dir:
// memories/<dir>/... (memories/... when dir is empty). The blob layout
// stays memory/<scope>/memories/...; only the workspace differs.
func WorkspacePath(dir, path string) string {
	if dir == "" {
		return path
	}
	return MemoryDir + dir + "/" + strings.TrimPrefix(path, MemoryDir)
}

// Materialised reports whether a scope's file at path goes into the
// workspaces of the agents that read the scope: the summary, the
// handbook, the rollout summaries and the skills. Raw memories, the
// selection and the rollouts stay in the store: they are consolidation's
// working files, not lessons.
func Materialised(path string) bool {
	switch {
	case path == SummaryPath, path == HandbookPath:
		return true
	case strings.HasPrefix(path, RolloutSummariesDir):
		return strings.HasSuffix(path, ".md") && !strings.Contains(strings.TrimPrefix(path, RolloutSummariesDir), "/")
	case strings.HasPrefix(path, SkillsDir):
		name, rest, ok := strings.Cut(strings.TrimPrefix(path, SkillsDir), "/")
		return ok && SkillNamePattern.MatchString(name) && rest != "" && !strings.Contains(rest, "..")
	}
	return false
}

// LiveUpdatable reports whether an agent may rewrite a scope's file at
// path from its workspace (memory written back at the end of its turn):
// the handbook and the summary only.
func LiveUpdatable(path string) bool { return path == HandbookPath || path == SummaryPath }

// MaxBytes is the bound of a live-updatable file at path.
func MaxBytes(path string) int {
	if path == SummaryPath {
		return MaxSummaryBytes
	}
	return MaxHandbookBytes
}

// CheckLiveUpdate reports whether data can replace the live-updatable
// file at path: bounded and UTF-8 text.
func CheckLiveUpdate(path string, data []byte) error {
	if !LiveUpdatable(path) {
		return fmt.Errorf("memory: %s is not updated from a workspace", path)
	}
	if len(data) > MaxBytes(path) {
		return fmt.Errorf("memory: %s is %d bytes, over its bound of %d", path, len(data), MaxBytes(path))
	}
	if !utf8.Valid(data) {
		return fmt.Errorf("memory: %s is not UTF-8 text", path)
	}
	return nil
}

// Hash is the content hash by which write-back tells a file changed.
func Hash(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// SkillInfo is a memory skill as instructions list it.
type SkillInfo struct {
	Name        string
	Description string
}

// ParseSkillInfo reads the name and description of a SKILL.md's YAML
// frontmatter (simple `key: value` lines between `---` lines). A missing
// name is the folder's; a missing description is empty.
func ParseSkillInfo(folder string, data []byte) SkillInfo {
	info := SkillInfo{Name: folder}
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for i := 0; sc.Scan(); i++ {
		line := strings.TrimSpace(sc.Text())
		if i == 0 {
			if line != "---" {
				return info
			}
			continue
		}
		if line == "---" {
			break
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		v = strings.Trim(strings.TrimSpace(v), `"'`)
		switch strings.TrimSpace(k) {
		case "name":
			if SkillNamePattern.MatchString(v) {
				info.Name = v
			}
		case "description":
			info.Description = Bound(v, 300)
		}
	}
	return info
}

// SkillIndex is the list of skills that goes into instructions, each with
// where it is (at(name) gives the path to show), bounded by
// MaxSkillIndexBytes.
func SkillIndex(skills []SkillInfo, at func(name string) string) string {
	if len(skills) == 0 {
		return ""
	}
	var b strings.Builder
	for _, s := range skills {
		line := fmt.Sprintf("- %s (%s): %s\n", s.Name, at(s.Name), s.Description)
		if b.Len()+len(line) > MaxSkillIndexBytes {
			b.WriteString("- ... (more skills in " + SkillsDir + ")\n")
			break
		}
		b.WriteString(line)
	}
	return b.String()
}

// Search returns the lines of text that contain every word of query
// (case-insensitive), each with its line number, bounded by max bytes;
// like grep -n over the handbook.
func Search(text, query string, max int) string {
	words := strings.Fields(strings.ToLower(query))
	if len(words) == 0 {
		return ""
	}
	var b strings.Builder
	for i, line := range strings.Split(text, "\n") {
		low := strings.ToLower(line)
		all := true
		for _, w := range words {
			if !strings.Contains(low, w) {
				all = false
				break
			}
		}
		if !all {
			continue
		}
		hit := fmt.Sprintf("%d: %s\n", i+1, line)
		if max > 0 && b.Len()+len(hit) > max {
			b.WriteString("... (more matches; narrow the query)\n")
			break
		}
		b.WriteString(hit)
	}
	return b.String()
}

// ForkScope is the scope a fork of a session uses in place of scope: its
// own, derived from scope and the fork's id, so the fork's memory is
// independent of its source's once the fork has copied it.
func ForkScope(scope, forkID string) string {
	sum := sha256.Sum256([]byte(scope + "\x00" + forkID))
	if len(scope) > 80 {
		scope = scope[:80]
	}
	scope = strings.TrimRight(scope, ".")
	return fmt.Sprintf("%s.fork-%x", scope, sum[:6])
}
