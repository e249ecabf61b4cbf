package workflows

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/workflows/events"
)

// Budgets: a run, or a session over all its turns, spends at most its
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

// versionBudgets marks agent workflows that ask their root before each
// model call. The marker is written only in runs with a budget.
const versionBudgets = "troupe.budgets"

// versionBudgetLoans marks roots that lend their ledger to the agent at
// work (BudgetLoan). The marker is written only in runs with a budget.
const versionBudgetLoans = "troupe.budget-loans"

// refusal words a refusal of a model call: the root's kind ("run",
// "session"), why (which limits are reached) and how to go on.
func refusal(what, why, hint string) string {
	msg := fmt.Sprintf("the %s's budget is spent (%s)", what, why)
	if hint != "" {
		msg += ": " + hint
	}
	return msg
}

// treeBudget is the ledger of a root (a run's orchestrator, a session)
// with the messages it takes.
type treeBudget struct {
	// ledger is where the root keeps its ledger (nil for no budget).
	ledger **runtime.BudgetLedger
	rec    *events.Recorder
	// what is the root's kind for people ("run", "session"); hint says
	// how to go on once the budget is spent.
	what, hint string
	asks       workflow.ReceiveChannel
	usage      workflow.ReceiveChannel
	returns    workflow.ReceiveChannel
	// lent is the agent workflow the ledger is lent to ("" when none):
	// the ledger lacks what it spent since.
	lent string
	// refused is the first refusal's reason, which the root's error
	// repeats.
	refused string
}

// newTreeBudget sets the root's budget handlers up on the ledger at
// ledger; listen has it take the messages of its tree's agents (a root
// that can have no budget takes none).
func newTreeBudget(ctx workflow.Context, ledger **runtime.BudgetLedger, listen bool, rec *events.Recorder, what, hint string) (*treeBudget, error) {
	b := &treeBudget{ledger: ledger, rec: rec, what: what, hint: hint,
		asks: workflow.GetSignalChannel(ctx, troupe.BudgetAskSignal), usage: workflow.GetSignalChannel(ctx, troupe.BudgetUsageSignal),
		returns: workflow.GetSignalChannel(ctx, troupe.BudgetReturnSignal)}
	if err := workflow.SetQueryHandler(ctx, troupe.BudgetQuery, func() (*runtime.BudgetReport, error) {
		return (*b.ledger).Report(), nil
	}); err != nil {
		return nil, err
	}
	if !listen {
		return b, nil
	}
	if err := workflow.SetUpdateHandler(ctx, troupe.BudgetAskUpdate, func(ctx workflow.Context, ask troupe.BudgetAsk) (troupe.BudgetAnswer, error) {
		return b.answer(ctx, ask), nil
	}); err != nil {
		return nil, err
	}
	workflow.Go(ctx, func(gctx workflow.Context) {
		for gctx.Err() == nil {
			workflow.NewSelector(gctx).
				AddReceive(b.asks, func(workflow.ReceiveChannel, bool) { b.takeAsk(gctx) }).
				AddReceive(b.usage, func(workflow.ReceiveChannel, bool) { b.takeUsage() }).
				AddReceive(b.returns, func(workflow.ReceiveChannel, bool) { b.takeReturn(gctx) }).
				Select(gctx)
		}
	})
	return b, nil
}

// drain takes the messages that came in and were not taken yet: before
// the root continues as new, or reports.
func (b *treeBudget) drain(ctx workflow.Context) {
	for b.takeReturn(ctx) || b.takeUsage() || b.takeAsk(ctx) {
	}
}

// takeAsk answers an ask that came by signal: the call starts unless the
// budget is spent. An ask always gets an answer, or its agent would wait
// for ever.
func (b *treeBudget) takeAsk(ctx workflow.Context) bool {
	var ask troupe.BudgetAsk
	if !b.asks.ReceiveAsync(&ask) {
		return false
	}
	ans := b.answer(ctx, ask)
	// No wait for the signal's delivery: the root answers the next ask
	// at once. An agent that ended meanwhile needs no answer.
	workflow.SignalExternalWorkflow(ctx, ask.Workflow, "", troupe.BudgetAnswerSignal, ans)
	return true
}

