package runtime

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// This file holds the approvals of an agent tree as plain Go: the desk
// the root of a run or session keeps (the calls of its tree that wait for
// a human, and the decisions it remembers), and the transitions that
// requests and decisions make on it. The workflows only carry the
// messages: an agent workflow asks its root with a signal, the root
// takes decisions by update and signals each to the workflow that waits.

// ApprovalRequest is a call that waits for a human's decision, as the
// agent workflow that holds it asks its root.
type ApprovalRequest struct {
	// ID names the approval across the tree (ApprovalID).
	ID string `json:"id"`
	// Workflow is the agent workflow that waits.
	Workflow string `json:"workflow"`
	Agent    string `json:"agent"`
	Tool     string `json:"tool"`
	// Kind is the kind of call: function, sandbox, mcp or agent.
	Kind   string `json:"kind"`
	CallID string `json:"call_id"`
	// Arguments are the call's JSON arguments, as the model gave them.
	Arguments string    `json:"arguments"`
	Since     time.Time `json:"since"`
	// Deadline, when set, is when the wait times out and OnTimeout
	// decides.
	Deadline  *time.Time `json:"deadline,omitempty"`
	OnTimeout string     `json:"on_timeout,omitempty"`
}

// ApprovalID is the id of the approval of call callID in workflow wf:
// short enough to type, the same wherever it is computed.
func ApprovalID(wf, callID string) string {
	sum := sha256.Sum256([]byte(wf + "\x00" + callID))
	return "a" + hex.EncodeToString(sum[:4])
}

// Remember scopes of a decision (ApprovalDecision.Remember).
const (
	// RememberTool applies the decision to every later call of the tool
	// by the same agent, for the rest of the run or session.
	RememberTool = "tool"
	// RememberArguments applies it to the later calls of the tool by the
	// same agent with the same arguments.
	RememberArguments = "arguments"
)

// Who took a decision (ApprovalDecision.By).
const (
	DecidedByUser    = "user"
	DecidedByRule    = "rule"
	DecidedByTimeout = "timeout"
	// DecidedByInterrupt: the session's user interrupted the turn while
	// the call waited; it is not run.
	DecidedByInterrupt = "interrupt"
)

// ApprovalDecision decides a waiting call.
type ApprovalDecision struct {
	// ID names the approval (ApprovalRequest.ID).
	ID      string `json:"id"`
	Approve bool   `json:"approve"`
	// Message is for the model: why a call was rejected, or a note on an
	// approved one.
	Message string `json:"message,omitempty"`
	// Remember, when set (RememberTool, RememberArguments), applies the
	// decision to later calls alike, for the rest of the run or session.
	Remember string `json:"remember,omitempty"`
	// Arguments, when set, replace the call's arguments (a JSON object)
	// before it runs.
	Arguments string `json:"arguments,omitempty"`
	// By says who decided; the runtime sets it.
	By string `json:"by,omitempty"`
	// CallID is the call decided, for the workflow that waits; the root
	// sets it.
	CallID string `json:"call_id,omitempty"`
}

// ApprovalRule is a remembered decision.
type ApprovalRule struct {
	Agent string `json:"agent"`
	Tool  string `json:"tool"`
	// Arguments, when set, limits the rule to calls with these arguments
	// (compacted JSON).
	Arguments string `json:"arguments,omitempty"`
	Approve   bool   `json:"approve"`
	Message   string `json:"message,omitempty"`
}

// matches reports whether the rule decides the request.
func (r ApprovalRule) matches(req ApprovalRequest) bool {
	return r.Agent == req.Agent && r.Tool == req.Tool && (r.Arguments == "" || r.Arguments == compactJSON(req.Arguments))
}

// ApprovalDesk is the approvals of an agent tree, kept by its root: the
// calls waiting, oldest first, and the decisions remembered.
type ApprovalDesk struct {
	Pending []ApprovalRequest `json:"pending,omitempty"`
	Rules   []ApprovalRule    `json:"rules,omitempty"`
}

// Errors of the desk's transitions.
var (
	// ErrNoApproval: no call waits under that id.
	ErrNoApproval = errors.New("no such approval waiting")
	// ErrBadDecision: a decision that cannot be taken as given.
	ErrBadDecision = errors.New("invalid decision")
)

