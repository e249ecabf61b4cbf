package capabilities

// A repository's own guidance for agents: the AGENTS.md at the root of a
// workspace. The worker reads it through the sandbox session as the
// workspace is provisioned (an activity) and the model activity adds it
// to the instructions; no workflow code reads it.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// AgentsFile is the file at the root of a workspace that holds its
// repository's own guidance for agents.
const AgentsFile = "AGENTS.md"

// MaxGuidanceBytes bounds the part of AGENTS.md that goes into the
// instructions; a longer file is cut there, with a note that says so.
const MaxGuidanceBytes = 32 << 10

// ReadGuidance reads the AGENTS.md at the root of s's workspace, cut to
// MaxGuidanceBytes with a note. A workspace without one (or with
// something at that path that is not a regular file inside the
// workspace: a directory, a FIFO, a symlink that leads out) has no
// guidance: ReadGuidance returns "" and no error. Other errors (the
// sandbox is gone) are returned.
func ReadGuidance(ctx context.Context, s sandbox.Session) (string, error) {
	data, err := s.ReadFile(ctx, AgentsFile)
	switch {
	case err == nil:
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, sandbox.ErrNotRegular), errors.Is(err, sandbox.ErrPathEscape):
		return "", nil
	case errors.Is(err, sandbox.ErrTooLarge):
		return TooLargeGuidance(), nil
	default:
		return "", fmt.Errorf("capabilities: read %s: %w", AgentsFile, err)
	}
	return BoundGuidance(string(data)), nil
}

// TooLargeGuidance is the guidance of a workspace whose AGENTS.md is over
// sandbox.MaxReadBytes: a note saying so.
func TooLargeGuidance() string {
	return fmt.Sprintf("[%s is too large to read here (over %d bytes). Read it in parts in the workspace.]", AgentsFile, sandbox.MaxReadBytes)
}

// BoundGuidance cuts the text of an AGENTS.md to MaxGuidanceBytes (never
// inside a character) and says so.
func BoundGuidance(text string) string {
	if len(text) <= MaxGuidanceBytes {
		return text
	}
	return cutUTF8(text, MaxGuidanceBytes) + fmt.Sprintf("\n\n[%s has %d bytes; only the first %d are shown here. Read the rest in the workspace.]", AgentsFile, len(text), MaxGuidanceBytes)
}

// GuidanceInstructions renders a workspace's guidance (as ReadGuidance
// returns it) for an agent's instructions; "" for none.
func GuidanceInstructions(guidance string) string {
	if guidance == "" {
		return ""
	}
	return "## Repository guidance (" + AgentsFile + ")\n" +
		"The workspace's " + AgentsFile + " holds its repository's own guidance for agents that work in it. Follow it where it does not conflict with the instructions above.\n\n" +
		guidance
}
