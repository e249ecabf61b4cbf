package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"golang.org/x/term"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/cli/spend"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/memory"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/telemetry"
	"github.com/troupe-dev/troupe/workflows/events"
)

func quietLogger() log.Logger {
	return log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
}

func runCommand(graphs []Graph) *cobra.Command {
	var (
		graphName, agent string
		wo               workerOptions
		asJSON, quiet    bool
		verbose          bool
		vars             []string
		budgetSpec       string
		maxCalls         int
		inputFile        string
	)
	graphFlags := map[string]*string{}
	cmd := &cobra.Command{
		Use:   "run [flags] [INPUT|-]",
		Short: "Run a graph to completion, showing live progress on stderr and the final output on stdout",
		RunE: func(cmd *cobra.Command, args []string) error {
			if graphName == "" && len(graphs) == 1 {
				graphName = graphs[0].Graph.Name()
			}
			g, err := findGraph(graphs, graphName)
			if err != nil {
				return err
			}
			budget, err := budgetFlag(cmd, budgetSpec)
			if err != nil {
				return err
			}
			input := strings.Join(args, " ")
			if inputFile != "" || len(args) == 1 && args[0] == "-" {
				// Read whole, up to troupe.MessageLimit; a big one goes
				// by reference.
				if input, err = messageOf(args, inputFile, cmd.InOrStdin()); err != nil {
					return err
				}
			} else if err := troupe.CheckMessage("the run input", len(input)); err != nil {
				return err
			}
			if strings.TrimSpace(input) == "" {
				if input = g.DefaultInput; input == "" {
					return fmt.Errorf("graph %s needs an input: troupe run --graph %s \"what to do\"", g.Graph.Name(), g.Graph.Name())
				}
			}
			if maxCalls < 0 {
				return fmt.Errorf("--max-concurrent-calls %d: give a bound above 0, or leave it out for each agent's own", maxCalls)
			}
			in := troupe.RunInput{Graph: g.Graph.Name(), Agent: agent, Input: input, Vars: map[string]string{}, Budget: budget, MaxConcurrentCalls: maxCalls}
			var roots []string
			for _, f := range g.Flags {
				v := graphFlags[f.Name]
				if v == nil || *v == "" {
					if f.Default == "" {
						continue
					}
					d := f.Default
					v = &d
				}
				val := *v
				if f.HostPath && !isURL(val) {
					abs, err := filepath.Abs(val)
					if err != nil {
						return fmt.Errorf("--%s: %w", f.Name, err)
					}
					val = abs
					roots = append(roots, abs)
				}
				in.Vars[f.Name] = val
			}
			vs, err := parseVars(vars)
			if err != nil {
				return err
			}
			maps.Copy(in.Vars, vs)
			if agent != "" {
				if _, err := g.Graph.Agent(agent); err != nil {
					return err
				}
			}
			progress := cmd.ErrOrStderr()
			if quiet {
				progress = io.Discard
			}
			wo.roots = append(wo.roots, roots...)
			out := runOutput{json: asJSON, verbose: verbose}
			if f, ok := cmd.InOrStdin().(*os.File); ok && !quiet && term.IsTerminal(int(f.Fd())) {
				out.ask = f // Calls that wait for approval are asked about here.
			}
			res, err := resolveConn(connectionOf(cmd))
			if err != nil {
				return err
			}
			if !wo.serve && (wo.taskQueue != "" || cluster(res)) {
				// The run goes to other workers: a worker's flag would
				// change nothing, and must not seem to.
				for _, f := range []string{"sandbox", "sandbox-queue", "allow-root"} {
					if cmd.Flags().Changed(f) {
						return usage(fmt.Errorf("--%s sets up a worker of this process, but this run goes to the workers of the task queue: "+
							"pass --worker to serve it from this process, or give --%s to `troupe worker`", f, f))
					}
				}
			}
			return runGraph(cmd.Context(), res, graphs, in, wo, out, cmd.OutOrStdout(), progress, cmd.ErrOrStderr())
		},
	}
	for _, g := range graphs {
		for _, f := range g.Flags {
			if _, dup := graphFlags[f.Name]; dup {
				continue
			}
			graphFlags[f.Name] = cmd.Flags().String(f.Name, "", f.Usage+" (graph "+g.Graph.Name()+")")
		}
	}
	cmd.Flags().StringVar(&inputFile, "file", "", "read the input from this file (- as INPUT reads it from stdin); up to 64 MiB")
	cmd.Flags().StringVar(&graphName, "graph", "", "graph to run (required when the binary serves several)")
	cmd.Flags().StringVar(&agent, "agent", "", "agent to start at (default: the graph's entry agent)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the whole run result as JSON")
	cmd.Flags().BoolVar(&quiet, "quiet", false, "do not show progress")
	cmd.Flags().BoolVar(&verbose, "verbose", false, "on failure, show the whole chain of errors and where the log is")
	cmd.Flags().StringArrayVar(&vars, "var", nil, "run variable KEY=VALUE (repeatable)")
	cmd.Flags().StringVar(&budgetSpec, "budget", "", "the run's budget, "+budgetUsage)
	cmd.Flags().IntVar(&maxCalls, "max-concurrent-calls", 0, "at most this many tool calls and agents-as-tools of one model turn run at once, for every agent of the run (default: each agent's MaxConcurrentCalls, 100 unless set)")
	cmd.Flags().StringVar(&wo.taskQueue, "task-queue", "", "task queue of the workers to run on (default "+troupe.DefaultTaskQueue+")")
	cmd.Flags().BoolVar(&wo.serve, "worker", false, "serve the run from a worker in this process, sandboxes on this machine "+
		"(the default on the embedded server of TROUPE_HOME without --task-queue; against a Temporal server named by --address, TEMPORAL_ADDRESS or a profile, the run goes to its workers)")
	addWaitFlag(cmd.Flags(), &wo.wait)
	addSandboxFlags(cmd.Flags(), &wo)
	addConnFlags(cmd.Flags())
	return cmd
}

