package lease

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/internal/periodic"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// ReapInterval is how often a worker's StartReaping looks for orphan
// sandboxes after the first look at start.
const ReapInterval = 5 * time.Minute

// ReapOrphans removes, from every client that is a sandbox.Reaper, the
// sandboxes keep answers false for, and returns what each backend removed.
// The errors of all backends are joined; one backend's failure does not
// stop the others.
func ReapOrphans(ctx context.Context, clients map[string]sandbox.Client, keep func(labels map[string]string) bool) (map[string][]string, error) {
	backends := make([]string, 0, len(clients))
	for b := range clients {
		backends = append(backends, b)
	}
	sort.Strings(backends)
	removed := map[string][]string{}
	var errs []error
	for _, b := range backends {
		r, ok := clients[b].(sandbox.Reaper)
		if !ok {
			continue
		}
		ids, err := r.Reap(ctx, keep)
		if len(ids) > 0 {
			removed[b] = ids
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", b, err))
		}
	}
	return removed, errors.Join(errs...)
}

// ReapRun removes, from every client that is a sandbox.Reaper, the
// sandboxes of workflow id and of the workflows under it (whose ids start
// with id/: a session's turns and their agents) once their workflow has
// closed, by KeepOpen's rule; the sandboxes of other workflows are left
// to StartReaping. It is what removing a session does at once, on the
// worker that runs it; the sandboxes on other hosts go when their
// worker's reaper next runs.
func ReapRun(ctx context.Context, c client.Client, namespace string, clients map[string]sandbox.Client, id string) (map[string][]string, error) {
	open := KeepOpen(ctx, c, namespace)
	return ReapOrphans(ctx, clients, func(labels map[string]string) bool {
		wf := labels["troupe.workflow"]
		if wf != id && !strings.HasPrefix(wf, id+"/") {
			return true
		}
		return open(labels)
	})
}

// StartReaping reaps the orphan sandboxes of namespace's workflows on c's
// cluster (KeepOpen: those whose workflow has closed) from clients, once
// now and then every interval (ReapInterval when zero), in the
// background, until the returned stop func is called; stop waits for a
// round under way. report, when set, gets each round's outcome.
//
// Together with Create replacing a dead attempt's leftovers, this bounds
// what a killed worker leaves: a sandbox outlives its workflow by at most
// interval, while a worker with the same sandbox roots (or Docker Engine)
// runs on its host. The first round, at the worker's start, also asks
// the owners of open workflows' sandboxes whether they still own them
// (KeepOwned): a host that comes back after it was taken as gone reaps
// the sandboxes restored elsewhere meanwhile.
func StartReaping(ctx context.Context, c client.Client, namespace string, clients map[string]sandbox.Client, interval time.Duration, report func(removed map[string][]string, err error)) (stop func()) {
	if interval <= 0 {
		interval = ReapInterval
	}
	first := true
	return periodic.Every(ctx, interval, func(ctx context.Context) {
		// The policy is made afresh each round, so a cluster id the
		// server did not give at first is asked for again.
		policy := KeepOpen(ctx, c, namespace)
		if first {
			// At a worker's start: its host may come back from the dead,
			// holding sandboxes restored elsewhere since.
			policy, first = KeepOwned(ctx, c, namespace), false
		}
		removed, err := ReapOrphans(ctx, clients, policy)
		if ctx.Err() == nil && report != nil {
			report(removed, err)
		}
	})
}

// ClusterID returns the id of the Temporal cluster c talks to.
func ClusterID(ctx context.Context, c client.Client) (string, error) {
	info, err := c.WorkflowService().GetClusterInfo(ctx, &workflowservice.GetClusterInfoRequest{})
	if err != nil {
		return "", fmt.Errorf("lease: cluster info: %w", err)
	}
	return info.GetClusterId(), nil
}

