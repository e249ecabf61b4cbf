package troupe

import (
	"errors"

	"go.temporal.io/sdk/temporal"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
)

// Names of the budgets' messages and query.
const (
	// BudgetAskUpdate asks the root whether a model call may start
	// (BudgetAsk) and returns its answer (BudgetAnswer): the ask the
	// budget-ask activity sends (BudgetAskActivityName).
	BudgetAskUpdate = "troupe.budget-ask-update"
	// BudgetAskSignal asks the root whether a model call may start
	// (BudgetAsk), to be answered by BudgetAnswerSignal: the ask of an
	// agent whose update could not go, and of runs from before updates.
	BudgetAskSignal = "troupe.budget-ask"
	// BudgetAnswerSignal answers an ask (BudgetAnswer).
	BudgetAnswerSignal = "troupe.budget-answer"
	// BudgetUsageSignal tells the root what a model call used
	// (BudgetUsage).
	BudgetUsageSignal = "troupe.budget-usage"
	// BudgetReturnSignal gives the root back its ledger, lent to an agent
	// (BudgetReturn).
	BudgetReturnSignal = "troupe.budget-return"
	// BudgetChangeSignal tells the agent that holds its root's ledger
	// that the budget changed (a session's budget command), so that it
	// gives the ledger back.
	BudgetChangeSignal = "troupe.budget-change"
	// BudgetQuery answers, at the root of a run or session, with what it
	// spent of its budget (*runtime.BudgetReport, nil for no budget).
	BudgetQuery = "troupe.budget"
	// CommandBudget changes a session's budget (SessionCommand.Arg: see
	// agents.Budget.Change), from its next model call on.
	CommandBudget = "budget"
	// EventBudgetExceeded records, at the root, a model call refused
	// because the budget is spent.
	EventBudgetExceeded = "budget_exceeded"
)

// BudgetAsk asks the root whether the model call of an agent's turn may
// start.
type BudgetAsk struct {
	Workflow string `json:"workflow"`
	Agent    string `json:"agent"`
	Turn     int    `json:"turn"`
	// Last is the usage of the agent's last call, when its report is not
	// known delivered.
	Last *BudgetUsage `json:"last,omitempty"`
	// Alone says the agent is the one agent of its tree at work (an
	// agent of the run's chain, or the session turn's, with none of its
	// own running), so the root may lend it its ledger with the answer.
	Alone bool `json:"alone,omitempty"`
}

// BudgetAnswer is the root's answer to an ask: the call starts, or not.
type BudgetAnswer struct {
	Turn int `json:"turn"`
	// Refused, when set, says why the call may not start.
	Refused string `json:"refused,omitempty"`
	// Loan, to an agent alone (BudgetAsk.Alone), is the root's ledger,
	// lent with the call let start.
	Loan *BudgetLoan `json:"loan,omitempty"`
}

// BudgetUsage tells the root what the model call of an agent's turn used.
type BudgetUsage struct {
	Workflow string             `json:"workflow"`
	Turn     int                `json:"turn"`
	Usage    runtime.AgentUsage `json:"usage"`
}

// BudgetLoan is a root's ledger lent to the one agent of its tree at
// work (a runtime.BudgetLease), which decides its own model calls with
// it, asking no one: on its way to the agent (AgentInput.Budget,
// BudgetAnswer.Loan) and back (AgentResult.Budget, a failed or cancelled
// agent's details, BudgetReturnSignal).
type BudgetLoan struct {
	Lease runtime.BudgetLease `json:"lease"`
	// What and Hint word a refusal as the root would: "the <What>'s
	// budget is spent (...): <Hint>".
	What string `json:"what"`
	Hint string `json:"hint,omitempty"`
	// Refused is the call the holder refused, if it did, which the root
	// records.
	Refused *BudgetRefusal `json:"refused,omitempty"`
}

// BudgetRefusal is a model call an agent that held its root's ledger
// refused: the agent, the turn, and why.
type BudgetRefusal struct {
	Agent  string `json:"agent"`
	Turn   int    `json:"turn"`
	Reason string `json:"reason"`
}

// BudgetReturn gives a root its ledger back from the agent workflow it
// lent it to, before the agent starts agents of its own.
type BudgetReturn struct {
	Workflow string     `json:"workflow"`
	Loan     BudgetLoan `json:"loan"`
}

// BudgetReportOf returns the report a troupe.BudgetExceeded error carries:
// the budget, and what the tree spent, per agent.
func BudgetReportOf(err error) (*runtime.BudgetReport, bool) {
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != ErrBudgetExceeded || !ae.HasDetails() {
		return nil, false
	}
	var rep runtime.BudgetReport
	if ae.Details(&rep) != nil {
		return nil, false
	}
	if rep.Agents == nil {
		// An agent's own failure (of a tree with no root to report):
		// its usage.
		rep.Agents = FailureOf(err).Usage
		rep.Usage, rep.Cost = rep.Agents.Total(), rep.Agents.Cost()
	}
	return &rep, true
}

// ModelBudget is what the model activity of an agent of a run with a
// budget does for it (ModelInput.Budget): it tells the root (of the run,
// for the agent workflow) what the call used, priced by the run's prices,
// right after the call. Handoffs are the agent's handoffs, after which it
// ends.
type ModelBudget struct {
	Root     string        `json:"root"`
	Workflow string        `json:"workflow"`
	Prices   agents.Prices `json:"prices,omitempty"`
	Handoffs []string      `json:"handoffs,omitempty"`
}

// How the model activity told the root what its call used
// (ModelOutput.Told).
const (
	// ToldNot: not at all; the agent workflow tells it.
	ToldNot = ""
	// ToldDelivered: the root has it.
	ToldDelivered = "delivered"
	// ToldSent: sent, and not waited for; the agent's next ask carries it
	// again, and its end sends it again.
	ToldSent = "sent"
)
