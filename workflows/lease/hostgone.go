package lease

// A host that dies whole takes its workers, its sandboxes and their
// workspaces with it. A sandbox activity on its store's queue then shows
// one of two timeouts: a heartbeat timeout when the activity ran there,
// a schedule-to-start timeout when nobody took it. A heartbeat timeout
// alone cannot tell a dead host from a dead worker on a live host (whose
// next worker resumes the sandbox: a call runs again there), so the
// workflow asks the server (StoreServed, a local activity) whether any
// worker other than the one that stopped answering polls the store's
// queue. None: the host is gone. Either way, a host taken as gone is
// remembered (hosts), and nothing more is sent there by the workflow: a
// call, a snapshot or a stop of a sandbox on it is not scheduled (not
// waited for), the sandbox is lost at once, the next need restores its
// last snapshot elsewhere, and the reaper of its host removes what is
// left when the host comes back (KeepOwned). So a host loss costs a run
// one HostTimeout, never two. A host that comes back (restarted on the
// same disk, so its store and queue are the same) is taken as back when
// a worker of its store makes a sandbox of the workflow's.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/runtime"
)

// StoreServedActivityName asks the server whether a worker polls a
// sandbox store's queue.
const StoreServedActivityName = "troupe.StoreServed"

// PollerFresh is how recent a worker's last poll of a queue must be for
// StoreServed to count it: a live worker keeps a poll open for up to a
// minute, then polls again, while the server lists a dead worker's polls
// for minutes.
const PollerFresh = 75 * time.Second

// versionHostGone marks the change to agents and sessions that ask,
// after a sandbox activity's worker stopped heartbeating, whether its
// host is gone (StoreServed) rather than run it there again, and that
// send nothing more to a host taken as gone. The marker is written only
// when a sandbox activity timed out.
const versionHostGone = "troupe.host-gone"

// StoreServedInput asks whether a worker other than Gone polls Queue.
type StoreServedInput struct {
	// Queue is the task queue of the sandbox store.
	Queue string `json:"queue"`
	// Gone is the identity of the worker that stopped answering: its
	// polls, still listed, do not count.
	Gone string `json:"gone,omitempty"`
}

// StoreServed reports whether a worker other than in.Gone polled the
// activity tasks of in.Queue within PollerFresh. It answers true when the
// server cannot say (no client, an error), so that the caller does as it
// did before it asked: it waits for the host.
func (a *Activities) StoreServed(ctx context.Context, in StoreServedInput) (bool, error) {
	if !activity.IsActivity(ctx) {
		return true, nil
	}
	c := activity.GetClient(ctx)
	if c == nil {
		return true, nil
	}
	d, err := c.DescribeTaskQueue(ctx, in.Queue, enums.TASK_QUEUE_TYPE_ACTIVITY)
	if err != nil {
		activity.GetLogger(ctx).Warn("cannot tell whether the sandbox store's queue is served; taking it as served", "queue", in.Queue, "error", err)
		return true, nil
	}
	return servedBy(d.GetPollers(), in.Gone, time.Now()), nil
}

// servedBy reports whether a poller other than gone polled within
// PollerFresh of now.
func servedBy(pollers []*taskqueue.PollerInfo, gone string, now time.Time) bool {
	for _, p := range pollers {
		if gone != "" && p.GetIdentity() == gone {
			continue
		}
		if now.Sub(p.GetLastAccessTime().AsTime()) < PollerFresh {
			return true
		}
	}
	return false
}

// versionHostBack marks the change to agents and sessions that take a
// store they took as gone as back once a worker of it made their sandbox
// (its host restarted on the same disk): before it, every call of that
// sandbox was refused as sent to a gone host, and the sandbox was lost
// again at each call. The marker is written only when a sandbox is made
// on a store taken as gone.
const versionHostBack = "troupe.host-back"

// Hosts are the sandbox stores (by task queue) a workflow took as gone:
// it sends them nothing more, until a worker of one makes a sandbox of
// the workflow's (its host came back on the same disk: takeBack). A
// session's Keeper shares one among its agents' Lives. It is workflow
// state, made from history.
type Hosts struct{ gone map[string]string }

// Gone reports whether the store of queue is taken as gone, and why.
func (h *Hosts) Gone(queue string) (string, bool) {
	if h == nil || h.gone == nil {
		return "", false
	}
	why, ok := h.gone[queue]
	return why, ok
}

func (h *Hosts) mark(queue, why string) {
	if h.gone == nil {
		h.gone = map[string]string{}
	}
	if _, ok := h.gone[queue]; !ok {
		h.gone[queue] = why
	}
}

// takeBack takes the store of queue as back, when the workflow took it
// as gone, for a worker of it just made a sandbox of the workflow's: it
// reports why it was taken as gone, and whether it is back now. Workflows
// from before versionHostBack keep it gone; the marker is written only
// when the store was taken as gone.
func (h *Hosts) takeBack(ctx workflow.Context, queue string) (string, bool) {
	why, gone := h.Gone(queue)
	if !gone || workflow.GetVersion(ctx, versionHostBack, workflow.DefaultVersion, 1) != 1 {
		return "", false
	}
	delete(h.gone, queue)
	return why, true
}

// hostGoneErr is the error of an activity not sent to the gone store of
// queue: the sandbox is lost.
func hostGoneErr(queue, why string) error {
	return troupe.NonRetryable(troupe.ErrHostGone, "the host of sandbox store %s is gone (%s): nothing more is sent there", queue, why)
}

