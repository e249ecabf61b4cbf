package codereview_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"
	"go.temporal.io/sdk/testsuite"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/examples/codereview"
	_ "github.com/troupe-dev/troupe/internal/binarychecksum" // no executable hashed in workflow code
	"github.com/troupe-dev/troupe/internal/exampletest"
	"github.com/troupe-dev/troupe/runtime/model/scripted"
	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// env runs the code review on a test environment (exampletest.Env): the
// reviewers' workspaces on the local backend may copy from repo, and
// nothing else of the host. It returns the scripted server, to count the
// rules it answered with, and the directory that holds the workspaces.
func env(t *testing.T, repo string) (*testsuite.TestWorkflowEnvironment, *scripted.Server, string) {
	t.Helper()
	return exampletest.Env(t, codereview.Graph(), codereview.Scenario, sandbox.Policy{AllowedRoots: []string{repo}})
}

// TestReview runs the whole code review offline, for the last commit as
// a user names it (HEAD, HEAD~1: the change from HEAD~1 to HEAD) and for
// a range: the coordinator fans out to the three sandboxed reviewers,
// which read the change in their workspaces, and writes the report; the
// test checks the typed summary and the two files on the host, whose
// findings quote what the reviewers' commands printed, and that both say
// which commits were reviewed.
func TestReview(t *testing.T) {
	repo := exampletest.ReviewRepo(t)
	g, err := git.PlainOpen(repo)
	if err != nil {
		t.Fatal(err)
	}
	head, err := g.Head()
	if err != nil {
		t.Fatal(err)
	}
	last, err := g.CommitObject(head.Hash())
	if err != nil {
		t.Fatal(err)
	}
	reviewed := last.ParentHashes[0].String()[:7] + ".." + head.Hash().String()[:7] + " (1 commit)"
	for _, ref := range []string{"HEAD", "HEAD~1", "HEAD~1..HEAD"} {
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

			// What every review of the repository writes, then what this
			// test asks more of: the counts in words, the high finding's
			// line in the report, no workspace left.
			exampletest.CheckReview(t, res.Output, out)
			sum, err := agents.Decode[codereview.Summary](res.Output)
			if err != nil {
				t.Fatalf("output %s: %v", res.Output, err)
			}
			if !strings.Contains(sum.Summary, "1 high, 1 medium, 1 low and 0 info findings") {
				t.Errorf("summary = %+v", sum)
			}
			if sum.Reviewed != reviewed || !strings.HasPrefix(sum.Summary, "Reviewed "+reviewed+": ") {
				t.Errorf("summary = %+v; want it to say it reviewed %s", sum, reviewed)
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
			md, err := os.ReadFile(filepath.Join(out, codereview.ReportFile))
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []string{"**high** `auth/login.go:4`", "# Code review\n\nReviewed " + reviewed + ".\n"} {
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
	repo := exampletest.ReviewRepo(t)
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