// answer answers an ask, by signal or by update: the call starts, and
// counts, unless the budget is spent (a call asked for again is let
// start again, uncounted). An agent alone is lent the ledger with it.
func (b *treeBudget) answer(ctx workflow.Context, ask troupe.BudgetAsk) troupe.BudgetAnswer {
	// What came before the ask counts first: the reports of calls that
	// ended before it was sent, the ledger given back.
	for b.takeReturn(ctx) || b.takeUsage() {
	}
	if b.lent == ask.Workflow {
		// The agent asks, so it does not use the ledger lent to it (a
		// worker from before loans ran it): it spent nothing of it.
		b.lent = ""
	}
	if u := ask.Last; u != nil {
		(*b.ledger).CountCall(u.Workflow, u.Turn, u.Usage)
	}
	ans := troupe.BudgetAnswer{Turn: ask.Turn}
	if why := (*b.ledger).AskCall(ask.Workflow, ask.Turn); why != "" {
		ans.Refused = refusal(b.what, why, b.hint)
		b.refuse(ctx, ask.Workflow, troupe.BudgetRefusal{Agent: ask.Agent, Turn: ask.Turn, Reason: ans.Refused})
		return ans
	}
	if ask.Alone {
		ans.Loan = b.lend(ctx, ask.Workflow)
	}
	return ans
}

// refuse records a refused call.
func (b *treeBudget) refuse(ctx workflow.Context, wf string, r troupe.BudgetRefusal) {
	if b.refused == "" {
		b.refused = r.Reason
	}
	b.rec.Add(ctx, troupe.Event{Kind: troupe.EventBudgetExceeded, Agent: r.Agent, Turn: r.Turn, Child: wf,
		Detail: fmt.Sprintf("the model call of %s (turn %d) was refused: %s", r.Agent, r.Turn, r.Reason)})
}

func (b *treeBudget) takeUsage() bool {
	var u troupe.BudgetUsage
	if !b.usage.ReceiveAsync(&u) {
		return false
	}
	(*b.ledger).CountCall(u.Workflow, u.Turn, u.Usage)
	return true
}

// lend lends the ledger to the agent workflow wf, the one agent of the
// tree at work: nil when there is no budget, or the ledger is lent
// already, or for a root that does not lend (recorded before loans).
func (b *treeBudget) lend(ctx workflow.Context, wf string) *troupe.BudgetLoan {
	if b == nil || *b.ledger == nil || b.lent != "" {
		return nil
	}
	if workflow.GetVersion(ctx, versionBudgetLoans, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return nil
	}
	b.lent = wf
	return &troupe.BudgetLoan{Lease: *(*b.ledger).Lend(), What: b.what, Hint: b.hint}
}

// repay takes the ledger lent to wf back with loan, what wf spent of it
// (nil: lost, with the agent).
func (b *treeBudget) repay(ctx workflow.Context, wf string, loan *troupe.BudgetLoan) {
	if b.lent != wf {
		return
	}
	b.lent = ""
	if loan == nil {
		workflow.GetLogger(ctx).Warn("an agent ended without giving its root's budget ledger back (terminated, or never started): what it spent of it is not counted", "agent", wf)
		return
	}
	(*b.ledger).Repay(&loan.Lease)
	if loan.Refused != nil {
		b.refuse(ctx, wf, *loan.Refused)
	}
}

func (b *treeBudget) takeReturn(ctx workflow.Context) bool {
	var r troupe.BudgetReturn
	if !b.returns.ReceiveAsync(&r) {
		return false
	}
	b.repay(ctx, r.Workflow, &r.Loan)
	return true
}

