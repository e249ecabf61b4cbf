// Package workflows holds the stories of a run: the workflows that run
// agent graphs durably on Temporal, and the Runner that registers them with
// the rooms that hold each concept. A story asks its rooms; it holds no
// concept's code itself.
//
// A run flows as shared/DESIGN.md tells it:
//
//  1. A client (package client) starts OrchestratorWorkflow with a graph,
//     an optional agent (the graph's entry by default) and the input. The
//     orchestrator pins the run's graph (pin.go): everything workflow code
//     branches on is fixed in the run's runtime.GraphSpec, so a redeploy
//     with an edited graph never changes a run in flight.
//  2. The orchestrator routes the run (handoff.Route): it starts the
//     active agent's AgentWorkflow as a child and, on each handoff, the
//     target's, until one gives the final output.
//  3. AgentWorkflow (agent.go) loops on one runtime.AgentState, whose
//     plain-Go transitions decide what comes next: the model activity
//     (which loads the transcript from the blob store, calls the model,
//     appends the turn, and decides the next step), then the turn's tool
//     calls, concurrently (calls.go): function tools as (local)
//     activities, sandbox tools on the agent's lease (workflows/lease),
//     MCP tools on the process that holds their sessions (package mcp),
//     agents-as-tools as child chains of their own. Every model call and
//     every call passes the agent's gate chain (workflows/gate): its
//     approvals (workflows/approval), guardrails (workflows/guardrail)
//     and share of the run's budget (workflows/budget), each in the
//     chain only if the agent has it.
//  4. The agent ends with a final output (validated against its output
//     type; an invalid one is fed back at most MaxOutputRetries times), a
//     handoff, or a typed failure (troupe.Err*); its sandbox is stopped,
//     or given back to its session, however it ends.
//  5. Every workflow records its events (workflows/events): kept in
//     state, answered by a query, saved to the blob store as it continues
//     as new; followers read them through package client.
//  6. A session (session.go) is the same machinery behind a durable idle
//     loop: SessionWorkflow waits, at no cost, for a message, runs a turn
//     through a handoff.Route, keeps its agents' workspaces across turns
//     (lease.Keeper), and continues as new before its history grows
//     large. SessionManagerWorkflow (manager.go) is the registry of a task
//     queue's sessions and the one door for their start, stop, list,
//     rename, fork and switch of backend. The session's controls (pause,
//     resume, interrupt) reach its whole tree of agents (control.go).
//  7. After a run or a session's turn, its memory scope (package memory)
//     is fed the rollout and consolidates it in the background.
//
// Where each concept lives:
//
//	the vocabulary           package troupe (the repository's root): names, wire types, error types
//	following runs           client
//	the agent loop           runtime (plain Go), runtime/model, runtime/transcript
//	sandboxes                runtime/sandbox (contract), runtime/sandbox/host, workflows/lease
//	handoff routing          handoff
//	approvals, guardrails,   workflows/gate and its gates: workflows/approval,
//	budgets                  workflows/guardrail, workflows/budget
//	events, live text        workflows/events
//	memory consolidation     memory
//	MCP tools                mcp
//	blob retention           workflows/retention
//	what an agent carries    capabilities (shell, filesystem, skills, compaction)
//
// Long agents: an agent workflow continues as new at the first turn
// boundary once its run has taken Config.ContinueAfterTurns turns (500)
// or its history holds Config.ContinueAfterEvents events (5,000), or the
// server suggests it, carrying its state, its lease (the sandbox stays
// up), its MCP catalog, its recent events and their pages (AgentCarry),
// so its parent, its result and a follower see one run. A run's
// orchestrator does the same between two agents of its chain (RunCarry).
//
// Determinism: transcripts, instructions, tool funcs, model calls and the
// files of a workspace are touched only in activities. Timeouts and
// retry policies are read from the worker's settings (replay does not
// check them); anything else a workflow branches on is in its input or an
// activity's result. Every change of the commands workflow code issues is
// versioned with workflow.GetVersion and proven by replaying checked-in
// histories (testdata/histories), including ones that must fail
// (testdata/histories-must-fail). Troupe does not use Temporal's Worker
// Versioning: every workflow type is, in its terms, auto-upgrading,
// because a run carries what it branches on.
//
// The Web UI: each child workflow's static summary names its agent, each
// activity's summary its step, and each run's "current details" its
// message and the agent at work (an agent's: its turn), set again by every
// run, as continue-as-new keeps no static summary.
package workflows
