package cli

// `troupe chat`: the terminal UI over sessions (package cli/chat holds its
// model and view). This file wires it to the server the other commands use
// and runs its effects as client calls.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/troupe-dev/troupe/cli/chat"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/workflows"
)

func chatCommand(graphs []Graph) *cobra.Command {
	var session, graph string
	cmd := &cobra.Command{
		Use:   "chat",
		Short: "Talk to sessions in a terminal UI: watch each turn live, fork, switch backend, pause, resume",
		Long: "troupe chat opens a session (--session, or /sessions, or /new [graph]) and shows each turn as it happens:\n" +
			"the agents' replies as they stream, the agent at work, tool calls and their results, handoffs, agents-as-tools\n" +
			"with their own steps indented under them, and sandboxes. /help lists the commands; /done leaves, and the\n" +
			"session stays. A worker (`troupe dev` or `troupe worker`) serves the sessions.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f, ok := cmd.InOrStdin().(*os.File); !ok || !term.IsTerminal(int(f.Fd())) {
				return errors.New("troupe chat needs a terminal; scripts use `troupe sessions`")
			}
			return withTemporal(cmd, func(cn *conn) error { return runChat(cmd, cn, graphs, session, graph) })
		},
	}
	cmd.Flags().StringVar(&session, "session", "", "the session to open")
	cmd.Flags().StringVar(&graph, "graph", "", "the graph of /new when it names none")
	return cmd
}

func runChat(cmd *cobra.Command, cn *conn, graphs []Graph, session, graph string) error {
	ctx, cancel := context.WithCancel(cmd.Context())
	defer cancel()
	st := chat.NewState(chat.Options{Graph: graph, Graphs: names(graphs)})
	r := &chatRunner{ctx: ctx, cn: cn, cl: cn.runs("", nil)}
	start := []chat.Effect{{Do: chat.DoCheckServed}}
	if session != "" {
		start = append(start, chat.Effect{Do: chat.DoOpen, Session: session})
	}
	ui := chat.New(st, r.cmd, start...)
	p := tea.NewProgram(ui, tea.WithContext(ctx), tea.WithAltScreen(), tea.WithInput(cmd.InOrStdin()), tea.WithOutput(cmd.OutOrStdout()))
	r.send = p.Send
	_, err := p.Run()
	r.stopFollowing()
	if err != nil && !errors.Is(err, tea.ErrProgramKilled) {
		return err
	}
	if st.Session != "" && st.Info.Status != runtime.SessionStopped {
		fmt.Fprintf(cmd.OutOrStdout(), "session %s stays: troupe chat --session %s\n", st.Session, st.Session)
	}
	return nil
}

// chatRunner makes the chat's client calls.
type chatRunner struct {
	ctx  context.Context
	cn   *conn
	cl   *troupeclient.Client
	send func(tea.Msg) // the program's, for the follower's events

	mu     sync.Mutex
	follow context.CancelFunc // stops the follower of the open session
}

// cmd returns the command that makes e's call and answers with its
// outcome.
func (r *chatRunner) cmd(e chat.Effect) tea.Cmd {
	ctx := r.ctx
	failed := func(err error) tea.Msg { return chat.Failed{Do: e.Do, Session: e.Session, Text: e.Arg, Err: err} }
	switch e.Do {
	case chat.DoCheckServed:
		return func() tea.Msg {
			return chat.Served{Queue: workflows.DefaultTaskQueue, OK: served(ctx, r.cn, workflows.DefaultTaskQueue)}
		}
	case chat.DoCreate:
		return func() tea.Msg {
			_, entry, err := r.cl.CreateSession(ctx, troupeclient.SessionInput{Graph: e.Arg})
			if err != nil {
				return failed(err)
			}
			return chat.Created{Entry: entry}
		}
	case chat.DoOpen, chat.DoInfo:
		return func() tea.Msg {
			info, err := r.cl.Session(e.Session).Info(ctx)
			switch {
			case err != nil:
				return failed(err)
			case e.Do == chat.DoOpen:
				return chat.Opened{Info: info}
			}
			return chat.Refreshed{Info: info}
		}
	case chat.DoFollow:
		fctx := r.following()
		return func() tea.Msg {
			err := r.cl.Session(e.Session).FollowFrom(fctx, e.Cursor, func(ev troupeclient.Event) {
				r.send(chat.Followed{Session: e.Session, Event: ev})
			}, troupeclient.WithDeltas())
			if fctx.Err() != nil {
				err = nil // another session opened, or the chat ended
			}
			return chat.FollowEnded{Session: e.Session, Err: err}
		}
	case chat.DoSend:
		return func() tea.Msg {
			res, err := r.cl.Session(e.Session).Send(ctx, e.Arg, false)
			if err != nil {
				return failed(err)
			}
			return chat.Sent{Session: e.Session, Text: e.Arg, Result: res}
		}
	case chat.DoList:
		return func() tea.Msg {
			list, err := r.cl.Sessions(ctx)
			if err != nil {
				return failed(err)
			}
			return chat.Listed{Sessions: list}
		}
	case chat.DoCommand:
		return func() tea.Msg {
			entry, err := r.cl.Session(e.Session).Command(ctx, troupeclient.SessionCommand{Op: e.Command, Arg: e.Arg})
			if err != nil {
				return failed(err)
			}
			return chat.Commanded{Session: e.Session, Command: e.Command, Entry: entry}
		}
	case chat.DoFork:
		return func() tea.Msg {
			_, entry, err := r.cl.Session(e.Session).Fork(ctx, e.Arg)
			if err != nil {
				return failed(err)
			}
			return chat.Forked{From: e.Session, Entry: entry}
		}
	case chat.DoSwitch:
		return func() tea.Msg {
			entry, err := r.cl.Session(e.Session).SwitchBackend(ctx, e.Arg)
			if err != nil {
				return failed(err)
			}
			return chat.Switched{Session: e.Session, Backend: e.Arg, Entry: entry}
		}
	}
	return func() tea.Msg { return failed(fmt.Errorf("the chat cannot %s", e.Do)) }
}

// following stops the follower of the session open until now and returns
// the context of the next one.
func (r *chatRunner) following() context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.follow != nil {
		r.follow()
	}
	ctx, cancel := context.WithCancel(r.ctx)
	r.follow = cancel
	return ctx
}

func (r *chatRunner) stopFollowing() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.follow != nil {
		r.follow()
	}
}
