package troupe

import (
	"time"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/model"
)

// Names of the session workflow and the messages it takes.
const (
	SessionWorkflowName = "troupe.Session"
	// SendUpdate sends the session a message (SendInput → SendResult);
	// one stored apart goes by SendRefUpdate.
	SendUpdate = "troupe.send"
	// MessageSignal sends the session a message (SendInput) with no
	// answer; a refused one is an event (message_refused).
	MessageSignal = "troupe.message"
	// ForkSignal asks a session to fork itself (ForkRequest); the session
	// manager sends it.
	ForkSignal = "troupe.fork-request"
	// AwaitUpdate waits for a turn (its id) to end and answers with its
	// SendResult: what a caller of SendUpdate with Wait that got
	// Continued asks the session's next run.
	AwaitUpdate = "troupe.await"
	// CommandUpdate runs a SessionCommand and answers with SessionInfo.
	CommandUpdate = "troupe.command"
	// SessionQuery answers with SessionInfo.
	SessionQuery = "troupe.session"
)

// Session error types, on the errors updates and results carry.
const (
	// ErrSessionBusy: a message refused by the reject policy.
	ErrSessionBusy = "troupe.SessionBusy"
	// ErrSessionStopped: a message or command for a stopped session.
	ErrSessionStopped = "troupe.SessionStopped"
	// ErrBadCommand: a command or message the session cannot take (an
	// empty message, an unknown policy or command).
	ErrBadCommand = "troupe.BadCommand"
)

// Event kinds of a session's own life (its turns record the kinds a run
// does, their Turn the session's turn number).
const (
	EventSessionStarted = "session_started"
	EventMessage        = "message"
	EventMessageRefused = "message_refused"
	EventTurnRolledBack = "turn_rolled_back"
	EventSessionCommand = "session_command"
	EventSessionStopped = "session_stopped"
	EventSessionForked  = "session_forked"
)

// SessionInput starts a session.
type SessionInput struct {
	// Graph names the graph, as the worker knows it.
	Graph string `json:"graph"`
	// Agent answers the first message; empty means the graph's entry.
	Agent string `json:"agent,omitempty"`
	// Name is the session's name for people; it can be changed.
	Name string `json:"name,omitempty"`
	// Policy is the input policy; empty means enqueue.
	Policy runtime.InputPolicy `json:"policy,omitempty"`
	// Vars are run variables, visible to agents' Go funcs in RunContext.
	Vars map[string]string `json:"vars,omitempty"`
	// MaxHandoffs bounds the handoffs of a turn; 0 means the worker's
	// default.
	MaxHandoffs int `json:"max_handoffs,omitempty"`
	// Budget, when set, is the session's budget over all its turns, over
	// the graph's default (agents.Graph.WithBudget); the zero Budget
	// lifts it. The budget command changes it.
	Budget *agents.Budget `json:"budget,omitempty"`
	// Manager is the workflow id of the session manager that created the
	// session, which it tells what changed; set by the manager.
	Manager string `json:"manager,omitempty"`
	// Fork, when set, is the session this one is forked from, as it
	// stood then; set by that session.
	Fork *SessionImage `json:"fork,omitempty"`
	// Carry is what the session's previous run carried over when it
	// continued as new; callers leave it nil.
	Carry *SessionCarry `json:"carry,omitempty"`
}

// SessionCarry is what a session carries into its next run: its spec, its
// state, and its recent events with their numbering and pages.
type SessionCarry struct {
	Spec      *runtime.GraphSpec   `json:"spec"`
	State     runtime.SessionState `json:"state"`
	Events    []Event              `json:"events,omitempty"`
	NextEvent int                  `json:"next_event"`
	Pages     []EventPage          `json:"pages,omitempty"`
	// Sent are the messages the session took last, by the id of the
	// update that sent each.
	Sent []SentMessage `json:"sent,omitempty"`
}

// SentMessage is a message a session took, by the id of the update that
// sent it, and the turn it got. The server knows an update's id within
// one run of a workflow only: a client whose update was taken just
// before the session continued as new, and that sends it again (its SDK
// does, when its first request timed out before the answer), reaches the
// next run as a new update. The session carries its last messages' ids
// so that such an update gets the turn its message already has, not a
// second turn.
type SentMessage struct {
	Update string     `json:"update"`
	Result SendResult `json:"result"`
}

// SessionImage is a session as a fork of it starts: its spec and its
// state, with its conversation forked (copy-on-write) and each workspace
// in its latest snapshot.
type SessionImage struct {
	From  string               `json:"from"`
	Spec  *runtime.GraphSpec   `json:"spec"`
	State runtime.SessionState `json:"state"`
}

