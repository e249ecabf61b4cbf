package troupe

import (
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"
)

// Application error types a run can fail with. They are stable: callers
// branch on them with ErrorType.
const (
	ErrMaxTurns       = "troupe.MaxTurnsExceeded"
	ErrMaxHandoffs    = "troupe.MaxHandoffsExceeded"
	ErrOutputInvalid  = "troupe.OutputInvalid"
	ErrModel          = "troupe.ModelError"
	ErrModelRetryable = "troupe.ModelUnavailable"
	// ErrModelRateLimited: the model endpoint turned a call away for its
	// rate limits (429), or the endpoint's shared limit
	// (agents.ModelLimit) had no room for it in time. Retried after the
	// wait the provider asked for, without counting against the
	// attempts a failing model gets; a call that stays rate-limited past
	// the run's bound (workflows.Config.ModelRateLimitWait) fails the
	// agent with it, non-retryable, saying for how long.
	ErrModelRateLimited = "troupe.ModelRateLimited"
	ErrPayloadTooLarge  = "troupe.PayloadTooLarge"
	ErrUnknownAgent     = "troupe.UnknownAgent"
	// ErrScenarioNoMatch: the run is on an offline scenario (the scripted
	// model, used when OPENAI_API_KEY is unset) that has no answer for
	// what was said. Not a model failure, and not retried: the message
	// names the scenario file to add a rule to.
	ErrScenarioNoMatch = "troupe.ScenarioNoMatch"
	// ErrBlobMissing: an activity needed a blob its worker's store does
	// not hold, and it stayed missing over several attempts (the workers
	// of a queue keep their blobs in different stores, or it was deleted).
	ErrBlobMissing = "troupe.BlobMissing"
	// ErrUnknownGraph: a session was asked of a graph that the worker
	// taking the request does not serve.
	ErrUnknownGraph = "troupe.UnknownGraph"
	// ErrGraphChanged: an agent a run needs is no longer in the graph the
	// worker serves (it was edited since the run started).
	ErrGraphChanged = "troupe.GraphChanged"
	ErrToolDepth    = "troupe.ToolDepthExceeded"
	ErrHandoff      = "troupe.HandoffFailed"
	ErrInstructions = "troupe.InstructionsFailed"
	ErrInternal     = "troupe.Internal"
	// ErrStoreNotServed: a sandbox was asked of a worker whose sandbox
	// store's queue nothing serves (wired with Runner.Register alone):
	// its commands could reach no worker.
	ErrStoreNotServed = "troupe.SandboxStoreNotServed"
	// ErrBudgetExceeded: the budget of the run (or session) is spent, and
	// an agent of its tree was about to call the model; its details are a
	// runtime.BudgetReport (see BudgetReportOf).
	ErrBudgetExceeded = "troupe.BudgetExceeded"
	// ErrBadBudget: a budget the run cannot keep (a negative limit, a cost
	// limit with a model the price table lacks).
	ErrBadBudget = "troupe.BadBudget"
	// ErrGuardrailTripped: a guardrail tripped (its details a
	// GuardrailTrip: see TrippedGuardrail).
	ErrGuardrailTripped = "troupe.GuardrailTripped"
	// ErrGuardrailFailed: a guardrail could not decide (its func failed,
	// or its agent did), so the run does not go on.
	ErrGuardrailFailed = "troupe.GuardrailFailed"
	// ErrGateFailed: a gate of an agent's chain (workflows/gate) failed
	// in a way no retry mends: it panicked. The message names the gate.
	ErrGateFailed = "troupe.GateFailed"
)

