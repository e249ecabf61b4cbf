package capabilities

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// ErrNoSession reports a sandbox tool called without a session in its
// context: the tool was not run by the worker's sandbox activity.
var ErrNoSession = errors.New("capabilities: no sandbox session")

// Bounds of exec_command.
const (
	// DefaultExecTimeout bounds a command whose call sets no
	// yield_time_ms.
	DefaultExecTimeout = 60 * time.Second
	// MaxExecTimeout caps yield_time_ms.
	MaxExecTimeout = 10 * time.Minute
	// DefaultMaxOutputTokens bounds the output of a command whose call
	// sets no max_output_tokens.
	DefaultMaxOutputTokens = 10_000
	// MaxOutputTokens caps max_output_tokens.
	MaxOutputTokens = 50_000
	// BytesPerToken is the estimate that turns token budgets into bytes,
	// as the OpenAI Agents SDK estimates it.
	BytesPerToken = 4
)

// execOutputBytes is what exec_command asks the session to keep: well
// above the largest token budget, so that the session's own head-and-tail
// cut only happens to huge outputs and exec_command's cut is the one the
// model sees.
const execOutputBytes = 1 << 20

// IdempotencyKeyEnv is the variable that holds, in an exec_command's
// environment, the call's idempotency key (agents.IdempotencyKey): the same
// when the command runs again after its worker was lost, so a script can
// pass it on to the services it changes.
const IdempotencyKeyEnv = "TROUPE_IDEMPOTENCY_KEY"

// ExecCommandArgs are the arguments of exec_command, named as the OpenAI
// Agents SDK names them.
type ExecCommandArgs struct {
	// Cmd is the shell command, run as `sh -c Cmd`.
	Cmd string `json:"cmd" jsonschema:"description=Shell command to execute (run with sh -c)."`
	// Workdir is the directory to run in, relative to the workspace root
	// (or under /workspace); empty means the root.
	Workdir string `json:"workdir,omitempty" jsonschema:"description=Working directory to run the command in (relative to the workspace root); defaults to the workspace root."`
	// YieldTimeMs bounds the command in milliseconds; zero means
	// DefaultExecTimeout, and it is capped at MaxExecTimeout.
	YieldTimeMs int `json:"yield_time_ms,omitempty" jsonschema:"description=How long to wait for the command to finish in milliseconds (default 60000; max 600000). A command still running then is stopped."`
	// MaxOutputTokens bounds the output returned; zero means
	// DefaultMaxOutputTokens, and it is capped at MaxOutputTokens.
	MaxOutputTokens int `json:"max_output_tokens,omitempty" jsonschema:"description=Maximum number of tokens of output to return (default 10000). Excess output is truncated in the middle."`
}

const shellInstructions = `You have a shell in a sandboxed workspace, /workspace. Run commands with ` + "`exec_command`" + `: each one runs with sh -c in the workspace root (or in workdir, relative to it) and returns its exit code and output. There is no interactive input, and a command still running after yield_time_ms (default 60 seconds) is stopped, so run servers and long jobs in the background with their output sent to a file. Use paths relative to the workspace root. Prefer ` + "`rg`" + ` and ` + "`rg --files`" + ` for searching when they are available, and read large files in parts rather than printing them whole.`

// Shell gives a sandbox agent a shell: the exec_command tool, which runs
// a command in the agent's workspace and returns the OpenAI Agents SDK's
// plain-text result:
//
//	Chunk ID: 3f9a1c
//	Wall time: 0.0123 seconds
//	Process exited with code 0
//	Output:
//	hello
//
// An output longer than max_output_tokens (≈4 bytes a token) is cut in
// the middle; the result then carries an "Original token count: N" line
// before "Output:", and the output reads "Total output lines: L", a blank
// line, the head, "…K tokens truncated…", and the tail. A command that
// outlives yield_time_ms is stopped; its result has no exit-code line and
// its output starts with "Command timed out after S seconds.".
func Shell() agents.Capability {
	tool := agents.MustFunctionTool("exec_command",
		"Runs a shell command in the sandbox workspace and returns its exit code and output.",
		execCommand, agents.InSandbox(), agents.WithTimeout(MaxExecTimeout+time.Minute))
	return &capability{
		name:         "shell",
		instructions: shellInstructions,
		tools:        []agents.Tool{tool},
	}
}

