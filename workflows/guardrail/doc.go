// Package guardrail runs an agent's guardrails: checks beside its work
// that can end its run (agents.InputGuardrail, OutputGuardrail,
// ToolGuardrail). They are a gate of the agent's chain (package
// workflows/gate): Gate at the agent's points, Activities for the funcs.
//
//  1. The run's spec says which guardrails each agent has, of which kind,
//     and how they run (runtime.GuardrailSpec); workflow code branches on
//     that alone. A guardrail that is a Go func runs in the guardrail
//     activity (a local one: GuardrailActivityName), which finds it by
//     name in the graph the worker serves; one that is an agent runs as a
//     child agent workflow (route), whose structured output is the
//     verdict. The funcs of one check run together, in one activity, and
//     beside the agents of that check. A tool guardrail agent's input is
//     the call it checks (agents.ToolCheck, as JSON): a user message for
//     a check of a call; for a check of an output, which may be stored
//     apart, the first segment of its transcript, written by a local
//     activity (GuardrailPromptActivityName).
//  2. Input guardrails check the user's message the first agent of a
//     chain answers (a run's, a session turn's, an agent tool's: the
//     agent input's CheckInput), once, at its first turn: the blocking
//     ones before the model call, the others in parallel with it. When
//     one of those trips, the model call is cancelled, and its answer, if
//     it came, discarded.
//  3. Output guardrails check an agent's final output before the agent
//     ends with it.
//  4. Tool guardrails check the calls of a turn that have any before any
//     call of the turn starts (startScreen, screen): at once with the
//     approval policies' check, and again, once approved, for a call whose
//     decision changed its arguments; a verdict on a call its approval
//     rejected does not count. The funcs of every call run in one
//     activity (the model call's, which checks the calls it answered
//     with: gate.Precheck; else the guardrail activity), and each agent
//     of each call as a child, all at once. A
//     rejected call is answered at the gate with the guardrail's message.
//     Then they check each call's output, as it comes, before the model
//     reads it (checkOutput): in order, consecutive funcs in one activity
//     and each agent as a child, each on the output the ones before left;
//     replaced, withheld, or passed.
//  5. A guardrail that trips records guardrail_tripped in the agent's
//     events and ends the agent with a non-retryable ErrGuardrailTripped
//     (its details a GuardrailTrip), which ends every agent up the chain
//     and the run (a session's turn fails). A check that cannot decide
//     (its func fails after the activity's retries, or its agent fails)
//     ends the run with ErrGuardrailFailed: no check lets through what it
//     did not see.
//
// Version markers (troupe.guardrails) are written only where a guardrail
// runs: runs recorded before guardrails (whose spec has none, or which
// read the graph as served) replay as they ran. Tool guardrail agents add
// theirs (troupe.tool-guardrail-agents) where one runs: the commands of
// tool guardrail funcs are those they were.
package guardrail