// Error types of the troupe command line and the client: what a command
// that could not do its work reports (`--json` prints them as
// {"error": {"type", "message"}}), stable for scripts to branch on.
const (
	// ErrNotFound: the id a command was given names no workflow on the
	// server (for a session: ErrUnknownSession).
	ErrNotFound = "troupe.NotFound"
	// ErrNoRun: the id names no workflow at all (troupe runs).
	ErrNoRun = "troupe.NoRun"
	// ErrNotRun: the id names a workflow that is not a run (an agent of
	// one, a session).
	ErrNotRun = "troupe.NotRun"
	// ErrRunClosed: the run (or the workflow a command names) has
	// closed, so it cannot be cancelled, terminated or sent anything (for
	// a session: ErrSessionStopped).
	ErrRunClosed = "troupe.RunClosed"
	// ErrNoWorker: no worker serves the task queue the command needs, so
	// nothing would answer it (start one, or wait with --wait).
	ErrNoWorker = "troupe.NoWorker"
	// ErrNoServer: no Temporal server answers at the address in use.
	ErrNoServer = "troupe.NoServer"
	// ErrConnectionConfig: the settings of the connection to Temporal
	// (--address, --namespace, --profile, the TEMPORAL_* variables, a
	// profile of temporal.toml) cannot be used: a profile that is not in
	// the file, a file that cannot be read or parsed, TLS files that do
	// not load, or no server named where one is needed.
	ErrConnectionConfig = "troupe.ConnectionConfig"
	// ErrPermissionDenied: the Temporal server refused the client: it
	// checks API keys (TEMPORAL_API_KEY, a profile's api_key) and the
	// client sent none, or one it does not accept or that gives no role
	// the call needs.
	ErrPermissionDenied = "troupe.PermissionDenied"
	// ErrPayloadKey: a payload is sealed (package codec) with a key the
	// process reading it does not have, or that another key of the same
	// id does not open; the message names the key id.
	ErrPayloadKey = "troupe.PayloadKey"
	// ErrUsage: the command line is wrong: an unknown flag or command, a
	// missing or extra argument, a value a flag does not take.
	ErrUsage = "troupe.Usage"
	// ErrFailed: a command failed for a reason with no type of its own.
	ErrFailed = "troupe.Failed"
)

// ErrorType returns the Type of the first Temporal application error in
// err's chain (for example ErrMaxTurns), or "" when there is none.
func ErrorType(err error) string {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return ae.Type()
	}
	return ""
}

// FailureText is a failure as a failed event tells it: what caused it,
// under the child workflow and activity errors that carried it, e.g.
// "troupe.ModelUnavailable: model unreachable at URL (connection refused)
// after 10 attempts" or "timed out (START_TO_CLOSE): …".
func FailureText(err error) string {
	e := err
	for {
		switch e.(type) {
		case *temporal.ActivityError, *temporal.ChildWorkflowExecutionError:
			if inner := errors.Unwrap(e); inner != nil {
				e = inner
				continue
			}
		}
		break
	}
	var ae *temporal.ApplicationError
	switch v := e.(type) {
	case *temporal.TimeoutError:
		text := "timed out (" + v.TimeoutType().String() + ")"
		if cause := errors.Unwrap(v); cause != nil {
			text += ": " + FailureText(cause)
		}
		return text
	case *temporal.CanceledError:
		return "cancelled"
	case *temporal.TerminatedError:
		return "terminated"
	case *temporal.ApplicationError:
		ae = v
	default:
		if !errors.As(e, &ae) {
			return e.Error()
		}
	}
	if strings.HasPrefix(ae.Type(), "troupe.") {
		return ae.Type() + ": " + ae.Message()
	}
	return ae.Message()
}

// ErrMCP is the application error type (see ErrorType) of an agent whose
// MCP tools cannot be listed: a server that does not start or answer, or
// tool names that clash.
const ErrMCP = "troupe.MCPError"

// ScenarioNoMatch is the failure of a model call that the offline
// scenario answered with no rule (the scripted model's no-match answer):
// an ErrScenarioNoMatch that says so and names source, the scenario file
// to add a rule to ("" when unknown), with cause (the scripted server's
// account of the request) along. It is not retryable: the same request
// would find no rule again.
func ScenarioNoMatch(source string, cause error) error {
	if source == "" {
		source = "the scenario"
	}
	return temporal.NewApplicationErrorWithOptions(
		"the offline scenario has no answer for this message; set OPENAI_API_KEY or add a rule to "+source,
		ErrScenarioNoMatch, temporal.ApplicationErrorOptions{NonRetryable: true, Cause: cause})
}

func NonRetryable(typ, format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), typ, nil)
}

// PayloadLimit bounds every payload this package builds. Temporal rejects
// payloads of 2 MiB; staying far below keeps histories healthy.
const PayloadLimit = 512 << 10

func CheckPayload(what string, n int) error {
	if n > PayloadLimit {
		return NonRetryable(ErrPayloadTooLarge,
			"%s is %d bytes, over Troupe's %d-byte bound for one Temporal payload; return less, or store it and pass a reference", what, n, PayloadLimit)
	}
	return nil
}