func execCommand(ctx context.Context, args ExecCommandArgs) (string, error) {
	s, ok := sandbox.SessionFrom(ctx)
	if !ok {
		return "", ErrNoSession
	}
	if strings.TrimSpace(args.Cmd) == "" {
		return "", errors.New("exec_command: cmd is empty")
	}
	workdir, err := workspacePath(args.Workdir)
	if err != nil {
		return "", fmt.Errorf("exec_command: workdir: %w", err)
	}
	timeout := DefaultExecTimeout
	if args.YieldTimeMs > 0 {
		timeout = min(time.Duration(args.YieldTimeMs)*time.Millisecond, MaxExecTimeout)
	}
	tokens := DefaultMaxOutputTokens
	if args.MaxOutputTokens > 0 {
		tokens = min(args.MaxOutputTokens, MaxOutputTokens)
	}
	req := sandbox.ExecRequest{
		Cmd:            args.Cmd,
		Workdir:        workdir,
		Timeout:        timeout,
		MaxOutputBytes: execOutputBytes,
	}
	if key := agents.IdempotencyKey(ctx); key != "" {
		req.Env = map[string]string{IdempotencyKeyEnv: key}
	}
	start := time.Now()
	res, err := s.Exec(ctx, req)
	if err != nil {
		return "", fmt.Errorf("exec_command: %w", err)
	}
	return formatExec(chunkID(), time.Since(start), res, timeout, tokens), nil
}

// formatExec renders a finished command as the SDK's exec_command result.
func formatExec(chunk string, wall time.Duration, res sandbox.ExecResult, timeout time.Duration, maxTokens int) string {
	out, origTokens, cut := truncateOutput(res.Output, res.OriginalBytes, res.Truncated, maxTokens)
	var b strings.Builder
	fmt.Fprintf(&b, "Chunk ID: %s\n", chunk)
	fmt.Fprintf(&b, "Wall time: %.4f seconds\n", wall.Seconds())
	if !res.TimedOut {
		fmt.Fprintf(&b, "Process exited with code %d\n", res.ExitCode)
	}
	if cut {
		fmt.Fprintf(&b, "Original token count: %d\n", origTokens)
	}
	b.WriteString("Output:\n")
	if res.TimedOut {
		fmt.Fprintf(&b, "Command timed out after %.3f seconds.", timeout.Seconds())
		if out != "" {
			b.WriteString("\n")
		}
	}
	b.WriteString(out)
	return b.String()
}

// truncateOutput cuts out to maxTokens (at BytesPerToken bytes a token)
// the way the SDK does: a "Total output lines" header, the head, a
// "…N tokens truncated…" marker, and the tail, all within the budget.
// sessionCut reports that the session already cut the middle of an
// output of originalBytes; the line count is then unknown and left out.
func truncateOutput(out string, originalBytes int, sessionCut bool, maxTokens int) (text string, originalTokens int, truncated bool) {
	budget := max(maxTokens, 0) * BytesPerToken
	if !sessionCut && len(out) <= budget {
		return out, 0, false
	}
	total := max(originalBytes, len(out))
	originalTokens = tokensFor(total)
	if len(out) <= budget { // cut by the session only, and with its marker
		return out, originalTokens, true
	}
	if budget == 0 {
		return "", originalTokens, true
	}
	prefix := ""
	if !sessionCut {
		prefix = fmt.Sprintf("Total output lines: %d\n\n", countLines(out))
	}
	marker := fmt.Sprintf("…%d tokens truncated…", originalTokens)
	if len(prefix)+len(marker) > budget {
		prefix = ""
	}
	room := budget - len(prefix) - len(marker)
	if room < 0 {
		return cutUTF8(marker, budget), originalTokens, true
	}
	head := cutUTF8(out, room/2)
	tail := tailUTF8(out, room-room/2)
	marker = fmt.Sprintf("…%d tokens truncated…", tokensFor(total-len(head)-len(tail)))
	return prefix + head + marker + tail, originalTokens, true
}

// tokensFor estimates the tokens of n bytes, rounding up.
func tokensFor(n int) int { return (max(n, 0) + BytesPerToken - 1) / BytesPerToken }

// countLines counts lines as Python's str.splitlines does for "\n".
func countLines(s string) int {
	n := strings.Count(s, "\n")
	if s != "" && !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}

// cutUTF8 returns the longest prefix of s of at most n bytes that does
// not split a character.
func cutUTF8(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// tailUTF8 returns the longest suffix of s of at most n bytes that does
// not split a character.
func tailUTF8(s string, n int) string {
	if n >= len(s) {
		return s
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}

// chunkID is the short random id the SDK puts at the top of each result.
func chunkID() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