// runOutput is how `troupe run` shows its result.
type runOutput struct {
	// json prints the result (or the failure) as JSON on stdout.
	json bool
	// verbose shows a failure's whole chain of errors.
	verbose bool
	// noEvents shows no progress: nothing could read it (the events are
	// read through a worker, and none serves the run).
	noEvents bool
	// ask, when set, is the terminal on which the calls that wait for
	// approval are asked about.
	ask io.Reader
}

// runGraph runs in, on the server of res, on a worker of this process
// when wo.serve asks for one or, without wo.taskQueue, on the embedded
// server of TROUPE_HOME; else on the workers of wo.taskQueue (default
// troupe.DefaultTaskQueue). A client of a Temporal server that others
// serve is only a client: it polls no queue and starts no sandbox.
func runGraph(ctx context.Context, res troupeclient.Resolved, graphs []Graph, in troupe.RunInput, wo workerOptions, out runOutput, stdout, progress, stderr io.Writer) error {
	logger, logPath, closeLog := runLog(stderr)
	defer closeLog()
	conn, err := dialTemporal(ctx, res, logger, stderr)
	if err != nil {
		return err
	}
	defer conn.close(stderr)
	ownWorker := wo.serve || wo.taskQueue == "" && conn.home != nil
	if wo.taskQueue == "" {
		// The queue `troupe dev` and `troupe worker` serve, so that a
		// run this process cannot finish goes on on any worker of the
		// same graphs.
		wo.taskQueue = troupe.DefaultTaskQueue
	}
	taskQueue := wo.taskQueue
	if ownWorker {
		wo.events = events.NewBus()
		wo.brief = !out.verbose
		stop, err := startWorker(ctx, conn.c, conn.res.Codec, conn.namespace, wo, graphs, stderr)
		if err != nil {
			return err
		}
		defer stopWithin(stop, workerStopWait)
	} else if err := needWorker(ctx, conn, taskQueue, wo.wait, stderr); err != nil {
		var e *Error
		if errors.As(err, &e) && e.Type == troupe.ErrNoWorker && !wo.wait {
			e.Message += "; `troupe run --worker` serves the run from this process instead"
		}
		return err
	}
	var opts []troupeclient.StartOption
	if g, err := findGraph(graphs, in.Graph); err == nil && !ownWorker && hasGitRepo(g) {
		// The workers of the queue may not see this disk: a local
		// repository goes to them through their blob store, under the
		// run, which is named first.
		id := troupeclient.NewRunID(in.Graph)
		if err := sendRepos(ctx, conn, g, taskQueue, id, in.Vars, repoInstead, progress); err != nil {
			return err
		}
		opts = append(opts, troupeclient.WithID(id))
	}
	run, err := conn.runs(taskQueue, wo.events).Start(ctx, in, opts...)
	if err != nil {
		if ctx.Err() != nil {
			return interrupted("", "interrupted while the run was starting", out, stdout, stderr)
		}
		return err
	}
	fmt.Fprintf(progress, "▶ run %s (graph %s)\n", run.ID(), in.Graph)
	err = awaitRun(ctx, run, out, logPath, stdout, progress, stderr)
	var stopped *Interrupted
	if ownWorker && !errors.As(err, &stopped) {
		settleMemory(ctx, conn.c, taskQueue, memoryScopes(graphs, in.Graph), memorySettleWait, progress)
	}
	return err
}

