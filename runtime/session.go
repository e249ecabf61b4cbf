package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/model"
)

// A session is a conversation over a graph that lives for as long as its
// user keeps it: each message the user sends is a turn, answered by the
// agent that ended the turn before, with the conversation so far. Its
// state is one SessionState, plain data its workflow carries whole through
// continue-as-new; the methods below are its transitions, and the workflow
// carries out the effects (a turn, a sandbox's suspension) that lead to
// them.

// InputPolicy is what a session does with a message that arrives while a
// turn is running.
type InputPolicy string

// The input policies.
const (
	// PolicyEnqueue queues the message; it is answered, in order, once
	// the turns before it have ended. The default: no message is lost.
	PolicyEnqueue InputPolicy = "enqueue"
	// PolicyReject refuses the message: the caller is told the session is
	// busy (ErrSessionBusy).
	PolicyReject InputPolicy = "reject"
	// PolicyInterrupt stops the running turn at its next step boundary,
	// keeping what it did, and answers the message with that context.
	PolicyInterrupt InputPolicy = "interrupt"
	// PolicyRollback cancels the running turn and undoes it (the
	// conversation back to the turn's start, each workspace restored
	// from the turn's starting snapshot), then answers the message.
	PolicyRollback InputPolicy = "rollback"
)

// Policies lists the input policies, the default first.
var Policies = []InputPolicy{PolicyEnqueue, PolicyReject, PolicyInterrupt, PolicyRollback}

// ParsePolicy returns the policy named s; "" is the default, enqueue.
func ParsePolicy(s string) (InputPolicy, error) {
	if s == "" {
		return PolicyEnqueue, nil
	}
	p := InputPolicy(s)
	if !slices.Contains(Policies, p) {
		return "", fmt.Errorf("%w: %q (want one of enqueue, reject, interrupt, rollback)", ErrUnknownPolicy, s)
	}
	return p, nil
}

// Errors of the session transitions, which callers branch on.
var (
	// ErrSessionBusy is a message refused by the reject policy while a
	// turn runs or messages wait.
	ErrSessionBusy = errors.New("the session is busy with a turn")
	// ErrSessionStopped is a message or command for a stopped session.
	ErrSessionStopped = errors.New("the session is stopped")
	// ErrUnknownPolicy is a policy name that is none of Policies.
	ErrUnknownPolicy = errors.New("unknown input policy")
	// ErrEmptyMessage is a message with no text.
	ErrEmptyMessage = errors.New("the message is empty")
	// ErrBudgetSpent is a message refused because the session's budget
	// is spent: no model call could answer it.
	ErrBudgetSpent = errors.New("the session's budget is spent")
)

// SessionStatus is where a session stands, as its status query says.
type SessionStatus string

// The session statuses.
const (
	// SessionIdle: no turn running and none waiting; the session costs
	// nothing but its history (its sandboxes are suspended after their
	// idle timeout).
	SessionIdle SessionStatus = "idle"
	// SessionThinking: a turn is running.
	SessionThinking SessionStatus = "thinking"
	// SessionWaiting: a turn is running, and a call of it waits for a
	// human's decision (an approval).
	SessionWaiting SessionStatus = "waiting"
	// SessionPaused: no turn starts, and a running turn's agents start no
	// model call or tool, until the session is resumed.
	SessionPaused SessionStatus = "paused"
	// SessionStopped: the session has ended; its sandboxes are stopped.
	SessionStopped SessionStatus = "stopped"
)

// Turn outcomes, in TurnRecord.Outcome.
const (
	TurnAnswered    = "answered"
	TurnFailed      = "failed"
	TurnInterrupted = "interrupted"
	TurnRolledBack  = "rolled_back"
)

