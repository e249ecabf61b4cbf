package budget

import (
	"context"
	"fmt"
	"hash/maphash"
	"slices"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/model"
)

// Activities send an agent's asks and returns to the root of its run, and
// the model activity's reports of what a call used, with the worker's
// client.
type Activities struct {
	// OnWorker reports whether the activities run on a Temporal worker,
	// whose activities have a client (activity.GetClient) to reach the
	// root with; a test environment's have none, and the agents then ask
	// by signal.
	OnWorker func() bool

	asks *askSlots
}

// NewActivities is the activities; onWorker is Activities.OnWorker.
func NewActivities(onWorker func() bool) *Activities {
	return &Activities{OnWorker: onWorker, asks: newAskSlots()}
}

// Register registers the activities on w.
func (a *Activities) Register(w worker.ActivityRegistry) {
	w.RegisterActivityWithOptions(a.BudgetAsk, activity.RegisterOptions{Name: BudgetAskActivityName})
	w.RegisterActivityWithOptions(a.BudgetReturn, activity.RegisterOptions{Name: BudgetReturnActivityName})
}

func (a *Activities) onWorker() bool { return a.OnWorker != nil && a.OnWorker() }

// This file holds the activities' side of budgets: the ask an
// agent sends its root by update, from a local activity; what the model
// activity tells the root right after the call (its usage); and the
// ledger an agent gives its root back. All go with the worker's client,
// so the agent's workflow takes no task of its own for them; it falls
// back to signals where they cannot go.

// versionBudgetAsks marks agent workflows that ask their root by update,
// from a local activity, whose model activity tells the root what each
// call used, and that take their root's ledger when lent (BudgetLoan).
// The marker is written only in runs with a budget.
const versionBudgetAsks = "troupe.budget-asks"

// BudgetAskActivityName is the local activity that asks the root of a run
// by update (BudgetAskUpdate) whether an agent's model call may start.
const BudgetAskActivityName = "troupe.BudgetAsk"

// BudgetAskInput is the budget-ask activity's input: the ask, and the
// root's workflow id.
type BudgetAskInput struct {
	Root string           `json:"root"`
	Ask  troupe.BudgetAsk `json:"ask"`
}

// BudgetAskOutput is the budget-ask activity's result: the root's answer,
// or why the ask could not go by update (the agent then asks by signal).
type BudgetAskOutput struct {
	Answer *troupe.BudgetAnswer `json:"answer,omitempty"`
	Unsent string               `json:"unsent,omitempty"`
}

// BudgetReturnActivityName is the local activity that gives the root of
// a run its ledger back (BudgetReturnSignal), and waits until the root
// has it.
const BudgetReturnActivityName = "troupe.BudgetReturn"

// BudgetReturnInput is the budget-return activity's input.
type BudgetReturnInput struct {
	Root   string              `json:"root"`
	Return troupe.BudgetReturn `json:"return"`
}

// Carry is what an agent workflow carries of its budget into
// its next run: its root's ledger, when lent to it, and the usage of its
// last call, until known delivered.
type Carry struct {
	Loan *troupe.BudgetLoan  `json:"loan,omitempty"`
	Last *troupe.BudgetUsage `json:"last,omitempty"`
}

// budgetAskTimeout bounds the budget-ask activity; the update it sends
// waits for the root's answer up to budgetAskWait, less, so that the
// activity comes back with the ask unsent rather than time out.
const (
	budgetAskTimeout = time.Minute
	budgetAskWait    = 45 * time.Second
)

// BudgetAsk asks the root of a run whether an agent's model call may
// start, with a Workflow Update (BudgetAskUpdate) whose id is the agent
// workflow's and the turn's (budgetAskID), and returns the answer. The
// id makes the ask once-only: the same ask sent again (the activity run
// again after a crash) is answered as the first was, by the server. An
// ask that cannot go so comes back unsent, saying why, and the agent asks
// by signal: without a client (a test environment), a root gone or that
// takes no such update (a worker from before it), or one that took too
// many updates in its run (the server's history.maxTotalUpdates).
func (a *Activities) BudgetAsk(ctx context.Context, in BudgetAskInput) (*BudgetAskOutput, error) {
	if !a.onWorker() {
		return &BudgetAskOutput{Unsent: "no Temporal client: the activity does not run on a worker"}, nil
	}
	ans, err := a.askRoot(ctx, activity.GetClient(ctx), in.Root, in.Ask)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return &BudgetAskOutput{Unsent: err.Error()}, nil
	}
	return &BudgetAskOutput{Answer: &ans}, nil
}

