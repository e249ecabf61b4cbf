package troupe

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/model"
)

// Names of the session manager and its messages.
const (
	SessionManagerWorkflowName = "troupe.SessionManager"
	// SessionManagerID is the workflow id of the manager of the default
	// task queue (see SessionManagerIDFor).
	SessionManagerID = "troupe-sessions"
	// CreateSessionUpdate creates a session (CreateSessionInput →
	// SessionEntry).
	CreateSessionUpdate = "troupe.create-session"
	// LifecycleUpdate runs a command on a session (LifecycleInput →
	// SessionEntry).
	LifecycleUpdate = "troupe.lifecycle"
	// SessionsQuery lists the sessions ([]SessionEntry), all of them in
	// one payload: clients page with SessionsPageQuery instead, and this
	// stays for the clients from before it.
	SessionsQuery = "troupe.sessions"
	// SessionsPageQuery lists one page of the sessions
	// (SessionsPageInput → SessionsPage).
	SessionsPageQuery = "troupe.sessions-page"
	// SessionChangedSignal is a session's news for its manager
	// (SessionEntry).
	SessionChangedSignal = "troupe.session-changed"
	// CommandSignal is a command for a session from its manager
	// (SessionCommand).
	CommandSignal = "troupe.command-signal"
	// ForkUpdate forks a session (ForkInput → SessionEntry).
	ForkUpdate = "troupe.fork"
	// ForkFailedSignal is a session's word that a fork of it could not
	// be made (ForkFailure).
	ForkFailedSignal = "troupe.fork-failed"
	// CommandDoneSignal is a session's word of how a command its manager
	// asked a reply to (SessionCommand.Reply) ended (CommandOutcome).
	CommandDoneSignal = "troupe.command-done"
)

// CommandOutcome is how a command a manager sent a session ended: Reply
// is the command's SessionCommand.Reply; Error, when set, says why it
// failed, and Type is the error's type (such as ErrSnapshotFailed).
type CommandOutcome struct {
	Reply string `json:"reply"`
	Error string `json:"error,omitempty"`
	Type  string `json:"type,omitempty"`
}

// ForkInput forks the session ID as NewID (empty for a fresh id), named
// Name (empty: the source's name, "(fork)").
type ForkInput struct {
	ID    string `json:"id"`
	NewID string `json:"new_id,omitempty"`
	Name  string `json:"name,omitempty"`
}

// ForkFailure says why the fork NewID could not be made.
type ForkFailure struct {
	NewID string `json:"new_id"`
	Error string `json:"error"`
	// Type, when set, is the error type the fork fails with (such as
	// ErrSnapshotFailed); ErrBadCommand when empty.
	Type string `json:"type,omitempty"`
}

// SessionManagerIDFor is the workflow id of the session manager of task
// queue: SessionManagerID for DefaultTaskQueue (or ""), else
// "troupe-sessions-<queue>". Each queue has a manager of its own, which
// runs there and starts its sessions there, where the workers that know
// their graphs listen: a manager of another queue could start sessions
// that no worker serves (`troupe mcp serve` runs its own worker on a queue
// of its own) or be served by no worker at all.
func SessionManagerIDFor(queue string) string {
	if queue == "" || queue == DefaultTaskQueue {
		return SessionManagerID
	}
	return SessionManagerID + "-" + queue
}

// SessionID is the id of a session of graph created without one:
// "session-GRAPH-" and suffix, 8 random hex digits. The session manager
// makes it; a client that puts a session's inputs under it before the
// session exists makes it too (client.NewSessionID).
func SessionID(graph, suffix string) string {
	return "session-" + graph + "-" + suffix
}

// ErrUnknownSession is a call for a session the manager does not hold.
const ErrUnknownSession = "troupe.UnknownSession"

// RegistryLoading is how the session manager answers a query that comes
// while it reads its registry back after it continued as new (a few
// milliseconds): the client asks again.
const RegistryLoading = "the session registry is loading after the manager continued as new: ask again"

