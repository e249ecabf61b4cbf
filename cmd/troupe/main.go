// Command troupe runs multi-agent LLM systems durably on Temporal. It
// serves the built-in example graphs; see package cli to build the same
// command over your own.
package main

import (
	"github.com/troupe-dev/troupe/cli"
	"github.com/troupe-dev/troupe/examples/builtin"
)

func main() {
	cli.Main(builtin.Graphs()...)
}
