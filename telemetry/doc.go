// Package telemetry gives Troupe's runs OpenTelemetry traces and the
// Temporal SDK's metrics, exported over OTLP when the standard
// OTEL_EXPORTER_OTLP_* variables ask for it; otherwise nothing is
// recorded, and a run that another process traces is passed on.
//
// # The contract
//
//  1. New builds a process's Telemetry from the environment (see New for
//     the variables) or from Config (an exporter or a metric reader of your
//     own, as tests use). With nothing asked for it records nothing:
//     ClientOptions adds only a relay interceptor, which passes on the
//     trace context of a run that a client or another worker traces (so
//     the run stays one trace) and does nothing for a run nobody traces;
//     the hooks in package workflows cost a context lookup each.
//  2. ClientOptions puts the tracing interceptors and the SDK's metrics
//     handler on a Temporal client. Workers made from that client take the
//     interceptors too, so dial once with them and pass the client to
//     workflows.Runner.StartWorkers; do not add them to worker.Options as
//     well. The CLI does this for every command that dials Temporal.
//  3. Call Shutdown (or ForceFlush) before the process ends: spans and
//     metrics are exported in batches in the background.
//
// # What a trace holds
//
// One trace per run, rooted at the client's StartWorkflow span (or at the
// run's workflow span when the client does not trace), and one per session
// turn, rooted at the turn's span and linked to the session's:
//
//   - RunWorkflow:troupe.Orchestrator, the run, with its graph
//     (troupe.graph);
//   - StartChildWorkflow then RunWorkflow:troupe.Agent for each agent's
//     workflow, with gen_ai.operation.name invoke_agent and
//     gen_ai.agent.name;
//   - RunActivity:troupe.Model then "chat <model>" for each model call: a
//     client span with the GenAI semantic conventions (gen_ai.provider.name
//     and gen_ai.system, gen_ai.request.model, gen_ai.response.model and
//     .id, gen_ai.usage.input_tokens and .output_tokens,
//     gen_ai.response.finish_reasons), the agent and its turn;
//   - "execute_tool <name>" for each tool call (gen_ai.tool.name,
//     gen_ai.tool.call.id, troupe.tool.kind function, sandbox, mcp or
//     agent): inside the activity that runs it for function, sandbox and
//     MCP tools, with "sandbox exec" for each command a sandbox tool runs;
//     in workflow code for an agent-as-tool, the tool agent's workflow
//     under it;
//   - "handoff <from> → <to>" for each handoff, its hooks under it;
//   - the activities of sandboxes, memory and events, as the SDK traces
//     them (StartActivity, RunActivity);
//   - "approval <tool>" for a call's wait for a human's decision, once the
//     gate waits for one.
//
// Prompts, tool arguments, outputs and commands stay out of spans.
// Queries are not traced: followers ask them all the time. Memory
// consolidation, which outlives the run that feeds it, traces on its own.
//
// # Replay and crashes
//
// Workflow code runs again whenever a worker rebuilds a workflow from its
// history: to answer a query about a workflow it does not hold, after its
// cache let the workflow go, after another worker crashed. The SDK's
// tracing interceptor (interceptor.NewTracingInterceptor, on which this
// package builds its Tracer, writing the same header as
// go.temporal.io/sdk/contrib/opentelemetry) starts outbound spans only
// when not replaying, but records a workflow's RunWorkflow span, and an
// update's, each time the workflow code ends, replay or not. Here:
//
//  1. The spans of workflow code (RunWorkflow, HandleUpdate, and the
//     WorkflowSpans of StartWorkflowSpan) take their ids from the run and a
//     key, not from chance: an execution that replays the workflow gets
//     the same ids, so the spans started under them before a crash keep
//     their parent.
//  2. They are recorded once, when their code ends outside replay. One
//     whose end is in the history already (a replay that answers a query,
//     a worker catching up) records nothing; one cut off (a crash, an
//     eviction) is recorded by the execution that ends it.
//  3. A local activity (model calls, by default) has no StartActivity span:
//     a crash during it makes the next worker run the workflow task again,
//     local activity and all. Its RunActivity span hangs off the span that
//     scheduled it, recorded when the call completes.
//
// What a crash can still leave: the spans a worker recorded in a workflow
// task it did not get to complete (a local activity that completed there,
// say, and so ran twice: both calls are shown, as both happened), and none
// of the spans it had not yet exported (batches go every
// OTEL_BSP_SCHEDULE_DELAY, 5 s by default; Config.SyncExport sends each
// span as it ends).
//
// # Cost
//
// Off, next to nothing: the relay interceptor's nil check per call of a
// run nobody traces, no metrics handler, and each hook a context lookup. On, bench.BenchmarkTracingOverhead measures a turn with
// spans and metrics exported over OTLP to a local Jaeger against a turn
// without, in the same run: within 10%.
package telemetry