// ended takes back the ledger lent to the child agent workflow wf, which
// ended with res or err: its result carries the loan, as does its
// failure or cancellation, unless it gave it back before.
func (b *treeBudget) ended(ctx workflow.Context, wf string, res *troupe.AgentResult, err error) {
	if b == nil {
		return
	}
	for b.takeReturn(ctx) {
	}
	if b.lent != wf {
		return
	}
	loan := troupe.FailureOf(err).Budget
	if err == nil {
		loan = res.Budget
	}
	b.repay(ctx, wf, loan)
}

// changed tells the agent that holds the ledger, if one does, that the
// budget changed: it gives the ledger back before its next call, which
// the root decides on the new budget.
func (b *treeBudget) changed(ctx workflow.Context) {
	if b == nil || b.lent == "" {
		return
	}
	workflow.SignalExternalWorkflow(ctx, b.lent, "", troupe.BudgetChangeSignal, nil)
}

// settle forgets which calls were counted, once no agent of the tree
// lives: the messages that came are taken first.
func (b *treeBudget) settle(ctx workflow.Context) {
	b.drain(ctx)
	b.lent = ""
	(*b.ledger).Settle()
}

// exceeded is the root's error for a tree that failed with err: a
// troupe.BudgetExceeded one gets the ledger's report as its details.
func (b *treeBudget) exceeded(ctx workflow.Context, err error) error {
	if troupe.ErrorType(err) != troupe.ErrBudgetExceeded || *b.ledger == nil {
		return err
	}
	b.drain(ctx)
	msg := b.refused
	if msg == "" {
		msg = strings.TrimPrefix(troupe.FailureText(err), troupe.ErrBudgetExceeded+": ")
	}
	return temporal.NewNonRetryableApplicationError(msg, troupe.ErrBudgetExceeded, err, (*b.ledger).Report())
}

// runBudget sets a run's budget up at its root: the ledger it carried, or
// a new one for a budget in its spec.
func (r *Runner) runBudget(ctx workflow.Context, spec *runtime.GraphSpec, carry *RunCarry, rec *events.Recorder) (*treeBudget, error) {
	ledger := runtime.NewBudgetLedger(spec.Budget)
	if carry != nil && carry.Budget != nil {
		ledger = carry.Budget
	}
	return newTreeBudget(ctx, &ledger, ledger != nil, rec, "run", "")
}

// agentBudget is an agent workflow's side of its tree's budget.
type agentBudget struct {
	root, wf, agent string
	answers         workflow.ReceiveChannel
	// byUpdate says the agent asks by update, from a local activity, its
	// model activity tells the root what each call used, and it takes
	// the root's ledger when lent (versionBudgetAsks); prices are the
	// run's.
	byUpdate bool
	prices   agents.Prices
	// alone says the agent is alone in its tree when it asks: an agent of
	// the run's chain (or the session turn's), which the root starts one
	// at a time, and whose own agents have ended by then. handoffs are
	// its handoffs, after which it ends.
	alone    bool
	handoffs []string
	// loan is the root's ledger while lent to the agent, which then asks
	// no one; changes says the root's budget changed since (a session's
	// budget command), so the agent gives the ledger back and asks.
	loan    *troupe.BudgetLoan
	changes workflow.ReceiveChannel
	// report is the last usage report sent by signal, and last what the
	// agent's last call used, until it is known delivered.
	report workflow.Future
	last   *troupe.BudgetUsage
}

// newAgentBudget is the budget of an agent workflow of a run with one;
// nil otherwise (and for an agent with no root to ask, or replayed from
// before budgets). carry is what the agent's previous run carried.
func newAgentBudget(ctx workflow.Context, spec *runtime.GraphSpec, in troupe.AgentInput, wf string, agent *runtime.AgentSpec, carry *AgentBudgetCarry) *agentBudget {
	if spec.Budget == nil || in.RunID == "" {
		return nil
	}
	if workflow.GetVersion(ctx, versionBudgets, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return nil
	}
	b := &agentBudget{root: in.RunID, wf: wf, agent: agent.Name, answers: workflow.GetSignalChannel(ctx, troupe.BudgetAnswerSignal)}
	if workflow.GetVersion(ctx, versionBudgetAsks, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return b
	}
	b.byUpdate, b.prices, b.alone = true, spec.Prices, in.Depth == 0
	b.changes = workflow.GetSignalChannel(ctx, troupe.BudgetChangeSignal)
	for _, t := range agent.Tools {
		if t.Kind == agents.ToolHandoff {
			b.handoffs = append(b.handoffs, t.Name)
		}
	}
	b.loan = in.Budget
	if carry != nil {
		b.last, b.loan = carry.Last, carry.Loan
	}
	return b
}

