// Command troupe runs multi-agent LLM systems durably on Temporal. It
// serves the example graphs listed in package graphs (examples/dealdesk
// and examples/codereview); see package cli to build the same command
// over your own.
package main

import (
	"github.com/troupe-dev/troupe/cli"
	"github.com/troupe-dev/troupe/cmd/troupe/graphs"
)

func main() {
	cli.Main(graphs.Served()...)
}
