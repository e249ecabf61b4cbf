package troupe

import "time"

// EventPage is a page of a workflow's events saved in the blob store when
// one of its runs continued as new: the events numbered From to To, as a
// JSON array under Key.
type EventPage struct {
	From int    `json:"from"`
	To   int    `json:"to"`
	Key  string `json:"key"`
}

// Names of the queries every workflow of a run or session answers: its
// events after a number ([]Event), and the pages of its earlier runs'
// events in the blob store ([]EventPage).
const (
	EventsQuery     = "troupe.events"
	EventPagesQuery = "troupe.event-pages"
)

// Event is one step of a run, kept in workflow state for the events query.
// A text delta (EventTextDelta) is the one kind that no workflow records:
// a piece of a model turn's text on its way, which only followers that ask
// for deltas see (WithDeltas), numbered 0.
type Event struct {
	// Seq numbers the events of one workflow from 1; it is 0 for a text
	// delta, which a Cursor ignores.
	Seq int `json:"seq"`
	// Time is the workflow time of the event (a delta's: the worker's
	// clock when the piece arrived).
	Time time.Time `json:"time"`
	// Kind is one of the Event* constants.
	Kind string `json:"kind"`
	// WorkflowID is the workflow that recorded the event.
	WorkflowID string `json:"workflow_id"`
	Agent      string `json:"agent,omitempty"`
	Turn       int    `json:"turn,omitempty"`
	Tool       string `json:"tool,omitempty"`
	CallID     string `json:"call_id,omitempty"`
	// Detail is a short, human-readable description.
	Detail string `json:"detail,omitempty"`
	// Child is the workflow id of a child this event started or finished.
	Child string `json:"child,omitempty"`
	// Approval is the id of the approval a call waits for
	// (approval_requested, approval_decided): what a decision names.
	Approval string `json:"approval,omitempty"`
}

// Event kinds.
const (
	EventRunStarted        = "run_started"
	EventAgentStarted      = "agent_started"
	EventTurn              = "model_turn"
	EventToolCalled        = "tool_called"
	EventToolResult        = "tool_result"
	EventAgentToolStarted  = "agent_tool_started"
	EventAgentToolFinished = "agent_tool_finished"
	EventHandoff           = "handoff"
	EventOutputInvalid     = "output_invalid"
	EventModelRetry        = "model_retry"
	EventContinued         = "continued_as_new"
	EventFinal             = "final_output"
	EventInterrupted       = "interrupted"
	EventFailed            = "failed"
	// EventTextDelta is a piece of a model turn's text as the model
	// generates it (Detail), for the turn (Turn) of the agent (Agent,
	// WorkflowID) that the turn's model_turn event then records. It is
	// never recorded: not in workflow state, not in history, not in the
	// events query. Followers see deltas only with WithDeltas.
	EventTextDelta = "text_delta"
	// EventToolInDoubt is a call of a tool that is not idempotent
	// (agents.NotIdempotent) which an earlier attempt started and did not
	// finish (its worker was lost mid-call, or it timed out): it was not
	// run again, and the model was told it may or may not have taken
	// effect (agents.InDoubtOutput). Detail holds the call's idempotency
	// key.
	EventToolInDoubt = "tool_in_doubt"
)

// Cursor is where a follower stands in a run: for each workflow of the
// run it knows of, the number of the last event of it that the follower
// got (0: none yet). Keep one with Add as events arrive; From(cursor)
// then has a follower go on from there, also after a continue-as-new or
// from another process, with no event repeated or skipped. It encodes as
// JSON.
type Cursor map[string]int

// Add moves c past e, and makes a workflow that e starts known to c. A
// text delta (Seq 0) moves nothing.
func (c Cursor) Add(e Event) {
	if e.Seq > c[e.WorkflowID] {
		c[e.WorkflowID] = e.Seq
	}
	if e.Child != "" {
		if _, ok := c[e.Child]; !ok {
			c[e.Child] = 0
		}
	}
}

// Preview is s cut to n bytes, with an ellipsis when cut: what an event's
// Detail shows of a longer text.
func Preview(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// EventsQueryPage bounds the events one answer of the events query holds; a
// follower further behind asks again from the last it got.
const EventsQueryPage = 2500