// ask has the model call of turn start, or not: nil to start it, a
// troupe.BudgetExceeded error when the budget is spent. An agent that
// holds its root's ledger decides itself. Others ask the root and wait
// for the answer: by update, from a local activity, which costs the
// agent no workflow task of its own, or else by signal.
func (b *agentBudget) ask(ctx workflow.Context, turn int) error {
	if b == nil {
		return nil
	}
	if b.changed() && b.loan != nil {
		// The budget changed: the root decides with the new one, and
		// lends its ledger again.
		b.release(ctx)
	}
	if b.loan != nil {
		return b.decide(turn)
	}
	ask := troupe.BudgetAsk{Workflow: b.wf, Agent: b.agent, Turn: turn, Alone: b.byUpdate && b.alone}
	if b.last != nil && (b.report == nil || !b.report.IsReady()) {
		ask.Last = b.last // Rather than wait for the report.
	}
	b.report, b.last = nil, nil
	if b.byUpdate {
		ans, ok, err := b.askByUpdate(ctx, ask)
		if err != nil {
			return err
		}
		if ok {
			return b.answered(ans, turn)
		}
	}
	if err := workflow.SignalExternalWorkflow(ctx, b.root, "", troupe.BudgetAskSignal, ask).Get(ctx, nil); err != nil {
		if ctx.Err() != nil {
			return temporal.NewCanceledError()
		}
		return troupe.NonRetryable(troupe.ErrInternal, "agent %s could not ask the root of its run (%s) for its model call: %v", b.agent, b.root, err)
	}
	for {
		if err := workflow.Await(ctx, func() bool { return b.answers.Len() > 0 }); err != nil {
			return err
		}
		var ans troupe.BudgetAnswer
		b.answers.ReceiveAsync(&ans)
		if ans.Turn != turn {
			continue // An answer to an ask of an earlier run: none waits for it.
		}
		return b.answered(ans, turn)
	}
}

// changed takes the budget changes the root sent, and reports whether
// there were any.
func (b *agentBudget) changed() bool {
	any := false
	for b.changes != nil && b.changes.ReceiveAsync(nil) {
		any = true
	}
	return any
}

// decide has the model call of turn start, or not, by the ledger the
// agent holds, as its root would.
func (b *agentBudget) decide(turn int) error {
	why := b.loan.Lease.Ask()
	if why == "" {
		return nil
	}
	r := troupe.BudgetRefusal{Agent: b.agent, Turn: turn, Reason: refusal(b.loan.What, why, b.loan.Hint)}
	b.loan.Refused = &r
	return troupe.NonRetryable(troupe.ErrBudgetExceeded, "agent %s stopped before its model call of turn %d: %s", b.agent, turn, r.Reason)
}

// answered is the root's answer to the ask of turn as ask returns it,
// and takes the ledger it lends.
func (b *agentBudget) answered(ans troupe.BudgetAnswer, turn int) error {
	if ans.Refused != "" {
		return troupe.NonRetryable(troupe.ErrBudgetExceeded, "agent %s stopped before its model call of turn %d: %s", b.agent, turn, ans.Refused)
	}
	if ans.Loan != nil && b.byUpdate {
		b.loan = ans.Loan
	}
	return nil
}