// SessionMessage is a user's message, waiting or being answered.
type SessionMessage struct {
	// Turn is the id of the turn that answers it: "t1", "t2", ... in the
	// order the messages arrived.
	Turn string `json:"turn"`
	// Text is the message, or its start when it is stored apart (Ref).
	Text string `json:"text"`
	// Ref, when set, is the blob key of a message too big for a Temporal
	// payload (troupe.MessageRef), of Size bytes: the turn's agents read
	// it from the blob store.
	Ref  string `json:"ref,omitempty"`
	Size int    `json:"size,omitempty"`
	// At is when the session took it (workflow time).
	At time.Time `json:"at"`
}

// Item is the message as the conversation's user item: its text, or the
// reference of a message stored apart.
func (m SessionMessage) Item() agents.Item {
	if m.Ref != "" {
		return agents.UserMessageRef(m.Ref)
	}
	return agents.UserMessage(m.Text)
}

// TurnRecord is a turn that ended.
type TurnRecord struct {
	// Turn is the turn's id (SessionMessage.Turn).
	Turn string `json:"turn"`
	// Message is the start of the user's message.
	Message string `json:"message"`
	// Outcome is one of TurnAnswered, TurnFailed, TurnInterrupted,
	// TurnRolledBack.
	Outcome string `json:"outcome"`
	// Agent is the agent that answered (or was at work when the turn
	// ended otherwise).
	Agent string `json:"agent,omitempty"`
	// Output is the answer: a JSON document for agents with an output
	// type, a JSON string of the text otherwise.
	Output json.RawMessage `json:"output,omitempty"`
	// Error says why a turn failed; ErrorType is its stable type.
	Error     string `json:"error,omitempty"`
	ErrorType string `json:"error_type,omitempty"`
	// Path lists the agents the turn went through, in order of handoffs.
	Path []string `json:"path,omitempty"`
	// Workflow is the prefix of the turn's agent workflows' ids, whose
	// events the session's follower reads.
	Workflow string `json:"workflow,omitempty"`
	// ModelTurns counts the model turns of the turn.
	ModelTurns int         `json:"model_turns,omitempty"`
	Usage      model.Usage `json:"usage"`
	Started    time.Time   `json:"started"`
	Ended      time.Time   `json:"ended"`
	// Agents is the turn's usage per agent, and Cost its cost (failed
	// agents' included).
	Agents Usages  `json:"agents,omitempty"`
	Cost   float64 `json:"cost,omitempty"`
}

// AgentLease is the sandbox lease of one of a session's agents.
type AgentLease struct {
	Agent string       `json:"agent"`
	Lease SandboxLease `json:"lease"`
}

// RecentTurns bounds the turn records a session keeps in its state; older
// ones are in its events (and their pages in the blob store).
const RecentTurns = 20

// SessionState is a session's state: everything its workflow carries from
// one turn to the next, and through continue-as-new.
type SessionState struct {
	// Name is the session's name, as the user gave or renamed it.
	Name string `json:"name,omitempty"`
	// Agent is the agent that answers the next message: the one that
	// ended the last turn, or the graph's entry.
	Agent string `json:"agent"`
	// Transcript is the conversation so far, in the blob store.
	Transcript TranscriptRef `json:"transcript"`
	// Pending are items an interrupted turn left to append before the
	// next message (the outputs of its last calls).
	Pending []agents.Item `json:"pending,omitempty"`
	// Policy is what a message that arrives during a turn does.
	Policy InputPolicy `json:"policy"`
	// Queue are the messages waiting for their turn, in order.
	Queue []SessionMessage `json:"queue,omitempty"`
	// Running is the message whose turn is running, if any.
	Running *SessionMessage `json:"running,omitempty"`
	// Turns counts the turns that ended; NextTurn numbers the messages.
	Turns    int `json:"turns"`
	NextTurn int `json:"next_turn"`
	// Recent are the last RecentTurns turns that ended, oldest first.
	Recent []TurnRecord `json:"recent,omitempty"`
	// Usage sums the model usage of every turn.
	Usage model.Usage `json:"usage"`
	// Agents is the usage of every turn per agent, with its cost.
	Agents Usages `json:"agents,omitempty"`
	// Budget is the session's budget and what its turns spent of it (all
	// of them: a budget spans the session), or nil for no budget.
	Budget *BudgetLedger `json:"budget,omitempty"`
	// Leases are the sandbox leases of the session's agents, by agent
	// name: each agent the user talks to keeps one workspace for the
	// whole session.
	Leases []AgentLease `json:"leases,omitempty"`
	// Backend, when set, is the sandbox backend the session's workspaces
	// are provisioned on (switch backend), over each agent's own.
	Backend string `json:"backend,omitempty"`
	// Paused and Stopped are the user's commands in force.
	Paused  bool `json:"paused,omitempty"`
	Stopped bool `json:"stopped,omitempty"`
	// LastActivity is when a message last arrived or a turn last ended.
	LastActivity time.Time `json:"last_activity"`
	// Approvals are the calls of the running turn's tree that wait for a
	// decision, and the decisions the session remembers.
	Approvals ApprovalDesk `json:"approvals,omitzero"`
}

