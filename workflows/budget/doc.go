// Package budget keeps a run, or a session over all its turns, within its
// budget (agents.Budget: input tokens, output tokens, model calls, cost)
// on model calls, across its whole tree of agents.
//
//  1. The budget is fixed when the run starts, in its spec
//     (runtime.RunSettings.Budget): the run's own (RunInput.Budget,
//     SessionInput.Budget) or the graph's default (agents.Graph.
//     WithBudget). So are the prices (RunSettings.Prices): the graph's
//     table and the worker's Config.Prices, for the models the graph's
//     agents use. A cost limit with a model that has no price is refused
//     at the start (troupe.BadBudget), as is a graph whose default is such
//     by NewRunner.
//  2. The root of the tree (the run's orchestrator, the session: the
//     RunID of every agent input) keeps the ledger (runtime.BudgetLedger)
//     and answers for it, in a coroutine and an update handler of its
//     own.
//  3. The ledger is lent to the one agent of the tree at work, which
//     decides its model calls itself, as the root would, asking no one
//     (BudgetLoan, a runtime.BudgetLease: the root's ledger, and what the
//     holder spent since). The root lends it to each agent of its chain
//     when it starts it (AgentInput.Budget): the agents of a run's chain
//     of handoffs, or of a session's turn, run one at a time, so while
//     one holds the ledger no other agent of the tree lives but those it
//     starts. Before it starts any (agents-as-tools, guardrail agents)
//     the holder gives the ledger back, with what it spent, and waits
//     until the root has it (BudgetReturnSignal, sent by a local
//     activity, or by the workflow when that cannot go); it gets it back
//     by asking again once they have ended (BudgetAsk.Alone). It gives it
//     back for good in its result, or its failure's or cancellation's
//     details, which the root reads (treeBudget.ended); a ledger that
//     continues as new with its agent stays with it (AgentCarry.Budget).
//     The ledger is never shared out between agents that run at once: a
//     call's usage is known only once it ends, so shares of a token or
//     cost budget could not keep point 5. While it is lent, the root's
//     own ledger (BudgetQuery, a session's info) lacks what the holder
//     spent since. A session's budget command changes the root's ledger
//     at once and tells the holder (BudgetChangeSignal), which gives the
//     ledger back before its next call, so that the root decides that
//     call on the new budget.
//  4. Every other agent (those that run beside others: agents-as-tools,
//     guardrail agents) asks the root before each model call and waits
//     for the answer: by update (BudgetAskUpdate), sent from a local
//     activity with the worker's client (BudgetAskActivityName), so the
//     agent's workflow takes no task of its own for it; the update's id
//     is the agent workflow's and the turn's, so an ask sent again (the
//     activity run again after a crash) is answered as the first was. An
//     ask that cannot go so (no client, as in the test environment; a
//     root that takes no such update; a root past the server's updates
//     per run) goes by signal (BudgetAskSignal, BudgetAnswerSignal). The
//     root lets the call start, and counts it once per turn
//     (runtime.BudgetLedger.AskCall), unless a limit is reached. Right
//     after the call the model activity tells the root what it used
//     (BudgetUsageSignal, with the worker's client), priced by the run's
//     prices: waiting until the root has it when the agent ends after the
//     call, else not; the agent's next ask carries it again unless it is
//     known delivered (the root counts a call once:
//     runtime.BudgetLedger.CountCall), and before the agent ends it makes
//     sure the root has it.
//  5. So the root has counted every call of an agent before it answers
//     the agent's next ask, and every call of an agent that ended; and
//     the holder of the ledger has counted every call of the tree, since
//     the root had them all when it lent it and no other agent lives
//     while it holds it. A call is thus let start only if every call the
//     one who decided had news of left the budget unspent: once it is
//     spent, no agent of the tree starts another, however many run in
//     parallel; calls already running finish and count (a ModelCalls
//     limit is never passed; a token or cost limit by what those calls
//     used).
//  6. An agent refused fails with troupe.BudgetExceeded; an agent whose
//     agent-as-tool fails so fails too (agents working in parallel stop
//     at their next ask), and the root ends the run with
//     troupe.BudgetExceeded, whose details are the ledger's report
//     (runtime.BudgetReport: the budget, the calls, the usage and cost
//     per agent; BudgetReportOf reads it). The root records each refusal
//     as a budget_exceeded event (a holder's, once the ledger is back).
//  7. A session's budget spans its turns: the turn that runs out fails
//     with troupe.BudgetExceeded and the session lives on, refusing
//     messages (troupe.BudgetExceeded, saying how to go on) until its
//     budget command (SessionCommand{Op: "budget", Arg: "cost=2"}) raises
//     the budget or lifts it ("off"), for the turns after.
//
// What it costs: a run without a budget exchanges no message and records
// no marker; it pays nothing. With one, an agent that holds the ledger
// pays nothing per call (two version markers when it starts, the ledger in
// its input and result): a run of one agent, or of a chain of them, costs
// what it costs without a budget. An agent that asks pays, per call, the
// update's round trip through the root (a workflow task of the root's,
// about five history events there) and the report's signal (another task
// of the root's, off the agent's path); an agent that gives the ledger
// back pays a signal's round trip before its agents start, and its ask
// after. BenchmarkBudgetOverhead measures both, on a shared 2-core
// machine: a turn of the looper (201 turns, one agent) costs what it costs
// without a budget (ratio 0.84 to 1.06 over three runs, about 5 ms a turn;
// it was 6.8 to 15.6, 34 to 90 ms a turn, when every call asked the root
// by signal and waited for its answer by signal); a turn that runs 50
// agents-as-tools, each asking, takes 1.2 to 1.4 times as long as without
// (it took 2.2 to 2.8 times).
//
// What a loan does not keep: a holder that is terminated (not cancelled)
// takes with it what it spent since the ledger was lent, which the root
// then never counts (it logs so); a holder's refusal reaches the root's
// events when the ledger comes back; and a budget command reaches the
// holder as a signal, so a call it decides before the signal arrives
// goes by the budget before.
//
// Usage per agent: every agent workflow keeps its usage per agent (its
// own calls, and those of the agents it ran as tools: runtime.Usages, in
// its state), priced by the run's prices, whether the run has a budget
// or not. Its result carries it, and so does its failure (the error's
// details), so a failed agent-as-tool's usage still counts in its
// caller's, and a run's result (RunResult.Agents, Cost), a session's turn
// (TurnRecord.Agents, Cost) and the session (SessionInfo.Agents, Cost)
// report it. An agent cancelled mid-call reports nothing back; the ledger
// of a run with a budget counts its calls all the same (and a cancelled
// holder's ledger comes back in its cancellation's details). Memory
// consolidation's model calls belong to the memory scope, not the run.
//
// The agent's side is a gate of its chain (package workflows/gate):
// Agent asks before each turn (BeforeTurn), has the model activity report
// what the call used (AroundModel, AfterModel), and gives the ledger back
// before the agent starts agents of its own (BeforeChildren). The root's
// side is Tree; Activities send the asks and returns with the worker's
// client.
package budget
