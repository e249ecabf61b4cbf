package lease

// The spans of sandbox tools (package telemetry tells the whole
// contract): a sandbox tool call's span in its activity
// (telemetry.StartToolCall, as for every tool), and a span for each
// command the tool runs in the sandbox (sandbox exec). With tracing off (no telemetry interceptors
// on the worker) each costs a context lookup.

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/telemetry"
)

// toolKind is the kind of a sandbox tool call, on its span (and at the
// gate of package workflows).
const toolKind = "sandbox"

// tracedSession is a sandbox session whose commands have spans (sandbox
// exec), for a tool call that is traced.
type tracedSession struct {
	sandbox.Session
}

// traceSession returns s with spans for its commands when ctx's span is
// recorded, else s itself.
func traceSession(ctx context.Context, s sandbox.Session) sandbox.Session {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return s
	}
	return tracedSession{s}
}

func (s tracedSession) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	st := s.State()
	ctx, span := telemetry.Start(ctx, "sandbox exec", attribute.String("troupe.sandbox.id", st.ID), attribute.String("troupe.sandbox.backend", st.Backend))
	res, err := s.Session.Exec(ctx, req)
	if err == nil {
		span.SetAttributes(attribute.Int("process.exit.code", res.ExitCode))
	}
	telemetry.End(span, err)
	return res, err
}
