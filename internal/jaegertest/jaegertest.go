// Package jaegertest starts a real OpenTelemetry receiver for tests: the
// Jaeger backend (v2, built on the OpenTelemetry Collector;
// github.com/jaegertracing/jaeger, built from its Go module into
// tools/bin by scripts/setup.sh), on loopback ports, with OTLP receivers
// over HTTP and gRPC, traces kept in memory and read back through Jaeger's
// query API, and metrics served in the Prometheus text format.
package jaegertest

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/proctest"
)

// Jaeger is a running Jaeger.
type Jaeger struct {
	// OTLPHTTP is the base URL of its OTLP/HTTP receiver
	// (OTEL_EXPORTER_OTLP_ENDPOINT for http/protobuf).
	OTLPHTTP string
	// OTLPGRPC is the URL of its OTLP/gRPC receiver.
	OTLPGRPC string

	// query is the base URL of the query API; metrics, the URL of the
	// Prometheus exporter of the metrics it received.
	query, metrics string
}

// Binary returns the path of jaeger: $TROUPE_JAEGER, else tools/bin/jaeger
// in this module.
func Binary() string {
	return proctest.Tool("TROUPE_JAEGER", "bin", "jaeger")
}

const config = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
    metrics:
      receivers: [otlp]
      exporters: [prometheus]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    storage:
      traces: memory
    http:
      endpoint: %[1]s
    grpc:
      endpoint: %[2]s
  jaeger_storage:
    backends:
      memory:
        memory:
          max_traces: 100000
receivers:
  otlp:
    protocols:
      http:
        endpoint: %[3]s
      grpc:
        endpoint: %[4]s
exporters:
  jaeger_storage_exporter:
    trace_storage: memory
  prometheus:
    endpoint: %[5]s
`

// Start starts Jaeger, and stops it when the test ends. A missing binary
// fails the test, saying how to build it.
func Start(t testing.TB) *Jaeger {
	t.Helper()
	bin := Binary()
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("jaeger is missing (%v): run scripts/setup.sh (make test does)", err)
	}
	addrs := make([]any, 5)
	for i := range addrs {
		addrs[i] = proctest.FreeAddr(t)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, config, addrs...), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", "file:"+cfg)
	// Jaeger traces itself when asked to by the environment: not here.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "OTEL_SDK_DISABLED=true", "OTEL_TRACES_EXPORTER=none", "OTEL_METRICS_EXPORTER=none")
	j := &Jaeger{query: "http://" + addrs[0].(string), OTLPHTTP: "http://" + addrs[2].(string), OTLPGRPC: "http://" + addrs[3].(string),
		metrics: "http://" + addrs[4].(string) + "/metrics"}
	proctest.Serve(t, "jaeger", cmd, filepath.Join(dir, "jaeger.log"), 60*time.Second, func() bool {
		return ready(j.query+"/api/services") && ready(j.metrics) && proctest.Dials(addrs[2].(string)) && proctest.Dials(addrs[3].(string))
	})
	return j
}

func ready(url string) bool {
	resp, err := http.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Span is a span as Jaeger stores it.
type Span struct {
	TraceID, SpanID, ParentSpanID string
	Name                          string
	// Service is the service.name of the process that sent it.
	Service string
	// Attributes holds its attributes, each as its JSON value's text
	// (a string's own text, a number's digits, an array's JSON).
	Attributes map[string]string
}

// Trace returns the spans of the trace with id traceID (hex) that Jaeger
// holds; none when it holds no such trace.
func (j *Jaeger) Trace(traceID string) ([]Span, error) {
	resp, err := http.Get(j.query + "/api/v3/traces/" + traceID)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil, nil
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("jaeger: trace %s: %s: %s", traceID, resp.Status, body)
	}
	// The answer is a stream of chunks, each {"result": {OTLP JSON}} (or
	// {"error": ...}).
	var spans []Span
	dec := json.NewDecoder(resp.Body)
	for {
		var chunk struct {
			Result struct {
				ResourceSpans []struct {
					Resource struct {
						Attributes []attr `json:"attributes"`
					} `json:"resource"`
					ScopeSpans []struct {
						Spans []struct {
							TraceID      string `json:"traceId"`
							SpanID       string `json:"spanId"`
							ParentSpanID string `json:"parentSpanId"`
							Name         string `json:"name"`
							Attributes   []attr `json:"attributes"`
						} `json:"spans"`
					} `json:"scopeSpans"`
				} `json:"resourceSpans"`
			} `json:"result"`
			Error *struct {
				HTTPCode int    `json:"httpCode"`
				Message  string `json:"message"`
			} `json:"error"`
		}
		if err := dec.Decode(&chunk); errors.Is(err, io.EOF) {
			return spans, nil
		} else if err != nil {
			return nil, fmt.Errorf("jaeger: trace %s: %w", traceID, err)
		}
		if chunk.Error != nil {
			if chunk.Error.HTTPCode == http.StatusNotFound {
				return nil, nil
			}
			return nil, fmt.Errorf("jaeger: trace %s: %s", traceID, chunk.Error.Message)
		}
		for _, rs := range chunk.Result.ResourceSpans {
			service := attrs(rs.Resource.Attributes)["service.name"]
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					spans = append(spans, Span{TraceID: normalID(s.TraceID), SpanID: normalID(s.SpanID), ParentSpanID: normalID(s.ParentSpanID),
						Name: s.Name, Service: service, Attributes: attrs(s.Attributes)})
				}
			}
		}
	}
}

// normalID is an id in hex, whether Jaeger gave it in hex or in base64.
func normalID(id string) string {
	if id == "" {
		return ""
	}
	if _, err := hex.DecodeString(id); err == nil && (len(id) == 16 || len(id) == 32) {
		return strings.ToLower(id)
	}
	return id
}

type attr struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

func attrs(list []attr) map[string]string {
	out := map[string]string{}
	for _, a := range list {
		var v map[string]json.RawMessage
		if json.Unmarshal(a.Value, &v) != nil {
			continue
		}
		for _, raw := range v {
			var s string
			if json.Unmarshal(raw, &s) == nil {
				out[a.Key] = s
			} else {
				out[a.Key] = string(raw)
			}
		}
	}
	return out
}

// Metrics returns the metrics Jaeger received, in the Prometheus text
// format.
func (j *Jaeger) Metrics() (string, error) {
	resp, err := http.Get(j.metrics)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", errors.New("jaeger: metrics: " + resp.Status + ": " + strconv.Quote(string(body)))
	}
	return string(body), nil
}
