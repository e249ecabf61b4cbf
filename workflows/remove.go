package workflows

// Removing a session (troupe sessions rm, client.RemoveSession) is a way
// out for a session in any state, one stuck on a graph no worker serves
// included. The caller terminates the session's workflows itself (that
// needs no worker, and nothing a stuck session does can stop it), then
// asks the manager: by update when a worker serves the manager's queue,
// by signal when none does, which the server keeps until one runs it.
// The manager drops the session from its registry and runs the
// RemoveSessionData activity, which removes the session's sandboxes on
// the worker that runs it and its blob data.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/workflows/lease"
	"github.com/troupe-dev/troupe/workflows/retention"
)

// RemoveSessionDataActivityName is the activity that removes what a
// removed session left: its sandboxes on this worker's host and its blob
// data.
const RemoveSessionDataActivityName = "troupe.RemoveSessionData"

// versionRemoveSession marks the managers that take removals
// (troupe.remove-session): each removal's marker precedes its activity. A
// removal signalled to a manager whose history has no marker for it (a
// manager from before removals, which ignored the signal) stays ignored
// on replay.
const versionRemoveSession = "troupe.remove-session"

// RemoveSessionData removes the sandboxes of session in.ID and of its
// turns' agents from this worker's sandbox backends (their workflows must
// have closed: the caller terminated them), and its blob data
// (retention.Remove). What it could not do is in the result's Pending,
// not an error: the removal stands either way, and the reaper and the
// retention sweep remove what is left later.
func (a *Activities) RemoveSessionData(ctx context.Context, in troupe.RemoveSessionInput) (troupe.RemoveSessionResult, error) {
	res := troupe.RemoveSessionResult{ID: in.ID}
	if !a.r.onWorker.Load() {
		res.Pending = append(res.Pending, "its sandboxes and blob data: this worker has no Temporal client to tell whose workflows closed; the reaper and the retention sweep remove them")
		return res, nil
	}
	c := activity.GetClient(ctx)
	removed, err := lease.ReapRun(ctx, c, activity.GetInfo(ctx).WorkflowNamespace, a.r.leases.Sandboxes, in.ID)
	for _, b := range slices.Sorted(maps.Keys(removed)) {
		for _, id := range removed[b] {
			res.Sandboxes = append(res.Sandboxes, b+"/"+id)
		}
	}
	if err != nil {
		res.Pending = append(res.Pending, fmt.Sprintf("some sandboxes: %v; a worker's reaper removes them within %s", err, lease.ReapInterval))
	}
	n, keptFor, err := retention.Remove(ctx, c, a.r.cfg.Store, in.ID)
	res.Blobs = n
	if len(keptFor) > 0 {
		res.Pending = append(res.Pending, fmt.Sprintf("its blob data, which its fork %s still shares: the retention sweep deletes it once the fork is done", strings.Join(keptFor, ", ")))
	}
	if err != nil {
		res.Pending = append(res.Pending, fmt.Sprintf("some blob data: %v; the retention sweep deletes it", err))
	}
	return res, nil
}

// checkRemove refuses what names no session at all; an id the registry
// does not hold is not refused (its workflow may still be there), the
// result says so.
func (m *manager) checkRemove(_ workflow.Context, in troupe.RemoveSessionInput) error {
	switch {
	case in.ID == "":
		return temporal.NewNonRetryableApplicationError("remove which session? no id", troupe.ErrBadCommand, nil)
	case strings.Contains(in.ID, "/"):
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("session id %q holds a /: that is a turn's workflow, not a session", in.ID), troupe.ErrBadCommand, nil)
	}
	return nil
}

// remove drops session in.ID from the registry, forgets its news from
// then on, and removes its sandboxes and blob data (RemoveSessionData).
func (m *manager) remove(ctx workflow.Context, in troupe.RemoveSessionInput) (troupe.RemoveSessionResult, error) {
	res := troupe.RemoveSessionResult{ID: in.ID}
	if workflow.GetVersion(ctx, versionRemoveSession, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return res, nil // A removal signalled to a manager from before removals, which ignored it.
	}
	if i := m.find(in.ID); i >= 0 {
		m.sessions = slices.Delete(m.sessions, i, i+1)
		res.Found, res.Unlisted = true, true
	}
	// News the session sent before it was terminated may still come.
	m.removed[in.ID] = true
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 3}, Summary: "remove the sandboxes and blob data of " + in.ID})
	var data troupe.RemoveSessionResult
	if err := workflow.ExecuteActivity(actx, RemoveSessionDataActivityName, in).Get(ctx, &data); err != nil {
		res.Pending = append(res.Pending, fmt.Sprintf("its sandboxes and blob data (%s): the reaper and the retention sweep remove them", troupe.FailureText(err)))
		return res, nil
	}
	res.Sandboxes, res.Blobs, res.Pending = data.Sandboxes, data.Blobs, append(res.Pending, data.Pending...)
	return res, nil
}

// removeSignalled removes the session of a removal that came by signal,
// in a goroutine of its own (the main loop takes signals as they come);
// removing counts those under way, so that the run continues as new only
// when none is.
func (m *manager) removeSignalled(ctx workflow.Context, in troupe.RemoveSessionInput) {
	if m.checkRemove(ctx, in) != nil {
		return
	}
	m.removing++
	workflow.Go(ctx, func(ctx workflow.Context) {
		defer func() { m.removing-- }()
		_, _ = m.remove(ctx, in) // What it did or left is for the caller that waited; none does.
	})
}