// memorySettleWait bounds how long a run with its own worker stays, once
// its result is printed, for the memory workflows it fed to finish.
const memorySettleWait = 30 * time.Second

// memoryScopes are the memory scopes the agents of graph feed.
func memoryScopes(graphs []Graph, graph string) []string {
	var scopes []string
	for _, g := range graphs {
		if g.Graph.Name() != graph {
			continue
		}
		for _, a := range g.Graph.Agents() {
			if a.Memory.Generates() && !slices.Contains(scopes, a.Memory.Scope) {
				scopes = append(scopes, a.Memory.Scope)
			}
		}
	}
	return scopes
}

// settleMemory waits, up to wait or until ctx ends (Ctrl-C), for the
// memory workflows of scopes on queue to have nothing left to do: a run
// whose worker is this process's would otherwise leave its consolidation
// to the next worker that starts. The run's result is out before; the
// wait is only the worker's, and nothing is lost when it is cut short.
func settleMemory(ctx context.Context, c client.Client, queue string, scopes []string, wait time.Duration, progress io.Writer) {
	if len(scopes) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	said := false
	for _, scope := range scopes {
		id := memory.MemoryWorkflowID(queue, scope)
		for ctx.Err() == nil && memoryBusy(ctx, c, id) {
			if !said {
				fmt.Fprintf(progress, "… consolidating memory (scope %s) before this worker stops; Ctrl-C leaves it to the next worker\n", scope)
				said = true
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
}

// memoryBusy reports whether the memory workflow id has work left: a
// phase under way, rollouts pending, or a phase 2 owed, and no failure
// (a failing one is retried by a worker, later). One that does not exist
// or has closed has none; one that does not answer yet (its first task
// under way) is asked again.
func memoryBusy(ctx context.Context, c client.Client, id string) bool {
	v, err := c.QueryWorkflow(ctx, id, "", memory.MemoryQuery)
	var notFound *serviceerror.NotFound
	var failed *serviceerror.FailedPrecondition
	switch {
	case errors.As(err, &notFound), errors.As(err, &failed):
		return false
	case err != nil:
		return true
	}
	var st memory.MemoryStatus
	if v.Get(&st) != nil {
		return false
	}
	return (st.Phase != "idle" || st.Pending > 0 || st.Owed) && st.LastError == ""
}

// awaitRun follows run from its start (taking the events of this
// process's worker, when its client has the worker's bus, as they
// happen), waits for its result and prints it. When ctx ends first
// (Ctrl-C) or the server goes away, it says that the run goes on and how
// to pick it up, and returns an *Interrupted.
func awaitRun(ctx context.Context, run *troupeclient.Run, out runOutput, logPath string, stdout, progress, stderr io.Writer) error {
	id := run.ID()
	fctx, cancel := context.WithCancel(ctx)
	followed := make(chan struct{})
	printer := newEventPrinter(progress)
	show := printer.event
	if out.ask != nil && !out.noEvents {
		a := newAsker(out.ask, progress)
		go a.loop(fctx, run)
		show = func(e troupe.Event) {
			printer.event(e)
			switch e.Kind {
			case troupe.EventApprovalRequested:
				a.waits(e.Approval)
			case troupe.EventApprovalDecided:
				a.decided(e.Approval)
			}
		}
	}
	go func() {
		defer close(followed)
		if !out.noEvents {
			// The turns' text as it is generated, but not under --json
			// (its output stays what it was) nor --quiet.
			var opts []troupeclient.FollowOption
			if !out.json && progress != io.Discard {
				opts = append(opts, troupeclient.WithDeltas())
			}
			_ = run.Follow(fctx, show, opts...)
			printer.endLine()
		}
	}()
	res, err := run.Result(ctx)
	cancel()
	if err != nil {
		var wee *temporal.WorkflowExecutionError
		if !errors.As(err, &wee) && !isClosedStatus(err) {
			// Not the run's failure: this command stopped waiting, and
			// does not wait for the follower's last readings either (an
			// agent busy in a long workflow task answers only when the
			// task ends).
			why := "interrupted"
			if ctx.Err() == nil {
				why = "lost the Temporal server (" + oneLine(err.Error()) + ")"
			}
			return interrupted(id, why, out, stdout, stderr)
		}
		<-followed
		f := describeFailure(id, err)
		if out.json {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			_ = enc.Encode(f)
		} else if rep := f.Budget; rep != nil {
			// What the run spent, and how to give a run more.
			printSpend(stderr, "", rep.Usage, rep.Cost, rep.Agents, rep)
			fmt.Fprintf(stderr, "a run with more: troupe run --budget %s ... (N the new limit; --budget off runs with none)\n", spend.Raise(rep))
		}
		if out.verbose {
			fmt.Fprintf(stderr, "troupe: run %s failed:\n  %s\n  the SDK's log: %s\n", id, err, logPath)
		}
		return f
	}
	<-followed
	if err := printResult(stdout, *res, out.json); err != nil {
		return err
	}
	if !out.json {
		printSpend(progress, "", res.Usage, res.Cost, res.Agents, res.Budget)
	}
	return nil
}

// workerStopWait bounds how long a troupe command waits for its worker to
// stop. A workflow task that runs local activities back to back (an
// agent's model and function calls) goes on until the agent blocks; on
// Ctrl-C the command does not wait for that: the task is abandoned, and
// the server hands the workflow to a worker again once it times out.
const workerStopWait = 2 * time.Second

// stopWithin calls stop and returns when it has, or after d.
func stopWithin(stop func(), d time.Duration) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		stop()
	}()
	select {
	case <-done:
	case <-time.After(d):
	}
}

// isClosedStatus reports whether err says the run closed other than by
// completing or failing: cancelled, terminated, timed out.
func isClosedStatus(err error) bool {
	var ce *temporal.CanceledError
	var te *temporal.TerminatedError
	var to *temporal.TimeoutError
	return errors.As(err, &ce) || errors.As(err, &te) || errors.As(err, &to)
}

// printResult prints a run's result: the output (a string as text, a
// document indented) or, as JSON, the whole result.
func printResult(stdout io.Writer, res troupe.RunResult, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	var text string
	if json.Unmarshal(res.Output, &text) == nil {
		_, err := fmt.Fprintln(stdout, text)
		return err
	}
	var doc any
	if err := json.Unmarshal(res.Output, &doc); err != nil {
		return err
	}
	pretty, _ := json.MarshalIndent(doc, "", "  ")
	_, err := fmt.Fprintln(stdout, string(pretty))
	return err
}

// Interrupted is a troupe command that stopped waiting for a run that goes
// on (Ctrl-C, or the Temporal server went away). Its Error says how to
// pick the run up; the troupe command exits with status 130 for it.
type Interrupted struct {
	WorkflowID string
	// Why is what stopped the command: "interrupted", or the lost server.
	Why string
}

func (e *Interrupted) Error() string {
	if e.WorkflowID == "" {
		return e.Why + ": the run may not have started; `troupe runs ls` lists it if it did"
	}
	return fmt.Sprintf("%s: run %s goes on. A worker of its graph picks it up (`troupe dev`, `troupe worker`); "+
		"otherwise `troupe runs resume %s` runs it here, `troupe runs follow %s` watches it, `troupe runs cancel %s` stops it",
		e.Why, e.WorkflowID, e.WorkflowID, e.WorkflowID, e.WorkflowID)
}

func interrupted(id, why string, out runOutput, stdout, stderr io.Writer) error {
	e := &Interrupted{WorkflowID: id, Why: why}
	if out.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(RunFailure{WorkflowID: id, Err: FailureInfo{Type: "troupe.Interrupted", Message: e.Error()}})
	}
	return e
}

