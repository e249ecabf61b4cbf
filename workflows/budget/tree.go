package budget

import (
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/workflows/events"
)

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

// Tree is the ledger of a root (a run's orchestrator, a session)
// with the messages it takes.
type Tree struct {
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

// NewTree sets the root's budget handlers up on the ledger at
// ledger; listen has it take the messages of its tree's agents (a root
// that can have no budget takes none).
func NewTree(ctx workflow.Context, ledger **runtime.BudgetLedger, listen bool, rec *events.Recorder, what, hint string) (*Tree, error) {
	b := &Tree{ledger: ledger, rec: rec, what: what, hint: hint,
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

// Drain takes the messages that came in and were not taken yet: before
// the root continues as new, or reports.
func (b *Tree) Drain(ctx workflow.Context) {
	for b.takeReturn(ctx) || b.takeUsage() || b.takeAsk(ctx) {
	}
}

// takeAsk answers an ask that came by signal: the call starts unless the
// budget is spent. An ask always gets an answer, or its agent would wait
// for ever.
func (b *Tree) takeAsk(ctx workflow.Context) bool {
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
func (b *Tree) answer(ctx workflow.Context, ask troupe.BudgetAsk) troupe.BudgetAnswer {
	// What came before the ask counts first: the reports of calls that
	// Ended before it was sent, the ledger given back.
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
		ans.Loan = b.Lend(ctx, ask.Workflow)
	}
	return ans
}

// refuse records a refused call.
func (b *Tree) refuse(ctx workflow.Context, wf string, r troupe.BudgetRefusal) {
	if b.refused == "" {
		b.refused = r.Reason
	}
	b.rec.Add(ctx, troupe.Event{Kind: troupe.EventBudgetExceeded, Agent: r.Agent, Turn: r.Turn, Child: wf,
		Detail: fmt.Sprintf("the model call of %s (turn %d) was refused: %s", r.Agent, r.Turn, r.Reason)})
}

func (b *Tree) takeUsage() bool {
	var u troupe.BudgetUsage
	if !b.usage.ReceiveAsync(&u) {
		return false
	}
	(*b.ledger).CountCall(u.Workflow, u.Turn, u.Usage)
	return true
}

// Lend lends the ledger to the agent workflow wf, the one agent of the
// tree at work: nil when there is no budget, or the ledger is lent
// already, or for a root that does not lend (recorded before loans).
func (b *Tree) Lend(ctx workflow.Context, wf string) *troupe.BudgetLoan {
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
func (b *Tree) repay(ctx workflow.Context, wf string, loan *troupe.BudgetLoan) {
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

func (b *Tree) takeReturn(ctx workflow.Context) bool {
	var r troupe.BudgetReturn
	if !b.returns.ReceiveAsync(&r) {
		return false
	}
	b.repay(ctx, r.Workflow, &r.Loan)
	return true
}

// Ended takes back the ledger lent to the child agent workflow wf, which
// ended with res or err: its result carries the loan, as does its
// failure or cancellation, unless it gave it back before.
func (b *Tree) Ended(ctx workflow.Context, wf string, res *troupe.AgentResult, err error) {
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

// Changed tells the agent that holds the ledger, if one does, that the
// budget changed: it gives the ledger back before its next call, which
// the root decides on the new budget.
func (b *Tree) Changed(ctx workflow.Context) {
	if b == nil || b.lent == "" {
		return
	}
	workflow.SignalExternalWorkflow(ctx, b.lent, "", troupe.BudgetChangeSignal, nil)
}

// Settle forgets which calls were counted, once no agent of the tree
// lives: the messages that came are taken first.
func (b *Tree) Settle(ctx workflow.Context) {
	b.Drain(ctx)
	b.lent = ""
	(*b.ledger).Settle()
}

// Exceeded is the root's error for a tree that failed with err: a
// troupe.BudgetExceeded one gets the ledger's report as its details.
func (b *Tree) Exceeded(ctx workflow.Context, err error) error {
	if troupe.ErrorType(err) != troupe.ErrBudgetExceeded || *b.ledger == nil {
		return err
	}
	b.Drain(ctx)
	msg := b.refused
	if msg == "" {
		msg = strings.TrimPrefix(troupe.FailureText(err), troupe.ErrBudgetExceeded+": ")
	}
	return temporal.NewNonRetryableApplicationError(msg, troupe.ErrBudgetExceeded, err, (*b.ledger).Report())
}

// NewRunTree sets a run's budget up at its root: the ledger it carried
// (carried, nil for none), or a new one for a budget in its spec.
func NewRunTree(ctx workflow.Context, spec *runtime.GraphSpec, carried *runtime.BudgetLedger, rec *events.Recorder) (*Tree, error) {
	ledger := runtime.NewBudgetLedger(spec.Budget)
	if carried != nil {
		ledger = carried
	}
	return NewTree(ctx, &ledger, ledger != nil, rec, "run", "")
}

// Ledger is the root's ledger, nil for no budget: while it is lent, it
// lacks what the holder spent since.
func (b *Tree) Ledger() *runtime.BudgetLedger { return *b.ledger }

// SessionHint says how a session goes on once its budget is spent.
const SessionHint = `raise it with the session's budget command ("budget cost=N", "budget model_calls=N", or "budget off")`