// askByUpdate asks the root by update, from the budget-ask activity: the
// answer, and whether there is one (false when the ask could not go so).
func (b *agentBudget) askByUpdate(ctx workflow.Context, ask troupe.BudgetAsk) (troupe.BudgetAnswer, bool, error) {
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: budgetAskTimeout, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
		Summary: fmt.Sprintf("budget: may turn %d of %s call the model?", ask.Turn, b.agent),
	})
	var out BudgetAskOutput
	err := workflow.ExecuteLocalActivity(lctx, BudgetAskActivityName, BudgetAskInput{Root: b.root, Ask: ask}).Get(ctx, &out)
	switch {
	case ctx.Err() != nil:
		return troupe.BudgetAnswer{}, false, temporal.NewCanceledError()
	case err == nil && out.Answer != nil:
		return *out.Answer, true, nil
	case err != nil:
		out.Unsent = err.Error()
	}
	workflow.GetLogger(ctx).Warn("a budget ask could not go by update: it goes by signal", "agent", b.agent, "turn", ask.Turn, "why", out.Unsent)
	return troupe.BudgetAnswer{}, false, nil
}

// release gives the root its ledger back, if the agent holds it, before
// the agent starts agents of its own (agent tools, guardrail agents),
// which ask the root: the root has it before any of them asks.
func (b *agentBudget) release(ctx workflow.Context) {
	if b == nil || b.loan == nil {
		return
	}
	ret := troupe.BudgetReturn{Workflow: b.wf, Loan: *b.loan}
	b.loan = nil
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: budgetAskTimeout, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
		Summary: "budget: " + b.agent + " gives its root's ledger back",
	})
	var sent bool
	if err := workflow.ExecuteLocalActivity(lctx, BudgetReturnActivityName, BudgetReturnInput{Root: b.root, Return: ret}).Get(ctx, &sent); err == nil && sent {
		return
	}
	if ctx.Err() != nil {
		return
	}
	// A root that is gone takes nothing back.
	_ = workflow.SignalExternalWorkflow(ctx, b.root, "", troupe.BudgetReturnSignal, ret).Get(ctx, nil)
}

// giveBack is the root's ledger, if the agent holds it, for its result:
// the agent ends, and the root (which started it) takes it back.
func (b *agentBudget) giveBack() *troupe.BudgetLoan {
	if b == nil {
		return nil
	}
	loan := b.loan
	b.loan = nil
	return loan
}

// forModel is what the model activity does for the budget
// (ModelInput.Budget): nil for an agent that does not ask by update, or
// that holds its root's ledger.
func (b *agentBudget) forModel() *ModelBudget {
	if b == nil || !b.byUpdate || b.loan != nil {
		return nil
	}
	return &ModelBudget{Root: b.root, Workflow: b.wf, Prices: b.prices, Handoffs: b.handoffs}
}

// tell takes what the model call of turn used, u: into the ledger the
// agent holds, or, as far as the model activity did not tell the root
// (told), to the root by signal; it remembers what it sent until it is
// known delivered.
func (b *agentBudget) tell(ctx workflow.Context, turn int, u runtime.AgentUsage, told string) {
	if b == nil {
		return
	}
	if b.loan != nil {
		b.loan.Lease.Count(u)
		return
	}
	usage := &troupe.BudgetUsage{Workflow: b.wf, Turn: turn, Usage: u}
	switch told {
	case toldDelivered:
		b.report, b.last = nil, nil
	case toldSent:
		b.report, b.last = nil, usage
	default:
		b.last = usage
		b.report = workflow.SignalExternalWorkflow(ctx, b.root, "", troupe.BudgetUsageSignal, *b.last)
	}
}

// carry is what the agent's next run takes when it continues as new: the
// ledger it holds, and the last call's usage until known delivered. A
// report sent by signal is waited for first.
func (b *agentBudget) carry(ctx workflow.Context) *AgentBudgetCarry {
	if b == nil {
		return nil
	}
	if b.report != nil {
		_ = b.report.Get(ctx, nil) // A root that is gone counts nothing more.
		b.report, b.last = nil, nil
	}
	if b.last == nil && b.loan == nil {
		return nil
	}
	return &AgentBudgetCarry{Last: b.last, Loan: b.loan}
}

