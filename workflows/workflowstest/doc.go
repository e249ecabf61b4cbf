// Package workflowstest is the harness of tests that run Troupe's
// workflows for real on the SDK's test environment (go.temporal.io/sdk/
// testsuite), with the model the one part stood in for: what
// net/http/httptest is to a handler, for a workflows.Runner.
//
// A test that drives a run goes through these steps:
//
//  1. It scripts the model with a FuncModel: a Go func (a TurnFunc) that
//     answers each request, built from the item builders (Call, Shell)
//     and readers (FirstWord, LastItem, LastUser, OutputsOf) here, or a
//     ready one (ScriptedCoder, for a sandbox agent). The FuncModel
//     counts the calls per agent, by the first word of the agent's
//     instructions, so a test's agents start their instructions with
//     their name and a colon ("ops: deploys").
//  2. It serves a graph with that model on a quiet test environment:
//     NewRunnerEnv (a mem:// blob store unless the config names one),
//     LocalEnv (with the local sandbox backend), or NewEnv and Serve
//     when it needs the environment or the Runner apart. The environment
//     logs errors only and gives activities a minute before its deadlock
//     detector fires (see NewEnv). SlowAgents stands in for the agents of
//     a session's turns, for tests of the session alone.
//  3. It starts the workflow (env.ExecuteWorkflow), steering it on the
//     way from delayed callbacks (env.RegisterDelayedCallback): updates
//     with SendUpdate, AskSession and Decide, whose outcome an Update
//     holds; queries with Recorded and RecordedBy (the events query),
//     SessionInfo, and Pending (the calls a root lists as waiting for
//     approval).
//  4. It reads the outcome: Result or FinalOutput for a run, the
//     FuncModel's Calls, what the graph's tools recorded (a Strings).
//     Golden compares a payload with its JSON fixture.
//
// A replay test reads a set of checked-in histories (ReadIndex: file →
// workflow id) and replays each with today's workflow code (Replay), so
// that a change of the commands workflow code issues fails it until it
// is versioned.
//
// Package workflows' non-test code never imports this package (it
// imports workflows); the tests of workflows, of the rooms beside it
// (approval, guardrail, budget), of memory, and the gate chain's
// conformance suite (workflows/gate/gatetest) do.
package workflowstest
