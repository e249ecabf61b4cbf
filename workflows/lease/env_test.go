package lease_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/capabilities"
	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/local"
	"github.com/troupe-dev/troupe/workflows/lease"
	"github.com/troupe-dev/troupe/workflows/workflowstest"
)

// A sandbox's environment, resolved on its worker, never leaves the host
// in clear: the State that SandboxCreate returns to the workflow (and its
// history) holds no value of it, yet a worker started again on the host
// (another Activities, nothing cached, the same spool) runs the sandbox's
// commands with it. Another host, or a tampered State, cannot open it:
// the sandbox is gone for it, and the workflow makes it again.
func TestSandboxEnvStaysOnHost(t *testing.T) {
	const secret = "tok-3f9a7c-canary"
	root, spool := t.TempDir(), t.TempDir()
	lc, err := local.New(local.Config{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	g := agents.MustGraph("env", "worker", &agents.Agent{
		Name: "worker", Instructions: "worker", Capabilities: capabilities.Default(),
		Sandbox: &agents.Sandbox{ManifestFor: func(_ context.Context, rc agents.RunContext) (sandbox.Manifest, error) {
			return sandbox.Manifest{Env: map[string]string{"DEAL_TOKEN": secret + rc.RunID}}, nil
		}},
	})
	activities := func(spool string) *lease.Activities {
		return &lease.Activities{Sandboxes: map[string]sandbox.Client{"local": lc}, DefaultBackend: "local", SpoolDir: spool,
			Agent: func(graph, name string) (*agents.Graph, *agents.Agent, error) {
				a, err := g.Agent(name)
				return g, a, err
			}}
	}
	ctx := context.Background()
	create := func(id string) *lease.SandboxInfo {
		t.Helper()
		info, err := activities(spool).SandboxCreate(ctx, lease.SandboxCreateInput{Graph: "env", Agent: "worker", WorkflowID: id, Run: agents.RunContext{RunID: id}})
		if err != nil {
			t.Fatal(err)
		}
		return info
	}
	info, other := create("wf-env"), create("wf-other")
	out, _ := json.Marshal(info)
	if strings.Contains(string(out), secret) || len(info.State.Env) != 0 {
		t.Fatalf("SandboxCreate's result holds the environment in clear: %s", out)
	}
	run := func(a *lease.Activities, st sandbox.State) (string, error) {
		item, err := a.SandboxTool(ctx, lease.SandboxToolInput{Sandbox: st, Tool: troupe.ToolInput{Graph: "env", Agent: "worker",
			Call: workflowstest.Call("c1", "exec_command", `{"cmd":"echo token=$DEAL_TOKEN","workdir":null,"yield_time_ms":null,"max_output_tokens":null}`)}})
		return item.Output, err
	}
	// A worker started again on this host: nothing cached, the same spool.
	if got, err := run(activities(spool), info.State); err != nil || !strings.Contains(got, "token="+secret+"wf-env\n") {
		t.Fatalf("a command after the worker started again: %q, %v; want the environment", got, err)
	}
	// A State from before environments were sealed still works.
	plain := info.State
	plain.Data, plain.Env = nil, map[string]string{"DEAL_TOKEN": "old"}
	if got, err := run(activities(spool), plain); err != nil || !strings.Contains(got, "token=old") {
		t.Fatalf("a command with an unsealed State: %q, %v", got, err)
	}
	// Another key (another host's spool), or one sandbox's sealed
	// environment put in another's State: gone, never run with a wrong
	// environment.
	moved := other.State
	moved.Data = info.State.Data
	for name, tc := range map[string]struct {
		spool string
		st    sandbox.State
	}{"another key": {t.TempDir(), info.State}, "moved": {spool, moved}} {
		if got, err := run(activities(tc.spool), tc.st); troupe.ErrorType(err) != troupe.ErrSandboxGone {
			t.Errorf("%s: %q, %v; want %s", name, got, err, troupe.ErrSandboxGone)
		}
	}
	// A key others can read is refused, never used.
	if err := os.Chmod(filepath.Join(spool, "troupe-sandbox-env.key"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := activities(spool).SandboxCreate(ctx, lease.SandboxCreateInput{Graph: "env", Agent: "worker", WorkflowID: "wf-third"}); err == nil || !strings.Contains(err.Error(), "want a regular file of mode 0600") {
		t.Errorf("SandboxCreate with a key others can read: %v", err)
	}
	for _, st := range []sandbox.State{info.State, other.State} {
		if err := activities(spool).SandboxStop(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
}
