package telemetry_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/examples/dealdesk"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/telemetry"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/workflowstest"
)

// newTelemetry returns telemetry that exports every span, as it ends, to
// the in-memory exporter it returns.
func newTelemetry(t *testing.T) (*telemetry.Telemetry, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tel, err := telemetry.New(context.Background(), telemetry.Config{SpanExporter: exp, SyncExport: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tel.Shutdown(context.Background()) })
	return tel, exp
}

func workerInterceptors(tel *telemetry.Telemetry) []interceptor.WorkerInterceptor {
	var out []interceptor.WorkerInterceptor
	for _, i := range tel.Interceptors() {
		out = append(out, i)
	}
	return out
}

// spanWorkflow starts a workflow span, and under it an activity and a
// local activity, and ends it.
func spanWorkflow(ctx workflow.Context) error {
	sctx, s := telemetry.StartWorkflowSpan(ctx, "step", "step-1")
	actx := workflow.WithActivityOptions(sctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	if err := workflow.ExecuteActivity(actx, "noop").Get(ctx, nil); err != nil {
		return err
	}
	lctx := workflow.WithLocalActivityOptions(sctx, workflow.LocalActivityOptions{StartToCloseTimeout: time.Minute})
	if err := workflow.ExecuteLocalActivity(lctx, "noop").Get(ctx, nil); err != nil {
		return err
	}
	s.End(ctx, nil)
	return nil
}

func noop(context.Context) error { return nil }

// TestWorkflowSpanTree: a workflow's span (RunWorkflow), a span of its
// code (StartWorkflowSpan) under it, an activity under that (StartActivity
// then RunActivity), and a local activity with no StartActivity of its
// own, its RunActivity straight under the span that scheduled it. The
// spans of workflow code get the same ids in every execution of the run.
func TestWorkflowSpanTree(t *testing.T) {
	var first map[string]trace.SpanContext
	for i := range 2 {
		tel, exp := newTelemetry(t)
		var suite testsuite.WorkflowTestSuite
		suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		env := suite.NewTestWorkflowEnvironment()
		env.SetWorkerOptions(worker.Options{Interceptors: workerInterceptors(tel)})
		env.RegisterWorkflowWithOptions(spanWorkflow, workflow.RegisterOptions{Name: "span-workflow"})
		env.RegisterActivityWithOptions(noop, activity.RegisterOptions{Name: "noop"})
		env.ExecuteWorkflow("span-workflow")
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		spans := exp.GetSpans()
		byName := map[string][]tracetest.SpanStub{}
		for _, s := range spans {
			byName[s.Name] = append(byName[s.Name], s)
		}
		one := func(name string) tracetest.SpanStub {
			t.Helper()
			if len(byName[name]) != 1 {
				t.Fatalf("%d spans %q, want 1; all: %v", len(byName[name]), name, slices.Sorted(maps.Keys(byName)))
			}
			return byName[name][0]
		}
		run, step := one("RunWorkflow:span-workflow"), one("step")
		start := one("StartActivity:noop")
		if got := byName["RunActivity:noop"]; len(got) != 2 {
			t.Fatalf("%d RunActivity spans, want 2 (activity and local activity)", len(got))
		}
		if step.Parent.SpanID() != run.SpanContext.SpanID() {
			t.Errorf("step's parent = %s, want the RunWorkflow span %s", step.Parent.SpanID(), run.SpanContext.SpanID())
		}
		if start.Parent.SpanID() != step.SpanContext.SpanID() {
			t.Errorf("StartActivity's parent = %s, want the step %s", start.Parent.SpanID(), step.SpanContext.SpanID())
		}
		parents := []trace.SpanID{byName["RunActivity:noop"][0].Parent.SpanID(), byName["RunActivity:noop"][1].Parent.SpanID()}
		if !slices.Contains(parents, start.SpanContext.SpanID()) || !slices.Contains(parents, step.SpanContext.SpanID()) {
			t.Errorf("RunActivity parents = %v, want StartActivity %s (activity) and the step %s (local activity)", parents, start.SpanContext.SpanID(), step.SpanContext.SpanID())
		}
		for _, s := range spans {
			if s.SpanContext.TraceID() != run.SpanContext.TraceID() {
				t.Errorf("span %s in trace %s, want %s", s.Name, s.SpanContext.TraceID(), run.SpanContext.TraceID())
			}
		}
		ids := map[string]trace.SpanContext{"run": run.SpanContext, "step": step.SpanContext}
		if i == 0 {
			first = ids
		} else if !maps.EqualFunc(first, ids, func(a, b trace.SpanContext) bool { return a.Equal(b) }) {
			t.Errorf("ids of the second execution = %v, want those of the first %v", ids, first)
		}
	}
}

// turnWorkflow runs an activity in a span of its own trace, as a
// session's turn does.
func turnWorkflow(ctx workflow.Context) error {
	telemetry.SetWorkflowAttributes(ctx, attribute.String("troupe.test", "run"))
	tctx, s := telemetry.StartWorkflowSpan(ctx, "turn", "turn/1", telemetry.NewTrace(), telemetry.WithAttributes(attribute.String("troupe.test", "turn")))
	actx := workflow.WithActivityOptions(tctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	err := workflow.ExecuteActivity(actx, "noop").Get(ctx, nil)
	s.End(ctx, err)
	return err
}

// TestWorkflowSpanNewTrace: a span of workflow code started with NewTrace
// roots a trace of its own, linked to the workflow's span, and what runs
// under it is in that trace.
func TestWorkflowSpanNewTrace(t *testing.T) {
	tel, exp := newTelemetry(t)
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := suite.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: workerInterceptors(tel)})
	env.RegisterWorkflowWithOptions(turnWorkflow, workflow.RegisterOptions{Name: "turn-workflow"})
	env.RegisterActivityWithOptions(noop, activity.RegisterOptions{Name: "noop"})
	env.ExecuteWorkflow("turn-workflow")
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	byName := map[string]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		byName[s.Name] = s
	}
	run, turn, act := byName["RunWorkflow:turn-workflow"], byName["turn"], byName["RunActivity:noop"]
	if !run.SpanContext.IsValid() || !turn.SpanContext.IsValid() || !act.SpanContext.IsValid() {
		t.Fatalf("spans = %v, want the run's, the turn's and the activity's", names(exp.GetSpans()))
	}
	if turn.Parent.IsValid() || turn.SpanContext.TraceID() == run.SpanContext.TraceID() {
		t.Errorf("the turn's span has parent %v in trace %s, want a root of a trace of its own (the run's is %s)", turn.Parent, turn.SpanContext.TraceID(), run.SpanContext.TraceID())
	}
	if len(turn.Links) != 1 || turn.Links[0].SpanContext.SpanID() != run.SpanContext.SpanID() {
		t.Errorf("the turn's links = %v, want one, to the run's span %s", turn.Links, run.SpanContext.SpanID())
	}
	if act.SpanContext.TraceID() != turn.SpanContext.TraceID() {
		t.Errorf("the activity is in trace %s, want the turn's %s", act.SpanContext.TraceID(), turn.SpanContext.TraceID())
	}
	for name, s := range map[string]tracetest.SpanStub{"run": run, "turn": turn} {
		if !slices.Contains(s.Attributes, attribute.String("troupe.test", name)) {
			t.Errorf("the %s's span attributes = %v, want troupe.test=%s", name, s.Attributes, name)
		}
	}
}

