// Package workflows runs agent graphs durably on Temporal.
//
// A run flows as shared/DESIGN.md tells it:
//
//  1. A client starts OrchestratorWorkflow with a graph, an optional agent
//     (the graph's entry by default) and the input.
//  2. The orchestrator starts the active agent's AgentWorkflow as a child.
//     The child loops: the model activity (which loads the transcript from
//     the blob store, calls the model, appends the turn, and decides the
//     next step) → the turn's tool calls, concurrently: function tools as
//     (local) activities, agents-as-tools as child workflows.
//  3. The child ends with a final output (validated against the agent's
//     output type; an invalid one is fed back at most MaxOutputRetries
//     times) or a handoff. On a handoff the orchestrator runs the
//     handoff's callback and input filter (activities) and starts the
//     target's child. Max turns and max handoffs fail the run with typed
//     errors.
//  4. Every workflow run keeps its events (bounded by its continue-as-new
//     bounds), numbered from 1 across its runs; the "troupe.events" query
//     returns those after a number (2,500 at most an answer). As a
//     workflow continues as new, it saves its run's events to the blob
//     store as one page (events/WORKFLOW/FIRST.json, under the run's keys,
//     so blob retention deletes them with the rest of the run) and carries
//     the list of pages, which the "troupe.event-pages" query returns.
//     Follow walks a run's tree of workflows to stream the events, reading
//     what a later run no longer carries from the pages
//     (WithEventStore), else from the earlier runs while Temporal keeps
//     them. A worker given an Bus also hands each event, as it is
//     recorded, to followers in its process (FollowLive). A model call
//     that fails is retried by the workflow, each retry an event ("model
//     unreachable: connection refused; retry 3 of 10 in 2s").
//
// Live text: a turn's reply reaches followers as the model generates it,
// while history records only each turn's final response. The model
// adapters stream every call (runtime/model, WithDeltas), and the model
// activity hands each piece of text to the worker's Bus
// (Config.Events) as an EventTextDelta event of the agent's workflow and
// turn; the activity's result is the whole turn, as before. Deltas never
// pass through workflow code, workflow state, queries or history. They
// reach a follower that asks for them (WithDeltas) in one of two ways:
//
//  1. In the worker's process (`troupe run`, the MCP server, Go code that
//     runs its own worker), FollowLive takes them from the bus as they are
//     published, ahead of the turn's model_turn event, which the workflow
//     records once the activity has returned.
//  2. From another process, on this host or another (`troupe sessions
//     send` or `troupe runs follow` beside `troupe dev`, a client of a
//     remote cluster's workers): StartWorkers serves the bus's deltas over
//     HTTP on Config.DeltaAddr (127.0.0.1 on a free port by default),
//     behind a random token, and advertises the relay in the workers'
//     identity on their task queue: "PID@HOST troupe model=… deltas=
//     http://troupe:TOKEN@127.0.0.1:PORT/deltas". The follower reads the
//     run's task queue (DescribeWorkflowExecution), the identities of the
//     workers polling it (DescribeTaskQueue; again every 2 s, for workers
//     that come later), and subscribes to each relay with GET
//     /deltas?root=RUN: a line of JSON per delta of the run's workflows
//     and those it started (ids RUN and RUN/…), as they come. It merges
//     them into the recorded events it follows, a turn's deltas before the
//     turn's model_turn event: that event waits for the relay's end of the
//     turn's deltas for up to a second, and a delta that arrives after its
//     turn's event is dropped.
//
// What deltas cost: no history event, no workflow task, no payload in
// Temporal, per turn or per piece. Temporal carries only the relay's URL
// and token, inside the identity its workers present anyway (which the
// history events of workflow and activity tasks record: some 90 bytes
// more in each, the same for a turn of 10 deltas or of 10,000), so only
// who may read the task queue or the histories can read a relay. (The
// server of `troupe dev` asks no credentials: there, that is anyone who
// can reach it.) A relay costs the worker a listening socket
// and, per subscriber (64 at most), a buffer of 1,024 deltas: publishing
// never waits, and a subscriber that falls behind loses deltas, never
// slows a model call. A follower costs two describe calls every 2 s and
// one HTTP connection per worker. When a relay cannot be reached (another
// host behind a firewall, a relay bound to loopback, "off"), the follower
// gets no deltas and no error: it shows each turn when its model_turn
// event comes, as it always did. A model call that fails after some
// deltas is retried, and its retry streams its text again, after the
// model_retry event. A relay bound beyond loopback serves in clear text:
// bind it only on a network you trust.
//
// The Web UI: each child workflow's static summary names its agent, each
// activity's summary its step, and each run's "current details" its
// message and the agent at work (an agent's: its turn), set again by every
// run, as continue-as-new keeps no static summary.
//
// Long agents: an agent workflow continues as new at the first turn
// boundary once its run has taken Config.ContinueAfterTurns turns (500)
// or its history holds Config.ContinueAfterEvents events (5,000), or the
// server suggests it, carrying its AgentState, its sandbox lease (the
// sandbox stays up), its MCP catalog, its last 200 events with their
// numbering and its event pages (AgentCarry), so its parent, its result
// and a follower see one run. A run's history then stays under about ContinueAfterEvents plus
// one turn's events. A run's orchestrator continues as new the same way,
// before starting the next agent of a chain of handoffs once its history
// holds ContinueAfterEvents events (or the server suggests it), carrying
// the run's spec, where the chain stands and its recent events
// (RunCarry), so a run's history stays bounded however many handoffs
// MaxHandoffs allows.
//
// Sandboxes: a sandbox agent's workspace is held by a lease, which its
// agent workflow owns, or its session across turns. Package
// workflows/lease holds the lease's life (provisioned, live, idle,
// suspended, lost and re-provisioned, released to a session, stopped),
// the sandbox activities, the routing of a sandbox's activities to its
// store, and what a worker killed at any point of it leaves.
//
// A run keeps the graph it started with. Everything workflow code
// branches on is in the run's runtime.GraphSpec: each agent's limits,
// sandbox and MCP servers, its tools by kind (function, sandbox, agent,
// handoff, with their targets, timeouts, extractors and handoff hooks),
// and the worker settings that change control flow (MaxHandoffs,
// MaxToolDepth, ModelActivities). The orchestrator takes it from the graph
// once, in a side effect recorded in its history (version
// "troupe.pinned-graph"), and every agent workflow of the run gets it in
// its input. Workflow code reads nothing else of the graph or the worker's
// settings, only its inputs and activity results, so a worker redeployed
// with an edited graph replays and continues runs in flight on what they
// started with:
//
//	edited since the run started   what the run does
//	a tool gained                  not offered to the model: the run's spec lacks
//	                               it (a call of it anyway is an unknown tool, and
//	                               the model is told so)
//	a tool lost (its func gone)    a call of it gets the tool error "tool X is no
//	                               longer available…"; the run goes on
//	an input filter or callback    not run: the run's handoff had none
//	gained
//	a filter, callback or          the handoff goes on without it; the tool's result
//	extractor lost                 goes back as it is
//	an agent lost                  the agent's next activity fails with
//	                               troupe.GraphChanged naming it: a handoff chain
//	                               fails the run; an agent tool's call is a tool error
//	instructions, model, schemas   used from the graph served now (activities)
//	skills (capabilities/skills)   the index, load_skill and read_skill serve the
//	                               skills the worker loaded at its start, and
//	                               the memory skills as the store holds them
//	                               at each call
//
// Timeouts and retry policies are not part of a workflow's commands as
// replay checks them; they are read from the worker's settings. Runs from
// before pinning (no version marker) replay on the graph as it is served,
// as they always did. Troupe does not use Temporal's Worker Versioning
// (Worker Deployments): every workflow type is, in its terms,
// auto-upgrading, because a run carries what it branches on, and each
// change of the commands workflow code issues is versioned with
// workflow.GetVersion and proven by replaying checked-in histories
// (testdata/histories), including ones that must fail
// (testdata/histories-must-fail).
//
// Memory: package memory holds it whole and tells its story; the stories
// here only call it (memory.RecordRun, memory.Feed, memory.Fork).
//
// Budgets (budget.go): a run, or a session over all its turns, spends at
// most its budget (agents.Budget: input and output tokens, model calls,
// cost by a price table) across its whole tree. The budget and the prices
// are fixed in the run's spec when it starts (the run's own, or the
// graph's default; a session's budget command changes it). The root of
// the tree (orchestrator or session) keeps the ledger and lends it to the
// one agent at work, an agent of its chain, which decides its own calls
// with it and gives it back before it starts agents of its own and when
// it ends; the other agents (agents-as-tools, guardrail agents) ask the
// root before each model call, by update from a local activity, and
// their model activity reports the call's usage after. So no model call
// starts anywhere in the tree once the budget is spent, agents-as-tools
// in parallel included, and the run ends with troupe.BudgetExceeded and
// the usage per agent. Runs without a budget exchange nothing (the
// versions troupe.budgets, troupe.budget-asks and troupe.budget-loans are
// asked only with one). Every run reports its usage per agent and its
// cost (RunResult.Agents, Cost), a failed agent-as-tool's included.
//
// Guardrails (agents.InputGuardrail, OutputGuardrail, ToolGuardrail): the
// run's spec records each agent's guardrails, their kinds, whether an
// input guardrail blocks, and which are agents. Input guardrails check the
// user's message the first agent of a chain (a run's, a session turn's,
// an agent tool's) answers, once, before its first model call (Blocking)
// or in parallel with it (cancelled when one trips); output guardrails
// check an agent's final output; tool guardrails check a turn's calls
// before any starts, all at once, beside the approval policies and again
// for a call whose decision changed its arguments (the gate answers a
// rejected call with the guardrail's message), and each call's output, in
// order, before the model reads it (replaced or withheld). Funcs run in a
// local activity (GuardrailActivityName), agents as child agent workflows:
// an input or output guardrail agent reads the text and answers an
// agents.GuardrailVerdict; a tool guardrail agent reads the call (an
// agents.ToolCheck, as JSON: agent, tool, arguments, and for a check of
// an output the output, which a local activity, GuardrailPromptActivityName,
// writes into its transcript) and answers an agents.ToolCallVerdict or
// ToolOutputVerdict. A trip records guardrail_tripped and ends the run with
// ErrGuardrailTripped, whose details TrippedGuardrail reads; a check that
// cannot decide (a func that fails, an agent that fails or gives no
// verdict) ends it with ErrGuardrailFailed. See guardrails.go; versioned
// troupe.guardrails, asked only where a guardrail runs, and
// troupe.tool-guardrail-agents, asked only where a tool guardrail agent
// runs.
//
// Determinism: transcripts, instructions, tool funcs and model calls are
// touched only in activities. So is a workspace's AGENTS.md: before a
// sandbox agent's first model call, a local activity reads what its
// manifest would put there (workflows/lease; versioned
// troupe.manifest-guidance), the sandbox-create activity reads it again
// through the session of the workspace it made; each stores it in the
// blob store, the lease carries its key (SandboxLease.Guidance), and the
// model activity adds it to the instructions of every turn.
package workflows
