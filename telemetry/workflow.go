package telemetry

import (
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"
)

// WorkflowSpan is a span of workflow code: a handoff, an agent-as-tool
// call, a session turn, a wait for a human's approval. Start one with
// StartWorkflowSpan and end it with End. It is recorded once, when End is
// called outside replay, with the time StartWorkflowSpan was called (the
// workflow's time) as its start. Its ids derive from the workflow run and
// the key it was started with, so a replay on another worker (after a
// crash, say) gives it the same ids, and the activities and child
// workflows started under it before the crash keep their parent.
//
// A nil *WorkflowSpan (tracing off) does nothing.
type WorkflowSpan struct {
	p   *pending
	bag baggage.Baggage
}

// Finish implements interceptor.TracerSpan, so the span can be the
// current span of a workflow context; it does nothing: End records it.
func (*WorkflowSpan) Finish(*interceptor.TracerFinishSpanOptions) {}

// SpanOption configures a WorkflowSpan.
type SpanOption func(*spanOptions)

type spanOptions struct {
	newTrace bool
	attrs    []attribute.KeyValue
}

// NewTrace makes the span the root of a trace of its own, linked to the
// current span: a session's turn, whose session lives far longer than the
// turn.
func NewTrace() SpanOption { return func(o *spanOptions) { o.newTrace = true } }

// WithAttributes sets attributes on the span.
func WithAttributes(attrs ...attribute.KeyValue) SpanOption {
	return func(o *spanOptions) { o.attrs = append(o.attrs, attrs...) }
}

// StartWorkflowSpan starts a span named name in workflow code, as a child
// of the current span of ctx (the workflow's RunWorkflow span, or the
// WorkflowSpan that ctx came from), and returns a context with it as the
// current span: the activities and child workflows started with that
// context are its children. key names the span among the spans of the
// workflow run, the same on every replay: a turn's number, a call's id.
//
// It is deterministic and issues no command. Without the telemetry
// interceptors on the worker (tracing off) it returns ctx and nil, at the
// cost of one context lookup.
func StartWorkflowSpan(ctx workflow.Context, name, key string, opts ...SpanOption) (workflow.Context, *WorkflowSpan) {
	cur := ctx.Value(spanKey{})
	if cur == nil {
		return ctx, nil
	}
	var o spanOptions
	for _, opt := range opts {
		opt(&o)
	}
	var tr trace.Tracer
	switch c := cur.(type) {
	case *span:
		if c.pending != nil {
			tr = c.pending.tracer
		}
	case *WorkflowSpan:
		tr = c.p.tracer
	case *localParent:
		return ctx, nil
	}
	if tr == nil {
		return ctx, nil // Not this package's interceptor.
	}
	parent, bag := contextOf(cur)
	info := workflow.GetInfo(ctx)
	id := []string{"WorkflowSpan", info.WorkflowExecution.ID, info.WorkflowExecution.RunID, key}
	p := &pending{tracer: tr, name: name, parent: parent, kind: trace.SpanKindInternal, start: workflow.Now(ctx), attrs: o.attrs}
	if o.newTrace {
		p.parent = trace.SpanContext{}
		if parent.IsValid() {
			p.links = []trace.Link{{SpanContext: parent}}
		}
	}
	p.sc = derivedContext(p.parent, id...)
	s := &WorkflowSpan{p: p, bag: bag}
	return workflow.WithValue(ctx, spanKey{}, s), s
}

// SetAttributes sets attributes on the span.
func (s *WorkflowSpan) SetAttributes(attrs ...attribute.KeyValue) {
	if s == nil {
		return
	}
	s.p.setAttributes(attrs...)
}

// End ends the span, with err (nil for success) as its status. Outside
// replay it records the span; on replay it does nothing (the execution
// that got there first recorded it). It is deterministic and issues no
// command; a second End does nothing.
func (s *WorkflowSpan) End(ctx workflow.Context, err error) {
	if s == nil || workflow.IsReplaying(ctx) {
		return
	}
	s.p.mu.Lock()
	done := s.p.done
	s.p.done = true
	attrs := s.p.attrs
	s.p.mu.Unlock()
	if done {
		return
	}
	// Only outside replay, so the real time: a side channel, like a log.
	s.p.record(err, time.Now(), attrs) //workflowcheck:ignore it changes no workflow state
}

// SetWorkflowAttributes sets attributes on the span of the workflow run
// (RunWorkflow) that ctx belongs to, or on the WorkflowSpan it came from:
// an agent's name, say. Without tracing it does nothing.
func SetWorkflowAttributes(ctx workflow.Context, attrs ...attribute.KeyValue) {
	switch c := ctx.Value(spanKey{}).(type) {
	case *span:
		if c.pending != nil {
			c.pending.setAttributes(attrs...)
		}
	case *WorkflowSpan:
		c.SetAttributes(attrs...)
	}
}
