package cli

import (
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// printLimits writes, for each sandbox backend that reports them, how it
// bounds a session's resources on this host and which limits are not in
// force (sandbox.LimitReporter), as start-up lines.
func printLimits(w io.Writer, sandboxes map[string]sandbox.Client) {
	for _, name := range slices.Sorted(maps.Keys(sandboxes)) {
		if r, ok := sandboxes[name].(sandbox.LimitReporter); ok {
			fmt.Fprintf(w, "troupe: %s limits per session:\n%s", name, sandbox.FormatLimits(r.Enforced(), "  "))
		}
	}
}
