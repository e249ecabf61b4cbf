package workflows

// This file holds the hooks that give a run's trace its Troupe spans
// (package telemetry tells the whole contract): attributes on the
// workflows' own spans, the spans of workflow code (a handoff, an
// agent-as-tool call, a session's turn, a wait for an approval), and the
// spans of model and tool calls inside their activities. Each hook is one
// call at its site; with tracing off (no telemetry interceptors on the
// worker) each costs a context lookup.

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/telemetry"
	"github.com/troupe-dev/troupe/workflows/gate"
)

// traceRun names the run's graph on the orchestrator's span.
func traceRun(ctx workflow.Context, graph string) {
	telemetry.SetWorkflowAttributes(ctx, telemetry.AttrGraph.String(graph))
}

// traceAgent marks an agent workflow's span as the agent's invocation.
func traceAgent(ctx workflow.Context, graph, agent string) {
	telemetry.SetWorkflowAttributes(ctx, telemetry.AttrOperationName.String(telemetry.OpInvokeAgent),
		telemetry.AttrAgentName.String(agent), telemetry.AttrGraph.String(graph))
}

// traceAgentTool starts the span of agent's call c of an agent-as-tool:
// the tool agent's workflow (and the handoffs it takes) run under it.
func traceAgentTool(ctx workflow.Context, agent string, c agents.Item) (workflow.Context, *telemetry.WorkflowSpan) {
	attrs := append(telemetry.ToolAttributes(c.Name, c.CallID), telemetry.AttrAgentName.String(agent), telemetry.AttrToolKind.String(gate.KindAgent))
	return telemetry.StartWorkflowSpan(ctx, telemetry.OpExecuteTool+" "+c.Name, "tool/"+c.CallID, telemetry.WithAttributes(attrs...))
}

// traceTurn starts the span of a session's turn: the root of a trace of
// its own (one trace per turn), linked to the session's span.
func traceTurn(ctx workflow.Context, session, turn string) (workflow.Context, *telemetry.WorkflowSpan) {
	return telemetry.StartWorkflowSpan(ctx, "session turn "+turn, "turn/"+turn, telemetry.NewTrace(),
		telemetry.WithAttributes(attribute.String("troupe.session", session), attribute.String("troupe.session.turn", turn)))
}

// startChat starts the span of the model call of in (the Model
// activity's), with the GenAI attributes.
func startChat(ctx context.Context, req model.Request, in ModelInput) (context.Context, trace.Span) {
	return telemetry.StartChat(ctx, "openai", req.Model, telemetry.AttrAgentName.String(in.Agent),
		telemetry.AttrTurn.Int(in.Run.Turn), telemetry.AttrGraph.String(in.Graph))
}
