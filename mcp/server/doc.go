// Package server offers a Troupe graph's exposed agents (agents.Agent.Expose)
// as tools of a Model Context Protocol server, so any MCP client — an IDE,
// a chat app, another agent framework — can call them. Every call of an
// agent tool is a durable Troupe run: an OrchestratorWorkflow started
// through the Temporal client, like `troupe run` starts one; every agent
// tool has a session tool too, for a conversation (see Session tools).
// `troupe mcp serve` is this package behind a command line.
//
// The contract a client relies on:
//
//  1. Each exposed agent is an agent tool named by
//     agents.Graph.ExposedName, with the exposure's input schema (optional
//     properties need not be sent) and an output schema from the agent's
//     output type. An agent without an output type answers {"output":
//     "<text>"}. A result carries the output as structuredContent and as
//     pretty JSON text, and the run's workflow id in _meta["troupe/run_id"].
//  2. A call starts its run under a workflow id derived from the request
//     (see below), with Temporal's USE_EXISTING conflict policy and
//     REJECT_DUPLICATE reuse policy: a retried call joins the run the first
//     attempt started, or gets its result when that run has finished. It
//     never starts a second run.
//  3. When the call carries a progress token, the run's events — of the
//     whole tree of workflows: agents, tool calls, agents-as-tools,
//     handoffs — come as notifications/progress with increasing progress
//     and a message each. The first says "run <id> started" and carries
//     the id in _meta["troupe/run_id"], so a client knows the run before
//     the result.
//  4. A run that fails, is cancelled or times out, and a call whose
//     arguments do not match the input schema, answer isError: true with
//     the reason (for a failed run, Troupe's error type such as
//     troupe.MaxTurnsExceeded, also in _meta["troupe/error_type"]); they
//     are not protocol errors.
//  5. The client's notifications/cancelled for a call cancels its run
//     (the workflows stop their sandboxes on the way out). A dropped
//     connection, a closed session or a server shutdown does not: the run
//     goes on durably, and troupe_run_status and troupe_run_result read it
//     by id from any later session.
//  6. A call whose run waits for a human's decision asks the client
//     (elicitation), or answers with the calls that wait, which
//     troupe_run_approve decides (see Approvals).
//
// # Workflow ids
//
// A call's workflow id is "mcp-<graph>-<32 hex digits>", the digits a
// SHA-256 of the tool, the run it asks for (input and variables, so the
// arguments in canonical form) and the scope of the request:
//
//   - the idempotency key in the request's _meta["troupe/idempotency_key"]
//     (a string of 1 to 256 bytes), when the client sends one: the same
//     key, tool and arguments are the same run across sessions and
//     reconnections;
//   - otherwise the session id and the JSON-RPC request id, when the
//     session has an id (streamable HTTP in stateful mode, and stdio, whose
//     connection gets a random one): a request sent again in its session
//     is the same run;
//   - otherwise (stateless HTTP, where request ids of different clients
//     collide) nothing: each call is a fresh run.
//
// The id is derived from the variables as the arguments set them, before
// Config.PrepareVars (when set) readies them for the run: a retry derives
// the same id, whatever the hook makes of them.
//
// The SDK does not tell a tool handler its JSON-RPC request id, so the
// transports this package builds (HTTPHandler, Serve) copy it into the
// call's _meta["troupe/jsonrpc_id"] as they read the request, overwriting
// whatever the client put there, as a string: "n:" and a number's text,
// "s:" and a string (so ids above 2^53 stay apart). They stamp a
// notifications/cancelled with the id it cancels the same way.
//
// # Cancellation and disconnection
//
// In go-sdk, both a client's notifications/cancelled and a broken
// connection end a handler's context, and a closed stream of a stateful
// HTTP session does not end it at all. So the context says nothing about
// intent. The server therefore watches notifications/cancelled itself, with
// a receiving middleware that looks the cancelled request up by session and
// request id among the calls in flight and cancels that call's workflow.
// A cancellation may be handled before the handler of its request begins:
// it is kept for a minute, and that handler then answers without starting
// a run. (The transports pass go-sdk a cancellation's requestId only for a
// request go-sdk holds; otherwise go-sdk's own cancelling would race with
// the request's arrival, and might answer it with a bare protocol error.)
// Nothing else cancels a run: when a handler's context ends for another
// reason, or the session is deleted (HTTP DELETE), or the server shuts
// down (Close), the handler stops waiting and the run goes on. In stateless
// HTTP mode a cancellation arrives on a request of its own, with no session
// to find the call by, and is ignored.
//
// # Run tools
//
// Two more tools read runs by id, from any session: troupe_run_status
// (status, agent, recent events) and troupe_run_result (the call's result
// once the run has finished, waiting up to wait_seconds, else the status);
// a third, troupe_run_approve, decides a call that waits (see Approvals).
// They answer only for runs that the agent tools of a server like this one
// start: ids "mcp-<graph>-<32 hex digits>" of a graph served, at one of
// its exposed agents. Any other id — a run of `troupe run`, of a graph or
// agent not served, an agent's own workflow — gets "no run with id X", as
// an unknown id does: the id of a run is all a client needs to read it, so
// the run tools reveal nothing the agent tools could not have started.
//
// # Approvals
//
// A call of a served run's agents (or of a session turn's) may wait for a
// human's decision (agents.Approval; see workflows and its Approvals).
// While a tool call waits on the run or turn, the server follows the
// approval_requested events of its tree and reads the calls that wait
// from the root (client.Client.Approvals); then, one call at a time:
//
//  1. A client that declared the elicitation capability (form mode), on
//     a session that can carry a request to it (stdio, stateful HTTP),
//     gets an elicitation/create whose message names the agent, the tool
//     and the arguments, and whose form is {approve: boolean, message?:
//     string, remember?: boolean}. Accepting it decides as filled in
//     (remember: runtime.RememberTool); declining or dismissing it rejects
//     the call, with a message to the agent that the MCP client's user
//     declined (or dismissed) it. A call decided meanwhile elsewhere
//     withdraws its question (the elicitation's context ends). Several
//     calls are asked about one after the other, for as long as the run
//     lasts.
//  2. A client on protocol 2026-07-28 or later may not be sent requests
//     while it waits on one (SEP-2322): the tool call answers with the
//     same forms as input requests, one per call that waits, and a
//     requestState that names the run (or the session and its turn). The
//     client calls again with the answers; the server checks the state as
//     it checks a run id a client gives (see Run tools), takes the answers
//     as decisions, and waits on that run again, starting nothing new.
//  3. Otherwise — or when an elicitation or a decision fails — the tool
//     call stops waiting, and the run goes on waiting for the decisions.
//     The answer has _meta["troupe/status"] StatusWaitingForApproval,
//     the calls that wait in _meta["troupe/approvals"] ([{id, agent,
//     tool, arguments, since, deadline?, on_timeout?}]) and text that
//     lists them and says how to decide: troupe_run_approve {run_id or
//     session_id, call, approve, message?, remember?} takes a decision,
//     then waits as the agent or session tool did, approvals and all, and
//     answers with the run's result (as the agent tool does, with
//     _meta["troupe/status"]) or the turn's, or with the calls that wait
//     next. An agent or session tool answers this with isError: true and
//     no structuredContent, since MCP holds every other result of a tool
//     to its outputSchema, the agent's (the TypeScript SDK client rejects
//     one that is not); troupe_run_approve declares no output schema and
//     gives the same document as structuredContent.
//
// troupe_run_status lists the calls that wait under "approvals";
// troupe_run_result, which only reads, answers with them (as
// troupe_run_approve would) instead of waiting out wait_seconds.
//
// # Session tools
//
// Each agent tool X has a session tool X_session, which holds a
// conversation with X's agent in a durable session (a SessionWorkflow, see
// package workflows): the agent that ended a turn answers the next, with
// the conversation so far, and the session waits between messages at no
// cost, for as long as it is kept.
//
//  1. Its input is {"message": text, "session_id"?: id}. Without
//     session_id, the call creates a session of X's graph starting at X's
//     agent, through the session manager of the server's task queue
//     (client.CreateSession), named "X: <the message's start>"; when X
//     takes a typed input (agents.ExposeAs), the tool also takes X's
//     arguments as "start", which set the session's run variables. With
//     session_id, the call sends the message to that session, from any
//     connection: a client that lost its connection continues by id.
//  2. The call waits for the message's turn (client.Session.Ask) and
//     answers {"session_id", "turn" (the turn's number, 1 for the first
//     message), "agent" (who answered, and answers next), "reply" (what X
//     would answer: the output type's document, or {"output": text})} as
//     structuredContent and as pretty JSON text, with the session id in
//     _meta["troupe/session_id"]. A turn that failed, an empty message, a
//     stopped or paused session answer isError with the reason.
//  3. With a progress token, the first notification is "session <id>
//     started" (or "continued"), with the id in _meta["troupe/session_id"];
//     then come the turn's events: the session's ("turn 2: message
//     taken", "turn 2 answered by coordinator") and its agents', worded
//     as for runs.
//  4. A session tool continues only the sessions that the session tools
//     of a server like this one create: ids "mcp-session-<graph>-<32 hex
//     digits>" of a served graph, at an exposed agent. Any other id — a
//     session of `troupe sessions`, of a graph not served, an unknown one
//     — gets "no session with id X"; a session of another session tool
//     gets an error that names that tool.
//  5. Cancelling a call (notifications/cancelled), a dropped connection, a
//     deleted session or a server shutdown ends the wait only: the session
//     and the message's turn go on, and the answer joins the conversation.
//  6. The session's id and the message's update id derive from the
//     request's scope as a run's id does (see Workflow ids):
//     "mcp-session-<graph>-" and a hash of the tool, scope, message and
//     start; "mcp-message-" and a hash of the tool, session, scope and
//     message (client.WithMessageID). A retried call — the same
//     idempotency key, or the same request id in its MCP session — finds
//     the session the first attempt created, and Temporal takes its
//     message once and gives the retry the first attempt's answer (while
//     the session's run lasts: a session that continued as new since
//     takes the message again). Without a scope, each call creates its
//     own session under random digits, and each message is a new one.
package server
