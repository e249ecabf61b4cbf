package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
)

// Config configures New. Its zero value reads everything from the
// environment.
type Config struct {
	// ServiceName is the service.name of this process's spans and
	// metrics, unless OTEL_SERVICE_NAME (or service.name in
	// OTEL_RESOURCE_ATTRIBUTES) says otherwise; the default is "troupe".
	ServiceName string
	// SpanExporter, when set, receives the spans whatever the environment
	// says: an in-memory exporter in tests
	// (go.opentelemetry.io/otel/sdk/trace/tracetest), or an exporter of
	// your own.
	SpanExporter sdktrace.SpanExporter
	// MetricReader, when set, collects the metrics whatever the
	// environment says: sdkmetric.NewManualReader() in tests.
	MetricReader sdkmetric.Reader
	// SyncExport exports each span as it ends, before the code that ended
	// it goes on, instead of in batches in the background: a process
	// killed at any moment has exported every span it ended. It makes
	// every span cost an export round trip: for tests and debugging.
	SyncExport bool
	// Bookkeeping traces the runs' budget bookkeeping too: the asks,
	// reports and returns of their budgets' ledgers (activities, updates
	// and signals named troupe.Budget… or troupe.budget-…), a third of a
	// deal-desk trace's spans. Off, they are left out; what the model
	// calls cost stays on the model calls' spans. TROUPE_TRACE_BOOKKEEPING=1
	// turns it on as well.
	Bookkeeping bool
}

// Telemetry is a process's tracing and metrics: the tracer and meter
// providers, the Temporal interceptors that trace workflows and
// activities, and the SDK's metrics handler. A nil *Telemetry adds
// nothing; one that New made with nothing asked for records nothing and
// only passes other processes' traces on (see New).
type Telemetry struct {
	tp           *sdktrace.TracerProvider
	mp           *sdkmetric.MeterProvider
	interceptors []interceptor.Interceptor
	metrics      client.MetricsHandler
}

// instrumentation is the instrumentation scope of Troupe's spans.
const instrumentation = "github.com/troupe-dev/troupe"

// New builds the process's telemetry from cfg and the standard
// OpenTelemetry environment:
//
//   - Traces are exported over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT or
//     OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, with
//     OTEL_EXPORTER_OTLP[_TRACES]_PROTOCOL (http/protobuf, the default,
//     or grpc), and the exporter's other OTEL_EXPORTER_OTLP_* variables
//     (headers, certificates, compression, timeout), the batch
//     processor's OTEL_BSP_* and the sampler's OTEL_TRACES_SAMPLER[_ARG].
//   - The Temporal SDK's metrics (the workers' and the client's) are
//     exported the same way with the _METRICS_ variables, every
//     OTEL_METRIC_EXPORT_INTERVAL.
//   - OTEL_TRACES_EXPORTER or OTEL_METRICS_EXPORTER "none" turns either
//     off, as does OTEL_SDK_DISABLED=true for both; OTEL_SERVICE_NAME and
//     OTEL_RESOURCE_ATTRIBUTES describe the process.
//
// With none of these set (and no exporter or reader in cfg) it returns a
// Telemetry that records nothing, but whose interceptor passes a trace
// on: a worker that does not export still carries the trace context of
// a run that a client or another worker traces, from each workflow to
// the activities and child workflows it starts, so the run is one trace
// with this worker's own spans left out, not pieces. A run nobody traces
// pays a nil check per call for it. Call Shutdown before the process ends, so
// the spans and metrics still buffered are sent.
func New(ctx context.Context, cfg Config) (*Telemetry, error) {
	traces, tproto, err := signalEnv("TRACES")
	if err != nil {
		return nil, err
	}
	metrics, mproto, err := signalEnv("METRICS")
	if err != nil {
		return nil, err
	}
	traces = traces || cfg.SpanExporter != nil
	metrics = metrics || cfg.MetricReader != nil
	t := &Telemetry{}
	if !traces {
		// Not tracing, but passing the trace of a run that another
		// process traces on, so the run stays one trace.
		t.interceptors = []interceptor.Interceptor{interceptor.NewTracingInterceptor(&tracer{})}
	}
	if !traces && !metrics {
		return t, nil
	}
	res, err := processResource(ctx, cfg.ServiceName)
	if err != nil {
		return nil, err
	}
	if traces {
		exp := cfg.SpanExporter
		if exp == nil {
			if tproto == "grpc" {
				exp, err = otlptracegrpc.New(ctx)
			} else {
				exp, err = otlptracehttp.New(ctx)
			}
			if err != nil {
				return nil, fmt.Errorf("telemetry: OTLP trace exporter: %w", err)
			}
		}
		proc := sdktrace.NewBatchSpanProcessor(exp)
		if cfg.SyncExport {
			proc = sdktrace.NewSimpleSpanProcessor(exp)
		}
		t.tp = sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithIDGenerator(ids{}), sdktrace.WithSpanProcessor(proc))
		t.interceptors = []interceptor.Interceptor{
			interceptor.NewTracingInterceptor(&tracer{otel: t.tp.Tracer(instrumentation), bookkeeping: cfg.Bookkeeping || os.Getenv("TROUPE_TRACE_BOOKKEEPING") == "1"}),
			&guard{},
		}
	}
	if metrics {
		reader := cfg.MetricReader
		if reader == nil {
			var exp sdkmetric.Exporter
			if mproto == "grpc" {
				exp, err = otlpmetricgrpc.New(ctx)
			} else {
				exp, err = otlpmetrichttp.New(ctx)
			}
			if err != nil {
				t.Shutdown(ctx)
				return nil, fmt.Errorf("telemetry: OTLP metric exporter: %w", err)
			}
			reader = sdkmetric.NewPeriodicReader(exp)
		}
		t.mp = sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(reader))
		t.metrics = temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{
			Meter: t.mp.Meter("temporal-sdk-go"),
			// The default panics; a metric that cannot be recorded is no
			// reason to stop a worker.
			OnError:              func(error) {},
			UseMonotonicCounters: true,
		})
	}
	return t, nil
}

