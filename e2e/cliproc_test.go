package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/capabilities"
	"github.com/troupe-dev/troupe/cli"
	"github.com/troupe-dev/troupe/cmd/troupe/graphs"
	"github.com/troupe-dev/troupe/internal/testgraphs"
	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// The test binary doubles as the troupe command (with graphs.Served, the
// graphs cmd/troupe serves)
// when envCLI holds its arguments as a JSON array, so tests can hand a
// command line to third-party tools (an MCP client starting a stdio
// server, say) without building a binary.
const envCLI = "TROUPE_E2E_CLI_ARGS"

// envCLIPlod adds plodGraph, gateGraph, measureGraph and vaultGraph to the graphs the test binary
// serves as the troupe command.
const envCLIPlod = "TROUPE_E2E_CLI_PLOD"

// plodGraph is a run long enough to interrupt: one agent that calls a
// no-op tool for 40 turns (20 when the input starts with "medium"), each
// model answer taking 150 ms; or, when the input starts with "stream",
// that answers, after half a second, with a long text (stream_test.go).
func plodGraph() cli.Graph {
	tick := agents.MustFunctionTool("tick", "Does nothing.", func(_ context.Context, a bigArgs) (string, error) {
		return "tock " + a.N, nil
	})
	scenario := `rules:
  - name: plod-stream
    match: {instructions: "plod", input: "^stream"}
    respond:
      text: >-
        The plodder streams this answer for {{.User}}: a long reply that arrives piece by piece at every
        follower that asks for deltas, in this process or another, while the session's history records
        only the finished turn. It goes on for a while longer, so that it is far longer than the preview
        of a model_turn event, and a test can tell the streamed line from the recorded one.
      delay_ms: 500
  - name: plod-medium-done
    match: {instructions: "plod", input: "^medium", last_input: "^tock 20$"}
    respond: {text: "done after {{.Turn}} turns", delay_ms: 150}
  - name: plod-done
    match: {instructions: "plod", last_input: "^tock 40$"}
    respond: {text: "done after {{.Turn}} turns", delay_ms: 150}
  - name: plod-tick
    match: {instructions: "plod"}
    respond: {calls: [{name: tick, arguments: {n: "{{.Turn}}"}}], delay_ms: 150}
`
	return cli.Graph{
		Graph:    agents.MustGraph("plod", "plodder", &agents.Agent{Name: "plodder", Instructions: "plod", Tools: []agents.Tool{tick}, MaxTurns: 50}),
		Scenario: []byte(scenario),
	}
}

// gateGraph is a graph whose one agent removes what the user asks it to
// clean with a tool whose every call waits for approval. The tool notes
// each call it runs in $TROUPE_HOME/gate.log.
func gateGraph() cli.Graph {
	scenario := `rules:
  - name: gate-removed
    match: {instructions: "gatekeeper", last_input: "^removed "}
    respond: {text: "done: {{.LastOutput}}"}
  - name: gate-refused
    match: {instructions: "gatekeeper", last_input: "rejected this call"}
    respond: {text: "not removed: {{.LastOutput}}"}
  - name: gate-clean
    match: {instructions: "gatekeeper", last_input: '(?i)^clean \S+'}
    respond: {calls: [{name: rm_rf, arguments: {path: '{{match .LastUser ` + "`(?i)^clean (\\S+)`" + `}}'}}]}
`
	return cli.Graph{
		Graph:    testgraphs.Gate(func() string { return filepath.Join(os.Getenv("TROUPE_HOME"), "gate.log") }),
		Scenario: []byte(scenario),
	}
}

// measureGraph is a graph whose one agent answers with the size and the
// SHA-256 of the user's last message: a message that reached the model
// whole says so.
func measureGraph() cli.Graph {
	scenario := `rules:
  - name: measure
    match: {instructions: "measure"}
    respond: {text: "got {{len .LastUser}} bytes, sha256 {{sha256 .LastUser}}"}
`
	return cli.Graph{
		Graph:    agents.MustGraph("measure", "measurer", &agents.Agent{Name: "measurer", Instructions: "measure what you are given"}),
		Scenario: []byte(scenario),
	}
}

func cliProcess() int {
	var args []string
	if err := json.Unmarshal([]byte(os.Getenv(envCLI)), &args); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: "+envCLI+":", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	served := graphs.Served()
	if os.Getenv(envCLIPlod) != "" {
		served = append(served, plodGraph(), gateGraph(), measureGraph(), vaultGraph())
	}
	return cli.Execute(ctx, cli.Command(served, os.Stdout, os.Stderr), args)
}

// troupeCommand returns the troupe command line with args as a process,
// and the environment variable that makes the test binary act as it.
// Callers add the rest of the environment.
func troupeCommand(t testing.TB, args ...string) (*exec.Cmd, string) {
	t.Helper()
	js, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	env := envCLI + "=" + string(js)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), env)
	return cmd, env
}

// The canaries of vaultGraph: each must be sealed wherever Temporal keeps
// it (codec_test.go).
const (
	// canaryPrompt is a run's input: TestPayloadCodec starts the vault with it.
	canaryPrompt = "seal codec-canary-prompt-4b7e1"
	// canaryTool is the output of the vault's floor_price tool.
	canaryTool = "codec-canary-tool-9d21c"
	// canaryEnv is the value of DEAL_TOKEN in the vault's sandbox.
	canaryEnv = "codec-canary-env-1c5a8"
	// canaryApproval is the argument of the vault's grant call, which
	// waits for approval.
	canaryApproval = "codec-canary-approval-7e03f"
)

// vaultGraph is a graph whose one agent, vault, looks up a floor price
// with a tool whose output is canaryTool, checks in its sandbox (whose
// environment holds canaryEnv) that its token is set, and grants terms
// canaryApproval with a tool whose every call waits for approval.
func vaultGraph() cli.Graph {
	floor := agents.MustFunctionTool("floor_price", "Looks up a deal's floor price.", func(_ context.Context, a struct {
		Deal string `json:"deal"`
	}) (string, error) {
		return "floor price of " + a.Deal + ": " + canaryTool, nil
	})
	grant := agents.MustFunctionTool("grant", "Grants terms.", func(_ context.Context, a struct {
		Terms string `json:"terms"`
	}) (string, error) {
		return "granted", nil
	})
	scenario := `rules:
  - name: vault-done
    match: {instructions: "vault", last_input: "^granted$"}
    respond: {text: "sealed and done"}
  - name: vault-grant
    match: {instructions: "vault", last_input: "token-set"}
    respond: {calls: [{name: grant, arguments: {terms: "` + canaryApproval + `"}}]}
  - name: vault-token
    match: {instructions: "vault", last_input: "^floor price"}
    respond: {calls: [{name: exec_command, arguments: {cmd: 'test -n "$DEAL_TOKEN" && echo token-set'}}]}
  - name: vault-floor
    match: {instructions: "vault"}
    respond: {calls: [{name: floor_price, arguments: {deal: acme}}]}
`
	return cli.Graph{
		Graph: agents.MustGraph("vault", "vault", &agents.Agent{Name: "vault", Instructions: "vault: guards the deal's terms",
			Tools: []agents.Tool{floor, grant}, Approvals: []agents.Approval{agents.Always("grant")},
			Sandbox:      &agents.Sandbox{Manifest: sandbox.Manifest{Env: map[string]string{"DEAL_TOKEN": canaryEnv}}},
			Capabilities: []agents.Capability{capabilities.Shell()}}),
		Scenario: []byte(scenario),
	}
}
