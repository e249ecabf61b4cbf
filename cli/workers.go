package cli

// The commands that need a worker (sessions, `run --task-queue`, `runs
// follow` of a run that goes on, approvals, chat) ask the server first
// whether one serves their task queue: without one, a session's update or
// query waits for ever (or until its deadline, with "context deadline
// exceeded"), and the command would print nothing. They say so at once
// instead, naming the queue and what to start, or wait with --wait.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/troupe-dev/troupe"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/devserver"
)

// workerGrace is how long a command looks for a worker of its queue before
// it says that none serves it: a worker that has just started may not
// have polled the server yet.
const workerGrace = 1500 * time.Millisecond

// workerPoll is how often needWorker asks again.
const workerPoll = 100 * time.Millisecond

// addWaitFlag adds --wait, which makes a command that needs a worker wait
// for one instead of failing with troupe.ErrNoWorker.
func addWaitFlag(f *pflag.FlagSet, wait *bool) {
	f.BoolVar(wait, "wait", false, "when no worker serves the task queue, wait for one instead of failing")
}

// needWorker returns nil once a worker serves queue. When none does
// within workerGrace, it fails with troupe.ErrNoWorker, saying what to
// start; with wait it says on stderr that it waits, and waits until one
// does or ctx ends. When the server cannot say (an older server, no
// right to describe the queue), it returns nil: the command's own call
// then says what is wrong.
func needWorker(ctx context.Context, cn *conn, queue string, wait bool, stderr io.Writer) error {
	if queue == "" {
		queue = troupe.DefaultTaskQueue
	}
	deadline := time.Now().Add(workerGrace)
	if cn.home != nil && cn.home.srv != nil {
		// This process has just started the server: no worker has
		// joined it yet.
		deadline = time.Now()
	}
	said := false
	for {
		if served(ctx, cn, queue) {
			if said {
				fmt.Fprintf(stderr, "troupe: a worker serves task queue %s now\n", queue)
			}
			warnUntraced(ctx, cn, queue, stderr)
			return nil
		}
		if !wait && time.Now().After(deadline) {
			return noWorker(cn, queue, " (or pass --wait to wait for one)")
		}
		if wait && !said {
			fmt.Fprintf(stderr, "troupe: no worker serves task queue %s; waiting for one (start it with %s)\n", queue, startWorkerHint(cn, queue, true))
			said = true
		}
		select {
		case <-ctx.Done():
			return &Error{Type: troupe.ErrNoWorker, Message: fmt.Sprintf("no worker served task queue %s while this command waited", queue), Err: ctx.Err()}
		case <-time.After(workerPoll):
		}
	}
}

// warnUntraced says on stderr, once per connection, that this command
// exports traces while workers of queue export none, naming them: the
// spans of the run's workflows, model calls and tools are theirs to
// record, so its trace would hold this command's spans and little else,
// and nothing would say why. A worker whose identity does not say
// (tracesOf: one of before troupe said it, or one a program of its own
// runs) is not named: it may export.
func warnUntraced(ctx context.Context, cn *conn, queue string, stderr io.Writer) {
	if cn.tracesTo == "" || cn.untracedSaid {
		return
	}
	pollers, err := freshPollers(ctx, cn.c, queue)
	if err != nil {
		return
	}
	var untraced []string
	for _, p := range pollers {
		on, known, rest := tracesOf(p.GetIdentity())
		who, _, _ := strings.Cut(rest, " ")
		if known && !on && !slices.Contains(untraced, who) {
			untraced = append(untraced, who)
		}
	}
	if len(untraced) == 0 {
		return
	}
	cn.untracedSaid = true
	fmt.Fprintf(stderr, "troupe: traces: this command exports them to %s, but the worker(s) serving task queue %s (%s) export none: "+
		"the run's own spans are missing from its trace; set OTEL_EXPORTER_OTLP_ENDPOINT for `troupe worker` (or `troupe dev`) too\n",
		cn.tracesTo, queue, strings.Join(untraced, ", "))
}

// noWorker is the troupe.ErrNoWorker of queue: what to start, then more.
func noWorker(cn *conn, queue, more string) *Error {
	return &Error{Type: troupe.ErrNoWorker, Message: fmt.Sprintf("no worker serves task queue %s; start one with %s%s", queue, startWorkerHint(cn, queue, false), more)}
}