// TestReplayRecordsNothing replays the checked-in histories of a deal-desk
// run (every workflow of it has ended there): a worker replaying them, to
// answer a query or after a crash, records no span, since the execution
// that ran them live recorded them. The SDK's own OpenTelemetry
// interceptor, the control, records each workflow's RunWorkflow span
// again.
func TestReplayRecordsNothing(t *testing.T) {
	dir := "../workflows/testdata/histories/v6-event-pages"
	files, err := filepath.Glob(filepath.Join(dir, "dealdesk*.json"))
	if err != nil || len(files) < 5 {
		t.Fatalf("histories: %v, %v", files, err)
	}
	index := workflowstest.ReadIndex(t, dir)
	replayAll := func(interceptors []interceptor.WorkerInterceptor) {
		t.Helper()
		store, _ := blob.Open(context.Background(), "mem://")
		r, err := workflows.NewRunner(workflows.Config{Graphs: []*agents.Graph{dealdesk.Graph()}, Model: noModel{}, Store: store})
		if err != nil {
			t.Fatal(err)
		}
		rp, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{Interceptors: interceptors})
		if err != nil {
			t.Fatal(err)
		}
		r.RegisterWorkflows(rp)
		for _, f := range files {
			h, err := client.HistoryFromJSON(mustOpen(t, f), client.HistoryJSONOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := rp.ReplayWorkflowHistoryWithOptions(nil, h, worker.ReplayWorkflowHistoryOptions{
				OriginalExecution: workflow.Execution{ID: index[filepath.Base(f)], RunID: "replay"},
			}); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
		}
	}

	tel, exp := newTelemetry(t)
	replayAll(workerInterceptors(tel))
	if spans := exp.GetSpans(); len(spans) != 0 {
		t.Errorf("replay recorded %d spans, want none: %v", len(spans), names(spans))
	}

	control := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(control))
	sdk, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{Tracer: tp.Tracer("control")})
	if err != nil {
		t.Fatal(err)
	}
	replayAll([]interceptor.WorkerInterceptor{sdk})
	t.Logf("control: %d spans on replay: %v", len(control.GetSpans()), names(control.GetSpans()))
	if n := len(control.GetSpans()); n < len(files) {
		t.Errorf("control: the SDK's interceptor recorded %d spans on replay (%v), want one RunWorkflow per history at least; the test shows nothing", n, names(control.GetSpans()))
	}
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