// ForkRequest asks a session to fork itself as the session NewID, named
// Name, registered with Manager.
type ForkRequest struct {
	NewID   string `json:"new_id"`
	Name    string `json:"name,omitempty"`
	Manager string `json:"manager,omitempty"`
}

// SendInput is a message for a session.
type SendInput struct {
	Message string `json:"message"`
	// Wait has the update answer when the message's turn has ended, with
	// its record; otherwise it answers when the message is queued.
	Wait bool `json:"wait,omitempty"`
	// Ref, when set, is the message stored apart, instead of Message: it
	// is sent by SendRefUpdate, never SendUpdate or MessageSignal (a
	// worker that does not know references would take the empty Message).
	Ref *MessageRef `json:"ref,omitempty"`
}

// Text is the message, or its preview when it is stored apart.
func (in SendInput) Text() string {
	if in.Ref != nil {
		return in.Ref.Preview
	}
	return in.Message
}

// SendResult is a session's answer to a message.
type SendResult struct {
	// Turn is the id of the turn that answers the message.
	Turn string `json:"turn"`
	// Ahead counts the turns before it, the running one included, when
	// it was queued.
	Ahead int `json:"ahead"`
	// Cursor is where a follower of the session stands just before the
	// message's events: follow from it (From) to watch the turn.
	Cursor Cursor `json:"cursor"`
	// Record is the turn's outcome, when the caller waited for it.
	Record *runtime.TurnRecord `json:"record,omitempty"`
	// Continued says the session continued as new before the turn ended:
	// wait for it with AwaitUpdate (client.Session.Send does).
	Continued bool `json:"continued,omitempty"`
}

// Session commands (SessionCommand.Op).
const (
	CommandPause  = "pause"
	CommandResume = "resume"
	CommandStop   = "stop"
	CommandRename = "rename"
	CommandPolicy = "policy"
	CommandSwitch = "switch"
)

// SessionCommand is a command for a session: pause, resume, stop, rename
// (Arg: the new name), policy (Arg: the policy) or switch (Arg: the
// sandbox backend every workspace of the session moves to).
type SessionCommand struct {
	Op  string `json:"op"`
	Arg string `json:"arg,omitempty"`
	// Reply, when set, asks the session to say how the command ended
	// (CommandDoneSignal) to its manager, which waits for it on a pause,
	// or a switch between turns: both need snapshots that can fail.
	Reply string `json:"reply,omitempty"`
}

// SessionInfo is where a session stands.
type SessionInfo struct {
	ID     string                `json:"id"`
	Graph  string                `json:"graph"`
	Name   string                `json:"name,omitempty"`
	Status runtime.SessionStatus `json:"status"`
	// Agent answers the next message.
	Agent  string              `json:"agent"`
	Policy runtime.InputPolicy `json:"policy"`
	// Backend is the backend the session switched its workspaces to, if
	// it did.
	Backend string `json:"backend,omitempty"`
	// Turns counts the turns that ended; Queued the messages waiting;
	// Running is the id of the turn running, if any.
	Turns   int    `json:"turns"`
	Queued  int    `json:"queued,omitempty"`
	Running string `json:"running,omitempty"`
	// Usage sums the model usage of every turn.
	Usage        model.Usage `json:"usage"`
	LastActivity time.Time   `json:"last_activity"`
	// Agents is the same usage per agent, and Cost its cost.
	Agents runtime.Usages `json:"agents,omitempty"`
	Cost   float64        `json:"cost,omitempty"`
	// Budget, for a session with a budget, is the budget and what the
	// session spent of it.
	Budget *runtime.BudgetReport `json:"budget,omitempty"`
	// Recent are the last turns that ended, oldest first (their events
	// hold the rest, by reference).
	Recent []runtime.TurnRecord `json:"recent,omitempty"`
	// Sandboxes are the workspaces the session keeps, by agent.
	Sandboxes []SessionSandbox `json:"sandboxes,omitempty"`
	// NextEvent numbers the session's next event: Cursor{ID: NextEvent-1}
	// follows what happens from now on.
	NextEvent int `json:"next_event"`
}

// SessionSandbox is the workspace a session keeps for one of its agents.
type SessionSandbox struct {
	Agent string             `json:"agent"`
	State runtime.LeaseState `json:"state"`
	// Backend and ID name the live sandbox, if any.
	Backend string `json:"backend,omitempty"`
	ID      string `json:"id,omitempty"`
	// Snapshot is the last snapshot, which a restore starts from.
	Snapshot string `json:"snapshot,omitempty"`
	// Lent says the running turn's agent holds the sandbox now.
	Lent bool `json:"lent,omitempty"`
}
