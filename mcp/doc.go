// Package mcp is how agents use the tools of the MCP servers they
// declare (agents.MCPServer): the worker's client for those servers (a
// Pool of sessions, which lists their tools for the model and calls
// them), the Temporal activities that list and call them on the process
// holding the sessions (Activities), and the agent workflow's side of
// them (Tools).
//
// An agent workflow's MCP tools go through these steps:
//
//  1. Before each turn, Tools.Refresh lists the agent's tools with the
//     listing activity (ToolsActivityName): the first time, and after the
//     process holding the sessions was lost, on any worker; otherwise on
//     that process, whose Pool answers from its cache unless a server said
//     tools/list_changed or restarted, so the model sees a change at its
//     next turn. The process that lists opens the sessions and names its
//     own queue in the catalog (runtime.MCPCatalog, which travels in the
//     agent's state, by reference to its tool specs: content-addressed in
//     the blob store, under mcp/tools/, and cached by each worker).
//  2. The model activity offers the catalog's specs (Activities.ToolSpecs)
//     beside the agent's own tools. (A listing whose tool is named like
//     one of the agent's own fails, naming the fix: a Prefix on the
//     server.)
//  3. Tools.Call runs a call with the call activity (CallActivityName) on
//     the catalog's queue, so it reaches the process that holds the
//     sessions (and owns the stdio server processes), not just its host.
//     The request's _meta holds the call's idempotency key
//     (MetaIdempotencyKey, agents.IdempotencyKey), for servers that
//     make a repeated call take effect once. A call is never retried (a
//     tool need not be idempotent): at most once; whatever
//     happens, the model gets a tool output: the answer, the tool's error,
//     or what became of the call when the holding process is gone (the
//     call was not made) or died during it (it may have taken effect).
//     Either marks the process lost, so the next turn lists the tools
//     again elsewhere.
//
// The Pool imports no Temporal package; Activities and Tools do.
// workflows.NewRunner builds the Activities from its Config (MCP, the
// pool; the blob store) and registers them on every worker it starts and
// on a queue of this process of their own (workflows.Runner.StartWorkers).
//
// The contract a caller of the Pool relies on:
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