// flush waits until the root has the last report, sending it if it was
// not known sent, so that the root has counted every call of the agent
// before anyone sees the agent end.
func (b *agentBudget) flush(ctx workflow.Context) {
	if b == nil || ctx.Err() != nil {
		return
	}
	if b.report == nil && b.last != nil {
		b.report = workflow.SignalExternalWorkflow(ctx, b.root, "", troupe.BudgetUsageSignal, *b.last)
	}
	if b.report != nil {
		_ = b.report.Get(ctx, nil) // A root that is gone counts nothing more.
	}
	b.report, b.last = nil, nil
}

// count takes what the agent's model call of turn used: in the agent's
// usage per agent, priced by the run's prices, and, with a budget, told
// to the root.
func (t *turnCalls) count(ctx workflow.Context, st *runtime.AgentState, turn int, mo *ModelOutput) {
	cost, priced := runtime.CallCost(t.spec.Prices, mo.Model, mo.Usage)
	if !priced && len(t.spec.Prices) > 0 {
		// A model the run's graph did not use when it started (an
		// edited graph): its calls count no cost.
		workflow.GetLogger(ctx).Warn("a model call has no price: its cost is not counted", "agent", t.agent.Name, "model", mo.Model)
	}
	u := runtime.AgentUsage{Agent: t.agent.Name, Usage: mo.Usage, Cost: cost}
	st.Count(u)
	t.budget.tell(ctx, turn, u, mo.Told)
}

// countTool counts what an agent tool's chain of agents used, failed or
// not (the result of a chain that failed holds the failed agent's
// usage), and has a spent budget stop the caller too.
func (t *turnCalls) countTool(rr *routeResult, err error, usage *model.Usage, fatal *error) {
	if rr != nil {
		if t.tree != nil {
			*t.tree = t.tree.Add(rr.Agents...)
		}
		if err != nil {
			*usage = usage.Add(rr.Usage) // Those that succeeded add theirs below.
		}
	}
	if troupe.ErrorType(err) == troupe.ErrBudgetExceeded {
		*fatal = err
	}
}

// countFailed adds what a failed agent carries back to the chain's
// usage.
func (res *routeResult) countFailed(err error) {
	u := usageFrom(err)
	res.Usage = res.Usage.Add(u.Total())
	res.Agents = res.Agents.Add(u...)
}

// budgetOrNil is b, or nil for a budget that limits nothing.
func budgetOrNil(b agents.Budget) *agents.Budget {
	if !b.Limits() {
		return nil
	}
	return &b
}

// checkBudget reports why a run of spec cannot keep budget b (nil: no
// budget): a negative limit, or a cost limit with a model of the graph
// that has no price.
func checkBudget(spec *runtime.GraphSpec, b *agents.Budget) error {
	if b == nil {
		return nil
	}
	if err := b.Check(); err != nil {
		return err
	}
	switch {
	case b.Cost == 0:
	case len(spec.Prices) == 0:
		return fmt.Errorf("%w: the budget limits cost, but graph %s has no prices: give it some (agents.Graph.WithPrices, or the worker's Config.Prices)",
			agents.ErrInvalidBudget, spec.Graph)
	case len(spec.Unpriced) > 0:
		return fmt.Errorf("%w: the budget limits cost, but model(s) %s of graph %s have no price: add them to the graph's prices (agents.Graph.WithPrices) or the worker's (Config.Prices)",
			agents.ErrInvalidBudget, strings.Join(spec.Unpriced, ", "), spec.Graph)
	}
	return nil
}

// prices is the price table of g's runs: the graph's and the worker's
// (which wins), for the models g's agents use, and those models without
// a price; both nil without a price table.
func (r *Runner) prices(g *agents.Graph) (agents.Prices, []string) {
	graph := g.Prices()
	if len(graph) == 0 && len(r.cfg.Prices) == 0 {
		return nil, nil
	}
	var models []string
	for _, a := range g.Agents() {
		if m := cmp.Or(a.Model, r.cfg.DefaultModel); !slices.Contains(models, m) {
			models = append(models, m)
		}
	}
	slices.Sort(models)
	prices, unpriced := agents.Prices{}, []string(nil)
	for _, m := range models {
		if p, ok := r.cfg.Prices[m]; ok {
			prices[m] = p
		} else if p, ok := graph[m]; ok {
			prices[m] = p
		} else {
			unpriced = append(unpriced, m)
		}
	}
	return prices, unpriced
}

