package telemetry

import (
	"context"
	"errors"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/temporal"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/runtime/model"
)

// Attributes of the OpenTelemetry semantic conventions for generative AI
// (gen_ai.*) that Troupe's spans carry, and Troupe's own (troupe.*).
const (
	AttrOperationName = attribute.Key("gen_ai.operation.name")
	// AttrProviderName is the provider (gen_ai.provider.name); AttrSystem,
	// its older name (gen_ai.system), is set alongside for the backends
	// that read that one.
	AttrProviderName  = attribute.Key("gen_ai.provider.name")
	AttrSystem        = attribute.Key("gen_ai.system")
	AttrRequestModel  = attribute.Key("gen_ai.request.model")
	AttrResponseModel = attribute.Key("gen_ai.response.model")
	AttrResponseID    = attribute.Key("gen_ai.response.id")
	AttrFinishReasons = attribute.Key("gen_ai.response.finish_reasons")
	AttrInputTokens   = attribute.Key("gen_ai.usage.input_tokens")
	AttrOutputTokens  = attribute.Key("gen_ai.usage.output_tokens")
	AttrAgentName     = attribute.Key("gen_ai.agent.name")
	AttrToolName      = attribute.Key("gen_ai.tool.name")
	AttrToolCallID    = attribute.Key("gen_ai.tool.call.id")
	AttrToolType      = attribute.Key("gen_ai.tool.type")
	AttrErrorType     = attribute.Key("error.type")

	// AttrTurn is the agent's turn a span belongs to.
	AttrTurn = attribute.Key("troupe.turn")
	// AttrGraph is the run's graph.
	AttrGraph = attribute.Key("troupe.graph")
	// AttrToolKind is how a tool call runs: function, sandbox, mcp or
	// agent.
	AttrToolKind = attribute.Key("troupe.tool.kind")
)

// Operation names of the GenAI conventions.
const (
	OpChat        = "chat"
	OpExecuteTool = "execute_tool"
	OpInvokeAgent = "invoke_agent"
)

// tracerOf is the tracer of ctx's span's provider: the one of the
// RunActivity span in an activity; a no-op one without tracing.
func tracerOf(ctx context.Context) trace.Tracer {
	return trace.SpanFromContext(ctx).TracerProvider().Tracer(instrumentation)
}

// StartChat starts the span of a call of model by provider ("chat
// gpt-4.1", a client span with the GenAI attributes), as a child of ctx's
// span: the model activity's RunActivity span. Without tracing the span
// does nothing.
func StartChat(ctx context.Context, provider, model string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, parent
	}
	attrs = append(attrs, AttrOperationName.String(OpChat), AttrProviderName.String(provider), AttrSystem.String(provider), AttrRequestModel.String(model))
	return tracerOf(ctx).Start(ctx, OpChat+" "+model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// Chat is what a model call answered, for EndChat.
type Chat struct {
	ResponseID    string
	ResponseModel string
	InputTokens   int
	OutputTokens  int
	FinishReasons []string
}

// EndChat ends a span of StartChat with what the model answered, or err.
func EndChat(span trace.Span, c Chat, err error) {
	if !span.IsRecording() {
		return
	}
	if err != nil {
		End(span, err)
		return
	}
	attrs := []attribute.KeyValue{AttrInputTokens.Int(c.InputTokens), AttrOutputTokens.Int(c.OutputTokens)}
	if c.ResponseID != "" {
		attrs = append(attrs, AttrResponseID.String(c.ResponseID))
	}
	if c.ResponseModel != "" {
		attrs = append(attrs, AttrResponseModel.String(c.ResponseModel))
	}
	if len(c.FinishReasons) > 0 {
		attrs = append(attrs, AttrFinishReasons.StringSlice(c.FinishReasons))
	}
	span.SetAttributes(attrs...)
	span.End()
}

// EndResponse ends a span of StartChat with the model's response, or err
// (when resp is nil too, the span ends with err as its status).
func EndResponse(span trace.Span, resp *model.Response, err error) {
	if err != nil || resp == nil {
		EndChat(span, Chat{}, err)
		return
	}
	c := Chat{ResponseID: resp.ID, ResponseModel: resp.Model, InputTokens: resp.Usage.InputTokens, OutputTokens: resp.Usage.OutputTokens}
	if resp.FinishReason != "" {
		c.FinishReasons = []string{resp.FinishReason}
	}
	EndChat(span, c, nil)
}

// StartTool starts the span of a tool call ("execute_tool exec_command",
// with the GenAI attributes), as a child of ctx's span: the RunActivity
// span of the activity that runs the tool. Without tracing the span does
// nothing.
func StartTool(ctx context.Context, name, callID string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, parent
	}
	return tracerOf(ctx).Start(ctx, OpExecuteTool+" "+name, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(append(ToolAttributes(name, callID), attrs...)...))
}

// StartToolCall starts the span of in's call (StartTool) in the activity
// that runs it, with the agent, its turn and kind, the way the call runs:
// function, sandbox or mcp (AttrToolKind); attrs go first.
func StartToolCall(ctx context.Context, in troupe.ToolInput, kind string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return StartTool(ctx, in.Call.Name, in.Call.CallID, append(attrs, AttrAgentName.String(in.Agent),
		AttrTurn.Int(in.Run.Turn), AttrToolKind.String(kind))...)
}

// EndTool ends a span of StartTool with the tool's output: a failure when
// the tool said it failed ("Error: ...", as the model sees it).
func EndTool(span trace.Span, output string) {
	var err error
	if strings.HasPrefix(output, "Error: ") {
		err = errors.New(troupe.Preview(strings.TrimPrefix(output, "Error: "), 200))
	}
	End(span, err)
}

// ToolAttributes are the GenAI attributes of a call of tool name.
func ToolAttributes(name, callID string) []attribute.KeyValue {
	return []attribute.KeyValue{AttrOperationName.String(OpExecuteTool), AttrToolName.String(name), AttrToolCallID.String(callID), AttrToolType.String("function")}
}

// End ends span, with err (nil for success) as its status.
func End(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(AttrErrorType.String(errorType(err)))
	}
	span.End()
}

// errorType is err's class for error.type: its Temporal application
// error type (troupe.ModelError, ...), else _OTHER.
func errorType(err error) string {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) && ae.Type() != "" {
		return ae.Type()
	}
	return "_OTHER"
}

// Start starts a span named name as a child of ctx's span (an activity's
// RunActivity span, say); without tracing the span does nothing.
func Start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, parent
	}
	return tracerOf(ctx).Start(ctx, name, trace.WithAttributes(attrs...))
}

// Detached returns ctx without its span, so that the Temporal calls made
// with it start a trace of their own: a signal that starts or feeds a
// long-lived workflow (memory consolidation) from a run's activity, whose
// spans are no part of the run's.
func Detached(ctx context.Context) context.Context {
	return context.WithValue(trace.ContextWithSpanContext(ctx, trace.SpanContext{}), spanKey{}, nil)
}
