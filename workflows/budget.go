package workflows

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/model"
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
//     and answers for it, in a coroutine of its own.
//  3. Before each model call, an agent workflow of a run with a budget
//     asks the root (BudgetAskSignal) and waits for its answer
//     (BudgetAnswerSignal). The root lets the call start, and counts it,
//     unless a limit is reached. After the call the agent tells the root
//     at once what it used (BudgetUsageSignal), priced by the run's
//     prices, and tells it again with its next ask if that report is not
//     known delivered by then (the root counts a call once:
//     runtime.BudgetLedger.CountCall); before it ends it waits for its
//     last report to be delivered. So the root has counted every call of
//     an agent before it answers the agent's next ask, and every call of
//     an agent that ended. A call is thus let start only if every call
//     the root had news of when it answered left the budget unspent: once
//     it is spent, no agent of the tree starts another, however many run
//     in parallel; calls already running finish and count (a ModelCalls
//     limit is never passed; a token or cost limit by what those calls
//     used).
//  4. An agent refused fails with troupe.BudgetExceeded; an agent whose
//     agent-as-tool fails so fails too (agents working in parallel stop
//     at their next ask), and the root ends the run with
//     troupe.BudgetExceeded, whose details are the ledger's report
//     (runtime.BudgetReport: the budget, the calls, the usage and cost
//     per agent; BudgetReportOf reads it). The root records each refusal
//     as a budget_exceeded event.
//  5. A session's budget spans its turns: the turn that runs out fails
//     with troupe.BudgetExceeded and the session lives on, refusing
//     messages (troupe.BudgetExceeded, saying how to go on) until its
//     budget command (SessionCommand{Op: "budget", Arg: "cost=2"}) raises
//     the budget or lifts it ("off"), for the turns after.
//
// What it costs: a run without a budget exchanges no message and records
// no marker; it pays nothing. With one, each model call takes a round trip
// to the root before it starts (the ask and its answer: a workflow task of
// the root's and one more of the agent's) and a signal after it, about
// ten history events at the root, which the root's history carries until
// it continues as new (a session between turns, a run between two agents
// of its chain); each agent workflow waits once more, at its end, for its
// last report to be delivered. BenchmarkBudgetOverhead measures it.
//
// Usage per agent: every agent workflow keeps its usage per agent (its
// own calls, and those of the agents it ran as tools: runtime.Usages, in
// its state), priced by the run's prices, whether the run has a budget
// or not. Its result carries it, and so does its failure (the error's
// details), so a failed agent-as-tool's usage still counts in its
// caller's, and a run's result (RunResult.Agents, Cost), a session's turn
// (TurnRecord.Agents, Cost) and the session (SessionInfo.Agents, Cost)
// report it. An agent cancelled mid-call reports nothing back; the ledger
// of a run with a budget counts its calls all the same. Memory
// consolidation's model calls belong to the memory scope, not the run.

// Names of the budgets' messages and query.
const (
	// BudgetAskSignal asks the root whether a model call may start
	// (BudgetAsk).
	BudgetAskSignal = "troupe.budget-ask"
	// BudgetAnswerSignal answers an ask (BudgetAnswer).
	BudgetAnswerSignal = "troupe.budget-answer"
	// BudgetUsageSignal tells the root what a model call used
	// (BudgetUsage).
	BudgetUsageSignal = "troupe.budget-usage"
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

// versionBudgets marks agent workflows that ask their root before each
// model call. The marker is written only in runs with a budget.
const versionBudgets = "troupe.budgets"

// BudgetAsk asks the root whether the model call of an agent's turn may
// start.
type BudgetAsk struct {
	Workflow string `json:"workflow"`
	Agent    string `json:"agent"`
	Turn     int    `json:"turn"`
	// Last is the usage of the agent's last call, when its report is not
	// known delivered.
	Last *BudgetUsage `json:"last,omitempty"`
}

// BudgetAnswer is the root's answer to an ask: the call starts, or not.
type BudgetAnswer struct {
	Turn int `json:"turn"`
	// Refused, when set, says why the call may not start.
	Refused string `json:"refused,omitempty"`
}

// BudgetUsage tells the root what the model call of an agent's turn used.
type BudgetUsage struct {
	Workflow string             `json:"workflow"`
	Turn     int                `json:"turn"`
	Usage    runtime.AgentUsage `json:"usage"`
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
		rep.Agents = failureOf(err).Usage
		rep.Usage, rep.Cost = rep.Agents.Total(), rep.Agents.Cost()
	}
	return &rep, true
}

