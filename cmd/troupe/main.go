// Command troupe runs multi-agent LLM systems durably on Temporal. It
// serves the built-in example graphs; see package cli to build the same
// command over your own.
package main

import (
	"github.com/troupe-dev/troupe/cli"
	"github.com/troupe-dev/troupe/examples/codereview"
	"github.com/troupe-dev/troupe/examples/dealdesk"
)

func main() {
	cli.Main(
		cli.Graph{Graph: dealdesk.Graph(), Scenario: dealdesk.Scenario},
		cli.Graph{Graph: codereview.Graph(), Scenario: codereview.Scenario, Flags: []cli.Flag{
			{Name: codereview.VarRepo, Usage: "git repository to review: a local path or a URL", HostPath: true},
			{Name: codereview.VarRef, Usage: `commit, branch or tag to review against its first parent, or a range "A..B" / "A...B"`, Default: "HEAD"},
			{Name: codereview.VarOut, Usage: "directory for codereview-report.md and codereview-findings.json", Default: "."},
		}},
	)
}
