package bench

import (
	"context"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe/internal/jaegertest"
	"github.com/troupe-dev/troupe/telemetry"
)

// BenchmarkTracingOverhead measures what tracing costs a turn. The looper
// (200 turns calling a no-op function tool, then a text answer) runs on
// two workers of the same server: one whose client has no telemetry (off,
// the baseline), and one whose client has the telemetry that
// OTEL_EXPORTER_OTLP_ENDPOINT asks for (on): spans and the SDK's metrics
// exported over OTLP/HTTP, in batches, to a real receiver (Jaeger, started
// here, in its own process), the run started through the traced client.
// Each is measured twice per round, in the order off, on, on, off.
//
// Reported: off-ms/turn and on-ms/turn (wall time on the server per turn)
// and ratio, on's over off's (goal ≤ 1.1); cpu-ratio, the same for this
// process's CPU time (worker, Temporal server and model server; not
// Jaeger's); spans/turn, the spans exported per turn with tracing on.
func BenchmarkTracingOverhead(b *testing.B) {
	c := temporalClient(b)
	srv, url := modelServer(b)
	j := jaegertest.Start(b)
	b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", j.OTLPHTTP)
	b.Setenv("OTEL_SERVICE_NAME", "troupe-bench")
	ctx := context.Background()
	// The exporter the environment asks for, counted on its way.
	otlp, err := otlptracehttp.New(ctx)
	if err != nil {
		b.Fatal(err)
	}
	exp := &countingExporter{SpanExporter: otlp}
	tel, err := telemetry.New(ctx, telemetry.Config{SpanExporter: exp})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { tel.Shutdown(ctx) })
	traced, err := client.Dial(tel.ClientOptions(client.Options{HostPort: server.FrontendAddress(), Logger: quiet()}))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(traced.Close)

	off := startWorker(b, c, troupeWorker(b, url, nil))
	on := startWorker(b, traced, troupeWorker(b, url, nil))
	warmUp(b, c, off, false)
	warmUp(b, traced, on, false)
	if err := tel.ForceFlush(ctx); err != nil {
		b.Fatal(err)
	}
	exp.spans.Store(0)

	var offStats, onStats loopStats
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		offStats.add(runLoop(b, c, srv, off))
		onStats.add(runLoop(b, traced, srv, on))
		onStats.add(runLoop(b, traced, srv, on))
		offStats.add(runLoop(b, c, srv, off))
	}
	b.StopTimer()
	if err := tel.ForceFlush(ctx); err != nil {
		b.Fatal(err)
	}
	spans := float64(exp.spans.Load()) / float64(onStats.turns)

	b.ReportMetric(offStats.wallPer(), "off-ms/turn")
	b.ReportMetric(onStats.wallPer(), "on-ms/turn")
	b.ReportMetric(onStats.wallPer()/offStats.wallPer(), "ratio")
	b.ReportMetric(onStats.cpuPer()/offStats.cpuPer(), "cpu-ratio")
	b.ReportMetric(spans, "spans/turn")
	b.Logf("tracing off: %.2f ms/turn (CPU %.2f ms); on, OTLP to Jaeger: %.2f ms/turn (CPU %.2f ms), %.1f spans/turn; ratio %.2f (goal ≤ 1.1), CPU ratio %.2f",
		offStats.wallPer(), offStats.cpuPer(), onStats.wallPer(), onStats.cpuPer(), spans, onStats.wallPer()/offStats.wallPer(), onStats.cpuPer()/offStats.cpuPer())
}

// countingExporter counts the spans it passes on.
type countingExporter struct {
	sdktrace.SpanExporter
	spans atomic.Int64
}

func (e *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.spans.Add(int64(len(spans)))
	return e.SpanExporter.ExportSpans(ctx, spans)
}
