package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
)

// TestUntracedWorkerSaid: a `troupe run` that exports traces, against a
// `troupe worker` of another process, says in one line on stderr, naming
// the task queue and what to set, that the worker exports none (its spans,
// the run's own, are missing from the trace); beside a worker that
// exports, it says nothing. Both export to a local OTLP receiver started
// here.
func TestUntracedWorkerSaid(t *testing.T) {
	parallel(t)
	var exported atomic.Int64
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/v1/traces" {
			exported.Add(1)
		}
	}))
	defer receiver.Close()
	exports := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + receiver.URL, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=", "OTEL_METRICS_EXPORTER=none",
		"OTEL_TRACES_EXPORTER=", "OTEL_SDK_DISABLED="}
	exportsNone := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="}
	const said = "troupe: traces: this command exports them to "
	for _, tc := range []struct {
		name   string
		worker []string
		warn   bool
	}{
		{"a worker that exports none", exportsNone, true},
		{"a worker that exports", exports, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			queue := fmt.Sprintf("untraced-%v-%d", tc.warn, os.Getpid())
			env := append([]string{"TROUPE_HOME=" + t.TempDir(), "TEMPORAL_ADDRESS=" + temporalAddr, envCLIPlod + "=1"}, tc.worker...)
			startTroupe(t, "worker", env, "troupe: worker on", "worker", "--task-queue", queue)
			run := startCLIEnv(t, t.TempDir(), append([]string{"TEMPORAL_ADDRESS=" + temporalAddr}, exports...),
				"run", "--task-queue", queue, "--graph", "plod", "stream please")
			if code := run.wait(t); code != 0 {
				t.Fatalf("troupe run: exit %d; stderr:\n%s", code, run.errText())
			}
			stderr := run.errText()
			n := strings.Count(stderr, said)
			switch {
			case tc.warn && n != 1:
				t.Errorf("troupe run said %d times that the worker exports no traces; want once. stderr:\n%s", n, stderr)
			case !tc.warn && n != 0:
				t.Errorf("troupe run says a worker that exports traces exports none; stderr:\n%s", stderr)
			}
			if tc.warn && n > 0 {
				line := stderr[strings.Index(stderr, said):]
				line, _, _ = strings.Cut(line, "\n")
				for _, want := range []string{receiver.URL, "task queue " + queue, "OTEL_EXPORTER_OTLP_ENDPOINT", "troupe worker"} {
					if !strings.Contains(line, want) {
						t.Errorf("the line %q does not say %q", line, want)
					}
				}
			}
		})
	}
	if exported.Load() == 0 {
		t.Errorf("nothing reached the OTLP receiver: the commands did not export")
	}
}