// conn is a client of the Temporal server a troupe command uses: the one
// its connection settings name (resolveConn), or the server of
// TROUPE_HOME.
type conn struct {
	c         client.Client
	namespace string
	// res is what the command's connection settings came to.
	res  troupeclient.Resolved
	home *homeServer // nil when the settings name a server
	// store is the event store (eventStore), once opened is set: nil
	// when there is none to use or it cannot be opened.
	store  *blob.Store
	opened bool
	// inputs is the workers' blob store, once a message too big to travel
	// inside Temporal or a repository was put there (workersBlobs); the
	// MCP server's calls put theirs at once, so inputsMu guards it.
	inputs   *blob.Store
	inputsMu sync.Mutex
	// stopTelemetry flushes and stops the client's telemetry.
	stopTelemetry func()
	// tracesTo is where this command exports traces (the endpoint), or
	// "" when it exports none; untracedSaid whether warnUntraced has
	// spoken.
	tracesTo     string
	untracedSaid bool
}

// runs is the run client of the connection, starting runs on queue (the
// default one when empty) and following them with the events of bus (a
// worker of this process) when set.
func (cn *conn) runs(queue string, bus *events.Bus) *troupeclient.Client {
	cl, err := troupeclient.New(troupeclient.Config{Temporal: cn.c, TaskQueue: queue, Events: bus, Store: cn.eventStore(), Inputs: workersStore{cn, queue},
		DataConverter: cn.res.Options.DataConverter})
	if err != nil {
		panic(err) // unreachable: cn.c is set
	}
	return cl
}

