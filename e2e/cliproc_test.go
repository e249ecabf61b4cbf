package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"

	"github.com/troupe-dev/troupe/cli"
	"github.com/troupe-dev/troupe/examples/builtin"
)

// The test binary doubles as the troupe command (with the built-in graphs)
// when envCLI holds its arguments as a JSON array, so tests can hand a
// command line to third-party tools (an MCP client starting a stdio
// server, say) without building a binary.
const envCLI = "TROUPE_E2E_CLI_ARGS"

func cliProcess() int {
	var args []string
	if err := json.Unmarshal([]byte(os.Getenv(envCLI)), &args); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: "+envCLI+":", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd := cli.Command(builtin.Graphs(), os.Stdout, os.Stderr)
	cmd.SetArgs(args)
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "troupe:", err)
		return 1
	}
	return 0
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
