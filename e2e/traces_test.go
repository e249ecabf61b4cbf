package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/examples/dealdesk"
	"github.com/troupe-dev/troupe/internal/jaegertest"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/local"
	"github.com/troupe-dev/troupe/telemetry"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/events"
)

// envTraces makes a worker process trace with the telemetry the standard
// OTEL_* variables ask for, exporting each span as it ends (so a SIGKILL
// loses none that ended).
const envTraces = "TROUPE_E2E_TRACES"

// workerTelemetry adds a worker process's telemetry to its client's
// options when envTraces is set.
func workerTelemetry(opts client.Options) (client.Options, error) {
	if os.Getenv(envTraces) == "" {
		return opts, nil
	}
	tel, err := telemetry.New(context.Background(), telemetry.Config{SyncExport: true})
	if err != nil {
		return opts, err
	}
	return tel.ClientOptions(opts), nil
}

// span is a span of the run's trace, from either source: the in-memory
// exporter of this process (the client and the second worker) or Jaeger
// (the first worker's, exported over OTLP before it was killed).
type span struct {
	id, parent, trace, name, from string
	attrs                         map[string]string
}

// TestTracesAcrossCrash: a deal-desk run whose worker is killed (SIGKILL)
// while both reviewers wait on their model, finished by a second worker. The first worker exports over OTLP (the standard variables) to a
// real receiver, Jaeger, started here; the client and the second worker,
// in this process, to an in-memory exporter. Together they hold one trace,
// the run's, rooted at the client's StartWorkflow span: every span's parent
// is in it, no span is there twice, each of the run's workflows has one
// RunWorkflow span (its agent named) though the second worker replayed
// those the crash cut off and then every one of them again to answer
// queries, each model turn one chat span with the GenAI attributes (the
// killed one too, redone), each tool call one execute_tool span, the
// handoff one span; and the first worker's Temporal SDK metrics reached
// Jaeger too.
func TestTracesAcrossCrash(t *testing.T) {
	// Not parallel: beside the other tests on a loaded two-core machine, a
	// reviewer's redone first turn had no chat span.
	j := jaegertest.Start(t)
	_, url := modelServer(t)
	blobDir, queue := t.TempDir(), fmt.Sprintf("traces-%d", os.Getpid())
	held := filepath.Join(t.TempDir(), "held")
	first := spawnWorker(t, url, blobDir, queue, envHoldModel+"=reviewer", envHoldModelFile+"="+held,
		envTraces+"=1", "OTEL_EXPORTER_OTLP_ENDPOINT="+j.OTLPHTTP, "OTEL_SERVICE_NAME=troupe-e2e-first", "OTEL_METRIC_EXPORT_INTERVAL=100")

	exp := tracetest.NewInMemoryExporter()
	tel, err := telemetry.New(context.Background(), telemetry.Config{ServiceName: "troupe-e2e", SpanExporter: exp, SyncExport: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tel.Shutdown(context.Background()) })
	c, err := client.Dial(tel.ClientOptions(client.Options{HostPort: temporalAddr, Logger: quiet()}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)

	run, err := troupeclient.StartRun(context.Background(), c, queue, troupe.RunInput{Graph: "dealdesk", Input: "Review the Acme Corp deal"})
	if err != nil {
		t.Fatal(err)
	}
	// Both reviewers wait on their first model call: what the first worker
	// did has all been recorded (its workflow tasks completed), and what
	// is left is the second's.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if data, _ := os.ReadFile(held); strings.Count(string(data), "\n") >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the reviewers did not call their model in a minute")
		}
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	startTracedWorker(t, c, url, blobDir, queue)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var res troupe.RunResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatalf("the run after the crash: %v", err)
	}
	if rec, err := agents.Decode[dealdesk.Recommendation](res.Output); err != nil || rec.Decision != "approve_with_conditions" {
		t.Fatalf("recommendation = %+v (%v), want the one of an undisturbed run", rec, err)
	}

	// The run's workflows, and what each did: querying them (all closed)
	// replays each on the second worker.
	agentWorkflows := map[string]string{} // workflow id → agent
	var ids []string
	pending := []string{run.GetID()}
	events := map[string][]troupe.Event{}
	for len(pending) > 0 {
		id := pending[0]
		pending = pending[1:]
		if slices.Contains(ids, id) {
			continue
		}
		ids = append(ids, id)
		events[id] = eventsOf(t, c, id)
		for _, e := range events[id] {
			if (e.Kind == troupe.EventAgentStarted || e.Kind == troupe.EventAgentToolStarted) && e.Child != "" {
				agentWorkflows[e.Child] = e.Child[strings.LastIndex(e.Child, "-")+1:]
				pending = append(pending, e.Child)
			}
		}
	}
	if len(agentWorkflows) != 4 {
		t.Fatalf("agent workflows = %v, want triage, coordinator and the two reviewers", agentWorkflows)
	}

	// The trace: this process's spans, and the first worker's from Jaeger.
	var root *tracetest.SpanStub
	mem := exp.GetSpans()
	for i, s := range mem {
		if s.Name == "StartWorkflow:"+troupe.OrchestratorWorkflowName {
			root = &mem[i]
		}
	}
	if root == nil {
		t.Fatalf("no StartWorkflow span in this process's %d spans", len(mem))
	}
	traceID := root.SpanContext.TraceID().String()
	var all []span
	for _, s := range mem {
		if s.SpanContext.TraceID().String() != traceID {
			continue
		}
		sp := span{id: s.SpanContext.SpanID().String(), trace: traceID, name: s.Name, from: "memory", attrs: map[string]string{}}
		if s.Parent.IsValid() {
			sp.parent = s.Parent.SpanID().String()
		}
		for _, a := range s.Attributes {
			sp.attrs[string(a.Key)] = a.Value.Emit()
		}
		all = append(all, sp)
	}
	remote, err := j.Trace(traceID)
	if err != nil {
		t.Fatal(err)
	}
	fromFirst := 0
	for _, s := range remote {
		if s.Service == "troupe-e2e-first" {
			fromFirst++
		}
		all = append(all, span{id: s.SpanID, parent: s.ParentSpanID, trace: s.TraceID, name: s.Name, from: "jaeger", attrs: s.Attributes})
	}
	t.Logf("%d spans: %d from this process, %d from the first worker through Jaeger", len(all), len(all)-len(remote), len(remote))
	if fromFirst == 0 || fromFirst != len(remote) {
		t.Errorf("jaeger holds %d spans of the trace, %d of them from the first worker: want the first worker's, and only them", len(remote), fromFirst)
	}

	byID := map[string]span{}
	for _, s := range all {
		if prev, dup := byID[s.id]; dup {
			t.Errorf("span %s twice: %s (%s) and %s (%s)", s.id, prev.name, prev.from, s.name, s.from)
		}
		byID[s.id] = s
	}
	children := map[string][]span{}
	for _, s := range all {
		switch {
		case s.parent == "" && s.id != root.SpanContext.SpanID().String():
			t.Errorf("span %s (%s) is a root besides the client's", s.name, s.from)
		case s.parent != "" && byID[s.parent].id == "":
			t.Errorf("span %s (%s)'s parent %s is not in the trace", s.name, s.from, s.parent)
		}
		children[s.parent] = append(children[s.parent], s)
	}
	defer func() {
		if t.Failed() || testing.Verbose() {
			logTree(t, children, "", 0)
		}
	}()
	named := func(parent, prefix string) []span {
		var out []span
		for _, s := range children[parent] {
			if strings.HasPrefix(s.name, prefix) {
				out = append(out, s)
			}
		}
		return out
	}
	// descendants are the spans under id, down to (not into) the next
	// RunWorkflow spans.
	var descendants func(id string) []span
	descendants = func(id string) []span {
		var out []span
		for _, s := range children[id] {
			out = append(out, s)
			if !strings.HasPrefix(s.name, "RunWorkflow:") {
				out = append(out, descendants(s.id)...)
			}
		}
		return out
	}

	// One RunWorkflow span per workflow, each under its start.
	runSpans := map[string][]span{}
	for _, s := range all {
		if strings.HasPrefix(s.name, "RunWorkflow:") {
			runSpans[s.attrs["temporalWorkflowID"]] = append(runSpans[s.attrs["temporalWorkflowID"]], s)
		}
	}
	if len(runSpans) != len(ids) {
		t.Errorf("RunWorkflow spans of %d workflows, want %d: %v", len(runSpans), len(ids), slices.Sorted(mapsKeys(runSpans)))
	}
	for _, id := range ids {
		if n := len(runSpans[id]); n != 1 {
			t.Errorf("%d RunWorkflow spans of %s, want 1", n, id)
			continue
		}
		rs := runSpans[id]
		if start := byID[rs[0].parent]; !strings.HasPrefix(start.name, "StartWorkflow:") && !strings.HasPrefix(start.name, "StartChildWorkflow:") {
			t.Errorf("RunWorkflow of %s under %q, want its start", id, start.name)
		}
		if agent, ok := agentWorkflows[id]; ok && rs[0].attrs[string(telemetry.AttrAgentName)] != agent {
			t.Errorf("RunWorkflow of %s names agent %q, want %q", id, rs[0].attrs[string(telemetry.AttrAgentName)], agent)
		}
	}
	orchestrator := runSpans[run.GetID()]
	if len(orchestrator) == 1 {
		if hs := named(orchestrator[0].id, "handoff "); len(hs) != 1 || hs[0].name != "handoff triage → coordinator" {
			t.Errorf("handoff spans under the run = %v, want one, triage → coordinator", hs)
		}
	}

	for id, agent := range agentWorkflows {
		if len(runSpans[id]) != 1 {
			continue
		}
		under := descendants(runSpans[id][0].id)
		// A chat span per model turn, under the model activity's
		// RunActivity span, itself straight under the workflow's (a local
		// activity: no StartActivity span).
		turns := map[string]bool{}
		for _, e := range events[id] {
			if e.Kind == troupe.EventTurn {
				turns[fmt.Sprint(e.Turn)] = true
			}
		}
		chats := map[string]int{}
		for _, s := range under {
			switch {
			case s.name == "StartActivity:"+workflows.ModelActivityName:
				t.Errorf("%s: a StartActivity span for its model call, a local activity", agent)
			case strings.HasPrefix(s.name, "chat "):
				chats[s.attrs[string(telemetry.AttrTurn)]]++
				if p := byID[s.parent]; p.name != "RunActivity:"+workflows.ModelActivityName || p.parent != runSpans[id][0].id {
					t.Errorf("%s: chat span under %q, want the model activity's RunActivity under the agent's RunWorkflow", agent, p.name)
				}
				for _, k := range []string{"gen_ai.operation.name", "gen_ai.request.model", "gen_ai.response.model", "gen_ai.system",
					"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.response.finish_reasons"} {
					if s.attrs[k] == "" {
						t.Errorf("%s: chat span of turn %s lacks %s: %v", agent, s.attrs[string(telemetry.AttrTurn)], k, s.attrs)
					}
				}
			}
		}
		for turn := range turns {
			if chats[turn] != 1 {
				t.Errorf("%s: %d chat spans for turn %s, want 1", agent, chats[turn], turn)
			}
		}
		if len(chats) != len(turns) {
			t.Errorf("%s: chat spans for turns %v, want %v", agent, chats, turns)
		}
		// An execute_tool span per tool call.
		calls := map[string]string{}
		for _, e := range events[id] {
			if e.Kind == troupe.EventToolResult || e.Kind == troupe.EventAgentToolFinished {
				calls[e.CallID] = e.Tool
			}
		}
		tools := map[string]int{}
		for _, s := range under {
			if strings.HasPrefix(s.name, "execute_tool ") {
				tools[s.attrs["gen_ai.tool.call.id"]]++
				if s.name != "execute_tool "+s.attrs["gen_ai.tool.name"] {
					t.Errorf("%s: span %q names tool %q", agent, s.name, s.attrs["gen_ai.tool.name"])
				}
			}
		}
		for call, tool := range calls {
			if tools[call] != 1 {
				t.Errorf("%s: %d execute_tool spans for call %s of %s, want 1", agent, tools[call], call, tool)
				for _, e := range events[id] {
					t.Logf("event %s %s %s %s", e.Kind, e.Tool, e.CallID, e.Detail)
				}
			}
		}
		if len(tools) != len(calls) {
			t.Errorf("%s: execute_tool spans for calls %v, want %v", agent, tools, calls)
		}
	}

	// The first worker's metrics: the SDK's, over OTLP.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		metrics, err := j.Metrics()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(metrics, "temporal_request") && strings.Contains(metrics, `job="troupe-e2e-first"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Temporal SDK metric of the first worker reached jaeger:\n%.3000s", metrics)
		}
	}
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// logTree logs the spans under parent, indented.
func logTree(t *testing.T, children map[string][]span, parent string, depth int) {
	for _, s := range children[parent] {
		t.Logf("%s%s [%s %s] %v", strings.Repeat("  ", depth), s.name, s.from, s.id, s.attrs)
		logTree(t, children, s.id, depth+1)
	}
}

// startTracedWorker runs, in this process, a worker of the run on c (so
// traced as c is) that takes over the first worker's: the same task queue,
// host, blob store and sandbox store, the settings workerProcess gives.
func startTracedWorker(t *testing.T, c client.Client, modelURL, blobDir, queue string) {
	t.Helper()
	m, err := model.New(model.Config{APIKey: "test", BaseURL: modelURL})
	if err != nil {
		t.Fatal(err)
	}
	store, err := blob.Open(context.Background(), blobDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	lc, err := local.New(local.Config{Root: blobDir + "-sandboxes"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := workflows.NewRunner(workflows.Config{Graphs: workerGraphs("local"), Model: m, Store: store, Events: events.NewBus(),
		HeartbeatTimeout: time.Second, Host: queue, HostTimeout: 2 * time.Second, Sandboxes: map[string]sandbox.Client{"local": lc}})
	if err != nil {
		t.Fatal(err)
	}
	stop, err := r.StartWorkers(c, queue, worker.Options{StickyScheduleToStartTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
}