// dialTemporal connects to the Temporal server res names or, when it
// names none, to the server of TROUPE_HOME, which it starts when none
// runs. logger takes the SDK's log (nil: errors only, on stderr).
func dialTemporal(ctx context.Context, res troupeclient.Resolved, logger log.Logger, stderr io.Writer) (*conn, error) {
	opts := res.Options
	cn := &conn{res: res}
	var err error
	if !cluster(res) {
		if cn.home, err = openHomeServer(ctx, stderr); err != nil {
			return nil, err
		}
		// Nothing of a profile (TLS, API key, headers) applies to it;
		// the payload codec does.
		opts = client.Options{HostPort: cn.home.info.Address, Namespace: cn.home.info.Namespace,
			DataConverter: res.Options.DataConverter, FailureConverter: res.Options.FailureConverter}
	}
	opts.Logger = logger
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	opts, cn.stopTelemetry, err = withTelemetry(ctx, opts)
	if err == nil {
		if cn.c, err = client.DialContext(ctx, opts); err != nil {
			cn.stopTelemetry()
			err = dialError(cn, opts.HostPort, err)
		}
	}
	if err != nil {
		if cn.home != nil {
			cn.home.close(stderr)
		}
		return nil, err
	}
	cn.namespace = opts.Namespace
	cn.tracesTo = telemetry.TraceEndpoint()
	return cn, nil
}

// eventStore is the blob store the runs' workers save event pages to:
// TROUPE_BLOB_URL, else the home's file store when the home's server is
// the one in use (a remote cluster's workers use a store of their own).
// It is opened once and not checked: a follower reads pages from it when
// it can, and the earlier runs when not.
func (cn *conn) eventStore() *blob.Store {
	if cn.opened {
		return cn.store
	}
	cn.opened = true
	url := os.Getenv("TROUPE_BLOB_URL")
	if url == "" && cn.home != nil {
		url, _ = blobURL()
	}
	if url != "" {
		cn.store, _ = blob.Open(context.Background(), url)
	}
	return cn.store
}

