package mcp_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/mock"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/mcp"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/workflowstest"
)

type addArgs struct {
	A int `json:"a"`
	B int `json:"b"`
}

type unlockArgs struct{}

// mcpPeer is an in-process MCP server over streamable HTTP: "add" adds,
// "unlock" adds the tool "secret" (so the server's tool list changes) and
// "wipe" must never be called (it needs approval).
type mcpPeer struct {
	url   string
	calls sync.Map // tool name → *atomic.Int64
	keys  sync.Map // tool name → the idempotency key of its last call's _meta
}

func (p *mcpPeer) count(tool string) int64 {
	v, _ := p.calls.LoadOrStore(tool, new(atomic.Int64))
	return v.(*atomic.Int64).Load()
}

func (p *mcpPeer) hit(tool string) {
	v, _ := p.calls.LoadOrStore(tool, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

func startPeer(t *testing.T) *mcpPeer {
	t.Helper()
	p := &mcpPeer{}
	s := sdk.NewServer(&sdk.Implementation{Name: "peer", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "add", Description: "Adds."}, func(_ context.Context, req *sdk.CallToolRequest, a addArgs) (*sdk.CallToolResult, any, error) {
		p.hit("add")
		p.keys.Store("add", req.Params.GetMeta()[mcp.MetaIdempotencyKey])
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprint(a.A + a.B)}}}, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "unlock", Description: "Unlocks the secret tool."}, func(_ context.Context, _ *sdk.CallToolRequest, _ unlockArgs) (*sdk.CallToolResult, any, error) {
		p.hit("unlock")
		sdk.AddTool(s, &sdk.Tool{Name: "secret", Description: "Tells the secret."}, func(context.Context, *sdk.CallToolRequest, unlockArgs) (*sdk.CallToolResult, any, error) {
			p.hit("secret")
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "the secret is 7"}}}, nil, nil
		})
		// The SDK debounces tools/list_changed (10 ms) and sends it on
		// its own stream; answering later lets it arrive first, as from
		// a server that notifies before it answers.
		time.Sleep(200 * time.Millisecond)
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "unlocked"}}}, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "wipe", Description: "Wipes everything."}, func(context.Context, *sdk.CallToolRequest, unlockArgs) (*sdk.CallToolResult, any, error) {
		p.hit("wipe")
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "wiped"}}}, nil, nil
	})
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	t.Cleanup(srv.Close)
	p.url = srv.URL
	return p
}

func toolNames(req model.Request) []string {
	var names []string
	for _, s := range req.Tools {
		names = append(names, s.Name)
	}
	return names
}

