package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/runtime"
)

// approvalCommands are `troupe runs approvals|approve|reject`: the calls
// of a run's (or a session's) agent tree that wait for a human, and the
// decisions on them.
func approvalCommands(asJSON, wait *bool) []*cobra.Command {
	approvals := &cobra.Command{
		Use:   "approvals RUN",
		Short: "List the calls of a run's (or session's) agents that wait for approval",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withWorkerOf(cmd, args[0], *wait, func(cn *conn) error {
				list, err := cn.runs("", nil).Approvals(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				if *asJSON {
					if list == nil {
						list = []troupeclient.Approval{}
					}
					return printJSON(cmd.OutOrStdout(), list)
				}
				return printApprovals(cmd.OutOrStdout(), list)
			})
		},
	}
	var message, remember, arguments string
	decide := func(approve bool) func(cmd *cobra.Command, args []string) error {
		return func(cmd *cobra.Command, args []string) error {
			return withWorkerOf(cmd, args[0], *wait, func(cn *conn) error {
				d := troupeclient.Decision{ID: args[1], Approve: approve, Message: message, Remember: remember, Arguments: arguments}
				decided, err := cn.runs("", nil).Decide(cmd.Context(), args[0], d)
				if err != nil {
					return err
				}
				if *asJSON {
					return printJSON(cmd.OutOrStdout(), decided)
				}
				for _, d := range decided {
					fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", d.ID, decisionText(d))
				}
				return nil
			})
		}
	}
	approve := &cobra.Command{
		Use:   "approve RUN CALL",
		Short: "Approve a call that waits (CALL is its approval id, as `troupe runs approvals` lists it)",
		Args:  cobra.ExactArgs(2),
		RunE:  decide(true),
	}
	reject := &cobra.Command{
		Use:   "reject RUN CALL",
		Short: "Reject a call that waits; --message tells the model why",
		Args:  cobra.ExactArgs(2),
		RunE:  decide(false),
	}
	for _, c := range []*cobra.Command{approve, reject} {
		c.Flags().StringVar(&message, "message", "", "a message for the model")
		c.Flags().StringVar(&remember, "remember", "", `decide later calls alike for the rest of the run or session: "tool" (every call of the tool by that agent) or "arguments" (calls with the same arguments)`)
		c.Flags().Lookup("remember").NoOptDefVal = runtime.RememberTool
	}
	approve.Flags().StringVar(&arguments, "args", "", "JSON arguments that replace the model's")
	for _, c := range []*cobra.Command{approvals, approve, reject} {
		addWaitFlag(c.Flags(), wait)
	}
	return []*cobra.Command{approvals, approve, reject}
}

// printApprovals prints the calls that wait as a table.
func printApprovals(w io.Writer, list []troupeclient.Approval) error {
	if len(list) == 0 {
		_, err := fmt.Fprintln(w, "no call waits for approval")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CALL\tAGENT\tTOOL\tSINCE\tARGUMENTS")
	for _, a := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", a.ID, a.Agent, a.Tool, a.Since.Local().Format(time.DateTime), oneLine(a.Arguments))
	}
	return tw.Flush()
}

// decisionText says what a decision did.
func decisionText(d troupeclient.Decision) string {
	s := "rejected"
	if d.Approve {
		s = "approved"
	}
	if d.By == runtime.DecidedByRule {
		s += " (by a remembered decision)"
	}
	if d.Arguments != "" {
		s += " with arguments " + d.Arguments
	}
	if d.Message != "" {
		s += ": " + d.Message
	}
	return s
}

// approvalPrompt is how a call that waits is shown on a terminal.
func approvalPrompt(a troupeclient.Approval) string {
	args := a.Arguments
	var pretty map[string]any
	if json.Unmarshal([]byte(args), &pretty) == nil {
		if cmd, ok := pretty["cmd"].(string); ok && len(pretty) <= 3 {
			args = cmd
		}
	}
	return fmt.Sprintf("%s wants to run %s: %s", a.Agent, a.Tool, oneLine(args))
}

