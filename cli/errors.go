package cli

// How a troupe command reports that it failed: one line on stderr with the
// typed cause, and with --json a document {"error": {"type", "message"}}
// on stdout; never the Temporal SDK's or server's raw text ("workflow not
// found for ID", "(type: …, retryable: false)"). Execute does it for every
// subcommand; describeError is the one place that turns an error into a
// type and a line.

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/spf13/cobra"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"

	"github.com/troupe-dev/troupe"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/codec"
)

// Error is a failure of a troupe command with a type of its own (one of
// the troupe.Err* types, such as troupe.ErrNoWorker) and a message that
// says, in one line, what is wrong and what to do.
type Error struct {
	Type    string
	Message string
	// Err is the error underneath, if any.
	Err error
}

func (e *Error) Error() string { return e.Message }
func (e *Error) Unwrap() error { return e.Err }

// usageError is a command line that is wrong: a bad flag, argument or
// flag value (troupe.ErrUsage).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usage marks err, when not nil, as a wrong command line.
func usage(err error) error {
	if err == nil {
		return nil
	}
	return &usageError{err}
}

// ranError marks an error a command's RunE returned: any other error of
// a command comes from cobra, which refused the command line.
type ranError struct{ err error }

func (e *ranError) Error() string { return e.err.Error() }
func (e *ranError) Unwrap() error { return e.err }

// markRun wraps the RunE of cmd and of every command under it so that
// their errors are told apart from cobra's own (ranError).
func markRun(cmd *cobra.Command) {
	if runE := cmd.RunE; runE != nil {
		cmd.RunE = func(c *cobra.Command, args []string) error {
			if err := runE(c, args); err != nil {
				return &ranError{err}
			}
			return nil
		}
	}
	for _, sub := range cmd.Commands() {
		markRun(sub)
	}
}

// reported marks an error whose --json document the command has printed
// already (a richer one than Execute's: a run's failure, say).
type reported struct{ err error }

func (e *reported) Error() string { return e.err.Error() }
func (e *reported) Unwrap() error { return e.err }

// Execute runs root, a troupe command (see Command), on args under ctx,
// and returns its exit status (ExitCode). When it fails, Execute prints
// its error (describeError) on root's stderr, one line ending with its
// type, and when the
// command was given --json, {"error": {"type", "message"}} on root's
// stdout.
func Execute(ctx context.Context, root *cobra.Command, args []string) int {
	code, _ := execute(ctx, root, args)
	return code
}

// execute is Execute, which returns the error it reported too.
func execute(ctx context.Context, root *cobra.Command, args []string) (int, FailureInfo) {
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0, FailureInfo{}
	}
	info := describeError(err)
	if info.Type == troupe.ErrUsage && cmd != nil {
		info.Message += " (see `" + cmd.CommandPath() + " --help`)"
	}
	fmt.Fprintln(root.ErrOrStderr(), "troupe:", errorLine(info))
	var done *reported
	var rf *RunFailure
	var in *Interrupted
	if wantsJSON(cmd, args) && !errors.As(err, &done) && !errors.As(err, &rf) && !errors.As(err, &in) {
		_ = printJSON(root.OutOrStdout(), struct {
			Error FailureInfo `json:"error"`
		}{info})
	}
	return ExitCode(err), info
}

// errorLine is the line a failed command prints: what happened, then
// its type, which scripts and searches can match on, unless the message
// names it already.
func errorLine(info FailureInfo) string {
	if info.Type == "" || strings.Contains(info.Message, info.Type) {
		return info.Message
	}
	return info.Message + " [" + info.Type + "]"
}

// wantsJSON reports whether the command that ran was given --json: its
// flag, or, when the command line could not be parsed, the word itself.
func wantsJSON(cmd *cobra.Command, args []string) bool {
	if cmd != nil {
		if f := cmd.Flags().Lookup("json"); f != nil && f.Value.String() == "true" {
			return true
		}
	}
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "--json" || a == "--json=true" {
			return true
		}
	}
	return false
}

// describeError is err as a troupe command reports it: its type (a
// troupe.Err* type, or the type of the application error that caused
// it) and one line that says what happened, in which the text of a
// Temporal error is replaced by what it means.
func describeError(err error) FailureInfo {
	var (
		rf  *RunFailure
		in  *Interrupted
		own *Error
		bad *usageError
		ran *ranError
	)
	switch {
	case errors.As(err, &rf):
		typ := rf.Err.Type
		if typ == "" {
			typ = troupe.ErrFailed
		}
		return FailureInfo{Type: typ, Message: rf.Error()}
	case errors.As(err, &in):
		return FailureInfo{Type: "troupe.Interrupted", Message: in.Error()}
	case errors.As(err, &own):
		return FailureInfo{Type: own.Type, Message: flatten(err.Error())}
	case errors.As(err, &bad), !errors.As(err, &ran):
		return FailureInfo{Type: troupe.ErrUsage, Message: flatten(err.Error())}
	}
	typ := troupe.ErrFailed
	switch {
	case errors.Is(err, troupeclient.ErrNoRun):
		typ = troupe.ErrNoRun
	case errors.Is(err, troupeclient.ErrNotRun):
		typ = troupe.ErrNotRun
	case errors.Is(err, troupeclient.ErrClosed):
		typ = troupe.ErrRunClosed
	case errors.Is(err, troupeclient.ErrNoSession):
		typ = troupe.ErrUnknownSession
	case errors.As(err, new(*codec.KeyError)):
		typ = troupe.ErrPayloadKey
	}
	raw := temporalError(err)
	if raw == nil {
		return FailureInfo{Type: typ, Message: flatten(err.Error())}
	}
	rawType, text := plainTemporal(raw)
	if typ == troupe.ErrFailed {
		typ = rawType
	}
	msg := err.Error()
	if i := strings.LastIndex(msg, raw.Error()); i >= 0 {
		msg = msg[:i] + text
	} else {
		msg = text
	}
	return FailureInfo{Type: typ, Message: flatten(msg)}
}