// close closes the client and the event store, and releases the home's
// server.
func (cn *conn) close(stderr io.Writer) {
	if cn.store != nil {
		cn.store.Close()
	}
	if cn.inputs != nil {
		cn.inputs.Close()
	}
	cn.c.Close()
	cn.stopTelemetry()
	if cn.home != nil {
		cn.home.close(stderr)
	}
}

// eventPrinter prints a run's progress: a line per event (printEvent),
// and each turn's text as it streams in (text_delta), on the line of its
// turn, which the turn's model_turn event ends.
type eventPrinter struct {
	w io.Writer
	// open is the turn whose line of streamed text is open (no newline
	// yet), if any.
	open string
	// streamed holds the start of each streamed turn's text, to tell
	// whether its model_turn event says more than was shown.
	streamed map[string]string
}

func newEventPrinter(w io.Writer) *eventPrinter {
	return &eventPrinter{w: w, streamed: map[string]string{}}
}

// streamedKeep is how much of a turn's streamed text the printer keeps:
// more than a model_turn event's detail holds (200 bytes).
const streamedKeep = 256

func (p *eventPrinter) event(e troupe.Event) {
	key := fmt.Sprintf("%s#%d", e.WorkflowID, e.Turn)
	switch e.Kind {
	case troupe.EventTextDelta:
		if p.open != key {
			p.endLine()
			tag := "[" + e.Agent + "]"
			if _, ok := p.streamed[key]; ok {
				fmt.Fprintf(p.w, "  %s turn %d …", tag, e.Turn) // Taken up again after another's event.
			} else {
				fmt.Fprintf(p.w, "  %s turn %d: ", tag, e.Turn)
			}
			p.open = key
		}
		fmt.Fprint(p.w, e.Detail)
		if text := p.streamed[key]; len(text) < streamedKeep {
			p.streamed[key] = text + e.Detail[:min(len(e.Detail), streamedKeep-len(text))]
		}
		return
	case troupe.EventTurn:
		if text, ok := p.streamed[key]; ok {
			// The text is shown already: the turn ends its line, and says
			// what else the turn did (its tool calls).
			delete(p.streamed, key)
			if p.open == key {
				p.endLine()
			}
			if strings.HasPrefix(text, strings.TrimSuffix(e.Detail, "…")) {
				return
			}
		}
	}
	p.endLine()
	printEvent(p.w, e)
}

// endLine ends the open line of streamed text, if any.
func (p *eventPrinter) endLine() {
	if p.open != "" {
		fmt.Fprintln(p.w)
		p.open = ""
	}
}

// rootEvent reports whether e is the run's or the session's own: its
// workflow id, unlike its agents', has no slash.
func rootEvent(e troupe.Event) bool {
	return e.WorkflowID != "" && !strings.Contains(e.WorkflowID, "/")
}

