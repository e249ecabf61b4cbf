package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/cli"
	"github.com/troupe-dev/troupe/examples/dealdesk"
)

// TestCLIRun runs `troupe run` as a user does, with no OPENAI_API_KEY (so
// the deal-desk offline scenario answers) and, in turn, against a running
// Temporal (TEMPORAL_ADDRESS) and on its own embedded server.
func TestCLIRun(t *testing.T) {
	// Not parallel: it sets the environment the CLI or the store reads (t.Setenv).
	tests := []struct {
		name    string
		address string
	}{
		{"TEMPORAL_ADDRESS", temporalAddr},
		{"embedded server", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("OPENAI_API_KEY", "")
			t.Setenv("TEMPORAL_ADDRESS", tc.address)
			t.Setenv("TROUPE_HOME", t.TempDir())
			var stdout, stderr bytes.Buffer
			cmd := cli.Command([]cli.Graph{{Graph: dealdesk.Graph(), Scenario: dealdesk.Scenario}}, &stdout, &stderr)
			// --worker: against TEMPORAL_ADDRESS, a worker of this
			// process only when asked for (TestCLIRunIsOnlyAClient).
			cmd.SetArgs([]string{"run", "--worker", "--graph", "dealdesk", "--json", "Review the Acme Corp deal"})
			if err := cmd.ExecuteContext(context.Background()); err != nil {
				t.Fatalf("troupe run: %v\nstderr:\n%s", err, stderr.String())
			}
			var res troupe.RunResult
			if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
				t.Fatalf("stdout is not a run result: %v\n%s", err, stdout.String())
			}
			rec, err := agents.Decode[dealdesk.Recommendation](res.Output)
			if err != nil || res.Agent != "coordinator" || rec.Decision != "approve_with_conditions" || res.WorkflowID == "" {
				t.Errorf("result = %+v, recommendation %+v (%v)", res, rec, err)
			}
			progress := stderr.String()
			for _, want := range []string{"OPENAI_API_KEY is not set", "handoff: triage → coordinator", "⇉ review_pricing", "⇉ review_rollout", "→ exec_command", "sandbox provisioned", "sandbox stopped", "[coordinator] final output"} {
				if !strings.Contains(progress, want) {
					t.Errorf("progress lacks %q:\n%s", want, progress)
				}
			}
		})
	}
}

// TestCLIRunRemembers: `troupe run` on its own embedded server stays, once
// the result is out, for the deal desk's memory to be consolidated, so the
// next `troupe run` of the same home knows the decision made before. The
// command runs as a process of its own, with its own environment, so the
// test runs beside the others.
func TestCLIRunRemembers(t *testing.T) {
	parallel(t)
	home := t.TempDir()
	review := func() (dealdesk.Recommendation, string) {
		r := startCLI(t, home, "run", "--graph", "dealdesk", "--json", "Review the Acme Corp deal")
		if code := r.wait(t); code != 0 {
			t.Fatalf("troupe run: exit %d\nstderr:\n%s", code, r.errText())
		}
		var res troupe.RunResult
		if err := json.Unmarshal([]byte(r.stdout.String()), &res); err != nil {
			t.Fatalf("stdout is not a run result: %v\n%s", err, r.stdout.String())
		}
		rec, err := agents.Decode[dealdesk.Recommendation](res.Output)
		if err != nil {
			t.Fatalf("result %+v: %v", res, err)
		}
		return rec, r.errText()
	}
	if first, progress := review(); strings.Contains(first.Summary, "Earlier for") {
		t.Fatalf("first run: summary %q; progress:\n%s", first.Summary, progress)
	}
	if again, _ := review(); !strings.Contains(again.Summary, "Earlier for Acme Corp: approve_with_conditions") {
		t.Errorf("the second run says %q; want the decision made before", again.Summary)
	}
}

