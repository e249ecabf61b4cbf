package codereview_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/examples/codereview"
	"github.com/troupe-dev/troupe/memory"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/model/scripted"
	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/local"
	"github.com/troupe-dev/troupe/workflows"
)

// reviewRepo creates a git repository of two commits with go-git: a
// documented, tested package, then auth/login.go with an undocumented
// exported func on line 3, no test, and a hard-coded password on line 4.
func reviewRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	r, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	wt, err := r.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	commit := func(msg string, files map[string]string) {
		t.Helper()
		for name, content := range files {
			p := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := wt.Add(name); err != nil {
				t.Fatal(err)
			}
		}
		sig := &object.Signature{Name: "Tess", Email: "tess@example.com", When: time.Unix(1700000000, 0)}
		if _, err := wt.Commit(msg, &git.CommitOptions{Author: sig}); err != nil {
			t.Fatal(err)
		}
	}
	commit("shop: greet", map[string]string{
		"go.mod":       "module example.com/shop\n\ngo 1.22\n",
		"shop.go":      "package shop\n\n// Hello greets.\nfunc Hello() string { return \"hi\" }\n",
		"shop_test.go": "package shop\n\nimport \"testing\"\n\nfunc TestHello(t *testing.T) {\n\tif Hello() != \"hi\" {\n\t\tt.Fail()\n\t}\n}\n",
	})
	commit("auth: log in", map[string]string{
		"auth/login.go": "package auth\n\nfunc Login(user string) bool {\n\tpassword := \"hunter2\"\n\treturn user == \"admin\" && password != \"\"\n}\n",
	})
	return dir
}

// env runs the code review on a test environment: the offline scenario
// on the scripted model server, the reviewers' workspaces on the local
// backend, which may copy from repo (and nothing else of the host). It
// returns the scripted server, to count the rules it answered with, and
// the directory that holds the workspaces.
func env(t *testing.T, repo string) (*testsuite.TestWorkflowEnvironment, *scripted.Server, string) {
	t.Helper()
	sc, err := scripted.ParseScenario(codereview.Scenario)
	if err != nil {
		t.Fatal(err)
	}
	srv := scripted.New(sc)
	url, err := srv.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	m, err := model.New(model.Config{BaseURL: url, APIKey: "offline"})
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	lc, err := local.New(local.Config{Root: root, Policy: sandbox.Policy{AllowedRoots: []string{repo}}})
	if err != nil {
		t.Fatal(err)
	}
	store, err := blob.Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	r, err := workflows.NewRunner(workflows.Config{Graphs: []*agents.Graph{codereview.Graph()}, Model: m, Store: store,
		Sandboxes: map[string]sandbox.Client{local.Backend: lc}})
	if err != nil {
		t.Fatal(err)
	}
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(noMemorySignal{slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})})))
	e := s.NewTestWorkflowEnvironment()
	e.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute})
	r.Register(e)
	return e, srv, root
}

// noMemorySignal drops the SDK's log of the memory signal's failures.
// The coordinator has memory: after the run, its rollout is appended to
// the blob store and the scope's memory workflow is signalled with start,
// which needs a Temporal client, and a test environment gives its
// activities none. The run logs the failure and goes on, as it does for
// any memory failure; consolidation is not part of these runs.
type noMemorySignal struct{ slog.Handler }

