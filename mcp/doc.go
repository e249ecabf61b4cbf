// Package mcp is the worker's client for the MCP servers agents declare
// (agents.MCPServer): it lists their tools for the model and calls them.
// The Temporal activities in package workflows call it; it imports no
// Temporal package.
//
// The contract a caller relies on:
//
//  1. A Pool holds one session per server declaration, shared by the agents
//     that declare the same server (same Name, Command, Env, Dir, URL and
//     Headers). The first Tools or Call starts the session: for a stdio
//     server a process in its own process group, for an HTTP server a
//     streamable HTTP session. Concurrent first uses start one session.
//  2. Secrets stay on the worker. A stdio server's environment is exactly
//     PATH, HOME, USER, LANG, TERM and TMPDIR (when set) copied from the
//     worker's environment (PoolConfig.LookupEnv), plus the declaration's
//     Env; Env and Headers values expand ${NAME} from the same environment
//     when the session starts, and a reference to an unset variable is an
//     error naming it. Headers go only to the server's origin (scheme, host
//     and port): a redirect to another origin is refused.
//  3. Tools returns the tools the declaration offers (Allow, Deny), under
//     model-facing names (Prefix, sanitized), with schemas made
//     OpenAI-strict where they can be (ConvertSchema) unless NonStrict.
//     The listing is cached and fetched again after the server says its
//     tools changed or its session starts again; Listing.Version tells the
//     caller.
//  4. Call undoes the strict conversion's nulls, calls the tool within
//     the declaration's CallTimeout and the caller's context (cancelling
//     either cancels the request on the server), and turns the answer into
//     text, structured content and images. A tool's own error is a Result
//     with IsError, for the model to read.
//  5. When a server dies or its connection breaks, the call fails with
//     ErrServerDied and is not retried (tool calls need not be
//     idempotent); the next Tools or Call starts a new session, for a stdio
//     server a new process.
//  6. Close stops every session, and every stdio server with its process
//     group, before it returns: those of sessions still starting and of
//     sessions that broke and are still stopping too.
package mcp