// TestWorkerSandboxChoice: a worker whose sandbox backend is unusable
// (here bubblewrap is not on PATH) refuses to start, says why and how to
// fix it, and never falls back to the unconfined local backend by itself;
// chosen explicitly, local runs, labelled as unconfined.
func TestWorkerSandboxChoice(t *testing.T) {
	// Not parallel: it sets the environment the CLI or the store reads (t.Setenv).
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("TEMPORAL_ADDRESS", temporalAddr)
	t.Setenv("TROUPE_HOME", t.TempDir())
	t.Setenv("TROUPE_SANDBOX", "")
	t.Setenv("PATH", t.TempDir())
	graphs := []cli.Graph{{Graph: dealdesk.Graph(), Scenario: dealdesk.Scenario}}

	var stderr lockedBuffer
	cmd := cli.Command(graphs, io.Discard, &stderr)
	cmd.SetArgs([]string{"worker", "--task-queue", "e2e-sandbox-choice"})
	err := cmd.ExecuteContext(context.Background())
	if err == nil {
		t.Fatalf("the worker started without bubblewrap:\n%s", stderr.String())
	}
	for _, want := range []string{"the bwrap sandbox backend is unusable here", "dealdesk/", "apt-get install bubblewrap", "--sandbox local runs sandboxes unconfined"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var started lockedBuffer
	cmd = cli.Command(graphs, io.Discard, &started)
	cmd.SetArgs([]string{"worker", "--task-queue", "e2e-sandbox-choice", "--sandbox", "local"})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	for !strings.Contains(started.String(), "troupe: worker on") {
		select {
		case err := <-done:
			t.Fatalf("worker --sandbox local: %v\n%s", err, started.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("worker --sandbox local: %v", err)
	}
	if want := "local (UNCONFINED: no isolation) [default]"; !strings.Contains(started.String(), want) {
		t.Errorf("start-up lines lack %q:\n%s", want, started.String())
	}
}

// TestCLIDeadModel: `troupe run` against a model nobody answers is never
// silent: each retry of the model call shows in its progress, saying why
// and when the next attempt comes.
func TestCLIDeadModel(t *testing.T) {
	// Not parallel: it sets the environment the CLI or the store reads (t.Setenv).
	t.Setenv("OPENAI_API_KEY", "test")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1") // The discard port: nothing listens.
	t.Setenv("TEMPORAL_ADDRESS", "")
	t.Setenv("TROUPE_HOME", t.TempDir())
	var stdout bytes.Buffer
	var stderr syncBuffer
	cmd := cli.Command([]cli.Graph{{Graph: dealdesk.Graph(), Scenario: dealdesk.Scenario}}, &stdout, &stderr)
	cmd.SetArgs([]string{"run", "--graph", "dealdesk", "Review the Acme Corp deal"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	const want = "[triage] model unreachable: "
	deadline := time.Now().Add(90 * time.Second)
	for !strings.Contains(stderr.String(), "retry 2 of 10 in 1s") {
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("no retry event in the progress in 90 s:\n%s", stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	<-done
	var line string
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(l, want) {
			line = l
			break
		}
	}
	if !strings.HasSuffix(line, want+"connection refused; retry 2 of 10 in 1s") {
		t.Errorf("retry line = %q, want it to say why (connection refused) and when", line)
	}
}

// TestCLIRunNeedsInput: a graph without a default input says how to give
// one, before anything starts.
func TestCLIRunNeedsInput(t *testing.T) {
	parallel(t)
	var stdout, stderr bytes.Buffer
	cmd := cli.Command([]cli.Graph{{Graph: dealdesk.Graph(), Scenario: dealdesk.Scenario}}, &stdout, &stderr)
	cmd.SetArgs([]string{"run", "--graph", "dealdesk"})
	err := cmd.ExecuteContext(context.Background())
	if err == nil || !strings.Contains(err.Error(), `graph dealdesk needs an input: troupe run --graph dealdesk "what to do"`) {
		t.Fatalf("troupe run without an input: %v", err)
	}
}

// TestCLIRunFailure: a failed run is one line that names the agent, the
// error's type and what went wrong; --json prints it as JSON on stdout;
// the SDK's log goes to a file under TROUPE_HOME, not amid the progress.
func TestCLIRunFailure(t *testing.T) {
	// Not parallel: it sets the environment the CLI or the store reads (t.Setenv).
	// A model server that refuses every request, as OpenAI does a bad key.
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","code":"invalid_api_key"}}`)
	}))
	defer refuse.Close()
	home := t.TempDir()
	t.Setenv("OPENAI_API_KEY", "bad")
	t.Setenv("OPENAI_BASE_URL", refuse.URL+"/v1")
	t.Setenv("TEMPORAL_ADDRESS", temporalAddr)
	t.Setenv("TROUPE_HOME", home)
	var stdout, stderr bytes.Buffer
	cmd := cli.Command([]cli.Graph{{Graph: dealdesk.Graph(), Scenario: dealdesk.Scenario}}, &stdout, &stderr)
	cmd.SetArgs([]string{"run", "--worker", "--graph", "dealdesk", "--json", "Review the Acme Corp deal"})
	err := cmd.ExecuteContext(context.Background())
	const want = "agent triage failed: troupe.ModelError: model: HTTP 401 invalid_request_error: Incorrect API key provided."
	if err == nil || err.Error() != want {
		t.Fatalf("troupe run = %v, want %q", err, want)
	}
	var f cli.RunFailure
	if err := json.Unmarshal(stdout.Bytes(), &f); err != nil {
		t.Fatalf("stdout is not a failure: %v\n%s", err, stdout.String())
	}
	if f.WorkflowID == "" || f.Agent != "triage" || f.Err.Type != troupe.ErrModel || !strings.Contains(f.Err.Message, "HTTP 401") {
		t.Errorf("--json failure = %+v", f)
	}
	if strings.Contains(stderr.String(), "level=") {
		t.Errorf("SDK log lines amid the progress:\n%s", stderr.String())
	}
	logs, _ := filepath.Glob(filepath.Join(home, "logs", "run-*.log"))
	if len(logs) != 1 {
		t.Errorf("SDK logs in TROUPE_HOME/logs: %v, want one", logs)
	}
}
