// Package builtin lists the graphs the troupe command serves: the
// deal-desk and code-review examples, with their offline scenarios and the
// code-review flags.
package builtin

import (
	"github.com/troupe-dev/troupe/cli"
	"github.com/troupe-dev/troupe/examples/codereview"
	"github.com/troupe-dev/troupe/examples/dealdesk"
)

// Graphs returns the built-in graphs, fresh on each call.
func Graphs() []cli.Graph {
	return []cli.Graph{
		{Graph: dealdesk.Graph(), Scenario: dealdesk.Scenario},
		{Graph: codereview.Graph(), Scenario: codereview.Scenario, DefaultInput: codereview.DefaultRequest, Flags: []cli.Flag{
			{Name: codereview.VarRepo, Usage: "git repository to review: a local path or a URL", HostPath: true},
			{Name: codereview.VarRef, Usage: `commit, branch or tag to review against its first parent, or a range "A..B" / "A...B"`, Default: "HEAD"},
			{Name: codereview.VarOut, Usage: "directory for codereview-report.md and codereview-findings.json", Default: "."},
		}},
	}
}