// KeepOpen returns a keep-policy for sandbox orphan reaping, for the
// sandboxes of namespace on c's cluster: a sandbox is kept while the
// workflow named by its troupe.workflow label is open, when that cannot
// be told (the server does not answer), when it has no such label (no
// workflow of ours made it), and when its troupe.cluster or
// troupe.namespace label names another cluster or namespace. A sandbox of
// this cluster and namespace whose workflow is closed or unknown is an
// orphan.
func KeepOpen(ctx context.Context, c client.Client, namespace string) func(labels map[string]string) bool {
	return keep(ctx, c, namespace, false)
}

// KeepOwned is KeepOpen, and more: a sandbox whose workflow is open is
// kept only while that workflow (its owner: an agent workflow, or the
// session that keeps it) still owns it, by the HeldQuery's answer: an
// owner whose lease for the sandbox's agent moved past the sandbox's
// generation (troupe.generation label), or holds no sandbox at that
// generation (it was lost, suspended or stopped), lost it for good, and
// never uses it again. That is what a host that comes back holds of the
// sandboxes restored elsewhere while it was gone. A sandbox is kept when
// the owner cannot say (no answer, a query it does not know, no
// generation label), and while a session lent it to a turn's agent at
// its generation or later.
//
// It queries each open owner once per policy (a policy serves one
// round): StartReaping uses it for its first round, at a worker's start.
func KeepOwned(ctx context.Context, c client.Client, namespace string) func(labels map[string]string) bool {
	return keep(ctx, c, namespace, true)
}

func keep(ctx context.Context, c client.Client, namespace string, owned bool) func(labels map[string]string) bool {
	if namespace == "" {
		namespace = client.DefaultNamespace
	}
	cluster, clusterErr := ClusterID(ctx, c)
	held := map[string][]Held{}
	return func(labels map[string]string) bool {
		id := labels["troupe.workflow"]
		if id == "" {
			return true
		}
		if cl := labels[troupe.LabelCluster]; cl != "" && (clusterErr != nil || cl != cluster) {
			return true
		}
		if ns := labels[troupe.LabelNamespace]; ns != "" && ns != namespace {
			return true
		}
		d, err := c.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			var nf *serviceerror.NotFound
			return !errors.As(err, &nf)
		}
		if d.GetWorkflowExecutionInfo().GetStatus() != enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return false
		}
		if !owned || labels[troupe.LabelGeneration] == "" {
			return true
		}
		h, asked := held[id]
		if !asked {
			h, err = QueryHeld(ctx, c, id)
			if err != nil {
				h = nil // Cannot tell: kept.
			}
			held[id] = h
		}
		return !Superseded(labels, h)
	}
}

// QueryHeld asks the open workflow id which sandboxes it holds
// (HeldQuery), within 30 seconds.
func QueryHeld(ctx context.Context, c client.Client, id string) ([]Held, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := c.QueryWorkflow(ctx, id, "", HeldQuery)
	if err != nil {
		return nil, fmt.Errorf("lease: query %s of %s: %w", HeldQuery, id, err)
	}
	var held []Held
	if err := v.Get(&held); err != nil {
		return nil, fmt.Errorf("lease: query %s of %s: %w", HeldQuery, id, err)
	}
	return held, nil
}

// Superseded reports whether the sandbox of labels (its troupe.agent and
// troupe.generation) is one its owner, holding held, no longer owns: the
// owner's lease for the agent is past its generation, or at it with no
// sandbox (lost, suspended, stopped) and not lent to a turn. Whatever
// the owner does not say keeps the sandbox.
func Superseded(labels map[string]string, held []Held) bool {
	gen, err := strconv.Atoi(labels[troupe.LabelGeneration])
	if err != nil || gen <= 0 {
		return false
	}
	for _, h := range held {
		if h.Agent != labels["troupe.agent"] {
			continue
		}
		if h.Generation > gen {
			return true
		}
		return h.Generation == gen && !h.Lent && !holds(h.State)
	}
	return false
}

// holds reports whether a lease in state st holds its sandbox, or is
// making it.
func holds(st runtime.LeaseState) bool {
	switch st {
	case runtime.LeaseProvisioning, runtime.LeaseProvisioned, runtime.LeaseInUse, runtime.LeaseIdle, runtime.LeaseSuspending:
		return true
	}
	return false
}
