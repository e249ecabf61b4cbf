package troupe

// Names of the approvals' messages.
const (
	// ApprovalsQuery answers, at the root of a run or session, with the
	// calls of its tree that wait ([]runtime.ApprovalRequest).
	ApprovalsQuery = "troupe.approvals"
	// DecideUpdate takes a decision (runtime.ApprovalDecision) at the
	// root and answers with the decisions it routed
	// ([]runtime.ApprovalDecision, the one asked first).
	DecideUpdate = "troupe.decide"
	// ApprovalRequestSignal asks the root for a decision
	// (runtime.ApprovalRequest).
	ApprovalRequestSignal = "troupe.approval-request"
	// ApprovalSettledSignal tells the root a call waits no more
	// (runtime.ApprovalRequest), decided by its timeout.
	ApprovalSettledSignal = "troupe.approval-settled"
	// ApprovalDecisionSignal brings a decision to the agent workflow that
	// waits (runtime.ApprovalDecision).
	ApprovalDecisionSignal = "troupe.approval-decision"
)

// Event kinds of approvals.
const (
	EventApprovalRequested = "approval_requested"
	EventApprovalDecided   = "approval_decided"
)

// ErrBadDecision is the error type of a decision the root refuses: no such
// approval waits, or it cannot be taken as given.
const ErrBadDecision = "troupe.BadDecision"
