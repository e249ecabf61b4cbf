// Package handoff holds handoffs at work: the routing of a chain of agents
// joined by handoffs (Route), the handoff activity that runs a handoff's
// callback and input filter (Activities), and ready input filters
// (RemoveToolCalls, KeepLast, Nest, Chain). A handoff itself is declared
// on its agent (agents.Handoff).
//
// The contract of a chain, as Route.From carries it out:
//
//  1. The agent at work runs as a child agent workflow, its id
//     Prefix/<n>-<agent> (n counts the chain's agents from 0), with the
//     conversation so far (a transcript in the blob store and the items
//     pending); its first agent checks the user's message with its input
//     guardrails (troupe.AgentInput.CheckInput).
//  2. Before each child: a session's pause holds the chain and its
//     interrupt stops it (Control); a session's sandbox agent is lent
//     its workspace (Sandboxes) and the one agent at work is lent the
//     root's budget ledger (Budget), both given back when it ends,
//     failed or not; a run's orchestrator may continue as new between
//     two agents (Continue), carrying the chain's State.
//  3. The child ends with a final output, which ends the chain; with an
//     interrupt, which ends it too, the conversation kept; or with a
//     handoff. A handoff the run's spec does not list fails the chain with
//     troupe.ErrGraphChanged; more than the spec's MaxHandoffs fail it with
//     troupe.ErrMaxHandoffs.
//  4. On a handoff the chain records a handoff event and, when the
//     handoff has a callback or an input filter (the spec's Hooks), runs
//     them in the handoff activity, a local one, which stores the filtered
//     conversation as the target's transcript; then starts the target.
//  5. What the chain's agents used is summed in its Result, a failed
//     agent's included (Result.Failed).
//
// A run's orchestrator routes its run with a Route; a session routes each
// turn; an agent routes each of its agent-tool calls and guardrail agents.
package handoff
