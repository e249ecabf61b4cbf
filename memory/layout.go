package memory

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Paths of a scope's files, relative to the scope (see [Prefix]).
const (
	// MemoryDir holds what consolidation writes; it is what workspaces get.
	MemoryDir = "memories/"
	// SummaryPath is the compact summary that agents read first.
	SummaryPath = "memories/memory_summary.md"
	// HandbookPath is the grep-friendly handbook (MEMORY.md).
	HandbookPath = "memories/MEMORY.md"
	// RawMemoriesDir holds phase 1's raw memories, one per rollout.
	RawMemoriesDir = "memories/raw_memories/"
	// RolloutSummariesDir holds phase 1's rollout summaries.
	RolloutSummariesDir = "memories/rollout_summaries/"
	// SelectionPath is phase 2's record of the raw memories it used.
	SelectionPath = "memories/phase_two_selection.json"
	// SkillsDir holds the skills phase 2 found, one folder each.
	SkillsDir = "memories/skills/"
	// SessionsDir holds the rollouts, one JSONL file each.
	SessionsDir = "sessions/"
)

// Bounds of what a scope holds.
const (
	// MaxSummaryBytes bounds memory_summary.md: it goes into instructions.
	MaxSummaryBytes = 8 << 10
	// MaxHandbookBytes bounds MEMORY.md.
	MaxHandbookBytes = 256 << 10
	// MaxRawMemoryBytes bounds one raw memory.
	MaxRawMemoryBytes = 16 << 10
	// MaxRolloutSummaryBytes bounds one rollout summary.
	MaxRolloutSummaryBytes = 16 << 10
	// MaxSkillBytes bounds one SKILL.md.
	MaxSkillBytes = 32 << 10
	// MaxSkills bounds the skills one phase 2 writes.
	MaxSkills = 16
	// MaxSlugLen bounds a rollout slug.
	MaxSlugLen = 60
)

// Patterns of the names that become parts of a file's path.
var (
	// ScopePattern is what a scope's name looks like.
	ScopePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)
	// SlugPattern is what a rollout slug looks like: lower-case words
	// joined by hyphens, at most MaxSlugLen bytes.
	SlugPattern = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	// SkillNamePattern is what a skill's name looks like.
	SkillNamePattern = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	// rolloutIDPattern is what a rollout id looks like.
	rolloutIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
)

// ErrBadName reports a scope or rollout id that cannot name files.
var ErrBadName = errors.New("memory: bad name")

// CheckScope reports whether scope can name a memory scope.
func CheckScope(scope string) error {
	if !ScopePattern.MatchString(scope) || strings.Contains(scope, "..") {
		return fmt.Errorf("%w: scope %q must match %s", ErrBadName, scope, ScopePattern)
	}
	return nil
}

// CheckRolloutID reports whether id can name a rollout's files.
func CheckRolloutID(id string) error {
	if !rolloutIDPattern.MatchString(id) || strings.Contains(id, "..") {
		return fmt.Errorf("%w: rollout id %q must match %s", ErrBadName, id, rolloutIDPattern)
	}
	return nil
}

// RolloutID is the rollout id of a session or run whose workflow id is
// workflowID: the id itself when it can name files, else the id with every
// other byte replaced by '_' followed by a hash of it, so two workflow ids
// never share a rollout.
func RolloutID(workflowID string) string {
	if CheckRolloutID(workflowID) == nil {
		return workflowID
	}
	var b strings.Builder
	for _, r := range workflowID {
		switch {
		case r < 0x80 && (r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'):
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= 100 {
			break
		}
	}
	clean := strings.ReplaceAll(strings.TrimLeft(b.String(), "._-"), "..", "__")
	sum := sha256.Sum256([]byte(workflowID))
	if clean == "" {
		return fmt.Sprintf("r-%x", sum[:6])
	}
	return fmt.Sprintf("%s-%x", clean, sum[:6])
}

// Prefix is the blob-key prefix of scope's files: memory/<scope>/.
func Prefix(scope string) string { return "memory/" + scope + "/" }

// Key is the blob key of the file at path (relative, as the constants
// above) of scope.
func Key(scope, path string) string { return Prefix(scope) + path }

// RolloutPath is the path of a rollout's JSONL file.
func RolloutPath(id string) string { return SessionsDir + id + ".jsonl" }

// RawMemoryPath is the path of a rollout's raw memory.
func RawMemoryPath(id string) string { return RawMemoriesDir + id + ".md" }

// RolloutSummaryPath is the path of a rollout's summary with its slug.
func RolloutSummaryPath(id, slug string) string { return RolloutSummariesDir + id + "_" + slug + ".md" }

// SkillPath is the path of a skill's SKILL.md.
func SkillPath(name string) string { return SkillsDir + name + "/SKILL.md" }

// IsRolloutSummaryOf reports whether path (a rollout summary's) belongs to
// rollout id, whatever its slug.
func IsRolloutSummaryOf(path, id string) bool {
	rest, ok := strings.CutPrefix(path, RolloutSummariesDir+id+"_")
	return ok && strings.HasSuffix(rest, ".md") && !strings.Contains(rest, "/") && SlugPattern.MatchString(strings.TrimSuffix(rest, ".md"))
}