// signalEnv reads whether the environment asks for OTLP export of signal
// (TRACES or METRICS), and over which protocol.
func signalEnv(signal string) (on bool, protocol string, err error) {
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		return false, "", nil
	}
	exporterVar := "OTEL_" + signal + "_EXPORTER"
	switch sel := strings.TrimSpace(os.Getenv(exporterVar)); sel {
	case "none":
		return false, "", nil
	case "", "otlp":
	default:
		return false, "", fmt.Errorf("telemetry: %s=%s: Troupe exports over OTLP only (otlp, or none)", exporterVar, sel)
	}
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_"+signal+"_ENDPOINT") == "" {
		return false, "", nil
	}
	protocolVar := "OTEL_EXPORTER_OTLP_" + signal + "_PROTOCOL"
	protocol = os.Getenv(protocolVar)
	if protocol == "" {
		protocolVar = "OTEL_EXPORTER_OTLP_PROTOCOL"
		protocol = os.Getenv(protocolVar)
	}
	switch protocol {
	case "", "http/protobuf":
		return true, "http/protobuf", nil
	case "grpc":
		return true, "grpc", nil
	}
	return false, "", fmt.Errorf("telemetry: %s=%s: want http/protobuf or grpc", protocolVar, protocol)
}

// TraceEndpoint returns where the environment's OTEL_EXPORTER_OTLP_*
// variables send traces, as New reads them (the traces' own endpoint
// before the shared one), shown without credentials or parameters; or ""
// when they ask for no traces (New then exports none unless its Config
// has a SpanExporter). Commands tell with it whether they, and the
// workers they talk to, export traces.
func TraceEndpoint() string {
	if on, _, err := signalEnv("TRACES"); !on || err != nil {
		return ""
	}
	endpoint := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if endpoint == "" {
		endpoint = os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	if u, err := url.Parse(endpoint); err == nil && u.Host != "" {
		u.User, u.RawQuery, u.Fragment = nil, "", ""
		return u.String()
	}
	return endpoint // host:port, as gRPC takes it
}

// processResource describes this process: the SDK, the host, the service
// name, and what OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME say.
func processResource(ctx context.Context, service string) (*resource.Resource, error) {
	if service == "" {
		service = "troupe"
	}
	res, err := resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		resource.WithProcessPID(),
		resource.WithAttributes(attribute.String("service.name", service)),
		resource.WithFromEnv(),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) && !errors.Is(err, resource.ErrSchemaURLConflict) {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	return res, nil
}

// Enabled reports whether t traces or records metrics.
func (t *Telemetry) Enabled() bool { return t != nil && (t.tp != nil || t.mp != nil) }

// ClientOptions returns opts with t's interceptors appended and, unless
// opts has one, t's metrics handler. Workers made from the client take
// the interceptors too (the SDK applies a client's worker interceptors to
// its workers), so the client is the one place to set them: do not add
// them to worker.Options as well.
func (t *Telemetry) ClientOptions(opts client.Options) client.Options {
	if t == nil {
		return opts
	}
	for _, i := range t.interceptors {
		opts.Interceptors = append(slices.Clip(opts.Interceptors), i)
	}
	if opts.MetricsHandler == nil && t.metrics != nil {
		opts.MetricsHandler = t.metrics
	}
	return opts
}

// Interceptors returns t's Temporal interceptors, in order, for a client
// or worker built without ClientOptions; when t does not trace, the one
// that passes a trace on (see New).
func (t *Telemetry) Interceptors() []interceptor.Interceptor {
	if t == nil {
		return nil
	}
	return slices.Clone(t.interceptors)
}

// TracerProvider returns t's tracer provider, for spans of your own; a
// no-op one when t does not trace.
func (t *Telemetry) TracerProvider() trace.TracerProvider {
	if t == nil || t.tp == nil {
		return noop.NewTracerProvider()
	}
	return t.tp
}

// ForceFlush exports the spans and metrics t holds now.
func (t *Telemetry) ForceFlush(ctx context.Context) error {
	if t == nil {
		return nil
	}
	var errs []error
	if t.tp != nil {
		errs = append(errs, t.tp.ForceFlush(ctx))
	}
	if t.mp != nil {
		errs = append(errs, t.mp.ForceFlush(ctx))
	}
	return errors.Join(errs...)
}

// Shutdown exports what t holds and stops it.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	var errs []error
	if t.tp != nil {
		errs = append(errs, t.tp.Shutdown(ctx))
	}
	if t.mp != nil {
		errs = append(errs, t.mp.Shutdown(ctx))
	}
	return errors.Join(errs...)
}