func printEvent(w io.Writer, e troupe.Event) {
	tag := "[" + e.Agent + "]"
	if e.Agent == "" {
		tag = "[run]" // the orchestrator's own
	}
	switch e.Kind {
	case troupe.EventAgentStarted:
		if e.Child != "" {
			fmt.Fprintf(w, "● %s started\n", e.Agent)
		}
	case troupe.EventTurn:
		if e.Detail != "" {
			fmt.Fprintf(w, "  %s turn %d: %s\n", tag, e.Turn, oneLine(e.Detail))
		} else {
			fmt.Fprintf(w, "  %s turn %d\n", tag, e.Turn)
		}
	case troupe.EventToolCalled:
		fmt.Fprintf(w, "  %s → %s %s\n", tag, e.Tool, oneLine(e.Detail))
	case troupe.EventToolResult:
		fmt.Fprintf(w, "  %s ← %s: %s\n", tag, e.Tool, oneLine(e.Detail))
	case troupe.EventToolInDoubt:
		fmt.Fprintf(w, "  %s ⚠ %s may or may not have taken effect, %s\n", tag, e.Tool, oneLine(e.Detail))
	case troupe.EventAgentToolStarted:
		fmt.Fprintf(w, "  %s ⇉ %s (agent as tool): %s\n", tag, e.Tool, oneLine(e.Detail))
	case troupe.EventAgentToolFinished:
		fmt.Fprintf(w, "  %s ⇇ %s: %s\n", tag, e.Tool, oneLine(e.Detail))
	case troupe.EventHandoff:
		if e.Turn == 0 {
			fmt.Fprintf(w, "  handoff: %s\n", e.Detail)
		}
	case troupe.EventOutputInvalid:
		fmt.Fprintf(w, "  %s invalid output, asking again: %s\n", tag, oneLine(e.Detail))
	case troupe.EventModelRetry:
		fmt.Fprintf(w, "  %s %s\n", tag, oneLine(e.Detail))
	case troupe.EventFinal:
		// The root's (a run's, a session turn's) repeats its agent's:
		// the command shows the outcome itself.
		if e.Turn > 0 && !rootEvent(e) {
			fmt.Fprintf(w, "  %s final output\n", tag)
		}
	case troupe.EventSandboxProvisioned, troupe.EventSandboxRestored, troupe.EventSandboxSuspended,
		troupe.EventSandboxLost, troupe.EventSandboxStopped, troupe.EventSandboxCallRetry, troupe.EventSandboxStopRetry, troupe.EventSandboxRerouted:
		fmt.Fprintf(w, "  %s %s: %s\n", tag, strings.ReplaceAll(e.Kind, "_", " "), oneLine(e.Detail))
	case troupe.EventSandboxSnapshotFailed:
		// Whole: it says which file and what to do.
		fmt.Fprintf(w, "  %s ✗ sandbox snapshot failed: %s\n", tag, strings.ReplaceAll(e.Detail, "\n", " "))
	case troupe.EventFailed:
		if !rootEvent(e) {
			fmt.Fprintf(w, "  %s failed: %s\n", tag, oneLine(e.Detail))
		}
	case troupe.EventBudgetExceeded:
		fmt.Fprintf(w, "  %s ✗ %s\n", tag, oneLine(e.Detail))
	case troupe.EventApprovalRequested:
		root, _, _ := strings.Cut(e.WorkflowID, "/")
		fmt.Fprintf(w, "  %s ⏸ %s waits for approval (%s): %s\n", tag, e.Tool, e.Approval, oneLine(e.Detail))
		fmt.Fprintf(w, "      troupe runs approve %s %s   (or reject, with --message)\n", root, e.Approval)
	case troupe.EventApprovalDecided:
		fmt.Fprintf(w, "  %s %s %s\n", tag, e.Tool, oneLine(e.Detail))
	case troupe.EventLiveText:
		// Whole: it says which worker and why.
		fmt.Fprintf(w, "  ! no live text: %s\n", strings.ReplaceAll(e.Detail, "\n", " "))
	}
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

// isURL reports whether a host-path flag holds a URL (a git remote, say)
// rather than a path.
func isURL(s string) bool {
	return strings.Contains(s, "://") || strings.HasPrefix(s, "git@")
}

// runLog opens the log of this `troupe run`'s Temporal SDK (its client and
// worker), $TROUPE_HOME/logs/run-PID.log, so that nothing but the run's
// progress shows on the terminal; logs older than a week go. When it cannot
// (a read-only home, say), it says so and logs errors to stderr.
func runLog(stderr io.Writer) (log.Logger, string, func()) {
	f, path, err := openRunLog()
	if err != nil {
		fmt.Fprintf(stderr, "troupe: no log file (%v): SDK errors go to stderr\n", err)
		return quietLogger(), "stderr", func() {}
	}
	l := log.NewStructuredLogger(slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelInfo})))
	return l, path, func() { f.Close() }
}

