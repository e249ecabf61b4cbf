package workflows

// A session manager carries its registry through continue-as-new by
// reference: a registry of thousands of sessions is larger than a payload
// may be, so the run that continues saves it to the blob store in pages
// and passes their keys; the next run reads the pages back, each its own
// local activity (each page's result, the only copy history keeps, stays
// far below the payload bound), and drops them when it continues in turn.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/runtime"
)

// RegistryActivityName is the local activity that saves, loads and drops
// a session manager's registry pages.
const RegistryActivityName = "troupe.RegistryPages"

// versionManagerPages marks the change to managers that carry their
// registry in blob pages rather than in their input; at 2, a run drops
// the pages of the run before its previous one, not its previous one's,
// so that a reset of a run to its start still finds the pages it read.
const versionManagerPages = "troupe.manager-pages"

// registryPageBytes bounds a page's JSON: well below PayloadLimit, since
// each page comes back as a local activity's result.
const registryPageBytes = 256 << 10

// RegistryInput is one step on a manager's registry pages: Op "save"
// writes Entries as the page Key, "load" reads the page Key, "drop"
// deletes the pages under Prefix.
type RegistryInput struct {
	Op      string                `json:"op"`
	Key     string                `json:"key,omitempty"`
	Prefix  string                `json:"prefix,omitempty"`
	Entries []troupe.SessionEntry `json:"entries,omitempty"`
}

// RegistryPages saves, loads or drops registry pages.
func (a *Activities) RegistryPages(ctx context.Context, in RegistryInput) ([]troupe.SessionEntry, error) {
	store := a.r.cfg.Store
	switch in.Op {
	case "save":
		data, err := json.Marshal(in.Entries)
		if err != nil {
			return nil, err
		}
		return nil, store.Put(ctx, in.Key, data)
	case "load":
		data, err := store.Get(ctx, in.Key)
		if err != nil {
			return nil, err
		}
		var out []troupe.SessionEntry
		if err := json.Unmarshal(data, &out); err != nil {
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("registry page %s: %v", in.Key, err), troupe.ErrInternal, nil)
		}
		return out, nil
	case "drop":
		_, err := store.DeletePrefix(ctx, in.Prefix)
		return nil, err
	}
	return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("registry: unknown op %q", in.Op), troupe.ErrInternal, nil)
}

// registryPrefix is where a run of the manager saves its pages.
func registryPrefix(ctx workflow.Context) string {
	info := workflow.GetInfo(ctx)
	return "managers/" + info.WorkflowExecution.ID + "/" + info.WorkflowExecution.RunID + "/"
}

func registryCtx(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: time.Minute}, Summary: summary})
}

// loadRegistry reads the pages a manager's previous run saved, in order.
func loadRegistry(ctx workflow.Context, pages []string) ([]troupe.SessionEntry, error) {
	var all []troupe.SessionEntry
	for _, key := range pages {
		var page []troupe.SessionEntry
		if err := workflow.ExecuteLocalActivity(registryCtx(ctx, "load the session registry"), RegistryActivityName,
			RegistryInput{Op: "load", Key: key}).Get(ctx, &page); err != nil {
			return nil, err
		}
		all = append(all, page...)
	}
	return all, nil
}