// ErrManagerContinuing is an update the session manager turned away, as
// nothing was done yet, because its run is about to continue as new: its
// history reached its bound, and the updates under way finish first. The
// client sends it again at once (it holds a few hundred milliseconds at
// most); a caller of the client never sees it unless its context ends
// first.
const ErrManagerContinuing = "troupe.ManagerContinuing"

// CreateSessionInput creates a session.
type CreateSessionInput struct {
	// ID is the session's workflow id; empty for a fresh one,
	// "session-<graph>-<8 hex>". It must not hold "/".
	ID      string       `json:"id,omitempty"`
	Session SessionInput `json:"session"`
}

// LifecycleInput is a command for the session ID.
type LifecycleInput struct {
	ID      string         `json:"id"`
	Command SessionCommand `json:"command"`
}

// SessionEntry is a session as the manager lists it.
type SessionEntry struct {
	ID     string                `json:"id"`
	Name   string                `json:"name,omitempty"`
	Graph  string                `json:"graph"`
	Agent  string                `json:"agent"`
	Status runtime.SessionStatus `json:"status"`
	Policy runtime.InputPolicy   `json:"policy"`
	Turns  int                   `json:"turns"`
	Usage  model.Usage           `json:"usage"`
	// Backends are the sandbox backends of the session's workspaces.
	Backends     []string  `json:"backends,omitempty"`
	Created      time.Time `json:"created"`
	LastActivity time.Time `json:"last_activity"`
	// Request is the id of the update that created (or forked) the
	// session: a create or fork the server hands the manager again, in a
	// later run, after its client lost the answer (which happens under
	// bursts of creates as the manager continues as new), is answered
	// with this session, not done twice, for as long as the manager lists
	// it.
	Request string `json:"request,omitempty"`
}

// Bounds of a page of sessions (SessionsPageInput.Limit): a page of
// MaxSessionsPage entries of a few hundred bytes each stays far below the
// 2 MB payload bound, whatever the registry holds.
const (
	DefaultSessionsPage = 100
	MaxSessionsPage     = 1000
)

// SessionsPageInput asks the session manager for one page of its
// sessions, in the order it lists them (oldest first).
type SessionsPageInput struct {
	// Limit is the most sessions the page holds: DefaultSessionsPage
	// when 0, at most MaxSessionsPage.
	Limit int `json:"limit,omitempty"`
	// After is the id of the last session of the previous page (its
	// Next); empty for the first page. A session the manager no longer
	// lists (removed, or pruned once stopped) fails the query with
	// ErrUnknownSession rather than skip or repeat sessions.
	After string `json:"after,omitempty"`
	// Status and Graph, when set, keep only the sessions of that status
	// and graph.
	Status runtime.SessionStatus `json:"status,omitempty"`
	Graph  string                `json:"graph,omitempty"`
}

// SessionsPage is one page of a manager's sessions.
type SessionsPage struct {
	Sessions []SessionEntry `json:"sessions"`
	// Next is the After of the next page; empty when this page is the
	// last.
	Next string `json:"next,omitempty"`
	// Total is how many sessions match the filters, on every page.
	Total int `json:"total"`
}

