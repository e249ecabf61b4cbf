package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/temporal"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/cli/spend"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/runtime"
)

// sessionsCommand is `troupe sessions`: conversations that live on the
// Temporal server the other commands use (the one their connection
// settings name, else the server of TROUPE_HOME), served by the workers of `troupe dev` or
// `troupe worker`.
func sessionsCommand(graphs []Graph) *cobra.Command {
	var asJSON, wait bool
	cmd := &cobra.Command{
		Use:   "sessions",
		Short: "Create, list, show, message, pause, resume, rename, stop and remove sessions, and set their budgets",
		Long: "A session is a conversation with a graph that lives as long as you keep it: each message is a turn, answered by\n" +
			"the agent that ended the last one, with the conversation and the workspaces so far. A worker (`troupe dev` or\n" +
			"`troupe worker`) serves them; they idle at no cost between messages.",
	}
	cmd.PersistentFlags().BoolVar(&asJSON, "json", false, "print JSON for scripts")
	addConnFlags(cmd.PersistentFlags())
	addWaitFlag(cmd.PersistentFlags(), &wait)

	var agent, name, policy, id, budgetSpec string
	var vars []string
	create := &cobra.Command{
		Use:   "new GRAPH",
		Short: "Create a session of a graph and print its id",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := runtime.ParsePolicy(policy)
			if err != nil {
				return usage(fmt.Errorf("--policy: %w", err))
			}
			vs, err := parseVars(vars)
			if err != nil {
				return err
			}
			budget, err := budgetFlag(cmd, budgetSpec)
			if err != nil {
				return err
			}
			return withWorker(cmd, "", wait, func(cn *conn) error {
				var opts []troupeclient.StartOption
				sid := id
				if g, err := findGraph(graphs, args[0]); err == nil && hasGitRepo(g) {
					// The workers may not see this disk: a local
					// repository goes to them through their blob store,
					// under the session, which is named first.
					if sid == "" {
						sid = troupeclient.NewSessionID(args[0])
					}
					if err := sendRepos(cmd.Context(), cn, g, "", sid, vs, sessionRepoInstead, cmd.ErrOrStderr()); err != nil {
						return err
					}
				}
				if sid != "" {
					opts = append(opts, troupeclient.WithID(sid))
				}
				_, e, err := cn.runs("", nil).CreateSession(cmd.Context(), troupeclient.SessionInput{Graph: args[0], Agent: agent, Name: name, Policy: p, Vars: vs, Budget: budget}, opts...)
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), e)
				}
				_, err = fmt.Fprintln(cmd.OutOrStdout(), e.ID)
				return err
			})
		},
	}
	create.Flags().StringVar(&agent, "agent", "", "the agent that answers first (default: the graph's entry)")
	create.Flags().StringVar(&name, "name", "", "the session's name")
	create.Flags().StringVar(&policy, "policy", "enqueue", "what a message sent during a turn does: enqueue, reject, interrupt or rollback")
	create.Flags().StringVar(&id, "id", "", "the session's id (default: a fresh one)")
	create.Flags().StringVar(&budgetSpec, "budget", "", "the session's budget over all its turns (troupe sessions budget changes it), "+budgetUsage)
	create.Flags().StringArrayVar(&vars, "var", nil, "session variable KEY=VALUE, as the graph's flags of troupe run (repeatable; host paths absolute, and under the worker's --allow-root)")

	var limit int
	var after, status, graph string
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List sessions, oldest first, a page at a time (--limit, --after), of a status or graph (--status, --graph)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in, err := pageInput(limit, after, status, graph)
			if err != nil {
				return err
			}
			return withTemporal(cmd, func(cn *conn) error {
				var page troupeclient.SessionsPage
				err := needWorker(cmd.Context(), cn, "", wait, cmd.ErrOrStderr())
				var own *Error
				if errors.As(err, &own) && own.Type == troupe.ErrNoWorker && !wait {
					// The manager's list is a query, which needs a
					// worker: what the server recorded stands in.
					fmt.Fprintf(cmd.ErrOrStderr(), "troupe: %s; the sessions as the server recorded them follow (no turns or usage)\n", own.Message)
					var list []troupeclient.SessionEntry
					if list, err = recordedSessions(cmd.Context(), cn, troupe.DefaultTaskQueue, recordedMax); err == nil {
						page, err = troupe.PageSessions(list, in)
					}
				} else if err == nil {
					page, err = cn.runs("", nil).ListSessions(cmd.Context(), in)
				}
				if err != nil {
					return err
				}
				if page.Next != "" {
					fmt.Fprintf(cmd.ErrOrStderr(), "troupe: %d of %d sessions shown; the next page: troupe sessions ls --after %s%s\n",
						len(page.Sessions), page.Total, page.Next, filterFlags(in))
				}
				if asJSON {
					if page.Sessions == nil {
						page.Sessions = []troupeclient.SessionEntry{}
					}
					return printJSON(cmd.OutOrStdout(), page.Sessions)
				}
				if len(page.Sessions) == 0 {
					fmt.Fprintln(cmd.OutOrStdout(), "no sessions")
					return nil
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "SESSION\tNAME\tGRAPH\tAGENT\tBACKENDS\tSTATUS\tTURNS\tTOKENS\tLAST ACTIVITY")
				for _, e := range page.Sessions {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", e.ID, e.Name, e.Graph, e.Agent, strings.Join(e.Backends, ","), e.Status, e.Turns,
						e.Usage.TotalTokens, e.LastActivity.Local().Format(time.DateTime))
				}
				return tw.Flush()
			})
		},
	}
	ls.Flags().IntVar(&limit, "limit", defaultListLimit, fmt.Sprintf("the most sessions to list (at most %d)", troupe.MaxSessionsPage))
	ls.Flags().StringVar(&after, "after", "", "list the sessions after this one (the id the previous page named)")
	ls.Flags().StringVar(&status, "status", "", "only sessions of this status: idle, thinking, waiting, paused or stopped")
	ls.Flags().StringVar(&graph, "graph", "", "only sessions of this graph")

	show := &cobra.Command{
		Use:   "show SESSION",
		Short: "Show a session: status, agent, policy, usage and cost per agent, budget, sandboxes and its last turns",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withWorkerOf(cmd, args[0], wait, func(cn *conn) error {
				info, err := cn.runs("", nil).Session(args[0]).Info(cmd.Context())
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), info)
				}
				printSession(cmd.OutOrStdout(), info)
				return nil
			})
		},
	}

	var noWait bool
	var messageFile string
	send := &cobra.Command{
		Use:   "send SESSION MESSAGE|-",
		Short: "Send a session a message (- reads it from stdin, --file from a file); show the turn's progress on stderr and its answer on stdout",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			msg, err := messageOf(args[1:], messageFile, cmd.InOrStdin())
			if err != nil {
				return err
			}
			return withWorkerOf(cmd, args[0], wait, func(cn *conn) error {
				cl := cn.runs("", nil)
				if len(msg) > troupe.MessageInline {
					// By reference, through the store of the session's
					// workers.
					cl = cn.runs(queueOf(cmd.Context(), cn, args[0]), nil)
				}
				s := cl.Session(args[0])
				if noWait {
					res, err := s.Send(cmd.Context(), msg, false)
					if err != nil {
						return err
					}
					if asJSON {
						return printJSON(cmd.OutOrStdout(), res)
					}
					_, err = fmt.Fprintf(cmd.OutOrStdout(), "queued as turn %s (%d ahead)\n", res.Turn, res.Ahead)
					return err
				}
				var progress func(troupeclient.Event)
				var opts []troupeclient.SendOption
				printer := newEventPrinter(cmd.ErrOrStderr())
				if !asJSON {
					// The reply's text as it is generated; --json output
					// stays what it was.
					progress = printer.event
					opts = append(opts, troupeclient.Following(troupeclient.WithDeltas()))
				}
				rec, err := s.Ask(cmd.Context(), msg, progress, opts...)
				printer.endLine()
				if troupe.ErrorType(err) == troupe.ErrBudgetExceeded {
					return budgetSpent(cmd, s, "message refused")
				}
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), rec)
				}
				if rec.ErrorType == troupe.ErrBudgetExceeded {
					return budgetSpent(cmd, s, "turn "+rec.Turn+" stopped")
				}
				return printTurn(cmd.OutOrStdout(), rec)
			})
		},
	}
	send.Flags().BoolVar(&noWait, "no-wait", false, "return once the message is queued, with its turn's id")
	send.Flags().StringVar(&messageFile, "file", "", "read the message from this file (for one longer than a command line takes)")

	command := func(use, short, op string, nargs int) *cobra.Command {
		return &cobra.Command{
			Use:   use,
			Short: short,
			Args:  cobra.ExactArgs(nargs),
			RunE: func(cmd *cobra.Command, args []string) error {
				c := troupeclient.SessionCommand{Op: op}
				if nargs == 2 {
					c.Arg = args[1]
				}
				return withWorker(cmd, "", wait, func(cn *conn) error {
					e, err := cn.runs("", nil).Session(args[0]).Command(cmd.Context(), c)
					if err != nil {
						return err
					}
					if asJSON {
						return printJSON(cmd.OutOrStdout(), e)
					}
					_, err = fmt.Fprintf(cmd.OutOrStdout(), "session %s: %s (%s)\n", e.ID, op, e.Status)
					return err
				})
			},
		}
	}
	var forkName string
	fork := &cobra.Command{
		Use:   "fork SESSION",
		Short: "Fork a session: a new session with its conversation and workspaces as they stand, independent from then on",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withWorker(cmd, "", wait, func(cn *conn) error {
				_, e, err := cn.runs("", nil).Session(args[0]).Fork(cmd.Context(), forkName)
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), e)
				}
				_, err = fmt.Fprintln(cmd.OutOrStdout(), e.ID)
				return err
			})
		},
	}
	fork.Flags().StringVar(&forkName, "name", "", "the fork's name (default: the session's, \"(fork)\")")
	budget := &cobra.Command{
		Use:   "budget SESSION [SPEC]",
		Short: "Show a session's budget and what it spent; with SPEC (cost=N,model_calls=N,... or off), raise, lower or lift it",
		Long: "A session's budget spans all its turns. Once it is spent, the turn at work stops and the session answers no\n" +
			"message until its budget is raised or lifted. SPEC changes the limits it names (cost, model_calls,\n" +
			"input_tokens, output_tokens; 0 lifts one) and keeps the others; off lifts them all. What the session spent so\n" +
			"far counts against the new budget.",
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 2 {
				if _, err := spend.Parse(args[1]); err != nil {
					return usage(fmt.Errorf("budget %w (want %s)", err, spend.Syntax))
				}
			}
			return withWorkerOf(cmd, args[0], wait, func(cn *conn) error {
				s := cn.runs("", nil).Session(args[0])
				var info troupeclient.SessionInfo
				var err error
				if len(args) == 2 {
					info, err = s.SetBudget(cmd.Context(), args[1])
					var ae *temporal.ApplicationError
					if troupe.ErrorType(err) == troupe.ErrBadBudget && errors.As(err, &ae) {
						return fmt.Errorf("session %s refused the budget: %s", args[0], spend.Refusal(ae.Message()))
					}
				} else {
					info, err = s.Info(cmd.Context())
				}
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), info)
				}
				w := cmd.OutOrStdout()
				fmt.Fprintf(w, "session %s: budget %s\n", info.ID, spend.Budget(info.Budget))
				printSpend(w, "  ", info.Usage, info.Cost, info.Agents, nil)
				if spent := spend.Spent(info.Budget); spent != "" {
					fmt.Fprintf(w, "  the budget is spent (%s): %s\n", spent, raiseHint(info))
				}
				return nil
			})
		},
	}
	rm := &cobra.Command{
		Use:   "rm SESSION...",
		Short: "Remove sessions in any state, stuck or not: their workflows, their place in sessions ls, their sandboxes and blob data",
		Long: "rm removes each session, whatever it is doing: a running turn is cut short (terminated, not cancelled), a\n" +
			"paused, stopped or stuck session (one of a graph no worker serves) goes all the same. Its workflows are\n" +
			"terminated at once; the worker that takes the removal drops it from sessions ls and removes its sandboxes\n" +
			"and blob data (data a fork still shares stays until the fork is done). With no worker running it does not\n" +
			"wait: it says what is left for the next worker to do. An id that names no session, or one removed\n" +
			"already, is reported as not found (troupe.UnknownSession) and makes the exit status 1.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withTemporal(cmd, func(cn *conn) error {
				cl := cn.runs("", nil)
				var results []troupeclient.RemoveSessionResult
				var missing []string
				for _, id := range args {
					res, err := cl.RemoveSession(cmd.Context(), id)
					if errors.Is(err, troupeclient.ErrNoSession) {
						missing = append(missing, id)
					} else if err != nil {
						return onSession(id, err)
					}
					results = append(results, res)
					if !asJSON && res.Found {
						printRemoved(cmd.OutOrStdout(), res)
					}
				}
				if asJSON {
					if err := printJSON(cmd.OutOrStdout(), results); err != nil {
						return err
					}
				}
				if len(missing) == 0 {
					return nil
				}
				err := &Error{Type: troupe.ErrUnknownSession, Message: fmt.Sprintf("no session %s, or removed already (troupe sessions ls lists them)", strings.Join(missing, ", "))}
				if asJSON {
					return &reported{err} // The results say which were not found.
				}
				return err
			})
		},
	}
	cmd.AddCommand(create, ls, show, send, fork, budget, rm,
		command("switch SESSION BACKEND", "Move every workspace of a session to another sandbox backend (local, bwrap, docker), files intact", troupe.CommandSwitch, 2),
		command("pause SESSION", "Pause a session: no turn starts, and a running turn's agents start no model call or tool", troupe.CommandPause, 1),
		command("resume SESSION", "Resume a paused session where it stopped", troupe.CommandResume, 1),
		command("stop SESSION", "Stop a session for good: a running turn is cancelled, its sandboxes stopped", troupe.CommandStop, 1),
		command("rename SESSION NAME", "Rename a session", troupe.CommandRename, 2),
		command("policy SESSION enqueue|reject|interrupt|rollback", "Set what a message sent during a turn does", troupe.CommandPolicy, 2),
	)
	// The errors of a command on a session (all but new, ls and rm,
	// whose errors say which of its sessions) say which, typed.
	for _, sub := range cmd.Commands() {
		if runE := sub.RunE; runE != nil && sub != create && sub != ls && sub != rm {
			sub.RunE = func(cmd *cobra.Command, args []string) error {
				err := runE(cmd, args)
				if len(args) == 0 {
					return err
				}
				return onSession(args[0], err)
			}
		}
	}
	return cmd
}

