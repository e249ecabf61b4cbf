package troupe

import (
	"errors"

	"go.temporal.io/sdk/temporal"
)

// Event kinds of guardrails.
const (
	// EventGuardrailTripped: a guardrail tripped; the run ends. Detail
	// names the guardrail and its reason.
	EventGuardrailTripped = "guardrail_tripped"
	// EventGuardrailApplied: a tool guardrail rejected a call, or
	// replaced or withheld its output; the run goes on.
	EventGuardrailApplied = "guardrail_applied"
)

// GuardrailTrip is the details of an ErrGuardrailTripped error: which
// guardrail tripped, where, and why.
type GuardrailTrip struct {
	// Guardrail is the guardrail's name; Kind its kind
	// (agents.GuardrailInput, GuardrailOutput, GuardrailToolBefore,
	// GuardrailToolAfter).
	Guardrail string `json:"guardrail"`
	Kind      string `json:"kind"`
	// Agent is the agent whose guardrail it is, Workflow that agent's
	// workflow id.
	Agent    string `json:"agent"`
	Workflow string `json:"workflow"`
	// Tool and CallID are the call a tool guardrail checked.
	Tool   string `json:"tool,omitempty"`
	CallID string `json:"call_id,omitempty"`
	// Reason is the guardrail's.
	Reason string `json:"reason,omitempty"`
}

// Message is the text of the error a trip ends a run with.
func (g GuardrailTrip) Message() string {
	where := g.Kind + " guardrail " + g.Guardrail + " of agent " + g.Agent
	if g.Tool != "" {
		where += " (call of " + g.Tool + ")"
	}
	if g.Reason == "" {
		return where + " tripped"
	}
	return where + " tripped: " + g.Reason
}

// TrippedGuardrail returns the guardrail that ended a run, when err (a
// run's, a session turn's, or an agent's error) is ErrGuardrailTripped.
//
// The trip is the details of the error as the guardrail's agent raised
// it, which the agents that carried it up the chain wrap (with their
// usage and leases, see WithFailure): the chain is searched for it.
func TrippedGuardrail(err error) (*GuardrailTrip, bool) {
	var first *temporal.ApplicationError
	for e := err; e != nil; e = errors.Unwrap(e) {
		ae, ok := e.(*temporal.ApplicationError)
		if !ok || ae.Type() != ErrGuardrailTripped {
			continue
		}
		if first == nil {
			first = ae
		}
		var trip GuardrailTrip
		if ae.HasDetails() && ae.Details(&trip) == nil && trip.Guardrail != "" {
			return &trip, true
		}
	}
	if first == nil {
		return nil, false
	}
	return &GuardrailTrip{Reason: first.Message()}, true
}
