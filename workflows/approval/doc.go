// Package approval makes a call that needs a human's decision wait in its
// agent's workflow, durably and at no cost, until the decision comes.
// It is a gate of the agent's chain (package workflows/gate): Gate at the
// agent's calls, Desk at the root of its tree, Activities for the
// policies that decide per call.
//
//  1. Before a turn's calls start, the agent workflow sees which of them
//     a policy makes wait: the run's spec says which tools have one; a
//     policy that decides per call (agents.Approval.When) runs in the
//     model call's activity, on the calls the model answered with
//     (gate.Precheck), or in a local activity of its own when that did
//     not check them (arguments changed since, a pause between, a failed
//     check); the history keeps its answer.
//  2. For each call that waits it records approval_requested and asks the
//     root of its tree (the run's orchestrator or the session, whose id
//     every agent input carries as RunID) with troupe.ApprovalRequestSignal.
//  3. The root keeps the calls waiting on its runtime.ApprovalDesk, lists
//     them (troupe.ApprovalsQuery) and takes decisions (troupe.DecideUpdate), each
//     routed to the workflow that waits with troupe.ApprovalDecisionSignal; a
//     decision it remembers answers later requests at once.
//  4. The agent workflow waits until every call of the turn that waits is
//     decided (or its policy's timeout decides it, which it tells the
//     root with troupe.ApprovalSettledSignal), then runs the approved calls, with
//     the arguments a decision gave, and answers the rejected ones with
//     the rejection, which the model sees. Its sandbox is not provisioned
//     for the wait, and one it has is suspended by its idle timer.
package approval