// TestMCPTools runs an agent whose tools come from an MCP server: the
// model sees them prefixed and next to the agent's own; their calls run in
// the same turn as a function tool's; a call that changes the server's
// tool list makes the next turn offer the new tool; a tool whose server
// requires approval waits for a decision, and a rejected call never
// reaches the server. A call's request carries its idempotency key in
// _meta, the key the agent's own tools get for a call of that id.
func TestMCPTools(t *testing.T) {
	peer := startPeer(t)
	var ownCall agents.RunContext
	own := agents.MustFunctionTool("own", "The agent's own tool.", func(ctx context.Context, _ unlockArgs) (string, error) {
		ownCall, _ = agents.RunContextFrom(ctx)
		return "own done", nil
	})
	g := agents.MustGraph("mcp", "user", &agents.Agent{Name: "user", Instructions: "user: mcp", Tools: []agents.Tool{own},
		MCPServers: []*agents.MCPServer{{Name: "peer", URL: peer.url + "/mcp", Prefix: "p_",
			RequireApproval: func(tool string) bool { return tool == "wipe" }}}})
	var offered [][]string
	var outputs []string
	m := &workflowstest.FuncModel{Func: func(req model.Request) []agents.Item {
		offered = append(offered, toolNames(req))
		switch len(offered) {
		case 1:
			return []agents.Item{workflowstest.Call("1a", "p_add", `{"a":2,"b":40}`), workflowstest.Call("1b", "own", `{}`), workflowstest.Call("1c", "p_unlock", `{}`)}
		case 2:
			return []agents.Item{workflowstest.Call("2a", "p_secret", `{}`), workflowstest.Call("2b", "p_wipe", `{}`)}
		}
		for _, it := range req.Input {
			if it.Type == agents.ItemFunctionCallOutput {
				outputs = append(outputs, it.CallID+"="+it.Output)
			}
		}
		return []agents.Item{agents.AssistantMessage("done")}
	}}
	store, err := blob.Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	r, err := workflows.NewRunner(workflows.Config{Graphs: []*agents.Graph{g}, Model: m, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	env := workflowstest.NewEnv()
	r.Register(env)
	var waiting []runtime.ApprovalRequest
	var rejected *workflowstest.Update
	env.RegisterDelayedCallback(func() {
		waiting = workflowstest.Pending(t, env)
		if len(waiting) == 1 {
			rejected = workflowstest.Decide(env, runtime.ApprovalDecision{ID: waiting[0].ID, Message: "never wipe"})
		}
	}, time.Minute)
	env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "mcp", Input: "go"})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(waiting) != 1 || waiting[0].Tool != "p_wipe" || waiting[0].Kind != "mcp" {
		t.Fatalf("waiting for approval: %+v, want p_wipe alone", waiting)
	}
	rejected.Completed(t)
	if len(offered) != 3 {
		t.Fatalf("model turns = %d, want 3", len(offered))
	}
	if want := []string{"own", "p_add", "p_unlock", "p_wipe"}; !slices.Equal(offered[0], want) {
		t.Errorf("first turn offered %q, want %q", offered[0], want)
	}
	if !slices.Contains(offered[1], "p_secret") {
		t.Errorf("after unlock the model was offered %q, without p_secret", offered[1])
	}
	joined := strings.Join(outputs, "\n")
	for _, want := range []string{"1a=42", "1b=own done", "1c=unlocked", "2a=the secret is 7", "2b=Error: the user rejected this call; it was not run. Their message: never wipe"} {
		if !strings.Contains(joined, want) {
			t.Errorf("tool outputs lack %q:\n%s", want, joined)
		}
	}
	if n := peer.count("wipe"); n != 0 {
		t.Errorf("wipe, which needs approval, reached the server %d time(s)", n)
	}
	key, _ := peer.keys.Load("add")
	if ownCall.CallID != "1b" || ownCall.IdempotencyKey() == "" {
		t.Fatalf("the own tool ran for %+v, want call 1b with a key", ownCall)
	}
	if want := ownCall.ForCall("1a").IdempotencyKey(); key != want {
		t.Errorf("the server saw the idempotency key %v in _meta, want %q", key, want)
	}
}

// TestMCPToolClash fails an agent whose MCP tool is named like its own
// tool, with an error that says what to do.
func TestMCPToolClash(t *testing.T) {
	peer := startPeer(t)
	add := agents.MustFunctionTool("add", "Adds.", func(context.Context, addArgs) (string, error) { return "", nil })
	g := agents.MustGraph("clash", "user", &agents.Agent{Name: "user", Instructions: "user: clash", Tools: []agents.Tool{add},
		MCPServers: []*agents.MCPServer{{Name: "peer", URL: peer.url + "/mcp"}}})
	store, _ := blob.Open(context.Background(), "mem://")
	r, err := workflows.NewRunner(workflows.Config{Graphs: []*agents.Graph{g}, Store: store,
		Model: &workflowstest.FuncModel{Func: func(model.Request) []agents.Item { return []agents.Item{agents.AssistantMessage("x")} }}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	env := workflowstest.NewEnv()
	r.Register(env)
	env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "clash", Input: "go"})
	err = env.GetWorkflowError()
	if troupe.ErrorType(err) != troupe.ErrMCP || !strings.Contains(err.Error(), "set a Prefix") {
		t.Fatalf("error = %v (type %q), want %s naming the fix", err, troupe.ErrorType(err), troupe.ErrMCP)
	}
}

