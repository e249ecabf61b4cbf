package telemetry

// This file is the OpenTelemetry side of the SDK's tracing interceptor
// (interceptor.NewTracingInterceptor): an interceptor.Tracer whose spans
// of workflow code survive replay. It writes the same header as
// go.temporal.io/sdk/contrib/opentelemetry (W3C trace context and baggage
// under "_tracer-data"), so traces cross into workers and clients of other
// SDKs and of that package.
//
// Spans that the interceptor starts outside workflow code (StartWorkflow,
// RunActivity, ...) and the outbound spans of workflow code (StartActivity,
// StartChildWorkflow, ..., which the interceptor starts only when not
// replaying) are plain spans, recorded as they end. The spans of a
// workflow execution's inbound calls (RunWorkflow, HandleUpdate) are
// deferred: their ids come from the run (and the update) rather than
// chance, so a replay on another worker gets the same ids and the children
// started before a crash keep their parent; and they are recorded only when
// the guard (guard.go) says their workflow code ended outside replay, so a
// replay (a query of a closed workflow, a cache eviction, a worker taking
// over after a crash) adds none.

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// headerKey is the Temporal header field the span travels in: the one
// every SDK's OpenTelemetry integration uses.
const headerKey = "_tracer-data"

// The interceptor's span tags (interceptor's workflowIDTagKey and friends).
const (
	tagWorkflowID = "temporalWorkflowID"
	tagRunID      = "temporalRunID"
	tagUpdateID   = "temporalUpdateID"
)

// spanKey is the key of the current span in workflow contexts (the
// interceptor's SpanContextKey), read by the guard and by StartWorkflowSpan.
type spanKey struct{}

var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// tracer implements interceptor.Tracer with OpenTelemetry. With no otel
// tracer it is a relay: it records nothing and passes the trace context
// it is given on, unchanged, to what the code it runs starts.
type tracer struct {
	interceptor.BaseTracer
	otel trace.Tracer
	// bookkeeping traces the budgets' bookkeeping too (Config.Bookkeeping).
	bookkeeping bool
}

// bookkeeping reports whether a span of the interceptor's, of the
// activity, update or signal name, is budget bookkeeping.
func bookkeeping(name string) bool {
	return strings.HasPrefix(name, "troupe.Budget") || strings.HasPrefix(name, "troupe.budget-")
}

func (t *tracer) Options() interceptor.TracerOptions {
	return interceptor.TracerOptions{
		SpanContextKey: spanKey{},
		HeaderKey:      headerKey,
		// Followers query their runs all the time: a span per query would
		// drown the runs' own.
		DisableQueryTracing: true,
	}
}

// span is a span of the interceptor: a live OpenTelemetry span, or a
// deferred one (pending) that is recorded once its code ended outside
// replay.
type span struct {
	otel    trace.Span
	sc      trace.SpanContext
	bag     baggage.Baggage
	pending *pending
}

// untraced is the relay's span of code no trace reaches: it marshals to
// no header.
var untraced = &span{otel: noop.Span{}}

// ref is a span read from a header.
type ref struct {
	sc  trace.SpanContext
	bag baggage.Baggage
}

func (s *span) spanContext() trace.SpanContext {
	if s == nil {
		return trace.SpanContext{}
	}
	return s.sc
}

// Finish ends a live span, or records a deferred one that was kept.
func (s *span) Finish(opts *interceptor.TracerFinishSpanOptions) {
	var err error
	if opts != nil {
		err = opts.Error
	}
	if s.pending != nil {
		s.pending.finish(err)
		return
	}
	endSpan(s.otel, err, time.Now())
}

func endSpan(sp trace.Span, err error, at time.Time) {
	var can *workflow.ContinueAsNewError
	var app *temporal.ApplicationError
	switch {
	case err == nil, errors.As(err, &can):
	case errors.As(err, &app) && app.Category() == temporal.ApplicationErrorCategoryBenign:
		sp.RecordError(err)
	default:
		sp.RecordError(err)
		sp.SetStatus(codes.Error, err.Error())
	}
	sp.End(trace.WithTimestamp(at))
}

