package budget

import (
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/workflows/gate"
)

// Agent is an agent workflow's side of its tree's budget.
type Agent struct {
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

// NewAgent is the budget of an agent workflow of a run with one;
// nil otherwise (and for an agent with no root to ask, or replayed from
// before budgets). carry is what the agent's previous run carried.
func NewAgent(ctx workflow.Context, spec *runtime.GraphSpec, in troupe.AgentInput, wf string, agent *runtime.AgentSpec, carry *Carry) *Agent {
	if spec.Budget == nil || in.RunID == "" {
		return nil
	}
	if workflow.GetVersion(ctx, versionBudgets, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return nil
	}
	b := &Agent{root: in.RunID, wf: wf, agent: agent.Name, answers: workflow.GetSignalChannel(ctx, troupe.BudgetAnswerSignal)}
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
func (b *Agent) ask(ctx workflow.Context, turn int) error {
	if b == nil {
		return nil
	}
	if b.changed() && b.loan != nil {
		// The budget changed: the root decides with the new one, and
		// lends its ledger again.
		b.Release(ctx)
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
func (b *Agent) changed() bool {
	any := false
	for b.changes != nil && b.changes.ReceiveAsync(nil) {
		any = true
	}
	return any
}

// decide has the model call of turn start, or not, by the ledger the
// agent holds, as its root would.
func (b *Agent) decide(turn int) error {
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
func (b *Agent) answered(ans troupe.BudgetAnswer, turn int) error {
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
func (b *Agent) askByUpdate(ctx workflow.Context, ask troupe.BudgetAsk) (troupe.BudgetAnswer, bool, error) {
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

// Release gives the root its ledger back, if the agent holds it, before
// the agent starts agents of its own (agent tools, guardrail agents),
// which ask the root: the root has it before any of them asks.
func (b *Agent) Release(ctx workflow.Context) {
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

// GiveBack is the root's ledger, if the agent holds it, for its result:
// the agent ends, and the root (which started it) takes it back.
func (b *Agent) GiveBack() *troupe.BudgetLoan {
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
func (b *Agent) forModel() *troupe.ModelBudget {
	if b == nil || !b.byUpdate || b.loan != nil {
		return nil
	}
	return &troupe.ModelBudget{Root: b.root, Workflow: b.wf, Prices: b.prices, Handoffs: b.handoffs}
}

// tell takes what the model call of turn used, u: into the ledger the
// agent holds, or, as far as the model activity did not tell the root
// (told), to the root by signal; it remembers what it sent until it is
// known delivered.
func (b *Agent) tell(ctx workflow.Context, turn int, u runtime.AgentUsage, told string) {
	if b == nil {
		return
	}
	if b.loan != nil {
		b.loan.Lease.Count(u)
		return
	}
	usage := &troupe.BudgetUsage{Workflow: b.wf, Turn: turn, Usage: u}
	switch told {
	case troupe.ToldDelivered:
		b.report, b.last = nil, nil
	case troupe.ToldSent:
		b.report, b.last = nil, usage
	default:
		b.last = usage
		b.report = workflow.SignalExternalWorkflow(ctx, b.root, "", troupe.BudgetUsageSignal, *b.last)
	}
}

// Carry is what the agent's next run takes when it continues as new: the
// ledger it holds, and the last call's usage until known delivered. A
// report sent by signal is waited for first.
func (b *Agent) Carry(ctx workflow.Context) *Carry {
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
	return &Carry{Last: b.last, Loan: b.loan}
}

// Flush waits until the root has the last report, sending it if it was
// not known sent, so that the root has counted every call of the agent
// before anyone sees the agent end.
func (b *Agent) Flush(ctx workflow.Context) {
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

// Name names the gate.
func (b *Agent) Name() string { return "budget" }

// BeforeTurn asks for the turn's model call: refused (troupe.ErrBudgetExceeded)
// once the tree's budget is spent.
func (b *Agent) BeforeTurn(ctx workflow.Context, _ *gate.Turn, m *gate.ModelCall) error {
	return b.ask(ctx, m.Turn)
}

// AroundModel has the model activity tell the root what the call used,
// right after it, when the agent asks by update and holds no ledger.
func (b *Agent) AroundModel(ctx workflow.Context, _ *gate.Turn, m *gate.ModelCall, next func(workflow.Context) error) error {
	m.Report = b.forModel()
	return next(ctx)
}

// AfterModel takes what the call used: into the ledger the agent holds,
// or to the root as far as the model activity did not tell it.
func (b *Agent) AfterModel(ctx workflow.Context, _ *gate.Turn, m *gate.ModelCall) {
	b.tell(ctx, m.Turn, m.Usage, m.Told)
}

// BeforeChildren gives the root its ledger back before the agent starts
// agents of its own.
func (b *Agent) BeforeChildren(ctx workflow.Context, _ *gate.Turn) { b.Release(ctx) }
