// Package agents holds the plain-Go definitions of a Troupe agent system:
// agents, their tools (Go functions and other agents), handoffs, structured
// output types, and the Graph a worker serves.
//
// Nothing here imports Temporal. The workflows package reads these
// definitions; the Go funcs inside them (function tools, dynamic
// instructions, handoff filters and callbacks, output extractors,
// approval predicates, guardrails) run only inside activities, never in
// workflow code.
//
// The contract a caller relies on:
//
//  1. A Graph is validated once, by NewGraph, before any worker starts:
//     duplicate or invalid names, unknown handoff or agent-tool targets and
//     tool-name clashes are errors at start-up, not mid-run.
//  2. Tool schemas are made OpenAI-strict (additionalProperties false,
//     every property required, optional properties nullable) so they are
//     accepted by the Responses and Chat Completions APIs in strict mode.
//  3. Function-tool signatures are checked when the tool is built.
//  4. Guardrails (InputGuardrail, OutputGuardrail, ToolGuardrail) are
//     checked with the graph: unique names per agent, a func or an agent
//     of the graph whose output type is the verdict of its check
//     (GuardrailVerdict; ToolCallVerdict, ToolOutputVerdict for a tool
//     guardrail's checks of calls and of outputs) and which has no
//     guardrails itself, tools that exist and are not handoffs.
//  5. Every tool call has an idempotency key (IdempotencyKey, from the
//     call's RunContext), the same for every attempt of the call and
//     different for any other. A function tool runs at least once (again
//     after a worker crash) unless it is NotIdempotent: then at most
//     once, the model told when a call is in doubt (InDoubtOutput). The
//     README's "Tool effects" table says what each kind of tool does.
package agents
