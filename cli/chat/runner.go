package chat

// Runner wires the chat to a Troupe client: each effect is a client call
// whose outcome comes back as a message.

import (
	"context"
	"fmt"
	"maps"
	"sync"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/troupe-dev/troupe/agents"
	troupeclient "github.com/troupe-dev/troupe/client"
)

// NewRunner returns a Runner whose calls use cl under ctx. served, when
// set, tells whether a worker serves cl's task queue (DoCheckServed);
// nil means assume so.
func NewRunner(ctx context.Context, cl *troupeclient.Client, served func(ctx context.Context) bool) *Runner {
	return &Runner{ctx: ctx, cl: cl, served: served}
}

// Runner runs a chat's effects as calls of a Troupe client: Do is the
// do of New. Set Send to the program's Send before the program runs; the
// session's follower sends its events there.
type Runner struct {
	ctx    context.Context
	cl     *troupeclient.Client
	served func(ctx context.Context) bool
	// Send delivers a message to the program (tea.Program.Send).
	Send func(tea.Msg)
	// Vars are the variables of the sessions /new creates.
	Vars map[string]string
	// Budget, when set, is the budget of the sessions /new creates, over
	// their graph's default (the zero Budget lifts it).
	Budget *agents.Budget
	// PrepareVars, when set, readies the variables of each session /new
	// creates before the session exists: it gets the session's graph,
	// the id it will have, and its own copy of Vars, which it may change
	// (troupe chat sends a repository on this disk to the workers there
	// and names it by reference). Its error, one line the chat shows,
	// creates no session. Nil creates sessions with Vars as they are.
	PrepareVars func(ctx context.Context, graph, id string, vars map[string]string) error

	mu     sync.Mutex
	follow context.CancelFunc // stops the follower of the open session
}

// Do returns the command that makes e's call and answers with its
// outcome (a Msg).
func (r *Runner) Do(e Effect) tea.Cmd {
	ctx := r.ctx
	failed := func(err error) tea.Msg { return Failed{Do: e.Do, Session: e.Session, Text: e.Arg, Err: err} }
	switch e.Do {
	case DoCheckServed:
		return func() tea.Msg {
			return Served{Queue: r.cl.TaskQueue(), OK: r.served == nil || r.served(ctx)}
		}
	case DoDecide:
		return func() tea.Msg {
			ds, err := r.cl.Session(e.Session).Decide(ctx, e.Decision)
			if err != nil {
				return failed(err)
			}
			return Decided{Session: e.Session, Decisions: ds}
		}
	case DoCreate:
		return func() tea.Msg {
			in := troupeclient.SessionInput{Graph: e.Arg, Vars: r.Vars, Budget: r.Budget}
			var opts []troupeclient.StartOption
			if r.PrepareVars != nil {
				// Named first, for what PrepareVars puts under it; Vars
				// stay as they are for the next /new.
				id := troupeclient.NewSessionID(e.Arg)
				in.Vars = maps.Clone(r.Vars)
				if in.Vars == nil {
					in.Vars = map[string]string{}
				}
				if err := r.PrepareVars(ctx, e.Arg, id, in.Vars); err != nil {
					return failed(err)
				}
				opts = append(opts, troupeclient.WithID(id))
			}
			_, entry, err := r.cl.CreateSession(ctx, in, opts...)
			if err != nil {
				return failed(err)
			}
			return Created{Entry: entry}
		}
	case DoOpen, DoInfo:
		return func() tea.Msg {
			info, err := r.cl.Session(e.Session).Info(ctx)
			switch {
			case err != nil:
				return failed(err)
			case e.Do == DoOpen:
				// The calls waiting since before the chat opened it.
				approvals, _ := r.cl.Session(e.Session).Approvals(ctx)
				return Opened{Info: info, Approvals: approvals}
			}
			return Refreshed{Info: info}
		}
	case DoFollow:
		fctx := r.following()
		return func() tea.Msg {
			err := r.cl.Session(e.Session).FollowFrom(fctx, e.Cursor, func(ev troupeclient.Event) {
				r.Send(Followed{Session: e.Session, Event: ev})
			}, troupeclient.WithDeltas())
			if fctx.Err() != nil {
				err = nil // another session opened, or the chat ended
			}
			return FollowEnded{Session: e.Session, Err: err}
		}
	case DoSend:
		return func() tea.Msg {
			res, err := r.cl.Session(e.Session).Send(ctx, e.Arg, false)
			if err != nil {
				return failed(err)
			}
			return Sent{Session: e.Session, Text: e.Arg, Result: res}
		}
	case DoList:
		return func() tea.Msg {
			list, err := r.cl.Sessions(ctx)
			if err != nil {
				return failed(err)
			}
			return Listed{Sessions: list}
		}
	case DoCommand:
		return func() tea.Msg {
			entry, err := r.cl.Session(e.Session).Command(ctx, troupeclient.SessionCommand{Op: e.Command, Arg: e.Arg})
			if err != nil {
				return failed(err)
			}
			return Commanded{Session: e.Session, Command: e.Command, Entry: entry}
		}
	case DoFork:
		return func() tea.Msg {
			_, entry, err := r.cl.Session(e.Session).Fork(ctx, e.Arg)
			if err != nil {
				return failed(err)
			}
			return Forked{From: e.Session, Entry: entry}
		}
	case DoBudget:
		return func() tea.Msg {
			info, err := r.cl.Session(e.Session).SetBudget(ctx, e.Arg)
			if err != nil {
				return failed(err)
			}
			return Budgeted{Session: e.Session, Info: info}
		}
	case DoSwitch:
		return func() tea.Msg {
			entry, err := r.cl.Session(e.Session).SwitchBackend(ctx, e.Arg)
			if err != nil {
				return failed(err)
			}
			return Switched{Session: e.Session, Backend: e.Arg, Entry: entry}
		}
	}
	return func() tea.Msg { return failed(fmt.Errorf("the chat cannot %s", e.Do)) }
}

// following stops the follower of the session open until now and returns
// the context of the next one.
func (r *Runner) following() context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.follow != nil {
		r.follow()
	}
	ctx, cancel := context.WithCancel(r.ctx)
	r.follow = cancel
	return ctx
}

// Stop stops the follower of the open session; call it when the program
// has ended.
func (r *Runner) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.follow != nil {
		r.follow()
	}
}
