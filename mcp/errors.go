package mcp

import (
	"errors"
	"fmt"
	"strings"
)

// ErrUnknownTool reports a call of a tool the server's listing does not
// offer: the server has no such tool, or the declaration's Allow and Deny
// lists leave it out.
var ErrUnknownTool = errors.New("unknown MCP tool")

// ErrServerDied reports a server that went away: its stdio process exited
// or its connection broke, before or during a call. It comes wrapped in a
// *ServerError. The call is not retried, since tool calls need not be
// idempotent; the next Tools or Call starts a new session (for a stdio
// server, a new process).
var ErrServerDied = errors.New("MCP server died")

// ErrClosed reports the use of a Pool after Close, or a call that Close
// interrupted.
var ErrClosed = errors.New("MCP pool closed")

// ServerError reports a failure talking to an MCP server. Its message is
// written for a model to read, since it usually ends up as a tool result.
type ServerError struct {
	// Server is the declaration's Name.
	Server string
	// Op is what failed: "connect", "list tools", or "call " followed by
	// the server's name for the tool.
	Op string
	// Err is the cause. It wraps ErrServerDied when the server went away,
	// context.DeadlineExceeded when the call ran out of time, and a
	// *jsonrpc.Error of the SDK when the server answered with a protocol
	// error.
	Err error
}

// Error says what failed in words a model can act on; a death ends with
// the promise of a restart.
func (e *ServerError) Error() string {
	what := e.Op
	switch {
	case e.Op == "connect":
		what = "connecting"
	case e.Op == "list tools":
		what = "listing its tools"
	case strings.HasPrefix(e.Op, "call "):
		what = "the call to " + strings.TrimPrefix(e.Op, "call ")
	}
	if errors.Is(e.Err, ErrServerDied) {
		cause := strings.TrimPrefix(e.Err.Error(), ErrServerDied.Error()+": ")
		return fmt.Sprintf("MCP server %s died during %s: %s; it will be restarted on the next call", e.Server, what, cause)
	}
	return fmt.Sprintf("MCP server %s: %s failed: %v", e.Server, what, e.Err)
}

// Unwrap returns the cause, Err.
func (e *ServerError) Unwrap() error { return e.Err }