// BudgetReturn gives the root its ledger back, by signal, and reports
// whether the root has it (false: the agent sends it itself).
func (a *Activities) BudgetReturn(ctx context.Context, in BudgetReturnInput) (bool, error) {
	if !a.onWorker() {
		return false, nil
	}
	// A signal the server took is in the root's history before any ask
	// sent after it.
	err := activity.GetClient(ctx).SignalWorkflow(ctx, in.Root, "", troupe.BudgetReturnSignal, in.Return)
	return err == nil, nil
}

// askRoot sends ask to root by update and waits for the answer, up to
// budgetAskWait.
func (a *Activities) askRoot(ctx context.Context, c client.Client, root string, ask troupe.BudgetAsk) (troupe.BudgetAnswer, error) {
	release, err := a.asks.take(ctx, root)
	if err != nil {
		return troupe.BudgetAnswer{}, err
	}
	defer release()
	ctx, cancel := context.WithTimeout(ctx, budgetAskWait)
	defer cancel()
	var ans troupe.BudgetAnswer
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: root, UpdateName: troupe.BudgetAskUpdate, UpdateID: budgetAskID(ask),
		Args: []any{ask}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(ctx, &ans)
	}
	return ans, err
}

// budgetAskID is the update id of an ask: one per agent workflow and
// turn, which its retries share.
func budgetAskID(ask troupe.BudgetAsk) string {
	return fmt.Sprintf("budget-ask/%s/%d", ask.Workflow, ask.Turn)
}

// TellRoot tells the root of the run what the model call of run's turn
// used (modelName names the model that prices it, step is what the agent
// does next), when mb says where (the model input's Budget), while the caller stores
// the call's output; the channel it returns says, once, how (a toldX).
//
// A call after which the agent ends (a final output, a handoff) is told
// and waited for, so that the root has it before anyone sees the agent
// end. Otherwise the report goes without a wait: the agent's next ask
// carries it again (the root counts a call's usage once, by its turn),
// and so does its end.
func (a *Activities) TellRoot(ctx context.Context, mb *troupe.ModelBudget, run agents.RunContext, modelName string, u model.Usage, step runtime.Step) <-chan string {
	told := make(chan string, 1)
	if mb == nil || !a.onWorker() {
		told <- troupe.ToldNot
		return told
	}
	cost, _ := runtime.CallCost(mb.Prices, modelName, u)
	report := troupe.BudgetUsage{Workflow: mb.Workflow, Turn: run.Turn, Usage: runtime.AgentUsage{Agent: run.Agent, Usage: u, Cost: cost}}
	c, log := activity.GetClient(ctx), activity.GetLogger(ctx)
	ends := step.Final != nil || slices.ContainsFunc(step.Calls, func(it agents.Item) bool { return slices.Contains(mb.Handoffs, it.Name) })
	if ends {
		go func() {
			if err := c.SignalWorkflow(ctx, mb.Root, "", troupe.BudgetUsageSignal, report); err != nil {
				log.Warn("the root of the run did not take a model call's usage: the agent workflow tells it", "root", mb.Root, "error", err)
				told <- troupe.ToldNot
				return
			}
			told <- troupe.ToldDelivered
		}()
		return told
	}
	// The report outlives the activity, which does not wait for it.
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), budgetAskWait)
	go func() {
		defer cancel()
		if err := c.SignalWorkflow(bctx, mb.Root, "", troupe.BudgetUsageSignal, report); err != nil {
			log.Debug("a model call's usage did not go: the agent's next ask carries it", "root", mb.Root, "error", err)
		}
	}()
	told <- troupe.ToldSent
	return told
}

// askSlots bounds the budget asks this process has in flight to one
// root: the server takes at most history.maxInFlightUpdates (10 by
// default) updates in flight to a workflow, and the client retries one it
// refused only after 200 ms or more, where a slot here frees within the
// root's next workflow task. Roots share askStripes stripes, by hash.
type askSlots struct {
	seed    maphash.Seed
	stripes [askStripes]chan struct{}
}

const (
	askStripes = 64
	// asksPerRoot leaves room for the root's other updates (a client
	// waiting for a session's turn, say).
	asksPerRoot = 6
)

func newAskSlots() *askSlots {
	s := &askSlots{seed: maphash.MakeSeed()}
	for i := range s.stripes {
		s.stripes[i] = make(chan struct{}, asksPerRoot)
	}
	return s
}

// take waits for a slot for an ask to root, and returns the func that
// frees it.
func (s *askSlots) take(ctx context.Context, root string) (func(), error) {
	slots := s.stripes[maphash.String(s.seed, root)%askStripes]
	select {
	case slots <- struct{}{}:
		return func() { <-slots }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
