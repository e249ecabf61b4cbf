package agents

import (
	"errors"
	"fmt"
	"regexp"
	"time"
)

// DefaultMCPTimeout bounds one call of an MCP tool when its server sets
// no Timeout.
const DefaultMCPTimeout = 60 * time.Second

// MCPServer declares an MCP server whose tools an agent may call. It is
// plain data: the worker connects to it (package mcp) and the calls run as
// activities on the worker that holds the session. Exactly one of Command
// and URL is set.
//
// Secrets stay on the worker's host: the values of Env and Headers may
// name the worker's environment variables as ${NAME}, expanded when the
// worker connects, so the workflow history holds only the reference and
// no sandbox ever sees the value.
type MCPServer struct {
	// Name identifies the server among the agent's servers; it matches
	// ^[a-zA-Z0-9_-]{1,32}$.
	Name string
	// Command starts a stdio server: the program and its arguments. The
	// worker owns the process and restarts it if it dies.
	Command []string
	// Env is the stdio server's environment on top of a minimal one (PATH,
	// HOME, USER, LANG, TERM, TMPDIR); the worker's other variables are not
	// passed on.
	Env map[string]string
	// Dir is the stdio server's working directory; empty means the
	// worker's.
	Dir string
	// URL is a streamable HTTP server's endpoint.
	URL string
	// Headers are sent with every HTTP request, for example
	// {"Authorization": "Bearer ${GITHUB_TOKEN}"}.
	Headers map[string]string
	// Allow, when not empty, lists the only tools offered to the model, by
	// the server's names for them; Deny lists tools never offered. Deny
	// wins.
	Allow []string
	Deny  []string
	// Prefix is prepended to the server's tool names as the model sees
	// them, to keep two servers' tools (or an agent's own) apart.
	// Characters a tool name may not hold are replaced with '_'.
	Prefix string
	// Timeout bounds one tool call; 0 means DefaultMCPTimeout.
	Timeout time.Duration
	// NonStrict sends the tools' schemas to the model as the server gives
	// them, without strict mode. By default a schema is made OpenAI-strict
	// where it can be (optional properties become nullable and the nulls
	// are removed again before the call) and sent non-strict where it
	// cannot.
	NonStrict bool
	// RequireApproval, when set, names the tools (by the server's names)
	// whose calls wait for a human's decision, as under an Approval that
	// makes every call wait (see Agent.Approvals, which can also decide
	// per call).
	RequireApproval func(tool string) bool
}

var mcpServerName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,32}$`)

// ErrInvalidMCPServer reports an MCPServer declaration that cannot work.
var ErrInvalidMCPServer = errors.New("agents: invalid MCP server")

// Validate checks the declaration.
func (s *MCPServer) Validate() error {
	if s == nil {
		return fmt.Errorf("%w: nil", ErrInvalidMCPServer)
	}
	if !mcpServerName.MatchString(s.Name) {
		return fmt.Errorf("%w: name %q must match %s", ErrInvalidMCPServer, s.Name, mcpServerName)
	}
	switch {
	case len(s.Command) > 0 && s.URL != "":
		return fmt.Errorf("%w: %s sets both Command and URL", ErrInvalidMCPServer, s.Name)
	case len(s.Command) == 0 && s.URL == "":
		return fmt.Errorf("%w: %s sets neither Command nor URL", ErrInvalidMCPServer, s.Name)
	case len(s.Command) > 0 && s.Command[0] == "":
		return fmt.Errorf("%w: %s: empty command", ErrInvalidMCPServer, s.Name)
	case s.Timeout < 0:
		return fmt.Errorf("%w: %s: negative timeout", ErrInvalidMCPServer, s.Name)
	}
	return nil
}

// CallTimeout is Timeout with its default applied.
func (s *MCPServer) CallTimeout() time.Duration {
	if s.Timeout > 0 {
		return s.Timeout
	}
	return DefaultMCPTimeout
}

// Offers reports whether the server's tool named tool passes the Allow
// and Deny lists.
func (s *MCPServer) Offers(tool string) bool {
	for _, d := range s.Deny {
		if d == tool {
			return false
		}
	}
	if len(s.Allow) == 0 {
		return true
	}
	for _, a := range s.Allow {
		if a == tool {
			return true
		}
	}
	return false
}

// NeedsApproval reports whether a call of the server's tool needs a
// human's approval.
func (s *MCPServer) NeedsApproval(tool string) bool {
	return s.RequireApproval != nil && s.RequireApproval(tool)
}