// saveRegistry saves sessions in pages of at most registryPageBytes
// under this run's prefix and returns their keys.
func saveRegistry(ctx workflow.Context, sessions []troupe.SessionEntry) ([]string, error) {
	prefix := registryPrefix(ctx)
	var keys []string
	save := func(page []troupe.SessionEntry) error {
		key := fmt.Sprintf("%spage-%06d.json", prefix, len(keys))
		if err := workflow.ExecuteLocalActivity(registryCtx(ctx, "save the session registry"), RegistryActivityName,
			RegistryInput{Op: "save", Key: key, Entries: page}).Get(ctx, nil); err != nil {
			return err
		}
		keys = append(keys, key)
		return nil
	}
	start, size := 0, 0
	for i, e := range sessions {
		data, _ := json.Marshal(e) // Plain data: it cannot fail.
		if size+len(data) > registryPageBytes && i > start {
			if err := save(sessions[start:i]); err != nil {
				return nil, err
			}
			start, size = i, 0
		}
		size += len(data) + 1
	}
	if start < len(sessions) {
		if err := save(sessions[start:]); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// dropRegistry deletes the pages under the prefix of pages, once their
// entries are saved again by a later run.
func dropRegistry(ctx workflow.Context, pages []string) error {
	if len(pages) == 0 {
		return nil
	}
	prefix := pages[0][:len(pages[0])-len("page-000000.json")]
	if prefix == registryPrefix(ctx) {
		return nil // This run's own (a run id reused, as in tests): just saved again.
	}
	return workflow.ExecuteLocalActivity(registryCtx(ctx, "drop the previous session registry"), RegistryActivityName,
		RegistryInput{Op: "drop", Prefix: prefix}).Get(ctx, nil)
}

// continueAsNew continues the manager as new, with its registry (the
// stopped sessions pruned) in blob pages, or inline in runs from before
// the pages, and drops the pages that are no longer read.
func (m *manager) continueAsNew(ctx workflow.Context, in troupe.ManagerInput) error {
	kept := pruneStopped(m.sessions, keptStopped)
	v := workflow.GetVersion(ctx, versionManagerPages, workflow.DefaultVersion, 2)
	if v == workflow.DefaultVersion {
		return workflow.NewContinueAsNewError(ctx, troupe.SessionManagerWorkflowName, troupe.ManagerInput{Sessions: kept, Bound: m.bound, Created: m.created})
	}
	next := troupe.ManagerInput{Bound: m.bound, Created: m.created}
	if v >= 2 {
		// The pages the previous run read go now, a run later than at
		// version 1, so that a reset of a run to its start still finds
		// the pages it read; and before the save, whose loop below is
		// the last step.
		if err := dropRegistry(ctx, in.OldPages); err != nil {
			return err
		}
		next.OldPages = in.Pages
	}
	var err error
	if next.Pages, err = m.save(ctx, kept); err != nil {
		return err
	}
	// The updates the save let in are remembered too: one answered in
	// this run and sent again to the next (its client lost the answer as
	// the run closed) is answered, not done twice.
	next.Created = m.created
	if v == 1 {
		if err := dropRegistry(ctx, in.Pages); err != nil {
			return err
		}
	}
	return workflow.NewContinueAsNewError(ctx, troupe.SessionManagerWorkflowName, next)
}

// save writes the registry kept to blob pages and returns them, saving it
// again while signals or updates came during the save, so that the next
// run loses none of them.
func (m *manager) save(ctx workflow.Context, kept []troupe.SessionEntry) ([]string, error) {
	for {
		pages, err := saveRegistry(ctx, kept)
		if err != nil {
			return nil, err
		}
		// Signals and updates that came while the pages were saved are
		// taken, and the registry saved again: none is lost.
		if !m.signalled() && m.settled(ctx) {
			return pages, nil
		}
		if err := workflow.Await(ctx, func() bool { return m.settled(ctx) }); err != nil {
			return nil, err
		}
		m.drain(ctx)
		kept = pruneStopped(m.sessions, keptStopped)
	}
}

// keptStopped bounds the stopped sessions a manager keeps listing: the
// registry is carried through continue-as-new (a few hundred bytes a
// session, read back into the next run's history), so it forgets the stopped sessions that were last active
// longest ago beyond this many. Their workflows and data stay as
// retention keeps them.
const keptStopped = 500

// pruneStopped returns sessions without the stopped ones beyond the
// newest max (by last activity), in their order.
func pruneStopped(sessions []troupe.SessionEntry, max int) []troupe.SessionEntry {
	var stopped []time.Time
	for _, e := range sessions {
		if e.Status == runtime.SessionStopped {
			stopped = append(stopped, e.LastActivity)
		}
	}
	if len(stopped) <= max {
		return sessions
	}
	slices.SortFunc(stopped, func(a, b time.Time) int { return b.Compare(a) })
	cut := stopped[max-1] // The oldest activity kept.
	out := make([]troupe.SessionEntry, 0, len(sessions))
	kept := 0
	for _, e := range sessions {
		if e.Status == runtime.SessionStopped {
			if e.LastActivity.Before(cut) || kept == max {
				continue
			}
			kept++
		}
		out = append(out, e)
	}
	return out
}
