package telemetry

// The guard is a worker interceptor that sits inside the tracing
// interceptor (after it in the list): it sees the workflow code's inbound
// calls with their deferred span in the context, and the outbound calls
// before the tracing interceptor does.
//
//   - A workflow's run (ExecuteWorkflow) and an update's handler
//     (ExecuteUpdate) keep their deferred span when they return outside
//     replay. One that returns while replaying (the history already holds
//     its end: a query of a closed workflow, a worker catching up) was
//     recorded by the execution that got there first; one cut off (a cache
//     eviction, a crash) never returns, and the execution that finishes it
//     records it, with the same ids.
//   - A local activity gets no StartActivity span: it runs inside the
//     workflow's task, and a worker that dies during it leaves that task
//     to be run again, local activity and all, so the span of the first
//     schedule would stand beside the second's. Its RunActivity span,
//     recorded when the call completes, hangs off the workflow's current
//     span instead.

import (
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"
)

type guard struct {
	interceptor.InterceptorBase
}

func (*guard) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	g := &guardInbound{}
	g.Next = next
	return g
}

type guardInbound struct {
	interceptor.WorkflowInboundInterceptorBase
}

func (g *guardInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	o := &guardOutbound{}
	o.Next = outbound
	return g.Next.Init(o)
}

func (g *guardInbound) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	res, err := g.Next.ExecuteWorkflow(ctx, in)
	keepIfLive(ctx)
	return res, err
}

func (g *guardInbound) ExecuteUpdate(ctx workflow.Context, in *interceptor.UpdateInput) (any, error) {
	res, err := g.Next.ExecuteUpdate(ctx, in)
	keepIfLive(ctx)
	return res, err
}

// keepIfLive keeps the deferred span of ctx when the workflow is not
// replaying.
func keepIfLive(ctx workflow.Context) {
	s, ok := ctx.Value(spanKey{}).(*span)
	if !ok || s.pending == nil || workflow.IsReplaying(ctx) {
		return
	}
	s.pending.mu.Lock()
	s.pending.keep = true
	s.pending.mu.Unlock()
}

type guardOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
}

// localParent stands for the current span while the tracing interceptor
// schedules a local activity: the tracer starts no span for it, and writes
// the current span into the activity's header.
type localParent struct {
	parent interceptor.TracerSpanRef
}

func (*localParent) Finish(*interceptor.TracerFinishSpanOptions) {}

func (o *guardOutbound) ExecuteLocalActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	if cur := ctx.Value(spanKey{}); cur != nil {
		ctx = workflow.WithValue(ctx, spanKey{}, &localParent{parent: cur})
	}
	return o.Next.ExecuteLocalActivity(ctx, activityType, args...)
}