func openRunLog() (*os.File, string, error) {
	dir, err := home()
	if err != nil {
		return nil, "", err
	}
	dir = filepath.Join(dir, "logs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", err
	}
	if old, err := filepath.Glob(filepath.Join(dir, "run-*.log")); err == nil {
		for _, p := range old {
			if fi, err := os.Stat(p); err == nil && time.Since(fi.ModTime()) > 7*24*time.Hour {
				os.Remove(p)
			}
		}
	}
	path := filepath.Join(dir, fmt.Sprintf("run-%d.log", os.Getpid()))
	f, err := os.Create(path)
	return f, path, err
}

// RunFailure is a failed run, as `troupe run` tells it: the agent that
// failed, the error's type (one of the workflows.Err* types) and what went
// wrong. Its Error is one line; with --json it is printed as
// {"workflow_id", "error": {"type", "message"}, "agent"}.
type RunFailure struct {
	WorkflowID string      `json:"workflow_id"`
	Agent      string      `json:"agent,omitempty"`
	Err        FailureInfo `json:"error"`
	// Budget, for a run its budget stopped (troupe.BudgetExceeded), is
	// the budget and what the run spent, per agent.
	Budget *runtime.BudgetReport `json:"budget,omitempty"`
}

// FailureInfo is a run failure's typed error.
type FailureInfo struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

func (f *RunFailure) Error() string {
	who := "the run"
	if f.Agent != "" {
		who = "agent " + f.Agent
	}
	msg := strings.Join(strings.Fields(f.Err.Message), " ") // One line.
	switch f.Err.Type {
	case "":
		return fmt.Sprintf("%s failed: %s", who, msg)
	case TypeCanceled, TypeTerminated, TypeTimedOut:
		return fmt.Sprintf("the run %s", msg)
	case troupe.ErrBudgetExceeded:
		// No agent failed: the budget stopped them.
		return fmt.Sprintf("the run stopped: %s: %s", f.Err.Type, msg)
	case troupe.ErrBadBudget:
		msg = spend.Refusal(msg)
	}
	return fmt.Sprintf("%s failed: %s: %s", who, f.Err.Type, msg)
}

// The types of FailureInfo for runs that closed without failing.
const (
	// TypeCanceled is a run cancelled (troupe runs cancel, Ctrl-C of an
	// MCP call).
	TypeCanceled = "troupe.Canceled"
	// TypeTerminated is a run terminated (troupe runs terminate).
	TypeTerminated = "troupe.Terminated"
	// TypeTimedOut is a run past its workflow timeout.
	TypeTimedOut = "troupe.TimedOut"
)

// describeFailure reads a run's failure: the innermost agent workflow
// that failed, and the first typed error of the chain.
func describeFailure(id string, err error) *RunFailure {
	f := &RunFailure{WorkflowID: id, Err: FailureInfo{Message: err.Error()}}
	for e := err; e != nil; e = errors.Unwrap(e) {
		var child *temporal.ChildWorkflowExecutionError
		if !errors.As(e, &child) {
			break
		}
		id := child.WorkflowID()
		if i := strings.LastIndexByte(id, '/'); i >= 0 {
			id = id[i+1:]
		}
		if _, name, ok := strings.Cut(id, "-"); ok {
			f.Agent = name
		}
		e = child
	}
	var ae *temporal.ApplicationError
	var ce *temporal.CanceledError
	var te *temporal.TerminatedError
	var to *temporal.TimeoutError
	switch {
	case errors.As(err, &ae):
		f.Err = FailureInfo{Type: ae.Type(), Message: ae.Message()}
		f.Budget, _ = troupe.BudgetReportOf(err)
		if !strings.HasPrefix(ae.Type(), "troupe.") {
			f.Err.Type = "" // A Go type's name (an untyped error), not one of ours.
		}
	case errors.As(err, &ce):
		f.Agent, f.Err = "", FailureInfo{Type: TypeCanceled, Message: "was cancelled"}
	case errors.As(err, &te):
		f.Agent, f.Err = "", FailureInfo{Type: TypeTerminated, Message: "was terminated (its history says why)"}
	case errors.As(err, &to):
		f.Agent, f.Err = "", FailureInfo{Type: TypeTimedOut, Message: "timed out"}
	}
	return f
}
