package workflowstest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	_ "github.com/troupe-dev/troupe/internal/binarychecksum" // no executable hashed in workflow code
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/local"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/lease"
)

// NewEnv is a test workflow environment that logs errors only.
//
// The test environment runs activities in the workflow's goroutine, so
// its deadlock detector (a second by default) would time real activities
// (a sandbox command, say) on a loaded machine; here it is a minute.
// Workflow code that blocks is caught by workflowcheck (make lint).
func NewEnv() *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))))
	env := s.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute})
	return env
}

// Serve builds the Runner of cfg, with a mem:// blob store when cfg names
// none, and registers its workflows and activities on env.
func Serve(env *testsuite.TestWorkflowEnvironment, cfg workflows.Config) (*workflows.Runner, error) {
	if cfg.Store == nil {
		store, err := blob.Open(context.Background(), "mem://")
		if err != nil {
			return nil, fmt.Errorf("workflowstest: a mem:// store: %w", err)
		}
		cfg.Store = store
	}
	r, err := workflows.NewRunner(cfg)
	if err != nil {
		return nil, err
	}
	r.Register(env)
	return r, nil
}

// NewRunnerEnv is a quiet test environment (NewEnv) serving cfg (Serve);
// it fails t if the Runner cannot be built.
func NewRunnerEnv(t testing.TB, cfg workflows.Config) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	env := NewEnv()
	if _, err := Serve(env, cfg); err != nil {
		t.Fatal(err)
	}
	return env
}

// MemStore is a new, empty mem:// blob store.
func MemStore(t testing.TB) *blob.Store {
	t.Helper()
	store, err := blob.Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	return store
}

// LocalEnv is a test environment serving g with model m, a mem:// store
// and the local sandbox backend under the root it returns, the sandboxes
// idle 5 minutes before they suspend; tweak, when set, changes the
// runner's config.
func LocalEnv(t testing.TB, g *agents.Graph, m model.Model, tweak func(*workflows.Config)) (*testsuite.TestWorkflowEnvironment, string) {
	t.Helper()
	root := t.TempDir()
	lc, err := local.New(local.Config{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	cfg := workflows.Config{Graphs: []*agents.Graph{g}, Model: m, Store: MemStore(t),
		Sandboxes: map[string]sandbox.Client{"local": lc}, SandboxIdleTimeout: 5 * time.Minute}
	if tweak != nil {
		tweak(&cfg)
	}
	return NewRunnerEnv(t, cfg), root
}

// Leftovers lists the workspaces still on disk under a local sandbox
// client's root (LocalEnv's).
func Leftovers(t testing.TB, root string) []string {
	t.Helper()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.Name() != lease.StoreDirName { // the store's identity, not a workspace
			names = append(names, e.Name())
		}
	}
	return names
}

// Result is the result of the run env executed: an error when the run
// failed; it fails t when the run did not complete.
func Result(t testing.TB, env *testsuite.TestWorkflowEnvironment) (*troupe.RunResult, error) {
	t.Helper()
	if !env.IsWorkflowCompleted() {
		t.Fatal("the run did not complete")
	}
	if err := env.GetWorkflowError(); err != nil {
		return nil, err
	}
	var res troupe.RunResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	return &res, nil
}

// FinalOutput is the output text of the run env executed; it fails t
// unless the run completed without error.
func FinalOutput(t testing.TB, env *testsuite.TestWorkflowEnvironment) string {
	t.Helper()
	res, err := Result(t, env)
	if err != nil {
		t.Fatal(err)
	}
	var text string
	_ = json.Unmarshal(res.Output, &text)
	return text
}
