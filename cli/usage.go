package cli

// What runs and sessions spent, as the troupe commands print it (the
// words are package spend's, which the chat shares).

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/cli/spend"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/model"
)

// budgetFlag is a --budget flag's value: the budget it gives, or nil
// when the flag is not set.
func budgetFlag(cmd *cobra.Command, spec string) (*agents.Budget, error) {
	if !cmd.Flags().Changed("budget") {
		return nil, nil
	}
	b, err := spend.Parse(spec)
	if err != nil {
		return nil, usage(fmt.Errorf("--budget %w (want %s)", err, spend.Syntax))
	}
	return b, nil
}

// budgetUsage is the help of the --budget flags.
const budgetUsage = "over the graph's default: " + spend.Syntax + " for none"

// printSpend prints what a run or session spent (total, cost, per agent)
// and where its budget stands (rep; nil for none), each line after
// indent. Nothing spent and no budget prints nothing.
func printSpend(w io.Writer, indent string, total model.Usage, cost float64, us runtime.Usages, rep *runtime.BudgetReport) {
	if total.Requests == 0 && len(us) == 0 && rep == nil {
		return
	}
	fmt.Fprintf(w, "%susage: %s\n", indent, spend.Usage(total, cost))
	if len(us) > 1 {
		for _, line := range spend.Table(us) {
			fmt.Fprintf(w, "%s  %s\n", indent, line)
		}
	}
	if rep != nil {
		fmt.Fprintf(w, "%sbudget %s\n", indent, spend.Budget(rep))
	}
}
