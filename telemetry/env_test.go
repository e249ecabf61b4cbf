package telemetry_test

import (
	"context"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe/telemetry"
)

// TestEnvironment: New exports over OTLP only when the standard
// variables name an endpoint, and refuses what it cannot honour;
// TraceEndpoint says where the traces go, without credentials.
func TestEnvironment(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		on   bool
		// traces is what TraceEndpoint returns.
		traces string
		err    string
	}{
		{name: "nothing set", on: false},
		{name: "endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, on: true, traces: "http://127.0.0.1:4318"},
		{name: "endpoint with credentials", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://me:secret@otlp.example:4318?key=k"}, on: true, traces: "https://otlp.example:4318"},
		{name: "traces endpoint over grpc", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, on: true, traces: "http://127.0.0.1:4317"},
		{name: "metrics endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://127.0.0.1:4318/v1/metrics"}, on: true},
		{name: "exporters none", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"}, on: false},
		{name: "sdk disabled", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"}, on: false},
		{name: "exporter not otlp", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "zipkin"}, err: "OTEL_TRACES_EXPORTER=zipkin"},
		{name: "protocol unknown", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, err: "OTEL_EXPORTER_OTLP_PROTOCOL=http/json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
				"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
				"OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OTEL_SDK_DISABLED"} {
				t.Setenv(k, tc.env[k])
			}
			if got := telemetry.TraceEndpoint(); got != tc.traces {
				t.Errorf("TraceEndpoint = %q, want %q", got, tc.traces)
			}
			tel, err := telemetry.New(context.Background(), telemetry.Config{})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("New = %v, want an error naming %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer tel.Shutdown(context.Background())
			if tel.Enabled() != tc.on {
				t.Fatalf("Enabled = %v, want %v", tel.Enabled(), tc.on)
			}
			// Off, the one interceptor is the relay that passes a trace on.
			opts := tel.ClientOptions(client.Options{HostPort: "x"})
			if got := opts.MetricsHandler != nil || len(opts.Interceptors) > 1; got != tc.on || len(opts.Interceptors) == 0 {
				t.Errorf("client options changed: %v, want %v; %d interceptors (%+v)", got, tc.on, len(opts.Interceptors), opts)
			}
		})
	}
}

// TestNilTelemetry: a nil *Telemetry, what a caller that asked for none
// holds, adds nothing.
func TestNilTelemetry(t *testing.T) {
	var tel *telemetry.Telemetry
	opts := tel.ClientOptions(client.Options{HostPort: "x"})
	if opts.MetricsHandler != nil || opts.Interceptors != nil || tel.Enabled() || tel.Interceptors() != nil {
		t.Errorf("a nil Telemetry changed the options: %+v", opts)
	}
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}
