package e2e

// Tests of approvals through `troupe mcp serve` (package mcp/server): a
// call inside a served agent's run that waits for a human is asked of the
// TypeScript SDK client with an elicitation when it declares the
// capability, and otherwise answered with the calls that wait, which the
// client decides with troupe_run_approve.

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/internal/testgraphs"
	"github.com/troupe-dev/troupe/mcp/server"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/model/scripted"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/events"
)

// mcpGateRules drive the keeper of mcpGateGraph: "clean X" removes X,
// "clean X then Y" removes X, then Y; each call waits for approval, and
// the reply says what the last call did.
const mcpGateRules = `
rules:
  - name: mcpgate-then
    match: {instructions: "mcp gatekeeper", input: '^clean \S+ then \S+', turn: 2}
    respond: {calls: [{name: rm_rf, arguments: {path: '{{match .User ` + "`then (\\S+)`" + `}}'}}]}
  - name: mcpgate-removed
    match: {instructions: "mcp gatekeeper", last_input: "^removed "}
    respond: {text: "done: {{.LastOutput}}"}
  - name: mcpgate-refused
    match: {instructions: "mcp gatekeeper", last_input: "rejected this call"}
    respond: {text: "not removed: {{.LastOutput}}"}
  - name: mcpgate-clean
    match: {instructions: "mcp gatekeeper", input: '^clean \S+'}
    respond: {calls: [{name: rm_rf, arguments: {path: '{{match .User ` + "`^clean (\\S+)`" + `}}'}}]}
`

// mcpGateGraph is a graph with one exposed agent (mcpgate_keeper) that
// removes what it is asked to clean with rm_rf, whose every call waits
// for approval; rm_rf notes each path it is run on in log.
func mcpGateGraph(log string) *agents.Graph {
	rm := testgraphs.RmRf(func() string { return log })
	return agents.MustGraph("mcpgate", "keeper", &agents.Agent{
		Name: "keeper", Instructions: "mcp gatekeeper: cleans what it is asked to", Expose: agents.Expose("", "Cleans a directory of the build."),
		Tools: []agents.Tool{rm}, Approvals: []agents.Approval{agents.Always("rm_rf")},
	})
}

// newMCPGateFixture is an MCP server over HTTP on 127.0.0.1, in process,
// for mcpGateGraph, with a worker (whose events it follows) and a
// scripted model of its own. It returns the URLs of its stateful and its
// stateless HTTP handler, and the tool's log.
func newMCPGateFixture(t *testing.T) (url, stateless, log string) {
	t.Helper()
	c := dial(t)
	sc, err := scripted.ParseScenario([]byte(mcpGateRules))
	if err != nil {
		t.Fatal(err)
	}
	ms := scripted.New(sc)
	base, err := ms.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ms.Close() })
	log = filepath.Join(t.TempDir(), "gate.log")
	g := mcpGateGraph(log)
	bus := events.NewBus()
	queue := startWorker(t, c, base, model.APIResponses, func(cfg *workflows.Config) {
		cfg.Graphs = append(cfg.Graphs, g)
		cfg.Events = bus
	})
	s, err := server.New(server.Config{Client: c, TaskQueue: queue, PollInterval: 50 * time.Millisecond, Events: bus, Graphs: []*agents.Graph{g}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.HTTPHandler(server.HTTPOptions{}))
	srvStateless := httptest.NewServer(s.HTTPHandler(server.HTTPOptions{Stateless: true}))
	t.Cleanup(func() { s.Close(); srv.Close(); srvStateless.Close() })
	return srv.URL + server.Path, srvStateless.URL + server.Path, log
}

// tsApproveRun is what approve.mjs reports.
type tsApproveRun struct {
	Tools        []tsTool `json:"tools"`
	Elicitations []struct {
		Message         string          `json:"message"`
		RequestedSchema json.RawMessage `json:"requestedSchema"`
	} `json:"elicitations"`
	Progress  []tsProgress     `json:"progress"`
	Results   []tsResult       `json:"results"`
	Decisions []map[string]any `json:"decisions"`
}

