// Command troupe runs multi-agent LLM systems durably on Temporal. It
// serves the built-in example graphs; see package cli to build the same
// command over your own.
package main

import (
	"github.com/troupe-dev/troupe/cli"
	"github.com/troupe-dev/troupe/examples/dealdesk"
)

func main() {
	cli.Main(cli.Graph{Graph: dealdesk.Graph(), Scenario: dealdesk.Scenario})
}