// Routed is a decision on its way to the workflow that waits.
type Routed struct {
	Workflow string
	Decision ApprovalDecision
}

// Request takes a request: a remembered decision that matches answers it
// at once (routed), or it waits on the desk. A request already waiting
// (asked again) changes nothing.
func (d *ApprovalDesk) Request(req ApprovalRequest) (routed *Routed) {
	if slices.ContainsFunc(d.Pending, func(p ApprovalRequest) bool { return p.ID == req.ID }) {
		return nil
	}
	for _, r := range d.Rules {
		if r.matches(req) {
			return &Routed{Workflow: req.Workflow, Decision: ApprovalDecision{ID: req.ID, CallID: req.CallID, Approve: r.Approve, Message: r.Message, By: DecidedByRule}}
		}
	}
	d.Pending = append(d.Pending, req)
	return nil
}

// Check reports whether dec can be taken now, and why not.
func (d *ApprovalDesk) Check(dec ApprovalDecision) error {
	if d.find(dec.ID) < 0 {
		ids := make([]string, 0, len(d.Pending))
		for _, p := range d.Pending {
			ids = append(ids, p.ID)
		}
		waiting := "none waits"
		if len(ids) > 0 {
			waiting = "waiting: " + strings.Join(ids, ", ")
		}
		return fmt.Errorf("%w: %q (%s)", ErrNoApproval, dec.ID, waiting)
	}
	switch dec.Remember {
	case "", RememberTool, RememberArguments:
	default:
		return fmt.Errorf("%w: remember %q: want %q or %q", ErrBadDecision, dec.Remember, RememberTool, RememberArguments)
	}
	if dec.Arguments != "" {
		if !dec.Approve {
			return fmt.Errorf("%w: new arguments for a rejected call", ErrBadDecision)
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(dec.Arguments), &obj); err != nil {
			return fmt.Errorf("%w: the new arguments are not a JSON object: %v", ErrBadDecision, err)
		}
	}
	return nil
}

// Decide takes a user's decision: the call leaves the desk, the decision
// is remembered if asked, and every other waiting call a new rule decides
// goes along. It returns the decisions to route, the one asked first.
func (d *ApprovalDesk) Decide(dec ApprovalDecision) ([]Routed, error) {
	if err := d.Check(dec); err != nil {
		return nil, err
	}
	i := d.find(dec.ID)
	req := d.Pending[i]
	d.Pending = slices.Delete(d.Pending, i, i+1)
	dec.By, dec.CallID = DecidedByUser, req.CallID
	routed := []Routed{{Workflow: req.Workflow, Decision: dec}}
	if dec.Remember == "" {
		return routed, nil
	}
	rule := ApprovalRule{Agent: req.Agent, Tool: req.Tool, Approve: dec.Approve, Message: dec.Message}
	if dec.Remember == RememberArguments {
		rule.Arguments = compactJSON(req.Arguments)
	}
	d.Rules = append(d.Rules, rule)
	d.Pending = slices.DeleteFunc(d.Pending, func(p ApprovalRequest) bool {
		if !rule.matches(p) {
			return false
		}
		routed = append(routed, Routed{Workflow: p.Workflow, Decision: ApprovalDecision{ID: p.ID, CallID: p.CallID, Approve: rule.Approve, Message: rule.Message, By: DecidedByRule}})
		return true
	})
	return routed, nil
}

// Settle takes the approval id off the desk without a user's decision:
// its wait timed out, or its workflow stopped waiting.
func (d *ApprovalDesk) Settle(id string) {
	if i := d.find(id); i >= 0 {
		d.Pending = slices.Delete(d.Pending, i, i+1)
	}
}

// Forget drops the calls waiting in workflows whose ids start with
// prefix: a turn that ended (cancelled, rolled back) waits no more.
func (d *ApprovalDesk) Forget(prefix string) {
	d.Pending = slices.DeleteFunc(d.Pending, func(p ApprovalRequest) bool { return strings.HasPrefix(p.Workflow, prefix) })
}

func (d *ApprovalDesk) find(id string) int {
	return slices.IndexFunc(d.Pending, func(p ApprovalRequest) bool { return p.ID == id })
}

// compactJSON is s without insignificant space, or s when it is not JSON.
func compactJSON(s string) string {
	var b bytes.Buffer
	if json.Compact(&b, []byte(s)) != nil {
		return s
	}
	return b.String()
}
