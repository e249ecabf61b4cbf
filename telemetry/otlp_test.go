package telemetry_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe/internal/jaegertest"
	"github.com/troupe-dev/troupe/telemetry"
)

// TestOTLPExport: with the standard variables naming a real OTLP receiver
// (Jaeger, started here), over each protocol, the spans and the Temporal
// SDK's metrics reach it.
func TestOTLPExport(t *testing.T) {
	j := jaegertest.Start(t)
	for _, tc := range []struct{ protocol, endpoint string }{
		{"http/protobuf", j.OTLPHTTP},
		{"grpc", j.OTLPGRPC},
	} {
		t.Run(strings.ReplaceAll(tc.protocol, "/", "-"), func(t *testing.T) {
			service := fmt.Sprintf("troupe-otlp-test-%s-%d", strings.ReplaceAll(tc.protocol, "/", "-"), time.Now().UnixNano())
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", tc.endpoint)
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", tc.protocol)
			t.Setenv("OTEL_SERVICE_NAME", service)
			tel, err := telemetry.New(context.Background(), telemetry.Config{})
			if err != nil {
				t.Fatal(err)
			}
			_, span := tel.TracerProvider().Tracer("test").Start(context.Background(), "exported")
			span.End()
			// The SDK's metrics handler, as workers and clients use it.
			metric := "troupe_otlp_test_" + strings.ReplaceAll(tc.protocol, "/", "_")
			tel.ClientOptions(client.Options{}).MetricsHandler.Counter(metric).Inc(3)
			if err := tel.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}

			spans, err := j.Trace(span.SpanContext().TraceID().String())
			if err != nil {
				t.Fatal(err)
			}
			if len(spans) != 1 || spans[0].Name != "exported" || spans[0].Service != service || spans[0].SpanID != span.SpanContext().SpanID().String() {
				t.Errorf("jaeger holds %+v, want the span %q of service %s", spans, "exported", service)
			}
			metrics, err := j.Metrics()
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(metrics, metric) {
				t.Errorf("jaeger's metrics lack %s:\n%.2000s", metric, metrics)
			}
		})
	}
}
