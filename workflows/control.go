package workflows

import (
	"slices"

	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/workflows/lease"
)

// control is where a workflow of a session's turn stands on its
// session's commands, and the agent workflows it passes them to:
//
//   - paused: it starts no model call, tool call or agent workflow until
//     resumed; the calls running finish, and the agent's sandbox is
//     suspended while it waits;
//   - interrupted: it stops at its next step boundary (before its next
//     model call, or instead of the tool calls a model turn asked for),
//     keeping what it did, and starts no more agent workflows.
//
// The state changes in the workflow's own coroutines only (a signal's,
// an update's), so workflow code reads it between blocking points.
type control struct {
	paused, interrupted bool
	// children are the agent workflows this one runs that have started,
	// in the order they started.
	children []string
	// ch is the signal channel the controls come by, if any.
	ch workflow.ReceiveChannel
	// seq is the Seq of the last pause or resume taken.
	seq int
}

// newControl is a workflow's control; listen has it take Controls by
// signal (agent workflows; a session takes its commands by update).
func newControl(ctx workflow.Context, listen bool) *control {
	c := &control{}
	if !listen {
		return c
	}
	c.ch = workflow.GetSignalChannel(ctx, troupe.ControlSignal)
	workflow.Go(ctx, func(gctx workflow.Context) {
		for {
			var cmd troupe.Control
			if !c.ch.Receive(gctx, &cmd) {
				return
			}
			c.apply(gctx, cmd)
		}
	})
	return c
}

// drain applies the controls that came in and were not taken yet, before
// the workflow continues as new (which would lose them).
func (c *control) drain(ctx workflow.Context) {
	if c == nil || c.ch == nil {
		return
	}
	var cmd troupe.Control
	for c.ch.ReceiveAsync(&cmd) {
		c.apply(ctx, cmd)
	}
}

// apply takes a control and passes it on to the running children (a
// child that has just ended does not get it, which is as well).
func (c *control) apply(ctx workflow.Context, cmd troupe.Control) {
	switch cmd.Op {
	case troupe.ControlPause, troupe.ControlResume:
		if cmd.Seq != 0 && cmd.Seq <= c.seq {
			return // An older one, come late.
		}
		c.seq = max(c.seq, cmd.Seq)
		c.paused = cmd.Op == troupe.ControlPause
	case troupe.ControlInterrupt:
		c.interrupted = true
	default:
		return
	}
	for _, id := range c.children {
		_ = workflow.SignalExternalWorkflow(ctx, id, "", troupe.ControlSignal, cmd)
	}
}

// track makes the child agent workflow id, started as f, one that gets
// the controls once it has started, and gives it the state it missed in
// between; it forgets the child when it ends.
func (c *control) track(ctx workflow.Context, id string, f workflow.ChildWorkflowFuture) {
	if c == nil {
		return
	}
	workflow.Go(ctx, func(gctx workflow.Context) {
		if f.GetChildWorkflowExecution().Get(gctx, nil) != nil {
			return
		}
		c.children = append(c.children, id)
		if c.paused {
			_ = workflow.SignalExternalWorkflow(gctx, id, "", troupe.ControlSignal, troupe.Control{Op: troupe.ControlPause, Seq: c.seq})
		}
		if c.interrupted {
			_ = workflow.SignalExternalWorkflow(gctx, id, "", troupe.ControlSignal, troupe.Control{Op: troupe.ControlInterrupt})
		}
		_ = f.Get(gctx, nil)
		c.children = slices.DeleteFunc(c.children, func(s string) bool { return s == id })
	})
}

// hold waits while paused; sb, when set, is the agent's sandbox, which is
// suspended (snapshot, then stop) for the length of the pause.
func (c *control) hold(ctx workflow.Context, sb *lease.Life) error {
	if c == nil || !c.paused {
		return nil
	}
	if sb != nil && sb.Lease().Live() {
		// A sandbox whose snapshot fails stays up through the pause (an
		// event says so): stopping it would lose its files.
		if err := sb.Suspend(ctx, "pause"); err != nil && troupe.ErrorType(err) != troupe.ErrSnapshotFailed {
			return err
		}
	}
	return workflow.Await(ctx, func() bool { return !c.paused })
}

// stopping reports whether the workflow is to stop at this boundary.
func (c *control) stopping() bool { return c != nil && c.interrupted }

// Hold, Stopping and Track are the controls as a chain of agents obeys
// them (handoff.Control): a chain holds no sandbox of its own.
func (c *control) Hold(ctx workflow.Context) error { return c.hold(ctx, nil) }

func (c *control) Stopping() bool { return c.stopping() }

func (c *control) Track(ctx workflow.Context, id string, f workflow.ChildWorkflowFuture) {
	c.track(ctx, id, f)
}