// PageSessions returns the page in asks of sessions: at most in.Limit of
// those that match its filters, from the one after in.After on, in their
// order. The session manager answers SessionsPageQuery with it.
func PageSessions(sessions []SessionEntry, in SessionsPageInput) (SessionsPage, error) {
	limit := in.Limit
	switch {
	case limit < 0:
		return SessionsPage{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("a page of %d sessions: the limit must not be negative", limit), ErrBadCommand, nil)
	case limit == 0:
		limit = DefaultSessionsPage
	case limit > MaxSessionsPage:
		limit = MaxSessionsPage
	}
	from := 0
	if in.After != "" {
		i := slices.IndexFunc(sessions, func(e SessionEntry) bool { return e.ID == in.After })
		if i < 0 {
			return SessionsPage{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("no session %s to list after: it was removed, or pruned once stopped; list from the start", in.After), ErrUnknownSession, nil)
		}
		from = i + 1
	}
	match := func(e SessionEntry) bool {
		return (in.Status == "" || e.Status == in.Status) && (in.Graph == "" || e.Graph == in.Graph)
	}
	page := SessionsPage{Sessions: []SessionEntry{}}
	for i, e := range sessions {
		if !match(e) {
			continue
		}
		page.Total++
		if i < from {
			continue
		}
		if len(page.Sessions) == limit {
			if page.Next == "" {
				page.Next = page.Sessions[limit-1].ID
			}
			continue
		}
		page.Sessions = append(page.Sessions, e)
	}
	return page, nil
}

// ManagerInput starts (or continues) the session manager.
type ManagerInput struct {
	// Sessions is the registry its previous run carried over, when it
	// carried it whole (runs from before the registry went by pages).
	Sessions []SessionEntry `json:"sessions,omitempty"`
	// Pages are the blob keys of the registry its previous run saved, in
	// order (see registry.go).
	Pages []string `json:"pages,omitempty"`
	// OldPages are the pages the previous run read, which this run drops
	// when it continues as new in turn.
	OldPages []string `json:"old_pages,omitempty"`
	// Bound is the history length at which a run of the manager continues
	// as new: fixed at its first start (the worker's ContinueAfterEvents
	// then) and carried, so no later worker's setting changes a run's
	// commands. Callers leave it 0.
	Bound int `json:"bound,omitempty"`
	// Created are the sessions its last runs created, forked or
	// commanded (pause, stop, rename...), by the id of the update that
	// asked for each (see SentMessage): a create, fork or command sent
	// again after the manager continued as new is answered with the
	// session as it stands, not done twice.
	Created []CreatedSession `json:"created,omitempty"`
}

// CreatedSession is a session the manager created, forked or commanded,
// by the id of the update that asked for it.
type CreatedSession struct {
	Update string `json:"update"`
	ID     string `json:"id"`
}

// Removing a session: troupe sessions rm, client.RemoveSession.
const (
	// RemoveSessionUpdate drops a session from the manager's registry
	// and removes what it left: its sandboxes on the worker that takes
	// the update's activity, its blob data (RemoveSessionInput →
	// RemoveSessionResult). The caller terminates the session's
	// workflows first, which needs no worker.
	RemoveSessionUpdate = "troupe.remove-session"
	// RemoveSessionSignal asks the same when no worker serves the
	// manager's queue: the server keeps it until a worker runs the
	// manager, which applies it then (RemoveSessionInput).
	RemoveSessionSignal = "troupe.remove-session-signal"
)

// RemoveSessionInput removes the session ID.
type RemoveSessionInput struct {
	ID string `json:"id"`
}

// RemoveSessionResult says what the removal of session ID did, and what
// waits.
type RemoveSessionResult struct {
	ID string `json:"id"`
	// Found is whether there was a session to remove: its workflow, or
	// an entry in the manager's registry. Removing an id that names
	// neither (unknown, or removed already) does nothing.
	Found bool `json:"found"`
	// Terminated are the workflows that were running and were
	// terminated: the session's and its turns' agents'.
	Terminated []string `json:"terminated,omitempty"`
	// Unlisted is whether the manager dropped the session from its
	// registry (sessions ls no longer lists it).
	Unlisted bool `json:"unlisted"`
	// Sandboxes are the sandboxes removed, as backend/id.
	Sandboxes []string `json:"sandboxes,omitempty"`
	// Blobs counts the blob objects deleted: transcripts, outputs,
	// snapshots and event pages of the session and its turns.
	Blobs int `json:"blobs"`
	// Pending says what is left to do and who does it: what waits for
	// a worker, the data a fork of the session still shares.
	Pending []string `json:"pending,omitempty"`
}