// treeBudget is the ledger of a root (a run's orchestrator, a session)
// with the messages it takes.
type treeBudget struct {
	// ledger is where the root keeps its ledger (nil for no budget).
	ledger **runtime.BudgetLedger
	rec    *recorder
	// what is the root's kind for people ("run", "session"); hint says
	// how to go on once the budget is spent.
	what, hint string
	asks       workflow.ReceiveChannel
	usage      workflow.ReceiveChannel
	// refused is the first refusal's reason, which the root's error
	// repeats.
	refused string
}

// newTreeBudget sets the root's budget handlers up on the ledger at
// ledger; listen has it take the messages of its tree's agents (a root
// that can have no budget takes none).
func newTreeBudget(ctx workflow.Context, ledger **runtime.BudgetLedger, listen bool, rec *recorder, what, hint string) (*treeBudget, error) {
	b := &treeBudget{ledger: ledger, rec: rec, what: what, hint: hint,
		asks: workflow.GetSignalChannel(ctx, BudgetAskSignal), usage: workflow.GetSignalChannel(ctx, BudgetUsageSignal)}
	if err := workflow.SetQueryHandler(ctx, BudgetQuery, func() (*runtime.BudgetReport, error) {
		return (*b.ledger).Report(), nil
	}); err != nil {
		return nil, err
	}
	if !listen {
		return b, nil
	}
	workflow.Go(ctx, func(gctx workflow.Context) {
		for gctx.Err() == nil {
			workflow.NewSelector(gctx).
				AddReceive(b.asks, func(workflow.ReceiveChannel, bool) { b.takeAsk(gctx) }).
				AddReceive(b.usage, func(workflow.ReceiveChannel, bool) { b.takeUsage() }).
				Select(gctx)
		}
	})
	return b, nil
}

// drain takes the messages that came in and were not taken yet: before
// the root continues as new, or reports.
func (b *treeBudget) drain(ctx workflow.Context) {
	for b.takeUsage() || b.takeAsk(ctx) {
	}
}

// takeAsk answers an ask: the call starts unless the budget is spent.
// An ask always gets an answer, or its agent would wait for ever.
func (b *treeBudget) takeAsk(ctx workflow.Context) bool {
	var ask BudgetAsk
	if !b.asks.ReceiveAsync(&ask) {
		return false
	}
	// Reports that came with the ask count first.
	for b.takeUsage() {
	}
	if u := ask.Last; u != nil {
		(*b.ledger).CountCall(u.Workflow, u.Turn, u.Usage)
	}
	ans := BudgetAnswer{Turn: ask.Turn}
	if why := (*b.ledger).Ask(); why != "" {
		ans.Refused = fmt.Sprintf("the %s's budget is spent (%s)", b.what, why)
		if b.hint != "" {
			ans.Refused += ": " + b.hint
		}
		if b.refused == "" {
			b.refused = ans.Refused
		}
		b.rec.add(ctx, Event{Kind: EventBudgetExceeded, Agent: ask.Agent, Turn: ask.Turn, Child: ask.Workflow,
			Detail: fmt.Sprintf("the model call of %s (turn %d) was refused: %s", ask.Agent, ask.Turn, ans.Refused)})
	}
	// No wait for the signal's delivery: the root answers the next ask
	// at once. An agent that ended meanwhile needs no answer.
	workflow.SignalExternalWorkflow(ctx, ask.Workflow, "", BudgetAnswerSignal, ans)
	return true
}

func (b *treeBudget) takeUsage() bool {
	var u BudgetUsage
	if !b.usage.ReceiveAsync(&u) {
		return false
	}
	(*b.ledger).CountCall(u.Workflow, u.Turn, u.Usage)
	return true
}

// settle forgets which calls were counted, once no agent of the tree
// lives: the messages that came are taken first.
func (b *treeBudget) settle(ctx workflow.Context) {
	b.drain(ctx)
	(*b.ledger).Settle()
}