// workerOf is the identity of the worker that ran the activity err is
// the failure of, if the failure says: the sandbox activities' heartbeats
// carry it (Activities.SetIdentity), since the server's timeout names
// none.
func workerOf(err error) string {
	var te *temporal.TimeoutError
	if errors.As(err, &te) && te.HasLastHeartbeatDetails() {
		var who string
		if te.LastHeartbeatDetails(&who) == nil && who != "" {
			return who
		}
	}
	var ae *temporal.ActivityError
	if errors.As(err, &ae) {
		return ae.Identity()
	}
	return ""
}

// hostGone reports whether the host of the live sandbox is gone, after
// its activity failed with err: a store taken as gone already, a
// schedule-to-start timeout (no worker took the task within
// HostTimeout), or a heartbeat timeout with no other worker polling the
// store (StoreServed). It marks the store gone then. Histories from
// before versionHostGone answer false.
func (s *Life) hostGone(ctx workflow.Context, err error) bool {
	if !s.lease.Live() {
		return false
	}
	queue := s.lease.Sandbox.Queue
	if _, ok := s.hosts.Gone(queue); ok {
		return true
	}
	var te *temporal.TimeoutError
	if !errors.As(err, &te) {
		return false
	}
	t := te.TimeoutType()
	if t != enums.TIMEOUT_TYPE_SCHEDULE_TO_START && t != enums.TIMEOUT_TYPE_HEARTBEAT {
		return false
	}
	if workflow.GetVersion(ctx, versionHostGone, workflow.DefaultVersion, 1) != 1 {
		return false
	}
	if t == enums.TIMEOUT_TYPE_SCHEDULE_TO_START {
		s.hosts.mark(queue, "no worker of its store took a task within "+s.set.hostTimeout().String())
		return true
	}
	gone := workerOf(err)
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		Summary:             "ask whether the sandbox's host is still served",
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 2},
	})
	served := true
	if e := workflow.ExecuteLocalActivity(lctx, StoreServedActivityName, StoreServedInput{Queue: queue, Gone: gone}).Get(ctx, &served); e != nil {
		return false // Cannot tell: wait for the host, as before.
	}
	if served {
		return false
	}
	who := "the worker"
	if gone != "" {
		who += " " + gone
	}
	s.hosts.mark(queue, who+" stopped answering and no other worker of its store polls")
	return true
}

// lostNote is what the model hears of a loss: what was lost (the calls
// since the last snapshot, listed in l.Unsaved, which the next call does
// not find again) and what it finds instead.
func lostNote(l *runtime.SandboxLease, during string) string {
	from := "its last snapshot"
	if l.Snapshot == "" {
		from = "its manifest, as at its start (it had no snapshot yet)"
	}
	var others []string
	for _, c := range l.Unsaved {
		if c != during {
			others = append(others, c)
		}
	}
	count := func(n int) string {
		s := fmt.Sprintf("%d call", n)
		if n > 1 {
			s += "s"
		}
		if len(l.Unsaved) >= runtime.MaxUnsaved {
			s = "at least " + s
		}
		return s
	}
	if during != "" {
		lost := "what this call did to the workspace, if anything, is gone; nothing else was lost"
		if len(others) > 0 {
			lost = fmt.Sprintf("what this call and the %s before it since that snapshot (%s) did to the workspace is gone", count(len(others)), strings.Join(others, ", "))
		}
		return fmt.Sprintf("Error: the sandbox was lost while running this call (its host stopped answering), so its output is lost. "+
			"The next sandbox call restores the workspace from %s: %s. Run again what you still need.", from, lost)
	}
	return fmt.Sprintf("Note: the sandbox was lost since your last sandbox call (its host stopped answering) and was restored from %s: "+
		"what the last %s (%s) did to the workspace is gone. Run again what you still need. The output of this call follows.\n\n",
		from, count(len(l.Unsaved)), strings.Join(l.Unsaved, ", "))
}

// HeldQuery is the query an agent workflow with a sandbox and a session
// answer with the sandboxes they hold ([]Held): what a reaper asks of an
// open workflow before it removes a sandbox the workflow lost (KeepOwned).
const HeldQuery = "troupe.sandboxes"

// Held is a sandbox lease as its owner holds it now.
type Held struct {
	Agent      string             `json:"agent"`
	Generation int                `json:"generation"`
	State      runtime.LeaseState `json:"state"`
	// Lent is a session's lease out on loan to a turn's agent, which may
	// have moved it on since.
	Lent bool `json:"lent,omitempty"`
}

// Held is the lease of the Life, for HeldQuery.
func (s *Life) Held() []Held {
	return []Held{{Agent: s.agent, Generation: s.lease.Generation, State: s.lease.State}}
}

// Held are the leases of the session, for HeldQuery.
func (b *Keeper) Held() []Held {
	var out []Held
	for _, a := range b.agents() {
		l := b.lives[a].lease
		_, lent := b.lent[a]
		out = append(out, Held{Agent: a, Generation: l.Generation, State: l.State, Lent: lent})
	}
	return out
}

// SetHeldQuery answers HeldQuery with held: it adds no command to the
// workflow's history.
func SetHeldQuery(ctx workflow.Context, held func() []Held) error {
	return workflow.SetQueryHandler(ctx, HeldQuery, func() ([]Held, error) { return held(), nil })
}