// NewSessionState is a new session answered first by agent.
func NewSessionState(name, agent string, policy InputPolicy) *SessionState {
	if policy == "" {
		policy = PolicyEnqueue
	}
	return &SessionState{Name: name, Agent: agent, Policy: policy}
}

// Status is where the session stands.
func (s *SessionState) Status() SessionStatus {
	switch {
	case s.Stopped:
		return SessionStopped
	case s.Paused:
		return SessionPaused
	case s.Running != nil && len(s.Approvals.Pending) > 0:
		return SessionWaiting
	case s.Running != nil || len(s.Queue) > 0:
		return SessionThinking
	}
	return SessionIdle
}

// Busy reports whether a turn is running or messages wait.
func (s *SessionState) Busy() bool { return s.Running != nil || len(s.Queue) > 0 }

// Preempt is what a message that arrived during a turn does to that turn.
type Preempt int

// The preemptions.
const (
	// PreemptNone: the running turn goes on.
	PreemptNone Preempt = iota
	// PreemptInterrupt: stop the running turn at its next step boundary.
	PreemptInterrupt
	// PreemptRollback: cancel the running turn and undo it.
	PreemptRollback
)

// CheckMessage returns why the session would refuse text now, or nil; it
// changes nothing (an update's validator calls it).
func (s *SessionState) CheckMessage(text string) error {
	switch {
	case s.Stopped:
		return ErrSessionStopped
	case text == "":
		return ErrEmptyMessage
	case s.Budget.Spent() != "":
		return fmt.Errorf("%w (%s): raise it with the session's budget command (\"budget cost=N\", \"budget model_calls=N\", or \"budget off\")", ErrBudgetSpent, s.Budget.Spent())
	case s.Policy == PolicyReject && s.Busy():
		return ErrSessionBusy
	}
	return nil
}

// Submit takes a message at time now: it is queued with its turn id, and
// the returned preemption says what to do to the running turn, if any.
func (s *SessionState) Submit(text string, now time.Time) (SessionMessage, Preempt, error) {
	return s.SubmitMessage(SessionMessage{Text: text}, now)
}

// SubmitMessage is Submit of m, a message stored apart when its Ref is
// set (Text its preview); Turn and At are the session's to set.
func (s *SessionState) SubmitMessage(m SessionMessage, now time.Time) (SessionMessage, Preempt, error) {
	if err := s.CheckMessage(m.Text); err != nil {
		return SessionMessage{}, PreemptNone, err
	}
	s.NextTurn++
	m.Turn, m.At = fmt.Sprintf("t%d", s.NextTurn), now
	s.Queue = append(s.Queue, m)
	s.LastActivity = now
	p := PreemptNone
	if s.Running != nil {
		switch s.Policy {
		case PolicyInterrupt:
			p = PreemptInterrupt
		case PolicyRollback:
			p = PreemptRollback
		}
	}
	return m, p, nil
}