// exceeded is the root's error for a tree that failed with err: a
// troupe.BudgetExceeded one gets the ledger's report as its details.
func (b *treeBudget) exceeded(ctx workflow.Context, err error) error {
	if ErrorType(err) != ErrBudgetExceeded || *b.ledger == nil {
		return err
	}
	b.drain(ctx)
	msg := b.refused
	if msg == "" {
		msg = strings.TrimPrefix(failureText(err), ErrBudgetExceeded+": ")
	}
	return temporal.NewNonRetryableApplicationError(msg, ErrBudgetExceeded, err, (*b.ledger).Report())
}

// runBudget sets a run's budget up at its root: the ledger it carried, or
// a new one for a budget in its spec.
func (r *Runner) runBudget(ctx workflow.Context, spec *runtime.GraphSpec, carry *RunCarry, rec *recorder) (*treeBudget, error) {
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
	// report is the last usage report, and last what it tells, until it
	// is known delivered.
	report workflow.Future
	last   *BudgetUsage
}

// newAgentBudget is the budget of an agent workflow of a run with one;
// nil otherwise (and for an agent with no root to ask, or replayed from
// before budgets).
func newAgentBudget(ctx workflow.Context, spec *runtime.GraphSpec, in AgentInput, wf, agent string) *agentBudget {
	if spec.Budget == nil || in.RunID == "" {
		return nil
	}
	if workflow.GetVersion(ctx, versionBudgets, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return nil
	}
	return &agentBudget{root: in.RunID, wf: wf, agent: agent, answers: workflow.GetSignalChannel(ctx, BudgetAnswerSignal)}
}

// ask asks the root whether the model call of turn may start, and waits
// for the answer: nil to start it, a troupe.BudgetExceeded error when the
// budget is spent.
func (b *agentBudget) ask(ctx workflow.Context, turn int) error {
	if b == nil {
		return nil
	}
	ask := BudgetAsk{Workflow: b.wf, Agent: b.agent, Turn: turn}
	if b.report != nil && !b.report.IsReady() {
		ask.Last = b.last // Rather than wait for the report.
	}
	b.report, b.last = nil, nil
	if err := workflow.SignalExternalWorkflow(ctx, b.root, "", BudgetAskSignal, ask).Get(ctx, nil); err != nil {
		if ctx.Err() != nil {
			return temporal.NewCanceledError()
		}
		return nonRetryable(ErrInternal, "agent %s could not ask the root of its run (%s) for its model call: %v", b.agent, b.root, err)
	}
	for {
		if err := workflow.Await(ctx, func() bool { return b.answers.Len() > 0 }); err != nil {
			return err
		}
		var ans BudgetAnswer
		b.answers.ReceiveAsync(&ans)
		if ans.Turn != turn {
			continue // An answer to an ask of an earlier run: none waits for it.
		}
		if ans.Refused != "" {
			return nonRetryable(ErrBudgetExceeded, "agent %s stopped before its model call of turn %d: %s", b.agent, turn, ans.Refused)
		}
		return nil
	}
}

// tell tells the root what the model call of turn used.
func (b *agentBudget) tell(ctx workflow.Context, turn int, u runtime.AgentUsage) {
	if b == nil {
		return
	}
	b.last = &BudgetUsage{Workflow: b.wf, Turn: turn, Usage: u}
	b.report = workflow.SignalExternalWorkflow(ctx, b.root, "", BudgetUsageSignal, *b.last)
}

// flush waits until the root has the last report, so that it has counted
// every call of the agent before anyone sees the agent end.
func (b *agentBudget) flush(ctx workflow.Context) {
	if b == nil || b.report == nil || ctx.Err() != nil {
		return
	}
	_ = b.report.Get(ctx, nil) // A root that is gone counts nothing more.
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
	t.budget.tell(ctx, turn, u)
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
	if ErrorType(err) == ErrBudgetExceeded {
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
			ErrBudgetExceeded, nil, s.st.Budget.Report())
	}
	budgeted := s.spec.Budget != nil
	rr, err := s.r.routeFrom(ctx, s.rec, s.spec, rs, prefix, nil, s.boxes, s.ctl)
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
func (s *session) setBudget(arg string) error {
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
	return nil
}
