// Package graphs holds the graphs the troupe command serves, so that the
// command (cmd/troupe) and the tests that run it in process (e2e) serve
// the same list.
package graphs

import (
	"github.com/troupe-dev/troupe/cli"
	"github.com/troupe-dev/troupe/examples/codereview"
	"github.com/troupe-dev/troupe/examples/dealdesk"
)

// Served returns the graphs the troupe command serves, fresh on each
// call: the deal-desk and code-review examples, with their offline
// scenarios and the code-review flags (--repo, --ref, --out, each the run
// variable of the same name). A command over graphs of your own is
// cli.Main with your list.
func Served() []cli.Graph {
	return []cli.Graph{
		{Graph: dealdesk.Graph(), Scenario: dealdesk.Scenario, ScenarioFile: "examples/dealdesk/scenario.yaml"},
		{Graph: codereview.Graph(), Scenario: codereview.Scenario, ScenarioFile: "examples/codereview/scenario.yaml", DefaultInput: codereview.DefaultRequest, Flags: []cli.Flag{
			{Name: codereview.VarRepo, Usage: "git repository to review: a local path (sent to the workers through their blob store when they are not this process's) or a URL", HostPath: true, GitRepo: true},
			{Name: codereview.VarRef, Usage: `what to review: HEAD is the last commit; a revision R (HEAD~1, a commit, branch or tag) the change from R to HEAD; or a range "A..B" / "A...B"`, Default: "HEAD"},
			{Name: codereview.VarOut, Usage: "directory for codereview-report.md and codereview-findings.json", Default: "."},
		}},
	}
}
