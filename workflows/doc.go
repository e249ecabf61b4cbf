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
//  4. Every workflow keeps its events; the "troupe.events" query returns
//     them, and Follow walks a run's tree of workflows to stream them.
//
// Determinism: workflow code here reads only the immutable Graph, its
// inputs and activity results. Transcripts, instructions, tool funcs and
// model calls are touched only in activities.
package workflows