// TestMCPHostLost: when the process holding an agent's MCP sessions is
// gone (its queue's task is never picked up), the model is told that the
// call was not made, the tools are listed again, and the next call works.
func TestMCPHostLost(t *testing.T) {
	peer := startPeer(t)
	g := agents.MustGraph("lost", "user", &agents.Agent{Name: "user", Instructions: "user: lost",
		MCPServers: []*agents.MCPServer{{Name: "peer", URL: peer.url + "/mcp"}}})
	var outputs []string
	turn := 0
	m := &workflowstest.FuncModel{Func: func(req model.Request) []agents.Item {
		turn++
		if turn <= 2 {
			return []agents.Item{workflowstest.Call(fmt.Sprint(turn), "add", `{"a":1,"b":2}`)}
		}
		for _, it := range req.Input {
			if it.Type == agents.ItemFunctionCallOutput {
				outputs = append(outputs, it.Output)
			}
		}
		return []agents.Item{agents.AssistantMessage("done")}
	}}
	store, _ := blob.Open(context.Background(), "mem://")
	r, err := workflows.NewRunner(workflows.Config{Graphs: []*agents.Graph{g}, Model: m, Store: store, Host: "gone"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	env := workflowstest.NewEnv()
	r.Register(env)
	var lists []string
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == mcp.ToolsActivityName {
			lists = append(lists, info.TaskQueue)
		}
	})
	calls := 0
	env.OnActivity(mcp.CallActivityName, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in mcp.CallInput) (agents.Item, error) {
			calls++
			if calls == 1 {
				return agents.Item{}, temporal.NewTimeoutError(enums.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)
			}
			return r.MCP().Call(ctx, in)
		})
	env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "lost", Input: "go"})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(outputs) != 2 || !strings.Contains(outputs[0], "was not made: the worker holding MCP server peer is gone") || outputs[1] != "3" {
		t.Errorf("tool outputs = %q", outputs)
	}
	// The tools are listed before each of the three turns (with no
	// StartWorkers, on the workflow's own queue).
	if len(lists) != 3 {
		t.Errorf("listings ran on queues %q, want three", lists)
	}
}

// A stdio MCP server whose command cannot run: the worker refuses to
// start and names it (CheckHost), and listing its tools fails at once,
// not after retries.
func TestMCPCommandMissing(t *testing.T) {
	store, _ := blob.Open(context.Background(), "mem://")
	graph := func(command string) *agents.Graph {
		return agents.MustGraph("mcp_missing", "user", &agents.Agent{Name: "user", Instructions: "user",
			MCPServers: []*agents.MCPServer{{Name: "ghost", Command: []string{command, "stdio"}}}})
	}
	ok, err := workflows.NewRunner(workflows.Config{Graphs: []*agents.Graph{graph("sh")}, Model: &workflowstest.FuncModel{}, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	if err := ok.CheckHost(); err != nil {
		t.Errorf("CheckHost with sh as the command: %v", err)
	}
	for _, command := range []string{"troupe-no-such-mcp-server", "/nonexistent/troupe-mcp"} {
		r, err := workflows.NewRunner(workflows.Config{Graphs: []*agents.Graph{graph(command)}, Model: &workflowstest.FuncModel{}, Store: store})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if err := r.CheckHost(); err == nil || !strings.Contains(err.Error(), `agent user: MCP server ghost: command "`+command+`" cannot run on this worker`) {
			t.Errorf("CheckHost = %v, want it to name the server and the command", err)
		}
		_, err = r.MCP().Tools(context.Background(), mcp.ToolsInput{Graph: "mcp_missing", Agent: "user"})
		var ae *temporal.ApplicationError
		if !errors.As(err, &ae) || !ae.NonRetryable() || ae.Type() != troupe.ErrMCP {
			t.Errorf("MCPTools with the command %s = %v, want a non-retryable %s", command, err, troupe.ErrMCP)
		}
	}
}

// CheckHost takes a relative command in the server's Dir, as exec.Cmd does.
func TestCheckHostCommandInDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "server"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	g := agents.MustGraph("rel", "a", &agents.Agent{Name: "a", Instructions: "a",
		MCPServers: []*agents.MCPServer{{Name: "local", Command: []string{"./server"}, Dir: dir}}})
	store, _ := blob.Open(context.Background(), "mem://")
	r, err := workflows.NewRunner(workflows.Config{Graphs: []*agents.Graph{g}, Model: &workflowstest.FuncModel{}, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.CheckHost(); err != nil {
		t.Errorf("CheckHost refuses a server that starts: %v", err)
	}
}
