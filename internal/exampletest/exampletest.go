// Package exampletest holds what the tests of the example graphs
// (examples/dealdesk, examples/codereview, and e2e's runs of them) share:
// a test environment that runs a graph offline (Env), one request of an
// agent to a scenario (Asker), the repository a code review's tests
// review (ReviewRepo), and the check of what such a review wrote
// (CheckReview).
package exampletest

import (
	"context"
	"encoding/json"
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

// Env runs graph g offline on a test environment: its scenario on the
// scripted model server, its agents' workspaces on the local backend,
// under policy (which host paths they may copy from), and a mem:// blob
// store. It returns the scripted server, to count the rules it answered
// with, and the directory that holds the workspaces. The environment logs
// errors only, but those of the memory signal (see noMemorySignal). opts
// configure the scripted server (scripted.WithLog, to see the requests
// it rejects).
func Env(t testing.TB, g *agents.Graph, scenario []byte, policy sandbox.Policy, opts ...scripted.Option) (*testsuite.TestWorkflowEnvironment, *scripted.Server, string) {
	t.Helper()
	srv, m := serve(t, scenario, opts...)
	root := t.TempDir()
	lc, err := local.New(local.Config{Root: root, Policy: policy})
	if err != nil {
		t.Fatal(err)
	}
	store, err := blob.Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	r, err := workflows.NewRunner(workflows.Config{Graphs: []*agents.Graph{g}, Model: m, Store: store,
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
// The examples' coordinators have memory: after the run, its rollout is
// appended to the blob store and the scope's memory workflow is signalled
// with start, which needs a Temporal client, and a test environment gives
// its activities none. The run logs the failure and goes on, as it does
// for any memory failure; consolidation is not part of these runs.
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

// Asker sends single requests of a graph's agents to a scenario: the
// scripted server over HTTP, through the model client a worker uses, so a
// test sees which rule answers a conversation without running it.
type Asker struct {
	t     testing.TB
	g     *agents.Graph
	srv   *scripted.Server
	model model.Model
	vars  map[string]string
}

// NewAsker serves scenario and asks it as g's agents would, with vars as
// the run variables of their instructions.
func NewAsker(t testing.TB, g *agents.Graph, scenario []byte, vars map[string]string) *Asker {
	t.Helper()
	srv, m := serve(t, scenario)
	return &Asker{t: t, g: g, srv: srv, model: m, vars: vars}
}

// serve serves scenario on a scripted server (opts configure it) for the
// test's time, and returns it with the model client a worker would use.
func serve(t testing.TB, scenario []byte, opts ...scripted.Option) (*scripted.Server, model.Model) {
	t.Helper()
	sc, err := scripted.ParseScenario(scenario)
	if err != nil {
		t.Fatal(err)
	}
	srv := scripted.New(sc, opts...)
	url, err := srv.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	m, err := model.New(model.Config{BaseURL: url, APIKey: "offline"})
	if err != nil {
		t.Fatal(err)
	}
	return srv, m
}

// Ask sends agent's turn over input, offering it tools (by name, any
// arguments), and returns the rule that answered and the answer. A
// request no rule answers returns the model client's error.
func (a *Asker) Ask(agent string, input []agents.Item, tools ...string) (string, *model.Response, error) {
	a.t.Helper()
	ag, err := a.g.Agent(agent)
	if err != nil {
		a.t.Fatal(err)
	}
	instructions, err := ag.ResolveInstructions(context.Background(), agents.RunContext{Vars: a.vars})
	if err != nil {
		a.t.Fatal(err)
	}
	req := model.Request{Model: "scripted", Instructions: instructions, Input: input}
	for _, name := range tools {
		req.Tools = append(req.Tools, agents.ToolSpec{Name: name, Parameters: json.RawMessage(`{"type":"object","properties":{}}`)})
	}
	if ag.Output != nil {
		spec := ag.Output.Spec()
		req.Output = &spec
	}
	before := len(a.srv.Calls())
	resp, err := a.model.Respond(context.Background(), req)
	if err != nil {
		return "", nil, err
	}
	calls := a.srv.Calls()
	if len(calls) != before+1 {
		a.t.Fatalf("the server recorded %d answers, want 1", len(calls)-before)
	}
	return calls[len(calls)-1].Rule, resp, nil
}

// ReviewRepo creates a git repository of two commits with go-git: a
// documented, tested package, then auth/login.go with an undocumented
// exported func on line 3, no test, and a hard-coded password on line 4.
func ReviewRepo(t testing.TB) string {
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

// CheckReview checks what a code review of ReviewRepo wrote into out,
// given the run's output: the summary, the report and the findings of the
// three reviewers, each quoting the change.
func CheckReview(t testing.TB, output json.RawMessage, out string) {
	t.Helper()
	sum, err := agents.Decode[codereview.Summary](output)
	if err != nil {
		t.Fatalf("output %s: %v", output, err)
	}
	reportPath, findingsPath := filepath.Join(out, codereview.ReportFile), filepath.Join(out, codereview.FindingsFile)
	if sum.ReportPath != reportPath || sum.FindingsPath != findingsPath {
		t.Errorf("summary paths %s, %s; want %s, %s", sum.ReportPath, sum.FindingsPath, reportPath, findingsPath)
	}
	if sum.Counts != (codereview.Counts{High: 1, Medium: 1, Low: 1}) || !strings.Contains(sum.Summary, "1 high") {
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
	md, err := os.ReadFile(reportPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"# Code review", "## security", "## tests", "## api_design", "`auth/login.go:4`", "**high**"} {
		if !strings.Contains(string(md), s) {
			t.Errorf("report lacks %q:\n%s", s, md)
		}
	}
}