// idleHome is the troupe.ErrNoWorker of a command that needs a worker
// of queue (the default one when empty) when res names no server
// and no server runs on TROUPE_HOME: no worker can serve it then (the
// home's workers run with its server, or join it), so the command says
// so at once rather than start the server, which takes seconds, to ask
// it. It is nil otherwise, and with wait: that command starts the server
// and waits for a worker to join it.
func idleHome(res troupeclient.Resolved, queue string, wait bool) error {
	if wait || cluster(res) {
		return nil
	}
	dir, err := home()
	if err != nil {
		return nil
	}
	if _, err := devserver.Running(dir); !errors.Is(err, devserver.ErrNotRunning) {
		return nil
	}
	if queue == "" {
		queue = troupe.DefaultTaskQueue
	}
	return &Error{Type: troupe.ErrNoWorker, Message: fmt.Sprintf("no worker serves task queue %s: no troupe command runs the server of %s; "+
		"start one with `troupe dev` (or pass --wait to wait for one)", queue, dir)}
}

// startWorkerHint says how to start a worker of queue for the server cn
// uses. A command that runs the home's server itself keeps it up only
// while it runs: while it waits, a worker must join that server; once it
// has exited, `troupe dev` starts both.
func startWorkerHint(cn *conn, queue string, waiting bool) string {
	flag := ""
	if queue != troupe.DefaultTaskQueue {
		flag = " --task-queue " + queue
	}
	switch {
	case cn.home == nil:
		return "`troupe worker" + flag + "` against the same Temporal server (" + whereFrom(cn.res) + ")"
	case waiting && cn.home.srv != nil:
		return "`TEMPORAL_ADDRESS=" + cn.home.info.Address + " troupe worker" + flag + "`"
	}
	return "`troupe dev`"
}

// withWorker is withTemporal for a command that needs a worker of queue
// (the default one when empty): fn runs once one serves it (needWorker).
func withWorker(cmd *cobra.Command, queue string, wait bool, fn func(*conn) error) error {
	res, err := resolveConn(connectionOf(cmd))
	if err != nil {
		return err
	}
	if err := idleHome(res, queue, wait); err != nil {
		return err
	}
	return withConn(cmd, res, func(cn *conn) error {
		if err := needWorker(cmd.Context(), cn, queue, wait, cmd.ErrOrStderr()); err != nil {
			return err
		}
		return fn(cn)
	})
}

// queueOf is the task queue of workflow id (a run, a session), or "" when
// the server cannot say (no such workflow: the command's own call says
// so).
func queueOf(ctx context.Context, cn *conn, id string) string {
	d, err := cn.c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return ""
	}
	return d.GetExecutionConfig().GetTaskQueue().GetName()
}

// withWorkerOf is withWorker for a command on workflow id, which needs a
// worker of the workflow's own queue; for an id the server does not know,
// fn runs at once, and its call says that it is not found.
func withWorkerOf(cmd *cobra.Command, id string, wait bool, fn func(*conn) error) error {
	res, err := resolveConn(connectionOf(cmd))
	if err != nil {
		return err
	}
	if err := idleHome(res, "", wait); err != nil {
		return err
	}
	return withConn(cmd, res, func(cn *conn) error {
		if queue := queueOf(cmd.Context(), cn, id); queue != "" {
			if err := needWorker(cmd.Context(), cn, queue, wait, cmd.ErrOrStderr()); err != nil {
				return err
			}
		}
		return fn(cn)
	})
}

// unservedStatus is the status `sessions ls` gives, without a worker, a
// session whose workflow is open: what it does only a worker can say.
const unservedStatus runtime.SessionStatus = "unknown (no worker)"

// recordedSessions lists the sessions of queue from the server's records
// (visibility, and each one's first event), for `sessions ls` when no
// worker serves queue and the session manager cannot answer: ids, graphs,
// agents and names as they were created, when, and whether they were
// stopped; no turns or usage. At most max, newest first.
func recordedSessions(ctx context.Context, cn *conn, queue string, max int) ([]troupeclient.SessionEntry, error) {
	q := fmt.Sprintf("WorkflowType = '%s' AND TaskQueue = '%s'", troupe.SessionWorkflowName, queue)
	var out []troupeclient.SessionEntry
	var token []byte
	for len(out) < max {
		resp, err := cn.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: cn.namespace, Query: q, NextPageToken: token})
		if err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		for _, e := range resp.GetExecutions() {
			if len(out) == max {
				break
			}
			id := e.GetExecution().GetWorkflowId()
			entry := troupeclient.SessionEntry{ID: id, Status: unservedStatus, Created: e.GetStartTime().AsTime()}
			if e.GetStatus() != enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
				entry.Status = runtime.SessionStopped
				entry.LastActivity = e.GetCloseTime().AsTime()
			}
			if in, err := cn.runs(queue, nil).Session(id).Input(ctx); err == nil {
				entry.Graph, entry.Agent, entry.Name, entry.Policy = in.Graph, in.Agent, in.Name, in.Policy
			}
			out = append(out, entry)
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	slices.Reverse(out) // oldest first, as the manager lists them
	return out, nil
}