// withBudget is g with its default budget and prices, taken before the
// runner rebuilt it, checked: NewRunner refuses a budget the graph's
// runs could not keep.
func (r *Runner) withBudget(g *agents.Graph, budget *agents.Budget, prices agents.Prices) (*agents.Graph, error) {
	if err := errors.Join(r.cfg.Prices.Check(), prices.Check()); err != nil {
		return nil, fmt.Errorf("workflows: graph %s: %w", g.Name(), err)
	}
	if prices != nil {
		g = g.WithPrices(prices)
	}
	if budget == nil {
		return g, nil
	}
	g = g.WithBudget(*budget)
	spec := &runtime.GraphSpec{Graph: g.Name()}
	spec.Prices, spec.Unpriced = r.prices(g)
	if err := checkBudget(spec, budget); err != nil {
		return nil, fmt.Errorf("workflows: graph %s: %w", g.Name(), err)
	}
	return g, nil
}

// budgetHint says how a session goes on once its budget is spent.
const budgetHint = `raise it with the session's budget command ("budget cost=N", "budget model_calls=N", or "budget off")`

// route runs a session's turn from rs, unless the session's budget is
// spent: then the turn fails at once, starting no agent.
func (s *session) route(ctx workflow.Context, rs routeState, prefix string) (*routeResult, error) {
	if why := s.st.Budget.Spent(); why != "" {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("the session's budget is spent (%s): %s", why, budgetHint),
			troupe.ErrBudgetExceeded, nil, s.st.Budget.Report())
	}
	budgeted := s.spec.Budget != nil
	rr, err := s.r.routeFrom(ctx, s.rec, s.spec, rs, prefix, nil, s.boxes, s.ctl, s.budget)
	if l := s.st.Budget; !budgeted && l != nil && rr != nil {
		// A budget set during the turn, whose agents did not report:
		// what they used counts now.
		for _, u := range rr.Agents {
			l.Count(u)
		}
		l.Calls += int64(rr.Usage.Requests)
	}
	s.budget.settle(ctx) // No agent of the turn lives.
	return rr, err
}

// changedBudget is the session's budget as the budget command's arg
// changes it (nil: no budget), or why it cannot be.
func (s *session) changedBudget(arg string) (*agents.Budget, error) {
	var cur agents.Budget
	if s.st.Budget != nil {
		cur = s.st.Budget.Budget
	}
	b, err := cur.Change(arg)
	if err != nil {
		return nil, err
	}
	nb := budgetOrNil(b)
	if s.spec == nil {
		return nb, nil // The manager's check: the session checks the prices.
	}
	return nb, checkBudget(s.spec, nb)
}

// setBudget changes the session's budget (the budget command): the
// ledger takes it at once, and the turns that start after ask under it.
// A session that had no budget starts one with what it spent so far.
func (s *session) setBudget(ctx workflow.Context, arg string) error {
	nb, err := s.changedBudget(arg)
	if err != nil {
		return err
	}
	spec := *s.spec
	spec.Budget = nb
	s.spec = &spec
	if s.st.Budget == nil {
		if nb == nil {
			return nil
		}
		s.st.Budget = &runtime.BudgetLedger{Agents: s.st.Agents, Calls: int64(s.st.Usage.Requests)}
	}
	var b agents.Budget
	if nb != nil {
		b = *nb
	}
	s.st.Budget.SetBudget(b)
	s.budget.changed(ctx)
	return nil
}

// usageFrom is the usage a failed agent's error carries back, per agent.
func usageFrom(err error) runtime.Usages { return troupe.FailureOf(err).Usage }