// pending is a deferred span: what it takes to record it, and whether its
// code ended outside replay (keep).
type pending struct {
	tracer trace.Tracer
	name   string
	parent trace.SpanContext
	sc     trace.SpanContext
	kind   trace.SpanKind
	start  time.Time
	links  []trace.Link

	mu    sync.Mutex
	attrs []attribute.KeyValue
	keep  bool
	done  bool
}

func (p *pending) setAttributes(attrs ...attribute.KeyValue) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.attrs = append(p.attrs, attrs...)
}

// finish records the span, once, if its code ended outside replay.
func (p *pending) finish(err error) {
	p.mu.Lock()
	keep, done := p.keep, p.done
	p.done = true
	attrs := p.attrs
	p.mu.Unlock()
	if !keep || done {
		return
	}
	p.record(err, time.Now(), attrs)
}

func (p *pending) record(err error, end time.Time, attrs []attribute.KeyValue) {
	ctx := context.Background()
	if p.parent.IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, p.parent)
	}
	ctx = context.WithValue(ctx, idsKey{}, p.sc)
	_, sp := p.tracer.Start(ctx, p.name, trace.WithTimestamp(p.start), trace.WithSpanKind(p.kind),
		trace.WithAttributes(attrs...), trace.WithLinks(p.links...))
	endSpan(sp, err, end)
}

func (t *tracer) UnmarshalSpan(m map[string]string) (interceptor.TracerSpanRef, error) {
	if _, ok := m["traceparent"]; !ok {
		return nil, nil
	}
	ctx := propagator.Extract(context.Background(), propagation.MapCarrier(m))
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return nil, errors.New("telemetry: a traceparent header that does not parse")
	}
	return &ref{sc: sc, bag: baggage.FromContext(ctx)}, nil
}

func (t *tracer) MarshalSpan(s interceptor.TracerSpan) (map[string]string, error) {
	sc, bag := contextOf(s)
	if !sc.IsValid() {
		return nil, nil
	}
	m := propagation.MapCarrier{}
	propagator.Inject(baggage.ContextWithBaggage(trace.ContextWithSpanContext(context.Background(), sc), bag), m)
	return m, nil
}

// contextOf is the span context and baggage of any span or reference of
// this package.
func contextOf(r interceptor.TracerSpanRef) (trace.SpanContext, baggage.Baggage) {
	switch r := r.(type) {
	case *span:
		return r.sc, r.bag
	case *ref:
		return r.sc, r.bag
	case *WorkflowSpan:
		return r.p.sc, r.bag
	case *localParent:
		if r.parent == nil {
			return trace.SpanContext{}, baggage.Baggage{}
		}
		return contextOf(r.parent)
	}
	return trace.SpanContext{}, baggage.Baggage{}
}

func (t *tracer) SpanFromContext(ctx context.Context) interceptor.TracerSpan {
	sp := trace.SpanFromContext(ctx)
	if !sp.SpanContext().IsValid() {
		return nil
	}
	return &span{otel: sp, sc: sp.SpanContext(), bag: baggage.FromContext(ctx)}
}

func (t *tracer) ContextWithSpan(ctx context.Context, s interceptor.TracerSpan) context.Context {
	sc, bag := contextOf(s)
	ctx = baggage.ContextWithBaggage(ctx, bag)
	if sp, ok := s.(*span); ok && sp.otel != nil && sp.otel.IsRecording() {
		return trace.ContextWithSpan(ctx, sp.otel)
	}
	return trace.ContextWithSpanContext(ctx, sc)
}

func (t *tracer) GetLogger(logger log.Logger, r interceptor.TracerSpanRef) log.Logger {
	sc, _ := contextOf(r)
	if !sc.IsValid() {
		return logger
	}
	return log.With(logger, "TraceID", sc.TraceID(), "SpanID", sc.SpanID())
}