// noModel is never called: replays run no activity.
type noModel struct{}

func (noModel) Respond(context.Context, model.Request) (*model.Response, error) {
	return nil, errors.New("not called")
}

func mustOpen(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// bookkeepingWorkflow runs a budget's bookkeeping activity, then another.
func bookkeepingWorkflow(ctx workflow.Context) error {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	if err := workflow.ExecuteActivity(actx, "troupe.BudgetAsk").Get(ctx, nil); err != nil {
		return err
	}
	return workflow.ExecuteActivity(actx, "noop").Get(ctx, nil)
}

// TestBookkeepingLeftOut: the budgets' bookkeeping (activities, updates
// and signals named troupe.Budget… or troupe.budget-…) is left out of the
// traces unless Config.Bookkeeping asks for it; the rest is traced alike.
func TestBookkeepingLeftOut(t *testing.T) {
	for _, asked := range []bool{false, true} {
		exp := tracetest.NewInMemoryExporter()
		tel, err := telemetry.New(context.Background(), telemetry.Config{SpanExporter: exp, SyncExport: true, Bookkeeping: asked})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tel.Shutdown(context.Background()) })
		var suite testsuite.WorkflowTestSuite
		suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		env := suite.NewTestWorkflowEnvironment()
		env.SetWorkerOptions(worker.Options{Interceptors: workerInterceptors(tel)})
		env.RegisterWorkflowWithOptions(bookkeepingWorkflow, workflow.RegisterOptions{Name: "bookkeeping"})
		env.RegisterActivityWithOptions(noop, activity.RegisterOptions{Name: "noop"})
		env.RegisterActivityWithOptions(func(context.Context) error { return nil }, activity.RegisterOptions{Name: "troupe.BudgetAsk"})
		env.ExecuteWorkflow("bookkeeping")
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		var budget, other int
		for _, s := range exp.GetSpans() {
			switch s.Name {
			case "StartActivity:troupe.BudgetAsk", "RunActivity:troupe.BudgetAsk":
				budget++
			case "StartActivity:noop", "RunActivity:noop":
				other++
			}
		}
		if want := map[bool]int{false: 0, true: 2}[asked]; budget != want || other != 2 {
			t.Errorf("bookkeeping asked %v: %d spans of the budget's activity (want %d), %d of the other (want 2); all: %v", asked, budget, want, other, names(exp.GetSpans()))
		}
	}
}

// traceOf is an activity that answers the trace id its context carries
// ("" for none).
func traceOf(ctx context.Context) (string, error) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return "", nil
	}
	return sc.TraceID().String(), nil
}

// traceWorkflow answers the trace its activity ran in.
func traceWorkflow(ctx workflow.Context) (string, error) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	var id string
	err := workflow.ExecuteActivity(actx, "trace-of").Get(ctx, &id)
	return id, err
}

// TestRelayPassesTheTrace: the telemetry of a process that exports
// nothing still passes a run's trace on, from the workflow to what it
// starts, so a worker without an exporter does not cut a traced run into
// pieces; a run nobody traces stays without a trace.
func TestRelayPassesTheTrace(t *testing.T) {
	for _, v := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"} {
		t.Setenv(v, "")
	}
	tel, err := telemetry.New(context.Background(), telemetry.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if tel.Enabled() || len(tel.Interceptors()) != 1 {
		t.Fatalf("telemetry with nothing asked: enabled %v, %d interceptors; want the relay only", tel.Enabled(), len(tel.Interceptors()))
	}
	const traceID, spanID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	for _, tc := range []struct {
		name   string
		header map[string]string
		want   string
	}{
		{"a traced run", map[string]string{"traceparent": "00-" + traceID + "-" + spanID + "-01"}, traceID},
		{"a run nobody traces", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var suite testsuite.WorkflowTestSuite
			suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
			env := suite.NewTestWorkflowEnvironment()
			env.SetWorkerOptions(worker.Options{Interceptors: workerInterceptors(tel)})
			if tc.header != nil {
				p, err := converter.GetDefaultDataConverter().ToPayload(tc.header)
				if err != nil {
					t.Fatal(err)
				}
				env.SetHeader(&commonpb.Header{Fields: map[string]*commonpb.Payload{"_tracer-data": p}})
			}
			env.RegisterWorkflowWithOptions(traceWorkflow, workflow.RegisterOptions{Name: "trace-workflow"})
			env.RegisterActivityWithOptions(traceOf, activity.RegisterOptions{Name: "trace-of"})
			env.ExecuteWorkflow("trace-workflow")
			var got string
			if err := env.GetWorkflowResult(&got); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("the activity ran in trace %q, want %q", got, tc.want)
			}
		})
	}
}