// temporalError is the outermost error in err's chain that the Temporal
// SDK or server made, whose text is theirs: nil when there is none.
func temporalError(err error) error {
	for e := err; e != nil; e = errors.Unwrap(e) {
		t := reflect.TypeOf(e)
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		// The SDK's errors (temporal, and its internal package's) and the
		// server's (serviceerror).
		if strings.HasPrefix(t.PkgPath(), "go.temporal.io/") {
			return e
		}
	}
	return nil
}

// plainTemporal says what a Temporal error means, and its type.
func plainTemporal(err error) (string, string) {
	var (
		ae          *temporal.ApplicationError
		notFound    *serviceerror.NotFound
		unavailable *serviceerror.Unavailable
		denied      *serviceerror.PermissionDenied
		started     *serviceerror.WorkflowExecutionAlreadyStarted
		queryFailed *serviceerror.QueryFailed
		deadline    *serviceerror.DeadlineExceeded
		canceled    *temporal.CanceledError
		terminated  *temporal.TerminatedError
		timeout     *temporal.TimeoutError
	)
	switch {
	case errors.As(err, &ae):
		if strings.HasPrefix(ae.Type(), "troupe.") {
			return ae.Type(), ae.Type() + ": " + ae.Message()
		}
		return troupe.ErrFailed, ae.Message()
	case errors.As(err, &notFound):
		if closedWorkflow(notFound) {
			return troupe.ErrRunClosed, "it has closed, and takes nothing more"
		}
		return troupe.ErrNotFound, "not found on the server"
	case errors.As(err, &started):
		return troupe.ErrFailed, "that id is in use already"
	case errors.As(err, &queryFailed):
		return troupe.ErrFailed, "the worker cannot answer for it (a workflow of a graph, or of a version, that no worker serves?)"
	case errors.As(err, &unavailable):
		return troupe.ErrNoServer, "the Temporal server does not answer"
	case errors.As(err, &denied):
		return troupe.ErrPermissionDenied, "the Temporal server refused this client (" + strings.TrimSuffix(denied.Error(), ".") +
			"): give it an API key it accepts, with a role on the namespace the call needs, in TEMPORAL_API_KEY (or the profile's api_key)"
	case errors.As(err, &deadline), errors.Is(err, context.DeadlineExceeded):
		return troupe.ErrFailed, "no answer in time"
	case errors.As(err, &canceled):
		return "troupe.Canceled", "it was cancelled"
	case errors.As(err, &terminated):
		return "troupe.Terminated", "it was terminated"
	case errors.As(err, &timeout):
		return "troupe.TimedOut", "it timed out"
	}
	return troupe.ErrFailed, err.Error()
}

// closedWorkflow reports whether a NotFound of the server's is about a
// workflow that has closed ("workflow execution already completed"), not
// one that does not exist.
func closedWorkflow(nf *serviceerror.NotFound) bool {
	return strings.Contains(nf.Error(), "already completed")
}

// onSession types an error of a command on session id that the server,
// not the session manager, made: an id that names no workflow is
// troupe.ErrUnknownSession, as the manager says it, and a session whose
// workflow has closed troupe.ErrSessionStopped.
func onSession(id string, err error) error {
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf) && closedWorkflow(nf):
		return &Error{Type: troupe.ErrSessionStopped, Message: fmt.Sprintf("session %s is stopped: it takes no more messages or commands (troupe sessions show %s shows it)", id, id), Err: err}
	case errors.As(err, &nf), errors.Is(err, troupeclient.ErrNoSession):
		return &Error{Type: troupe.ErrUnknownSession, Message: fmt.Sprintf("no session %s (troupe sessions ls lists them)", id), Err: err}
	}
	return err
}

// dialError is the error of cn's client that could not connect to the
// Temporal server at addr: troupe.ErrNoServer when nothing answers there,
// saying which setting named it.
func dialError(cn *conn, addr string, err error) error {
	var unavailable *serviceerror.Unavailable
	var deadline *serviceerror.DeadlineExceeded
	if errors.As(err, &unavailable) || errors.As(err, &deadline) || errors.Is(err, context.DeadlineExceeded) {
		if cn.home != nil {
			return &Error{Type: troupe.ErrNoServer, Message: fmt.Sprintf("no Temporal server answers at %s, the server of TROUPE_HOME", addr), Err: err}
		}
		return &Error{Type: troupe.ErrNoServer, Message: fmt.Sprintf("no Temporal server answers at %s (%s): start it, or %s "+
			"to use the server of TROUPE_HOME (troupe dev runs it with a worker)", addr, whereFrom(cn.res), undoServer(cn.res)), Err: err}
	}
	return fmt.Errorf("connect to %s: %w", addr, err)
}

// flatten makes text one line.
func flatten(text string) string { return strings.Join(strings.Fields(text), " ") }