// asker asks on a terminal for the decisions on the calls of a run that
// wait, one at a time, in the order they came.
type asker struct {
	in  *bufio.Reader
	out io.Writer
	ids chan string
	// done are the approvals decided, as their events said.
	mu   sync.Mutex
	done map[string]bool
}

func newAsker(in io.Reader, out io.Writer) *asker {
	return &asker{in: bufio.NewReader(in), out: out, ids: make(chan string, 1024), done: map[string]bool{}}
}

// decided notes that the approval id was decided.
func (a *asker) decided(id string) {
	a.mu.Lock()
	a.done[id] = true
	a.mu.Unlock()
}

func (a *asker) isDecided(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.done[id]
}

// pending returns the call that waits under id once the root lists it
// (its agent records the request a moment before the root has it), or
// false once it was decided or ctx is done.
func (a *asker) pending(ctx context.Context, root approver, id string) (troupeclient.Approval, bool) {
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		list, err := root.Approvals(ctx)
		if err != nil && ctx.Err() == nil {
			fmt.Fprintf(a.out, "troupe: cannot read the approvals: %v\n", err)
		}
		if i := slices.IndexFunc(list, func(p troupeclient.Approval) bool { return p.ID == id }); i >= 0 {
			return list[i], true
		}
		if a.isDecided(id) {
			return troupeclient.Approval{}, false
		}
		select {
		case <-ctx.Done():
			return troupeclient.Approval{}, false
		case <-time.After(wait):
		}
	}
}

// waits queues the approval id to ask about.
func (a *asker) waits(id string) {
	select {
	case a.ids <- id:
	default: // A thousand questions queued: the rest are for troupe runs approve.
	}
}

// loop asks until ctx is done or the terminal closes.
func (a *asker) loop(ctx context.Context, root approver) {
	for {
		var id string
		select {
		case <-ctx.Done():
			return
		case id = <-a.ids:
		}
		p, ok := a.pending(ctx, root, id)
		if !ok {
			continue // Decided meanwhile, elsewhere or by a remembered decision.
		}
		if !a.ask(ctx, root, p) {
			return
		}
	}
}

// ask asks about one call until a decision is taken; false when the
// terminal closed.
func (a *asker) ask(ctx context.Context, root approver, p troupeclient.Approval) bool {
	for {
		fmt.Fprintf(a.out, "? %s\n  approve? [y]es, [n]o, [a]lways for this tool, [e]dit the arguments: ", approvalPrompt(p))
		answer, ok := a.line()
		if !ok {
			return false
		}
		dec := troupeclient.Decision{ID: p.ID}
		switch strings.ToLower(answer) {
		case "y", "yes":
			dec.Approve = true
		case "a", "always":
			dec.Approve, dec.Remember = true, runtime.RememberTool
		case "n", "no":
			fmt.Fprint(a.out, "  a message for the model (empty for none): ")
			if dec.Message, ok = a.line(); !ok {
				return false
			}
		case "e", "edit":
			fmt.Fprintf(a.out, "  arguments now: %s\n  new arguments (JSON): ", p.Arguments)
			if dec.Arguments, ok = a.line(); !ok {
				return false
			}
			dec.Approve = true
		default:
			continue
		}
		decided, err := root.Decide(ctx, dec)
		if err != nil {
			fmt.Fprintf(a.out, "  not taken: %v\n", err)
			if ctx.Err() != nil {
				return false
			}
			continue
		}
		for _, d := range decided {
			fmt.Fprintf(a.out, "  %s: %s\n", d.ID, decisionText(d))
		}
		return true
	}
}

func (a *asker) line() (string, bool) {
	s, err := a.in.ReadString('\n')
	if err != nil && s == "" {
		return "", false
	}
	return strings.TrimSpace(s), true
}

// approver is the root of an agent tree, which lists and decides its
// approvals (*client.Run, *client.Session).
type approver interface {
	Approvals(ctx context.Context) ([]troupeclient.Approval, error)
	Decide(ctx context.Context, d troupeclient.Decision) ([]troupeclient.Decision, error)
}