// printRemoved says what the removal of a session did, and what waits.
func printRemoved(w io.Writer, res troupeclient.RemoveSessionResult) {
	var did []string
	if n := len(res.Terminated); n > 0 {
		did = append(did, fmt.Sprintf("terminated %d workflow%s", n, plural(n)))
	}
	if res.Unlisted {
		did = append(did, "unlisted")
	}
	if n := len(res.Sandboxes); n > 0 {
		did = append(did, fmt.Sprintf("removed %d sandbox%s (%s)", n, map[bool]string{true: "es"}[n > 1], strings.Join(res.Sandboxes, ", ")))
	}
	if res.Blobs > 0 {
		did = append(did, fmt.Sprintf("deleted %d blob%s", res.Blobs, plural(res.Blobs)))
	}
	if len(did) == 0 {
		did = append(did, "nothing was left of it")
	}
	fmt.Fprintf(w, "removed session %s: %s\n", res.ID, strings.Join(did, ", "))
	for _, p := range res.Pending {
		fmt.Fprintf(w, "  left: %s\n", p)
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// recordedMax bounds the sessions `sessions ls` lists without a worker.
const recordedMax = 200

// printTurn prints a turn's answer, or why it has none.
func printTurn(w io.Writer, rec troupeclient.TurnRecord) error {
	switch rec.Outcome {
	case runtime.TurnAnswered:
		return printResult(w, troupe.RunResult{Output: rec.Output}, false)
	case runtime.TurnFailed:
		return fmt.Errorf("turn %s failed: %s", rec.Turn, rec.Error)
	}
	_, err := fmt.Fprintf(w, "turn %s: %s\n", rec.Turn, strings.ReplaceAll(rec.Outcome, "_", " "))
	return err
}

// printSession prints a session for people.
func printSession(w io.Writer, info troupeclient.SessionInfo) {
	fmt.Fprintf(w, "session %s", info.ID)
	if info.Name != "" {
		fmt.Fprintf(w, " (%s)", info.Name)
	}
	fmt.Fprintf(w, "\n  graph %s, %s, next answered by %s, policy %s\n", info.Graph, info.Status, info.Agent, info.Policy)
	fmt.Fprintf(w, "  %d turns, %d queued, %d tokens; last activity %s\n", info.Turns, info.Queued, info.Usage.TotalTokens, info.LastActivity.Local().Format(time.DateTime))
	printSpend(w, "  ", info.Usage, info.Cost, info.Agents, info.Budget)
	if spent := spend.Spent(info.Budget); spent != "" {
		fmt.Fprintf(w, "  the budget is spent (%s): %s\n", spent, raiseHint(info))
	}
	for _, sb := range info.Sandboxes {
		fmt.Fprintf(w, "  sandbox of %s: %s", sb.Agent, sb.State)
		if sb.ID != "" {
			fmt.Fprintf(w, " (%s %s)", sb.Backend, sb.ID)
		}
		fmt.Fprintln(w)
	}
	for _, r := range info.Recent {
		cost := ""
		if r.Cost != 0 {
			cost = " (" + spend.Cost(r.Cost) + ")"
		}
		what := string(r.Output) + r.Error
		if r.ErrorType == troupe.ErrBudgetExceeded {
			what = "stopped by the budget"
		}
		fmt.Fprintf(w, "  %s %s%s: %s → %s\n", r.Turn, r.Outcome, cost, oneLine(r.Message), oneLine(what))
	}
}

// raiseHint says how to go on with a session whose budget is spent.
func raiseHint(info troupeclient.SessionInfo) string {
	return fmt.Sprintf("troupe sessions budget %s %s raises it (N the new limit), troupe sessions budget %s off lifts it",
		info.ID, spend.Raise(info.Budget), info.ID)
}

// budgetSpent is the error of a message that session s refused, or of
// its turn that stopped (what), because the session's budget is spent:
// which limits are reached, and how to go on.
func budgetSpent(cmd *cobra.Command, s *troupeclient.Session, what string) error {
	info, err := s.Info(cmd.Context())
	if err != nil {
		return &Error{Type: troupe.ErrBudgetExceeded, Message: fmt.Sprintf("%s: session %s's budget is spent: troupe sessions budget %s shows it", what, s.ID(), s.ID())}
	}
	spent := spend.Spent(info.Budget)
	if spent == "" {
		spent = spend.Budget(info.Budget)
	}
	return &Error{Type: troupe.ErrBudgetExceeded, Message: fmt.Sprintf("%s: session %s's budget is spent (%s): %s", what, s.ID(), spent, raiseHint(info))}
}

// parseVars reads --var KEY=VALUE flags.
func parseVars(vars []string) (map[string]string, error) {
	if len(vars) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, v := range vars {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return nil, usage(fmt.Errorf("--var %q: want KEY=VALUE", v))
		}
		out[k] = val
	}
	return out, nil
}

// defaultListLimit is how many sessions `sessions ls` lists unless told.
const defaultListLimit = 50

// pageInput checks the flags of `sessions ls` and returns the page they
// ask for.
func pageInput(limit int, after, status, graph string) (troupe.SessionsPageInput, error) {
	if limit < 1 || limit > troupe.MaxSessionsPage {
		return troupe.SessionsPageInput{}, usage(fmt.Errorf("--limit %d: list 1 to %d sessions at a time", limit, troupe.MaxSessionsPage))
	}
	st := runtime.SessionStatus(status)
	switch st {
	case "", runtime.SessionIdle, runtime.SessionThinking, runtime.SessionWaiting, runtime.SessionPaused, runtime.SessionStopped:
	default:
		return troupe.SessionsPageInput{}, usage(fmt.Errorf("--status %q: a session is idle, thinking, waiting, paused or stopped", status))
	}
	return troupe.SessionsPageInput{Limit: limit, After: after, Status: st, Graph: graph}, nil
}

// filterFlags are the flags of `sessions ls` that in's filters and
// limit take, to repeat on the next page.
func filterFlags(in troupe.SessionsPageInput) string {
	var out string
	if in.Limit != defaultListLimit {
		out += fmt.Sprintf(" --limit %d", in.Limit)
	}
	if in.Status != "" {
		out += " --status " + string(in.Status)
	}
	if in.Graph != "" {
		out += " --graph " + in.Graph
	}
	return out
}