func (t *tracer) StartSpan(opts *interceptor.TracerStartSpanOptions) (interceptor.TracerSpan, error) {
	if lp, ok := opts.Parent.(*localParent); ok {
		// A local activity scheduled from workflow code: no span of its
		// own (see localParent); its RunActivity hangs off the parent.
		return lp, nil
	}
	if t.otel == nil && opts.Parent == nil {
		return untraced, nil // A run nobody traces.
	}
	parent, bag := contextOf(opts.Parent)
	if t.otel == nil || !t.bookkeeping && bookkeeping(opts.Name) {
		// Left out: what runs under it hangs off its parent.
		return &span{otel: noop.Span{}, sc: parent, bag: bag}, nil
	}
	kind := trace.SpanKindServer
	if opts.ToHeader {
		kind = trace.SpanKindClient
	}
	name := t.SpanName(opts)
	attrs := make([]attribute.KeyValue, 0, len(opts.Tags))
	for k, v := range opts.Tags {
		attrs = append(attrs, attribute.String(k, v))
	}
	var key []string
	switch opts.Operation {
	case "RunWorkflow":
		key = []string{opts.Operation, opts.Tags[tagWorkflowID], opts.Tags[tagRunID]}
	case "HandleUpdate":
		key = []string{opts.Operation, opts.Tags[tagWorkflowID], opts.Tags[tagRunID], opts.Tags[tagUpdateID]}
	}
	if key != nil {
		p := &pending{tracer: t.otel, name: name, parent: parent, kind: kind, start: opts.Time, attrs: attrs}
		p.sc = derivedContext(parent, key...)
		return &span{sc: p.sc, bag: bag, pending: p}, nil
	}
	ctx := context.Background()
	if parent.IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, parent)
	}
	start := opts.Time
	if start.IsZero() {
		start = time.Now()
	}
	_, sp := t.otel.Start(ctx, name, trace.WithTimestamp(start), trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
	return &span{otel: sp, sc: sp.SpanContext(), bag: bag}, nil
}

// derivedContext is the span context of a deferred span whose identity is
// key: in parent's trace (a trace of its own, derived from key too, when
// there is no parent), with a span id derived from key.
func derivedContext(parent trace.SpanContext, key ...string) trace.SpanContext {
	h := sha256.New()
	for _, k := range key {
		h.Write(binary.BigEndian.AppendUint32(nil, uint32(len(k))))
		h.Write([]byte(k))
	}
	sum := h.Sum(nil)
	var tid trace.TraceID
	var sid trace.SpanID
	copy(tid[:], sum[:16])
	copy(sid[:], sum[16:24])
	if !sid.IsValid() {
		sid[7] = 1
	}
	cfg := trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}
	if parent.IsValid() {
		cfg.TraceID, cfg.TraceFlags, cfg.TraceState = parent.TraceID(), parent.TraceFlags(), parent.TraceState()
	}
	return trace.NewSpanContext(cfg)
}

// idsKey carries the ids a deferred span was given in advance to the
// tracer provider's ID generator (ids).
type idsKey struct{}

// ids is the tracer provider's ID generator: the ids given in advance to a
// deferred span, random ones otherwise.
type ids struct{}

func (ids) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if sc, ok := ctx.Value(idsKey{}).(trace.SpanContext); ok {
		return sc.TraceID(), sc.SpanID()
	}
	var tid trace.TraceID
	for !tid.IsValid() {
		binary.NativeEndian.PutUint64(tid[:8], rand.Uint64())
		binary.NativeEndian.PutUint64(tid[8:], rand.Uint64())
	}
	return tid, randomSpanID()
}

func (ids) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if sc, ok := ctx.Value(idsKey{}).(trace.SpanContext); ok {
		return sc.SpanID()
	}
	return randomSpanID()
}

func randomSpanID() trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		binary.NativeEndian.PutUint64(sid[:], rand.Uint64())
	}
	return sid
}
