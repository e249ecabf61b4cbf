package codereview

import (
	"context"
	"fmt"
	"strings"

	"github.com/troupe-dev/troupe/agents"
)

// FindingsHaveFiles is the reviewers' output guardrail: a finding must
// name the file it is about, or the report could not point the user at
// it. A reviewer whose findings name none trips it, and the review ends
// with troupe.GuardrailTripped, naming the reviewer and the findings,
// rather than write a report with findings no one can place.
var FindingsHaveFiles = agents.CheckOutput("findings_have_files", func(_ context.Context, _ agents.RunContext, f Findings) (agents.GuardrailVerdict, error) {
	var without []string
	for _, x := range f.Findings {
		if strings.TrimSpace(x.File) == "" {
			without = append(without, fmt.Sprintf("%q", x.Message))
		}
	}
	if len(without) > 0 {
		return agents.Trip(fmt.Sprintf("%s reviewer gave %d finding(s) without a file: %s", f.Reviewer, len(without), strings.Join(without, ", "))), nil
	}
	return agents.Pass(), nil
})
