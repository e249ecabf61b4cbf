package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/sdk/client"
	"golang.org/x/term"

	"github.com/troupe-dev/troupe"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/codec"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/workflows/events"
)

// runsCommand is `troupe runs`: the runs of the Temporal server the other
// commands use (the one their connection settings name, else the server
// of TROUPE_HOME).
func runsCommand(graphs []Graph) *cobra.Command {
	var asJSON, wait bool
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List, show, follow, cancel, terminate and resume runs, and decide the calls that wait for approval",
	}
	cmd.PersistentFlags().BoolVar(&asJSON, "json", false, "print JSON for scripts")
	addConnFlags(cmd.PersistentFlags())

	var running bool
	var limit int
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List runs, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withTemporal(cmd, func(cn *conn) error {
				list, err := cn.runs("", nil).List(cmd.Context(), troupeclient.ListOptions{Running: running, Limit: limit})
				if err != nil {
					return err
				}
				if asJSON {
					if list == nil {
						list = []troupeclient.RunInfo{}
					}
					return printJSON(cmd.OutOrStdout(), list)
				}
				if len(list) == 0 {
					fmt.Fprintln(cmd.OutOrStdout(), "no runs")
					return nil
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "RUN\tSTATUS\tSTARTED\tSUMMARY")
				for _, r := range list {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.WorkflowID, r.Status, r.Start.Local().Format(time.DateTime), oneLine(r.Summary))
				}
				return tw.Flush()
			})
		},
	}
	ls.Flags().BoolVar(&running, "running", false, "only runs still running")
	ls.Flags().IntVar(&limit, "limit", 50, "at most this many runs")

	show := &cobra.Command{
		Use:   "show RUN",
		Short: "Show a run: its status and, once closed, its result or error",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withTemporal(cmd, func(cn *conn) error {
				return showRun(cmd.Context(), cn, args[0], asJSON, cmd.OutOrStdout())
			})
		},
	}

	follow := &cobra.Command{
		Use:   "follow RUN",
		Short: "Show a run's progress from its start, then its result, as `troupe run` does",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withTemporal(cmd, func(cn *conn) error {
				run := cn.runs("", nil).Run(args[0])
				info, err := run.Describe(cmd.Context())
				if err != nil {
					return err
				}
				out := runOutput{json: asJSON}
				if f, ok := cmd.InOrStdin().(*os.File); ok && !asJSON && term.IsTerminal(int(f.Fd())) {
					out.ask = f
				}
				if info.Close == nil {
					// A run that goes on moves, and shows its progress,
					// only through its workers.
					if err := needWorker(cmd.Context(), cn, info.TaskQueue, wait, cmd.ErrOrStderr()); err != nil {
						return &Error{Type: troupe.ErrNoWorker, Message: err.Error() + "; or run it here with `troupe runs resume " + info.WorkflowID + "`", Err: err}
					}
				} else if !served(cmd.Context(), cn, info.TaskQueue) {
					// A run's events are read through its workers.
					out.noEvents = true
					fmt.Fprintf(cmd.ErrOrStderr(), "troupe: run %s is %s; no worker serves task queue %s to show its progress (troupe dev does).\n", info.WorkflowID, info.Status, info.TaskQueue)
				}
				return awaitRun(cmd.Context(), run, out, "", cmd.OutOrStdout(), cmd.ErrOrStderr(), cmd.ErrOrStderr())
			})
		},
	}

	var reason string
	cancel := &cobra.Command{
		Use:   "cancel RUN",
		Short: "Ask a run to stop: its agents are cancelled and its sandboxes stopped",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withTemporal(cmd, func(cn *conn) error {
				run := cn.runs("", nil).Run(args[0])
				if err := run.Cancel(cmd.Context()); err != nil {
					return err
				}
				// A cancel is carried out by the run's workers: say so
				// when none serves it.
				if info, err := run.Describe(cmd.Context()); err == nil && !served(cmd.Context(), cn, info.TaskQueue) {
					fmt.Fprintf(cmd.ErrOrStderr(), "troupe: no worker serves task queue %s, so run %s stays RUNNING until one takes the cancel in "+
						"(troupe dev, or troupe runs resume %s); troupe runs terminate %s ends it now\n", info.TaskQueue, args[0], args[0], args[0])
				}
				return printAction(cmd.OutOrStdout(), asJSON, args[0], "cancel requested")
			})
		},
	}
	terminate := &cobra.Command{
		Use:   "terminate RUN",
		Short: "End a run at once, without cleaning up (its sandboxes are reaped later)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withTemporal(cmd, func(cn *conn) error {
				if err := cn.runs("", nil).Run(args[0]).Terminate(cmd.Context(), reason); err != nil {
					return err
				}
				return printAction(cmd.OutOrStdout(), asJSON, args[0], "terminated")
			})
		},
	}
	terminate.Flags().StringVar(&reason, "reason", "terminated with troupe runs terminate", "why, recorded in the run's history")

	var wo workerOptions
	resume := &cobra.Command{
		Use:   "resume RUN",
		Short: "Run a worker for a run here until it ends, showing its progress and result as `troupe run` does",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withTemporal(cmd, func(cn *conn) error {
				return resumeRun(cmd.Context(), cn, graphs, args[0], wo, asJSON, cmd.OutOrStdout(), cmd.ErrOrStderr())
			})
		},
	}
	addSandboxFlags(resume.Flags(), &wo)

	// Under --json, every failure is a document on stdout: those of a
	// run's own (its RunFailure, an interruption) are printed where they
	// happen, the others here.
	for _, sub := range []*cobra.Command{show, follow, cancel, terminate, resume} {
		runE := sub.RunE
		sub.RunE = func(cmd *cobra.Command, args []string) error {
			err := runE(cmd, args)
			var rf *RunFailure
			var in *Interrupted
			if err != nil && asJSON && !errors.As(err, &rf) && !errors.As(err, &in) {
				_ = printJSON(cmd.OutOrStdout(), RunFailure{WorkflowID: args[0], Err: describeError(&ranError{err})})
				return &reported{err}
			}
			return err
		}
	}
	addWaitFlag(follow.Flags(), &wait)
	cmd.AddCommand(ls, show, follow, cancel, terminate, resume)
	cmd.AddCommand(approvalCommands(&asJSON, &wait)...)
	return cmd
}

