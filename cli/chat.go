package cli

// `troupe chat`: the terminal UI over sessions (package cli/chat holds its
// model and view). This file wires it to the server the other commands use
// and runs its effects as client calls.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/cli/chat"
	"github.com/troupe-dev/troupe/runtime"
)

func chatCommand(graphs []Graph) *cobra.Command {
	var session, graph, budgetSpec string
	var vars []string
	var wait bool
	cmd := &cobra.Command{
		Use:   "chat",
		Short: "Talk to sessions in a terminal UI: watch each turn live, fork, switch backend, pause, resume",
		Long: "troupe chat opens a session (--session, or /sessions, or /new [graph]) and shows each turn as it happens:\n" +
			"the agents' replies as they stream, the agent at work, tool calls and their results, handoffs, agents-as-tools\n" +
			"with their own steps indented under them, and sandboxes. The header shows what the session spent and its\n" +
			"budget; /budget shows them per agent, /budget SPEC changes the budget. /help lists the commands; /done leaves,\n" +
			"and the session stays. A worker (`troupe dev` or `troupe worker`) serves the sessions.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			vs, err := parseVars(vars)
			if err != nil {
				return err
			}
			budget, err := budgetFlag(cmd, budgetSpec)
			if err != nil {
				return err
			}
			return withWorker(cmd, "", wait, func(cn *conn) error {
				if session != "" {
					// An id that names no session is said now, not in
					// the terminal UI.
					if _, err := cn.runs("", nil).Session(session).Input(cmd.Context()); err != nil {
						return onSession(session, err)
					}
				}
				if f, ok := cmd.InOrStdin().(*os.File); !ok || !term.IsTerminal(int(f.Fd())) {
					return usage(errors.New("troupe chat needs a terminal; scripts use `troupe sessions`"))
				}
				return runChat(cmd, cn, graphs, session, graph, vs, budget)
			})
		},
	}
	cmd.Flags().StringVar(&session, "session", "", "the session to open")
	cmd.Flags().StringVar(&graph, "graph", "", "the graph of /new when it names none")
	cmd.Flags().StringArrayVar(&vars, "var", nil, "variable KEY=VALUE of the sessions /new starts (repeatable), as for troupe sessions new")
	cmd.Flags().StringVar(&budgetSpec, "budget", "", "the budget of the sessions /new starts, "+budgetUsage)
	addWaitFlag(cmd.Flags(), &wait)
	addConnFlags(cmd.Flags())
	return cmd
}

func runChat(cmd *cobra.Command, cn *conn, graphs []Graph, session, graph string, vars map[string]string, budget *agents.Budget) error {
	ctx, cancel := context.WithCancel(cmd.Context())
	defer cancel()
	st := chat.NewState(chat.Options{Graph: graph, Graphs: names(graphs)})
	r := chat.NewRunner(ctx, cn.runs("", nil), func(ctx context.Context) bool { return served(ctx, cn, troupe.DefaultTaskQueue) })
	r.Vars, r.Budget = vars, budget
	// The workers may not see this disk: a local repository goes to them
	// through their blob store, under the session /new names first. What
	// is said of it would tear the terminal UI: a failure says enough.
	r.PrepareVars = repoSender(cn, graphs, "", sessionRepoInstead, io.Discard)
	start := []chat.Effect{{Do: chat.DoCheckServed}}
	if session != "" {
		start = append(start, chat.Effect{Do: chat.DoOpen, Session: session})
	}
	ui := chat.New(st, r.Do, start...)
	p := tea.NewProgram(ui, tea.WithContext(ctx), tea.WithAltScreen(), tea.WithInput(cmd.InOrStdin()), tea.WithOutput(cmd.OutOrStdout()))
	r.Send = p.Send
	_, err := p.Run()
	r.Stop()
	if err != nil && !errors.Is(err, tea.ErrProgramKilled) {
		return err
	}
	if st.Session != "" && st.Info.Status != runtime.SessionStopped {
		fmt.Fprintf(cmd.OutOrStdout(), "session %s stays: troupe chat --session %s\n", st.Session, st.Session)
	}
	return nil
}