// gateLog reads the paths rm_rf ran on.
func gateLog(t *testing.T, log string) []string {
	t.Helper()
	b, err := os.ReadFile(log)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// TestMCPServeApprovals: the calls that wait for approval in a served
// agent's run, decided by the TypeScript SDK client: with elicitation
// (accept, for two calls one after the other; decline; in a session), and
// without it, where the agent tool's answer lists the call that waits and
// troupe_run_approve decides it, for a run and for a session; and by
// go-sdk's client on 2026-07-28, with multi round-trip requests.
func TestMCPServeApprovals(t *testing.T) {
	parallel(t)
	url, stateless, log := newMCPGateFixture(t)
	var ran []string
	checkRan := func(t *testing.T, want ...string) {
		t.Helper()
		ran = append(ran, want...)
		if got := gateLog(t, log); !slices.Equal(got, ran) {
			t.Errorf("rm_rf ran on %q, want %q", got, ran)
		}
	}

	t.Run("elicitation accept", func(t *testing.T) {
		var out tsApproveRun
		runTSClient(t, "approve.mjs", nil, &out, url, "accept", "mcpgate_keeper", "clean build/ then dist/")
		if len(out.Elicitations) != 2 {
			t.Fatalf("%d elicitations, want one per call (2): %+v", len(out.Elicitations), out.Elicitations)
		}
		for i, path := range []string{"build/", "dist/"} {
			m := out.Elicitations[i].Message
			if !strings.Contains(m, "Agent keeper wants to call rm_rf") || !strings.Contains(m, `"path": "`+path+`"`) {
				t.Errorf("elicitation %d: %q, want the agent, the tool and the arguments", i, m)
			}
			if !strings.Contains(string(out.Elicitations[i].RequestedSchema), `"approve"`) {
				t.Errorf("elicitation %d asks for %s", i, out.Elicitations[i].RequestedSchema)
			}
		}
		res := out.Results[0]
		if len(out.Results) != 1 || res.IsError || string(res.StructuredContent) != `{"output":"done: removed dist/"}` {
			t.Errorf("the call answered %+v (%s)", out.Results, res.text())
		}
		var messages []string
		for _, p := range out.Progress {
			messages = append(messages, p.Message)
		}
		progress := strings.Join(messages, "\n")
		for _, want := range []string{"keeper: rm_rf waits for approval", "keeper: rm_rf approved by user: go ahead"} {
			if !strings.Contains(progress, want) {
				t.Errorf("progress lacks %q:\n%s", want, progress)
			}
		}
		checkRan(t, "build/", "dist/")
	})

	t.Run("elicitation decline", func(t *testing.T) {
		var out tsApproveRun
		runTSClient(t, "approve.mjs", nil, &out, url, "decline", "mcpgate_keeper", "clean secret/")
		if len(out.Elicitations) != 1 {
			t.Fatalf("%d elicitations, want 1", len(out.Elicitations))
		}
		res := out.Results[0]
		var reply struct {
			Output string `json:"output"`
		}
		if res.IsError || json.Unmarshal(res.StructuredContent, &reply) != nil ||
			!strings.HasPrefix(reply.Output, "not removed: Error: the user rejected this call") || !strings.Contains(reply.Output, "declined") {
			t.Errorf("the call answered %s (%s), want the model's reply that the call was rejected, as declined", res.StructuredContent, res.text())
		}
		checkRan(t)
	})

	t.Run("elicitation session", func(t *testing.T) {
		var out tsApproveRun
		runTSClient(t, "approve.mjs", nil, &out, url, "accept", "mcpgate_keeper"+server.SessionToolSuffix, "clean src/")
		if len(out.Elicitations) != 1 || len(out.Results) != 1 {
			t.Fatalf("%d elicitations, %d results, want 1 and 1", len(out.Elicitations), len(out.Results))
		}
		var turn struct {
			Turn  int             `json:"turn"`
			Reply json.RawMessage `json:"reply"`
		}
		res := out.Results[0]
		if res.IsError || json.Unmarshal(res.StructuredContent, &turn) != nil || turn.Turn != 1 || string(turn.Reply) != `{"output":"done: removed src/"}` {
			t.Errorf("the session tool answered %s (%s)", res.StructuredContent, res.text())
		}
		checkRan(t, "src/")
	})

	t.Run("fallback", func(t *testing.T) {
		var out tsApproveRun
		runTSClient(t, "approve.mjs", nil, &out, url, "fallback", "mcpgate_keeper", "clean cache/ then tmp/")
		if len(out.Elicitations) != 0 || len(out.Results) != 3 {
			t.Fatalf("%d elicitations, %d results, want none and 3 (the call, two approvals): %+v", len(out.Elicitations), len(out.Results), out.Results)
		}
		first := out.Results[0]
		runID := first.runID()
		if !regexp.MustCompile(`^mcp-mcpgate-[0-9a-f]{32}$`).MatchString(runID) {
			t.Fatalf("first answer's run id %q", runID)
		}
		checkWaiting(t, first, "cache/")
		// The first approval's answer: the run went on, and waits again.
		checkWaiting(t, out.Results[1], "tmp/")
		if out.Results[1].IsError || out.Results[1].runID() != runID {
			t.Errorf("troupe_run_approve's answer while the run waits again: %+v", out.Results[1])
		}
		last := out.Results[2]
		var reply struct {
			Output string `json:"output"`
		}
		if last.IsError || json.Unmarshal(last.StructuredContent, &reply) != nil ||
			reply.Output != "not removed: Error: the user rejected this call; it was not run. Their message: keep it" ||
			last.Meta[server.MetaStatus] != "completed" || last.runID() != runID {
			t.Errorf("the last troupe_run_approve answered %+v (%s)", last, last.text())
		}
		checkRan(t, "cache/")
	})

	t.Run("multi round-trip", func(t *testing.T) {
		// go-sdk's client speaks 2026-07-28 (with a server that serves it
		// statelessly), where a server may not send requests while it
		// serves one: the answer asks for input instead, and the client's
		// middleware calls again with its answers.
		var asked []string
		c := mcp.NewClient(&mcp.Implementation{Name: "e2e-go", Version: "v0"}, &mcp.ClientOptions{
			ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				asked = append(asked, req.Params.Message)
				approve := len(asked) == 1
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": approve, "message": "from go"}}, nil
			}})
		ctx := context.Background()
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: stateless}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		if v := cs.InitializeResult().ProtocolVersion; v < "2026-07-28" {
			t.Fatalf("go-sdk negotiated %s, before multi round-trip requests", v)
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcpgate_keeper", Arguments: map[string]any{"input": "clean out/ then bin/"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(asked) != 2 || !strings.Contains(asked[0], `"path": "out/"`) || !strings.Contains(asked[1], `"path": "bin/"`) {
			t.Errorf("asked %q, want about out/, then bin/", asked)
		}
		got, _ := json.Marshal(res.StructuredContent)
		if res.IsError || string(got) != `{"output":"not removed: Error: the user rejected this call; it was not run. Their message: from go"}` {
			t.Errorf("the call answered %s (isError %v)", got, res.IsError)
		}
		checkRan(t, "out/")
	})

	t.Run("fallback session", func(t *testing.T) {
		var out tsApproveRun
		runTSClient(t, "approve.mjs", nil, &out, url, "fallback", "mcpgate_keeper"+server.SessionToolSuffix, "clean logs/ then var/")
		if len(out.Results) != 3 {
			t.Fatalf("%d results, want 3 (the message, two approvals): %+v", len(out.Results), out.Results)
		}
		checkWaiting(t, out.Results[0], "logs/")
		checkWaiting(t, out.Results[1], "var/")
		if id := out.Results[1].Meta[server.MetaSessionID]; out.Results[1].IsError || id == nil || id != out.Decisions[0]["session_id"] {
			t.Errorf("troupe_run_approve's answer while the turn waits again: %+v", out.Results[1])
		}
		var turn struct {
			SessionID string          `json:"session_id"`
			Turn      int             `json:"turn"`
			Agent     string          `json:"agent"`
			Reply     json.RawMessage `json:"reply"`
		}
		last := out.Results[2]
		if last.IsError || json.Unmarshal(last.StructuredContent, &turn) != nil || turn.Turn != 1 || turn.Agent != "keeper" ||
			string(turn.Reply) != `{"output":"not removed: Error: the user rejected this call; it was not run. Their message: keep it"}` ||
			turn.SessionID != out.Decisions[0]["session_id"] {
			t.Errorf("troupe_run_approve answered %s (%s)", last.StructuredContent, last.text())
		}
		checkRan(t, "logs/")
	})
}

// checkWaiting checks an answer that says its run or session waits for
// the decision on one rm_rf call, on path.
func checkWaiting(t *testing.T, res tsResult, path string) {
	t.Helper()
	if res.Meta[server.MetaStatus] != server.StatusWaitingForApproval {
		t.Fatalf("answer %+v (%s), want one that waits for approval", res, res.text())
	}
	raw, _ := json.Marshal(res.Meta[server.MetaApprovals])
	var list []struct {
		ID        string          `json:"id"`
		Agent     string          `json:"agent"`
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(raw, &list); err != nil || len(list) != 1 {
		t.Fatalf("_meta approvals %s (%v), want one call", raw, err)
	}
	a := list[0]
	if a.ID == "" || a.Agent != "keeper" || a.Tool != "rm_rf" || string(a.Arguments) != `{"path":"`+path+`"}` {
		t.Errorf("the call that waits: %+v", a)
	}
	text := res.text()
	for _, want := range []string{"waits for a human's decision", "call " + a.ID + ": agent keeper wants to call rm_rf", server.ToolRunApprove} {
		if !strings.Contains(text, want) {
			t.Errorf("the answer's text lacks %q:\n%s", want, text)
		}
	}
}