// withTemporal runs fn with a client of the server cmd's connection
// settings name (connectionOf), and releases it.
func withTemporal(cmd *cobra.Command, fn func(*conn) error) error {
	res, err := resolveConn(connectionOf(cmd))
	if err != nil {
		return err
	}
	return withConn(cmd, res, fn)
}

// withConn runs fn with a client of the server res names, and releases
// it.
func withConn(cmd *cobra.Command, res troupeclient.Resolved, fn func(*conn) error) error {
	cn, err := dialTemporal(cmd.Context(), res, nil, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	defer cn.close(cmd.ErrOrStderr())
	return fn(cn)
}

// shown is `troupe runs show --json`: the run and, once it has closed,
// its result (with its usage, cost and budget) or its error (with, for a
// run its budget stopped, the budget and what the run spent).
type shown struct {
	troupeclient.RunInfo
	Result *troupe.RunResult     `json:"result,omitempty"`
	Error  *FailureInfo          `json:"error,omitempty"`
	Agent  string                `json:"agent,omitempty"`
	Budget *runtime.BudgetReport `json:"budget,omitempty"`
}

func showRun(ctx context.Context, cn *conn, id string, asJSON bool, stdout io.Writer) error {
	run := cn.runs("", nil).Run(id)
	info, err := run.Describe(ctx)
	if err != nil {
		return err
	}
	s := shown{RunInfo: info}
	if info.Close != nil {
		res, err := run.Result(ctx)
		if ke := new(codec.KeyError); errors.As(err, &ke) {
			return fmt.Errorf("the result of run %s: %w", id, err) // This process cannot read it.
		}
		if err != nil {
			f := describeFailure(id, err)
			s.Error, s.Agent, s.Budget = &f.Err, f.Agent, f.Budget
		} else {
			s.Result = res
		}
	}
	if asJSON {
		return printJSON(stdout, s)
	}
	fmt.Fprintf(stdout, "run:        %s\nstatus:     %s\ngraph:      %s\nsummary:    %s\nstarted:    %s\ntask queue: %s\n",
		s.WorkflowID, s.Status, s.Graph, oneLine(s.Summary), s.Start.Local().Format(time.DateTime), s.TaskQueue)
	if s.Close != nil {
		fmt.Fprintf(stdout, "closed:     %s (after %s)\n", s.Close.Local().Format(time.DateTime), s.Close.Sub(s.Start).Round(time.Millisecond))
	}
	switch {
	case s.Result != nil:
		r := s.Result
		fmt.Fprintf(stdout, "agent:      %s\n", r.Agent)
		printSpend(stdout, "", r.Usage, r.Cost, r.Agents, r.Budget)
		fmt.Fprintln(stdout, "output:")
		return printResult(stdout, *r, false)
	case s.Error != nil:
		f := RunFailure{WorkflowID: id, Agent: s.Agent, Err: *s.Error}
		fmt.Fprintf(stdout, "error:      %s\n", f.Error())
		if rep := s.Budget; rep != nil {
			printSpend(stdout, "", rep.Usage, rep.Cost, rep.Agents, rep)
		}
	}
	return nil
}

// resumeRun serves the run id's task queue with a worker of graphs until
// the run ends, and shows it as `troupe run` does. The host paths the run
// was started with (its graph's host-path flags) are the worker's allowed
// roots again.
func resumeRun(ctx context.Context, cn *conn, graphs []Graph, id string, wo workerOptions, asJSON bool, stdout, stderr io.Writer) error {
	run := cn.runs("", nil).Run(id)
	info, err := run.Describe(ctx)
	if err != nil {
		return err
	}
	out := runOutput{json: asJSON}
	if info.Close != nil {
		fmt.Fprintf(stderr, "troupe: run %s is %s already\n", id, info.Status)
		out.noEvents = true // nothing to show but the result
		return awaitRun(ctx, run, out, "", stdout, io.Discard, stderr)
	}
	in, err := run.Input(ctx)
	if err != nil {
		return err
	}
	g, err := findGraph(graphs, in.Graph)
	if err != nil {
		return fmt.Errorf("resume run %s: this troupe command does not serve its graph: %w", id, err)
	}
	for _, f := range g.Flags {
		if v := in.Vars[f.Name]; f.HostPath && v != "" && filepath.IsAbs(v) {
			wo.roots = append(wo.roots, v)
		}
	}
	wo.taskQueue = info.TaskQueue
	wo.events = events.NewBus()
	stop, err := startWorker(ctx, cn.c, cn.res.Codec, cn.namespace, wo, graphs, stderr)
	if err != nil {
		return err
	}
	defer stopWithin(stop, workerStopWait)
	fmt.Fprintf(stderr, "▶ resuming run %s (graph %s) on task queue %s\n", id, in.Graph, info.TaskQueue)
	return awaitRun(ctx, cn.runs(info.TaskQueue, wo.events).Run(id), out, "", stdout, stderr, stderr)
}

func printAction(stdout io.Writer, asJSON bool, id, what string) error {
	if asJSON {
		return printJSON(stdout, map[string]string{"workflow_id": id, "result": what})
	}
	_, err := fmt.Fprintf(stdout, "run %s: %s\n", id, what)
	return err
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// served reports whether a worker polls the workflow task queue: one
// whose last poll began within pollerFresh (a worker keeps a poll open
// for up to a minute, then polls again; the server lists the pollers of
// the last minutes). When the server cannot say, it answers true, to
// follow as before.
func served(ctx context.Context, cn *conn, queue string) bool {
	pollers, err := freshPollers(ctx, cn.c, queue)
	return err != nil || len(pollers) > 0
}

// freshPollers returns the workers polling queue's workflow tasks whose
// last poll began within pollerFresh: those that may be up.
func freshPollers(ctx context.Context, c client.Client, queue string) ([]*taskqueuepb.PollerInfo, error) {
	d, err := c.DescribeTaskQueue(ctx, queue, enums.TASK_QUEUE_TYPE_WORKFLOW)
	if err != nil {
		return nil, err
	}
	var fresh []*taskqueuepb.PollerInfo
	for _, p := range d.GetPollers() {
		if time.Since(p.GetLastAccessTime().AsTime()) < pollerFresh && !goneProcess(p.GetIdentity()) {
			fresh = append(fresh, p)
		}
	}
	return fresh, nil
}

// goneProcess reports whether a poller's identity ("PID@HOST...", as the
// SDK and workerIdentity write it) names a process of this host that has
// exited: the server lists its polls for a while after it stopped, but it
// serves nothing.
func goneProcess(identity string) bool {
	who, _, _ := strings.Cut(identity, " ")
	parts := strings.SplitN(who, "@", 3)
	if len(parts) < 2 {
		return false
	}
	host, _ := os.Hostname()
	pid, err := strconv.Atoi(parts[0])
	return err == nil && parts[1] == host && pid > 0 && syscall.Kill(pid, 0) == syscall.ESRCH
}

// pollerFresh is how recent a worker's last poll must be for freshPollers.
const pollerFresh = 75 * time.Second
