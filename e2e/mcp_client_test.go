package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/workflows"
)

// everythingBin is the real MCP reference server from npm, installed by
// scripts/setup.sh.
func everythingBin(t testing.TB) string {
	t.Helper()
	bin, err := filepath.Abs("../tools/mcp/node_modules/.bin/mcp-server-everything")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("server-everything is not installed (%v): run scripts/setup.sh", err)
	}
	return bin
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startEverythingHTTP runs server-everything over streamable HTTP on port
// and returns its process once it listens.
func startEverythingHTTP(t testing.TB, port int) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(everythingBin(t), "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			conn.Close()
			return cmd
		}
		if time.Now().After(deadline) {
			t.Fatalf("server-everything did not listen on %d: %s", port, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// pidsWithEnv lists the processes whose environment holds kv.
func pidsWithEnv(kv string) []int {
	var pids []int
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", d.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, e := range bytes.Split(env, []byte{0}) {
			if string(e) == kv {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// waitForCall waits until the agent workflow id has called tool.
func waitForCall(t *testing.T, c client.Client, id, tool string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		evs, _ := queryEvents(c, id)
		for _, e := range evs {
			if e.Kind == troupe.EventToolCalled && e.Tool == tool {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never called %s", id, tool)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestMCPToolsEndToEnd runs an agent whose tools come from the real
// server-everything, over stdio and over streamable HTTP: the model is
// offered the prefixed, allowed tools; two calls run in one turn; the
// server is killed during a long operation and the model gets a clear
// tool error; the next call runs on a restarted server, and the run ends
// with its output.
func TestMCPToolsEndToEnd(t *testing.T) {
	parallel(t)
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			mark := fmt.Sprintf("TROUPE_E2E_MCP_MARK=%s-%d", transport, time.Now().UnixNano())
			name, value, _ := strings.Cut(mark, "=")
			srv := &agents.MCPServer{Name: "everything", Prefix: "ev_",
				Allow: []string{"echo", "get-sum", "trigger-long-running-operation", "get-env", "get-structured-content", "get-resource-reference"},
				Deny:  []string{"get-env"}}
			var port int
			var httpServer *exec.Cmd
			switch transport {
			case "stdio":
				srv.Command = []string{everythingBin(t), "stdio"}
				srv.Env = map[string]string{name: value}
			case "http":
				port = freePort(t)
				httpServer = startEverythingHTTP(t, port)
				srv.URL = fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
			}
			g := agents.MustGraph("mcp_"+transport, "user", &agents.Agent{Name: "user", Instructions: "mcp user",
				MCPServers: []*agents.MCPServer{srv}, MaxTurns: 5})
			if transport == "stdio" {
				// Registered before the worker, so it runs after the
				// worker stops: the worker's stdio servers end with it.
				t.Cleanup(func() {
					deadline := time.Now().Add(10 * time.Second)
					for len(pidsWithEnv(mark)) > 0 {
						if time.Now().After(deadline) {
							t.Errorf("server-everything processes %v outlived the worker", pidsWithEnv(mark))
							return
						}
						time.Sleep(50 * time.Millisecond)
					}
				})
			}
			c := dial(t)
			ms, url := modelServer(t)
			withGraph := func(cfg *workflows.Config) { cfg.Graphs = append(cfg.Graphs, g) }
			queue := startWorker(t, c, url, model.APIResponses, withGraph)
			// A second worker process of the same host: the calls must
			// still reach the process that holds the session.
			startWorkerOn(t, c, url, model.APIResponses, queue, withGraph)
			run, err := troupeclient.StartRun(t.Context(), c, queue, troupe.RunInput{Graph: g.Name(), Input: "use the tools"})
			if err != nil {
				t.Fatal(err)
			}
			agentID := run.GetID() + "/0-user"
			waitForCall(t, c, agentID, "ev_trigger-long-running-operation")
			time.Sleep(500 * time.Millisecond) // the call reaches the server
			switch transport {
			case "stdio":
				// One session, one process, though two workers serve the
				// agent.
				pids := pidsWithEnv(mark)
				if len(pids) != 1 {
					t.Fatalf("%d server-everything processes hold the mark, want 1", len(pids))
				}
				for _, pid := range pids {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			case "http":
				_ = syscall.Kill(-httpServer.Process.Pid, syscall.SIGKILL)
				_ = httpServer.Wait()
				startEverythingHTTP(t, port)
			}
			var res troupe.RunResult
			if err := run.Get(t.Context(), &res); err != nil {
				t.Fatalf("run: %v", err)
			}
			if out := string(res.Output); !strings.Contains(out, "Echo: after the restart") {
				t.Errorf("final output = %s", out)
			}
			results := map[string][]string{}
			for _, e := range eventsOf(t, c, agentID) {
				if e.Kind == troupe.EventToolResult {
					results[e.Tool] = append(results[e.Tool], e.Detail)
				}
			}
			want := map[string]string{
				"ev_echo":                           "Echo: hello from troupe",
				"ev_get-sum":                        "42",
				"ev_trigger-long-running-operation": "Error: MCP server everything died during the call to trigger-long-running-operation",
				// A structured result reaches the model as its JSON.
				"ev_get-structured-content": `"temperature"`,
				// A tool's own error (isError) reaches the model as an error.
				"ev_get-resource-reference": "Error: Invalid resourceId: -1",
			}
			for tool, w := range want {
				if len(results[tool]) == 0 || !strings.Contains(results[tool][0], w) {
					t.Errorf("%s results = %q, want the first to hold %q", tool, results[tool], w)
				}
			}
			if len(results["ev_echo"]) != 2 {
				t.Errorf("echo results = %q, want two", results["ev_echo"])
			}
			if ms.Requests("mcp-first") != 1 || ms.Requests("mcp-answer") != 1 {
				t.Errorf("model rules: first %d, answer %d", ms.Requests("mcp-first"), ms.Requests("mcp-answer"))
			}
			if *historiesDir != "" && transport == "stdio" {
				saveHistories(t, c, map[string]bool{run.GetID(): true, agentID: true}, *historiesDir, "mcp")
			}
			if transport == "stdio" {
				// The restarted server is stopped with the worker (t.Cleanup
				// runs the worker's stop); meanwhile exactly one runs.
				if n := len(pidsWithEnv(mark)); n != 1 {
					t.Errorf("%d server-everything processes hold the mark, want 1 (the restarted one)", n)
				}
			}
		})
	}
}

type noArgs struct{}

// TestMCPCallCancelled: cancelling a run during an MCP call cancels the
// call on the server (the client sends notifications/cancelled) and the
// run ends cancelled.
func TestMCPCallCancelled(t *testing.T) {
	parallel(t)
	started, cancelled := make(chan struct{}), make(chan struct{})
	s := sdk.NewServer(&sdk.Implementation{Name: "hang", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "hang", Description: "Never answers."}, func(ctx context.Context, _ *sdk.CallToolRequest, _ noArgs) (*sdk.CallToolResult, any, error) {
		close(started)
		<-ctx.Done()
		close(cancelled)
		return nil, nil, ctx.Err()
	})
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	t.Cleanup(srv.Close)
	g := agents.MustGraph("mcp_hang", "user", &agents.Agent{Name: "user", Instructions: "mcp hanger",
		MCPServers: []*agents.MCPServer{{Name: "peer", URL: srv.URL + "/mcp"}}})
	c := dial(t)
	_, url := modelServer(t)
	queue := startWorker(t, c, url, model.APIResponses, func(cfg *workflows.Config) {
		cfg.Graphs = append(cfg.Graphs, g)
		cfg.HeartbeatTimeout = 2 * time.Second
	})
	run, err := troupeclient.StartRun(t.Context(), c, queue, troupe.RunInput{Graph: g.Name(), Input: "hang"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(time.Minute):
		t.Fatal("the MCP call never reached the server")
	}
	if err := c.CancelWorkflow(t.Context(), run.GetID(), ""); err != nil {
		t.Fatal(err)
	}
	var ce *temporal.CanceledError
	if err := run.Get(t.Context(), nil); !errors.As(err, &ce) {
		t.Fatalf("run error = %v, want cancelled", err)
	}
	select {
	case <-cancelled:
	case <-time.After(time.Minute):
		t.Fatal("the server's call was not cancelled")
	}
}