// Ready reports whether a turn can start: a message waits, none runs, and
// the session is neither paused nor stopped.
func (s *SessionState) Ready() bool {
	return !s.Stopped && !s.Paused && s.Running == nil && len(s.Queue) > 0
}

// StartTurn takes the next message (Ready must hold).
func (s *SessionState) StartTurn() (SessionMessage, error) {
	if !s.Ready() {
		return SessionMessage{}, fmt.Errorf("runtime: session: no turn can start (status %s, %d queued)", s.Status(), len(s.Queue))
	}
	m := s.Queue[0]
	s.Queue = slices.Delete(s.Queue, 0, 1)
	s.Running = &m
	return m, nil
}

// TurnEnded records the running turn's end: rec says how it ended; agent
// and transcript are who answers next and the conversation now (for a
// rolled-back or failed turn, those of the turn's start).
func (s *SessionState) TurnEnded(rec TurnRecord, agent string, transcript TranscriptRef) error {
	if s.Running == nil || s.Running.Turn != rec.Turn {
		return fmt.Errorf("runtime: session: turn %s ended, but it is not the one running", rec.Turn)
	}
	s.Running = nil
	s.Turns++
	s.Agent, s.Transcript = agent, transcript
	s.Usage = s.Usage.Add(rec.Usage)
	s.Agents = s.Agents.Add(rec.Agents...)
	s.LastActivity = rec.Ended
	s.Recent = append(s.Recent, rec)
	if len(s.Recent) > RecentTurns {
		s.Recent = slices.Delete(s.Recent, 0, len(s.Recent)-RecentTurns)
	}
	return nil
}

// Record returns the record of turn id, if it is among the recent ones.
func (s *SessionState) Record(id string) (TurnRecord, bool) {
	for i := len(s.Recent) - 1; i >= 0; i-- {
		if s.Recent[i].Turn == id {
			return s.Recent[i], true
		}
	}
	return TurnRecord{}, false
}

// LeaseOf returns the lease of agent's sandbox, or a new one if the
// agent has none yet.
func (s *SessionState) LeaseOf(agent string) SandboxLease {
	if i, ok := s.leaseIndex(agent); ok {
		return s.Leases[i].Lease
	}
	return *NewSandboxLease()
}

// SetLease records the lease of agent's sandbox.
func (s *SessionState) SetLease(agent string, l SandboxLease) {
	i, ok := s.leaseIndex(agent)
	if !ok {
		s.Leases = slices.Insert(s.Leases, i, AgentLease{Agent: agent})
	}
	s.Leases[i].Lease = l
}

func (s *SessionState) leaseIndex(agent string) (int, bool) {
	return slices.BinarySearchFunc(s.Leases, agent, func(l AgentLease, a string) int {
		switch {
		case l.Agent < a:
			return -1
		case l.Agent > a:
			return 1
		}
		return 0
	})
}

// SetPolicy changes the input policy.
func (s *SessionState) SetPolicy(p InputPolicy) error {
	if s.Stopped {
		return ErrSessionStopped
	}
	if _, err := ParsePolicy(string(p)); err != nil {
		return err
	}
	s.Policy = p
	return nil
}

// Pause holds the session: no turn starts until Resume.
func (s *SessionState) Pause() error {
	if s.Stopped {
		return ErrSessionStopped
	}
	s.Paused = true
	return nil
}

// Resume lets turns start again.
func (s *SessionState) Resume() error {
	if s.Stopped {
		return ErrSessionStopped
	}
	s.Paused = false
	return nil
}

// Stop ends the session for good; the messages still queued are dropped
// and returned, so their callers can be told.
func (s *SessionState) Stop() []SessionMessage {
	dropped := s.Queue
	s.Queue, s.Stopped, s.Paused = nil, true, false
	return dropped
}