func (h noMemorySignal) Handle(ctx context.Context, r slog.Record) error {
	signal := false
	r.Attrs(func(a slog.Attr) bool {
		signal = a.Key == "ActivityType" && a.Value.String() == memory.MemorySignalActivityName
		return !signal
	})
	if signal {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h noMemorySignal) WithAttrs(as []slog.Attr) slog.Handler {
	return noMemorySignal{h.Handler.WithAttrs(as)}
}

func (h noMemorySignal) WithGroup(name string) slog.Handler {
	return noMemorySignal{h.Handler.WithGroup(name)}
}

// TestReview runs the whole code review offline, for a commit and for a
// range: the coordinator fans out to the three sandboxed reviewers, which
// read the change in their workspaces, and writes the report; the test
// checks the typed summary and the two files on the host, whose findings
// quote what the reviewers' commands printed.
func TestReview(t *testing.T) {
	repo := reviewRepo(t)
	for _, ref := range []string{"HEAD", "HEAD~1..HEAD"} {
		t.Run(ref, func(t *testing.T) {
			e, srv, sandboxes := env(t, repo)
			out := filepath.Join(t.TempDir(), "review")
			e.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "codereview", Input: codereview.DefaultRequest,
				Vars: map[string]string{codereview.VarRepo: repo, codereview.VarRef: ref, codereview.VarOut: out}})
			if err := e.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			var res troupe.RunResult
			if err := e.GetWorkflowResult(&res); err != nil {
				t.Fatal(err)
			}
			// Three coordinator turns (fan out, write the report, sum up) and
			// two per reviewer (a command, then the findings).
			if res.Agent != "coordinator" || res.Turns != 3 || res.Usage.Requests != 9 {
				t.Errorf("agent %s, turns %d (want 3), model calls %d (want 9)", res.Agent, res.Turns, res.Usage.Requests)
			}
			for _, rule := range []string{"codereview-security-reviews", "codereview-tests-reviews", "codereview-api-design-reviews", "codereview-coordinator-writes-report"} {
				if n := srv.Count(rule); n != 1 {
					t.Errorf("rule %s answered %d times, want 1", rule, n)
				}
			}

			sum, err := agents.Decode[codereview.Summary](res.Output)
			if err != nil {
				t.Fatalf("output %s: %v", res.Output, err)
			}
			reportPath, findingsPath := filepath.Join(out, codereview.ReportFile), filepath.Join(out, codereview.FindingsFile)
			if sum.ReportPath != reportPath || sum.FindingsPath != findingsPath {
				t.Errorf("summary paths %s, %s; want %s, %s", sum.ReportPath, sum.FindingsPath, reportPath, findingsPath)
			}
			if sum.Counts != (codereview.Counts{High: 1, Medium: 1, Low: 1}) || !strings.Contains(sum.Summary, "1 high, 1 medium, 1 low and 0 info findings") {
				t.Errorf("summary = %+v", sum)
			}

			data, err := os.ReadFile(findingsPath)
			if err != nil {
				t.Fatal(err)
			}
			findings, err := codereview.ParseFindings(string(data))
			if err != nil {
				t.Fatalf("findings file: %v\n%s", err, data)
			}
			want := map[string]codereview.Finding{
				codereview.SeverityHigh:   {File: "auth/login.go", Line: 4}, // security: the password
				codereview.SeverityMedium: {File: "auth/login.go", Line: 1}, // tests: none in the change
				codereview.SeverityLow:    {File: "auth/login.go", Line: 3}, // api_design: Login undocumented
			}
			if len(findings) != len(want) {
				t.Fatalf("%d findings, want %d:\n%s", len(findings), len(want), data)
			}
			for _, f := range findings {
				if w, ok := want[f.Severity]; !ok || f.File != w.File || f.Line != w.Line {
					t.Errorf("finding %+v; want %s at %s:%d", f, f.Severity, w.File, w.Line)
				}
			}
			// Each reviewer quoted what its command printed in its sandbox.
			for _, quote := range []string{`password := \"hunter2\"`, "func Login(user string) bool", "auth/login.go changes with no test"} {
				if !strings.Contains(string(data), quote) {
					t.Errorf("findings lack %q:\n%s", quote, data)
				}
			}
			// Each reviewer's sandbox was stopped as it ended: no workspace is
			// left (a backend's own state is in dot files).
			left, err := os.ReadDir(sandboxes)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range left {
				if !strings.HasPrefix(d.Name(), ".") {
					t.Errorf("workspace %s left in %s", d.Name(), sandboxes)
				}
			}
			md, err := os.ReadFile(reportPath)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []string{"# Code review", "## security", "## tests", "## api_design", "**high** `auth/login.go:4`"} {
				if !strings.Contains(string(md), s) {
					t.Errorf("report lacks %q:\n%s", s, md)
				}
			}
		})
	}
}

// TestReviewBadRef runs the review of a ref the repository does not have:
// the coordinator's instructions fail the run before anything fans out,
// so no reviewer is asked and no report is written.
func TestReviewBadRef(t *testing.T) {
	repo := reviewRepo(t)
	e, srv, _ := env(t, repo)
	out := filepath.Join(t.TempDir(), "review")
	e.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "codereview", Input: codereview.DefaultRequest,
		Vars: map[string]string{codereview.VarRepo: repo, codereview.VarRef: "no-such-branch", codereview.VarOut: out}})
	err := e.GetWorkflowError()
	if err == nil || !strings.Contains(err.Error(), `"no-such-branch"`) {
		t.Fatalf("the run ended with %v, want a failure naming the ref", err)
	}
	if n := srv.Count("codereview-coordinator-fans-out"); n != 0 {
		t.Errorf("the coordinator fanned out %d times", n)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("the output directory exists: %v", err)
	}
}
