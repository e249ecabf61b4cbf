package workflows_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/sandbox/local"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/retention"
	"github.com/troupe-dev/troupe/workflows/workflowstest"
)

// Messages sent while a turn runs wait in order, none lost, whether sent
// by update or by signal; a caller that waits gets its turn's outcome.
func TestSessionQueuesMessagesInOrder(t *testing.T) {
	env, _ := newEnv(t, nil)
	var inputs []string
	workflowstest.SlowAgents(env, &inputs)
	var first, second, third *workflowstest.Update
	env.RegisterDelayedCallback(func() {
		first = workflowstest.SendUpdate(env, troupe.SendUpdate, troupe.SendInput{Message: "one", Wait: true})
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		// Turn t1 is running.
		second = workflowstest.SendUpdate(env, troupe.SendUpdate, troupe.SendInput{Message: "two"})
		env.SignalWorkflow(troupe.MessageSignal, troupe.SendInput{Message: "three"})
		third = workflowstest.SendUpdate(env, troupe.SendUpdate, troupe.SendInput{Message: "four", Wait: true})
	}, 2*time.Second)
	env.RegisterDelayedCallback(func() {
		if info := workflowstest.SessionInfo(t, env); info.Status != runtime.SessionThinking || info.Running != "t1" || info.Queued != 3 {
			t.Errorf("during turn t1: %+v; want thinking on t1 with 3 queued", info)
		}
	}, 2500*time.Millisecond)
	env.RegisterDelayedCallback(func() {
		info := workflowstest.SessionInfo(t, env)
		if info.Status != runtime.SessionIdle || info.Turns != 4 {
			t.Errorf("after the turns: %+v; want idle after 4 turns", info)
		}
		var order []string
		for _, r := range info.Recent {
			order = append(order, r.Turn+"="+string(r.Output))
		}
		if got, want := strings.Join(order, " "), `t1="re: one" t2="re: two" t3="re: three" t4="re: four"`; got != want {
			t.Errorf("turns %s, want %s", got, want)
		}
		workflowstest.SendUpdate(env, troupe.CommandUpdate, troupe.SessionCommand{Op: troupe.CommandStop})
	}, time.Minute)
	env.ExecuteWorkflow(troupe.SessionWorkflowName, troupe.SessionInput{Graph: "test", Agent: "c"})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(inputs, ","); got != "one,two,three,four" {
		t.Errorf("the agents got %s, want one,two,three,four", got)
	}
	var r1, r2, r4 troupe.SendResult
	first.Decode(t, &r1)
	second.Decode(t, &r2)
	third.Decode(t, &r4)
	if r1.Turn != "t1" || r1.Record == nil || string(r1.Record.Output) != `"re: one"` || r1.Record.Outcome != runtime.TurnAnswered {
		t.Errorf("the first caller got %+v, want turn t1's answer", r1)
	}
	if r2.Turn != "t2" || r2.Ahead != 1 || r2.Record != nil {
		t.Errorf("the second caller got %+v, want turn t2 queued behind one, not waited for", r2)
	}
	if r4.Turn != "t4" || r4.Ahead != 3 || r4.Record == nil || string(r4.Record.Output) != `"re: four"` {
		t.Errorf("the fourth caller got %+v, want turn t4's answer, queued behind three", r4)
	}
	var info troupe.SessionInfo
	if err := env.GetWorkflowResult(&info); err != nil {
		t.Fatal(err)
	}
	if info.Status != runtime.SessionStopped || info.Turns != 4 {
		t.Errorf("ended as %+v, want stopped after 4 turns", info)
	}
}

// Under the reject policy a message sent during a turn is refused with
// troupe.SessionBusy, and taken once the turn has ended; a signalled one
// is refused with an event.
func TestSessionRejectPolicy(t *testing.T) {
	env, _ := newEnv(t, nil)
	var inputs []string
	workflowstest.SlowAgents(env, &inputs)
	var busy, later *workflowstest.Update
	env.RegisterDelayedCallback(func() {
		workflowstest.SendUpdate(env, troupe.SendUpdate, troupe.SendInput{Message: "one"})
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		busy = workflowstest.SendUpdate(env, troupe.SendUpdate, troupe.SendInput{Message: "two"})
		env.SignalWorkflow(troupe.MessageSignal, troupe.SendInput{Message: "signalled"})
	}, 2*time.Second)
	env.RegisterDelayedCallback(func() {
		later = workflowstest.SendUpdate(env, troupe.SendUpdate, troupe.SendInput{Message: "three", Wait: true})
	}, 10*time.Second)
	env.RegisterDelayedCallback(func() {
		workflowstest.SendUpdate(env, troupe.CommandUpdate, troupe.SessionCommand{Op: troupe.CommandStop})
	}, time.Minute)
	env.ExecuteWorkflow(troupe.SessionWorkflowName, troupe.SessionInput{Graph: "test", Agent: "c", Policy: runtime.PolicyReject})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if busy.Accepted() || troupe.ErrorType(busy.Err()) != troupe.ErrSessionBusy {
		t.Errorf("a message during a turn: accepted %v, error %v; want it refused as %s", busy.Accepted(), busy.Err(), troupe.ErrSessionBusy)
	}
	var r troupe.SendResult
	later.Decode(t, &r)
	if r.Turn != "t2" || r.Record == nil || string(r.Record.Output) != `"re: three"` {
		t.Errorf("a message after the turn got %+v, want it answered as t2", r)
	}
	if got := strings.Join(inputs, ","); got != "one,three" {
		t.Errorf("the agents got %s, want one,three", got)
	}
	refused := 0
	for _, e := range workflowstest.Recorded(t, env, 0) {
		if e.Kind == troupe.EventMessageRefused && strings.Contains(e.Detail, "signalled") {
			refused++
		}
	}
	if refused != 1 {
		t.Errorf("%d refusal events for the signalled message, want 1", refused)
	}
}

// sessionSandboxEnv is a test environment whose graph has a plain agent
// "plain" and a sandbox agent "coder" (local backend under root), and whose
// model runs fn.
func sessionSandboxEnv(t *testing.T, fn workflowstest.TurnFunc, tweak func(*workflows.Config)) (*testsuite.TestWorkflowEnvironment, string) {
	t.Helper()
	g := agents.MustGraph("code", "coder",
		&agents.Agent{Name: "coder", Instructions: "coder: edits files", Sandbox: &agents.Sandbox{},
			Handoffs: []agents.Handoff{agents.HandoffTo("plain")}},
		&agents.Agent{Name: "plain", Instructions: "plain: talks", Handoffs: []agents.Handoff{agents.HandoffTo("coder")}},
	)
	return workflowstest.LocalEnv(t, g, &workflowstest.FuncModel{Func: fn}, tweak)
}

// dirs are the workspaces among a local root's entries (each sandbox has a
// directory and a dot-file of its state).
func dirs(entries []string) []string {
	var out []string
	for _, e := range entries {
		if !strings.HasPrefix(e, ".") {
			out = append(out, e)
		}
	}
	return out
}

// A sandbox agent keeps one workspace for the whole session: the next turn
// finds the files of the last, on the same live sandbox while it is
// within its idle timeout; after that the sandbox is suspended (no live
// sandbox while the session idles), and the next command restores it from
// its snapshot with the files intact; stopping the session stops it.
func TestSessionKeepsTheWorkspace(t *testing.T) {
	env, root := sessionSandboxEnv(t, workflowstest.ScriptedCoder, nil)
	var r1, r2, r3 *workflowstest.Update
	var liveBetween, liveIdle []string
	var idleInfo troupe.SessionInfo
	env.RegisterDelayedCallback(func() {
		r1 = workflowstest.SendUpdate(env, troupe.SendUpdate, troupe.SendInput{Message: "run: echo first > notes.txt && echo written", Wait: true})
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		liveBetween = workflowstest.Leftovers(t, root)
		r2 = workflowstest.SendUpdate(env, troupe.SendUpdate, troupe.SendInput{Message: "run: cat notes.txt && echo second >> notes.txt", Wait: true})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		liveIdle = workflowstest.Leftovers(t, root)
		idleInfo = workflowstest.SessionInfo(t, env)
		r3 = workflowstest.SendUpdate(env, troupe.SendUpdate, troupe.SendInput{Message: "run: cat notes.txt", Wait: true})
	}, time.Hour)
	env.RegisterDelayedCallback(func() {
		workflowstest.SendUpdate(env, troupe.CommandUpdate, troupe.SessionCommand{Op: troupe.CommandStop})
	}, time.Hour+time.Minute)
	env.ExecuteWorkflow(troupe.SessionWorkflowName, troupe.SessionInput{Graph: "code"})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	outputs := []string{}
	for _, u := range []*workflowstest.Update{r1, r2, r3} {
		var r troupe.SendResult
		u.Decode(t, &r)
		if r.Record == nil {
			t.Fatalf("no record: %+v (err %v)", r, u.Err())
		}
		outputs = append(outputs, string(r.Record.Output))
	}
	want := []string{`"out: written"`, `"out: first"`, `"out: first\nsecond"`}
	for i := range want {
		if outputs[i] != want[i] {
			t.Errorf("turn %d answered %s, want %s", i+1, outputs[i], want[i])
		}
	}
	if len(dirs(liveBetween)) != 1 {
		t.Errorf("between turns within the idle timeout: workspaces %v, want the one live sandbox", liveBetween)
	}
	if len(liveIdle) != 0 {
		t.Errorf("after the idle timeout: workspaces %v, want none", liveIdle)
	}
	if len(idleInfo.Sandboxes) != 1 || idleInfo.Sandboxes[0].State != runtime.LeaseSuspended || idleInfo.Sandboxes[0].Snapshot == "" {
		t.Errorf("idle session's sandboxes: %+v, want coder's suspended with a snapshot", idleInfo.Sandboxes)
	}
	// The session suspends and stops (its agents provision and restore,
	// in their own events).
	n := workflowstest.Kinds(workflowstest.Recorded(t, env, 0))
	if n[troupe.EventSandboxSuspended] != 1 || n[troupe.EventSandboxStopped] != 1 {
		t.Errorf("session's sandbox events %v: want 1 suspended, 1 stopped", n)
	}
	if left := workflowstest.Leftovers(t, root); len(left) != 0 {
		t.Errorf("workspaces left after the session stopped: %v", left)
	}
}

// The agent that ended a turn answers the next, with the conversation so
// far: a handoff in one turn moves the session to its target.
func TestSessionNextTurnGoesToTheLastAgent(t *testing.T) {
	var plainSaw []string
	env, _ := sessionSandboxEnv(t, func(req model.Request) []agents.Item {
		last := workflowstest.LastItem(req)
		switch workflowstest.FirstWord(req.Instructions) {
		case "coder:":
			if last.Content == "talk to plain" {
				return []agents.Item{workflowstest.Call("h", "transfer_to_plain", "{}")}
			}
			return []agents.Item{agents.AssistantMessage("coder here")}
		default:
			plainSaw = nil
			for _, it := range req.Input {
				if it.Type == agents.ItemMessage && it.Role == "user" {
					plainSaw = append(plainSaw, it.Content)
				}
			}
			return []agents.Item{agents.AssistantMessage("plain here")}
		}
	}, nil)
	var second *workflowstest.Update
	env.RegisterDelayedCallback(func() {
		workflowstest.SendUpdate(env, troupe.SendUpdate, troupe.SendInput{Message: "talk to plain"})
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		second = workflowstest.SendUpdate(env, troupe.SendUpdate, troupe.SendInput{Message: "and again", Wait: true})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		if info := workflowstest.SessionInfo(t, env); info.Agent != "plain" || info.Turns != 2 {
			t.Errorf("after two turns: %+v; want plain to answer next", info)
		}
		workflowstest.SendUpdate(env, troupe.CommandUpdate, troupe.SessionCommand{Op: troupe.CommandStop})
	}, 2*time.Minute)
	env.ExecuteWorkflow(troupe.SessionWorkflowName, troupe.SessionInput{Graph: "code"})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var r troupe.SendResult
	second.Decode(t, &r)
	if r.Record == nil || r.Record.Agent != "plain" || string(r.Record.Output) != `"plain here"` {
		t.Errorf("second turn %+v, want plain's answer", r.Record)
	}
	if got := strings.Join(plainSaw, "|"); got != "talk to plain|and again" {
		t.Errorf("plain saw the user say %q, want both messages", got)
	}
}

// rollbackModel runs each "run: CMD" message's command. A message that
// says "stuck" fails every call, as an unreachable server does. One that
// says "slow@AGENT" fails AGENT's call after a tool output once, so that
// the turn waits a second (workflow time) before the retry: the window in
// which a test sends the message that rolls it back. One that says
// "handoff" has coder hand off to plain once its command ran.
type rollbackModel struct {
	mu     sync.Mutex
	failed map[string]bool
}

func (m *rollbackModel) Respond(_ context.Context, req model.Request) (*model.Response, error) {
	refused := errors.New("model: Post: dial tcp 127.0.0.1:9: connect: connection refused")
	user, last := workflowstest.LastUser(req), workflowstest.LastItem(req)
	if strings.Contains(user, "stuck") {
		return nil, refused
	}
	agent := strings.TrimSuffix(workflowstest.FirstWord(req.Instructions), ":")
	m.mu.Lock()
	defer m.mu.Unlock()
	if strings.Contains(user, "slow@"+agent) && last.Type == agents.ItemFunctionCallOutput && !m.failed[user] {
		m.failed[user] = true
		return nil, refused
	}
	if agent == "coder" && strings.Contains(user, "handoff") && last.Type == agents.ItemFunctionCallOutput {
		return &model.Response{Output: []agents.Item{workflowstest.Call("h", "transfer_to_plain", "{}")}}, nil
	}
	return &model.Response{Output: workflowstest.ScriptedCoder(req)}, nil
}

// Under the rollback policy a message sent during a turn cancels that
// turn and undoes it: the conversation is back at the turn's start (the
// next model call does not see it), and each workspace is restored from
// the turn's starting snapshot (the files the turn changed are as
// before): the one of the agent at work, and the one of an agent that
// changed it and handed off during the turn.
func TestSessionRollback(t *testing.T) {
	for _, tc := range []struct{ name, slow string }{
		{"in the agent at work", "run: echo slow > a.txt && echo new > b.txt slow@coder"},
		{"after a handoff", "run: echo slow > a.txt && echo new > b.txt handoff slow@plain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &rollbackModel{failed: map[string]bool{}}
			env, root := sessionSandboxEnv(t, nil, func(c *workflows.Config) { c.Model = m })
			var slow, after *workflowstest.Update
			env.RegisterDelayedCallback(func() {
				workflowstest.SendUpdate(env, troupe.SendUpdate, troupe.SendInput{Message: "run: echo kept > a.txt"})
			}, time.Second)
			env.RegisterDelayedCallback(func() {
				slow = workflowstest.SendUpdate(env, troupe.SendUpdate, troupe.SendInput{Message: tc.slow, Wait: true})
			}, time.Minute)
			env.RegisterDelayedCallback(func() {
				// The slow turn ran its command and waits on a model's retry.
				if info := workflowstest.SessionInfo(t, env); info.Running != "t2" {
					t.Errorf("session %+v, want turn t2 running", info)
				}
				after = workflowstest.SendUpdate(env, troupe.SendUpdate, troupe.SendInput{Message: "run: cat a.txt; ls", Wait: true})
			}, time.Minute+500*time.Millisecond)
			env.RegisterDelayedCallback(func() {
				workflowstest.SendUpdate(env, troupe.CommandUpdate, troupe.SessionCommand{Op: troupe.CommandStop})
			}, time.Hour)
			env.ExecuteWorkflow(troupe.SessionWorkflowName, troupe.SessionInput{Graph: "code", Policy: runtime.PolicyRollback})
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			var rs, ra troupe.SendResult
			slow.Decode(t, &rs)
			after.Decode(t, &ra)
			if rs.Record == nil || rs.Record.Outcome != runtime.TurnRolledBack {
				t.Fatalf("the slow turn ended %+v (err %v), want rolled back", rs.Record, slow.Err())
			}
			if ra.Record == nil || ra.Record.Agent != "coder" || string(ra.Record.Output) != `"out: kept\na.txt"` {
				t.Errorf("after the rollback: %+v; want coder to answer, a.txt as the first turn left it, and no b.txt", ra.Record)
			}
			if left := workflowstest.Leftovers(t, root); len(left) != 0 {
				t.Errorf("workspaces left after the session stopped: %v", left)
			}
		})
	}
}

// A session continues as new carrying its state exactly: the next run
// answers as the last would have, with the conversation and the
// workspace, and its events go on from the same number. An update that
// the last run took and a client sends again to the next run (the server
// knows update ids within one run only) gets the turn it had, not a
// second one.
func TestSessionContinueAsNew(t *testing.T) {
	var seen []string
	fn := func(req model.Request) []agents.Item {
		seen = seen[:0]
		for _, it := range req.Input {
			if it.Type == agents.ItemMessage && it.Role == "user" {
				seen = append(seen, it.Content)
			}
		}
		return workflowstest.ScriptedCoder(req)
	}
	store, _ := blob.Open(context.Background(), "mem://")
	tweak := func(c *workflows.Config) { c.ContinueAfterEvents, c.Store = 1000, store }
	env, _ := sessionSandboxEnv(t, fn, tweak)
	var before troupe.SessionInfo
	env.RegisterDelayedCallback(func() {
		workflowstest.SendUpdate(env, troupe.SendUpdate, troupe.SendInput{Message: "run: echo carried > c.txt"})
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		workflowstest.SendUpdateWithID(env, troupe.SendUpdate, "send-hello", troupe.SendInput{Message: "hello"})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		// The history reaches its bound; the rename wakes the session,
		// which continues as new once the update is done.
		before = workflowstest.SessionInfo(t, env)
		env.SetCurrentHistoryLength(1000)
		workflowstest.SendUpdate(env, troupe.CommandUpdate, troupe.SessionCommand{Op: troupe.CommandRename, Arg: "carried"})
	}, time.Hour)
	env.ExecuteWorkflow(troupe.SessionWorkflowName, troupe.SessionInput{Graph: "code", Name: "carry me"})
	var cae *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &cae) {
		t.Fatalf("session ended with %v, want it to continue as new", err)
	}
	var next troupe.SessionInput
	if err := converter.GetDefaultDataConverter().FromPayloads(cae.Input, &next); err != nil {
		t.Fatal(err)
	}
	c := next.Carry
	if c == nil || c.Spec == nil || c.State.Turns != 2 || c.State.Name != "carried" || c.State.Transcript.Segments == 0 || c.State.Agent != "coder" ||
		len(c.State.Leases) != 1 || c.State.Leases[0].Lease.State != runtime.LeaseSuspended || c.State.Leases[0].Lease.Snapshot == "" {
		t.Fatalf("carry %+v, want the state after two turns: renamed, its transcript, coder's suspended sandbox", c)
	}

	env2, root2 := sessionSandboxEnv(t, fn, tweak)
	var third, again *workflowstest.Update
	env2.RegisterDelayedCallback(func() {
		if info := workflowstest.SessionInfo(t, env2); info.Turns != 2 || info.Name != "carried" || info.NextEvent != before.NextEvent+2 {
			t.Errorf("continued session %+v, want 2 turns, its new name, and events numbered on after %d", info, before.NextEvent+1)
		}
		again = workflowstest.SendUpdateWithID(env2, troupe.SendUpdate, "send-hello", troupe.SendInput{Message: "hello", Wait: true})
		third = workflowstest.SendUpdate(env2, troupe.SendUpdate, troupe.SendInput{Message: "run: cat c.txt", Wait: true})
	}, time.Second)
	env2.RegisterDelayedCallback(func() {
		workflowstest.SendUpdate(env2, troupe.CommandUpdate, troupe.SessionCommand{Op: troupe.CommandStop})
	}, time.Hour)
	env2.ExecuteWorkflow(troupe.SessionWorkflowName, next)
	if err := env2.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var r, a troupe.SendResult
	third.Decode(t, &r)
	if r.Turn != "t3" || r.Record == nil || string(r.Record.Output) != `"out: carried"` {
		t.Errorf("third turn %s %+v, want t3 with the carried workspace's file", r.Turn, r.Record)
	}
	again.Decode(t, &a)
	if a.Turn != "t2" || a.Record == nil || a.Record.Message != "hello" {
		t.Errorf("the update sent again got turn %s %+v, want hello's turn t2 as it ended", a.Turn, a.Record)
	}
	if got := strings.Join(seen, "|"); !strings.HasPrefix(got, "run: echo carried > c.txt|hello|run: cat c.txt") {
		t.Errorf("the model saw %q, want the whole conversation", got)
	}
	if left := workflowstest.Leftovers(t, root2); len(left) != 0 {
		t.Errorf("workspaces left: %v", left)
	}
}

// Stop ends the session, cancelling a running turn and stopping its
// sandboxes; a stopped session refuses messages and commands.
func TestSessionStop(t *testing.T) {
	m := &rollbackModel{failed: map[string]bool{}}
	env, root := sessionSandboxEnv(t, nil, func(c *workflows.Config) { c.Model = m })
	var running, queued, afterStop, pause *workflowstest.Update
	env.RegisterDelayedCallback(func() {
		workflowstest.SendUpdate(env, troupe.SendUpdate, troupe.SendInput{Message: "run: echo hi > x"})
		running = workflowstest.SendUpdate(env, troupe.SendUpdate, troupe.SendInput{Message: "stuck", Wait: true})
		queued = workflowstest.SendUpdate(env, troupe.SendUpdate, troupe.SendInput{Message: "two", Wait: true})
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		if info := workflowstest.SessionInfo(t, env); info.Running != "t2" {
			t.Errorf("before stop: %+v, want turn t2 running", info)
		}
		workflowstest.SendUpdate(env, troupe.CommandUpdate, troupe.SessionCommand{Op: troupe.CommandStop})
		// The session takes these after the stop.
		afterStop = workflowstest.SendUpdate(env, troupe.SendUpdate, troupe.SendInput{Message: "three"})
		pause = workflowstest.SendUpdate(env, troupe.CommandUpdate, troupe.SessionCommand{Op: troupe.CommandPause})
	}, 5*time.Second)
	env.ExecuteWorkflow(troupe.SessionWorkflowName, troupe.SessionInput{Graph: "code"})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var r troupe.SendResult
	running.Decode(t, &r)
	if r.Record == nil || r.Record.Outcome != runtime.TurnFailed || !strings.Contains(r.Record.Error, "stopped") {
		t.Errorf("the running turn ended %+v, want failed: the session stopped", r.Record)
	}
	if troupe.ErrorType(queued.Err()) != troupe.ErrSessionStopped {
		t.Errorf("the queued message's caller got %v, want %s", queued.Err(), troupe.ErrSessionStopped)
	}
	for what, u := range map[string]*workflowstest.Update{"message": afterStop, "pause": pause} {
		if u == nil || u.Accepted() || troupe.ErrorType(u.Err()) != troupe.ErrSessionStopped {
			t.Errorf("a %s after stop: %+v; want refused as stopped", what, u)
		}
	}
	if left := workflowstest.Leftovers(t, root); len(left) != 0 {
		t.Errorf("workspaces left after the session stopped: %v", left)
	}
}

// The session manager creates sessions as its children, lists them with
// what their sessions tell it (status, agent, turns), and passes them
// rename, pause, resume and stop; a session it does not hold, or that is
// stopped, is refused, and a session that cannot start is not listed.
func TestSessionManager(t *testing.T) {
	env, _ := newEnv(t, nil)
	var inputs []string
	workflowstest.SlowAgents(env, &inputs)
	var created, dup, renamed, unknown, paused, afterStop *workflowstest.Update
	var listed [][]troupe.SessionEntry
	list := func() {
		es := sessionsNow(t, env)
		listed = append(listed, es)
	}
	env.RegisterDelayedCallback(func() {
		created = workflowstest.SendUpdate(env, troupe.CreateSessionUpdate, troupe.CreateSessionInput{ID: "s1",
			Session: troupe.SessionInput{Graph: "test", Agent: "c", Name: "first"}})
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		dup = workflowstest.SendUpdate(env, troupe.CreateSessionUpdate, troupe.CreateSessionInput{ID: "s1", Session: troupe.SessionInput{Graph: "test"}})
		renamed = workflowstest.SendUpdate(env, troupe.LifecycleUpdate, troupe.LifecycleInput{ID: "s1", Command: troupe.SessionCommand{Op: troupe.CommandRename, Arg: "renamed"}})
		unknown = workflowstest.SendUpdate(env, troupe.LifecycleUpdate, troupe.LifecycleInput{ID: "nope", Command: troupe.SessionCommand{Op: troupe.CommandPause}})
		if err := env.UpdateWorkflowByID("s1", troupe.SendUpdate, "", &testsuite.TestUpdateCallback{
			OnAccept: func() {}, OnReject: func(err error) { t.Errorf("message refused: %v", err) }, OnComplete: func(any, error) {},
		}, troupe.SendInput{Message: "hello"}); err != nil {
			t.Error(err)
		}
	}, 2*time.Second)
	env.RegisterDelayedCallback(list, 3*time.Second) // The turn runs.
	env.RegisterDelayedCallback(list, time.Minute)   // It has ended.
	env.RegisterDelayedCallback(func() {
		paused = workflowstest.SendUpdate(env, troupe.LifecycleUpdate, troupe.LifecycleInput{ID: "s1", Command: troupe.SessionCommand{Op: troupe.CommandPause}})
	}, 2*time.Minute)
	env.RegisterDelayedCallback(list, 3*time.Minute)
	env.RegisterDelayedCallback(func() {
		workflowstest.SendUpdate(env, troupe.LifecycleUpdate, troupe.LifecycleInput{ID: "s1", Command: troupe.SessionCommand{Op: troupe.CommandStop}})
	}, 4*time.Minute)
	env.RegisterDelayedCallback(func() {
		afterStop = workflowstest.SendUpdate(env, troupe.LifecycleUpdate, troupe.LifecycleInput{ID: "s1", Command: troupe.SessionCommand{Op: troupe.CommandResume}})
	}, 5*time.Minute)
	env.RegisterDelayedCallback(list, 6*time.Minute)
	env.RegisterDelayedCallback(env.CancelWorkflow, 7*time.Minute)
	env.ExecuteWorkflow(troupe.SessionManagerWorkflowName, troupe.ManagerInput{})

	var e troupe.SessionEntry
	created.Decode(t, &e)
	if created.Err() != nil || e.ID != "s1" || e.Name != "first" || e.Status != runtime.SessionIdle {
		t.Fatalf("create: %+v, %v", e, created.Err())
	}
	if dup.Accepted() || troupe.ErrorType(dup.Err()) != troupe.ErrBadCommand {
		t.Errorf("a second session s1: accepted %v, err %v; want refused", dup.Accepted(), dup.Err())
	}
	renamed.Decode(t, &e)
	if e.Name != "renamed" {
		t.Errorf("rename: %+v", e)
	}
	if unknown.Accepted() || troupe.ErrorType(unknown.Err()) != troupe.ErrUnknownSession {
		t.Errorf("a command for no session: accepted %v, err %v", unknown.Accepted(), unknown.Err())
	}
	paused.Decode(t, &e)
	if e.Status != runtime.SessionPaused {
		t.Errorf("pause: %+v", e)
	}
	if afterStop.Accepted() || troupe.ErrorType(afterStop.Err()) != troupe.ErrSessionStopped {
		t.Errorf("resume after stop: accepted %v, err %v", afterStop.Accepted(), afterStop.Err())
	}
	want := []struct {
		status runtime.SessionStatus
		turns  int
	}{{runtime.SessionThinking, 0}, {runtime.SessionIdle, 1}, {runtime.SessionPaused, 1}, {runtime.SessionStopped, 1}}
	if len(listed) != len(want) {
		t.Fatalf("%d lists, want %d", len(listed), len(want))
	}
	for i, w := range want {
		if len(listed[i]) != 1 || listed[i][0].Status != w.status || listed[i][0].Turns != w.turns || listed[i][0].Name != "renamed" {
			t.Errorf("list %d: %+v, want s1 (renamed) %s after %d turns", i, listed[i], w.status, w.turns)
		}
	}
}

// treeModel answers the "tree" graph: lead fans out to its agent tools
// for a message that says "fan", else answers with what it saw; a
// helper calls its note tool, then answers "helped", its first call
// failing once (a second of workflow time before its retry) for a
// message that says "slow";
// solo runs "echo A > a.txt", then (slowly, for "slow") "echo B > b.txt",
// then answers.
type treeModel struct {
	mu     sync.Mutex
	failed map[string]bool
	calls  int
}

func (m *treeModel) count() int { m.mu.Lock(); defer m.mu.Unlock(); return m.calls }

func (m *treeModel) Respond(_ context.Context, req model.Request) (*model.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	agent, user, last := strings.TrimSuffix(workflowstest.FirstWord(req.Instructions), ":"), workflowstest.LastUser(req), workflowstest.LastItem(req)
	slowOnce := func(key string) bool {
		if strings.Contains(user, "slow") && !m.failed[key] {
			m.failed[key] = true
			return true
		}
		return false
	}
	refused := errors.New("model: Post: dial tcp 127.0.0.1:9: connect: connection refused")
	answer := func(items ...agents.Item) (*model.Response, error) { return &model.Response{Output: items}, nil }
	var outputs []string
	for _, it := range req.Input {
		if it.Type == agents.ItemFunctionCallOutput {
			outputs = append(outputs, it.Output)
		}
	}
	saw := "saw: " + strings.Join(outputs, " | ")
	switch agent {
	case "helper":
		if last.Type == agents.ItemFunctionCallOutput {
			return answer(agents.AssistantMessage("helped"))
		}
		if slowOnce(user) {
			return nil, refused
		}
		return answer(workflowstest.Call("n", "note", "{}"))
	case "lead":
		if strings.Contains(user, "fan") && last.Type == agents.ItemMessage {
			return answer(workflowstest.Call("h1", "help_one", `{"input":"slow one"}`), workflowstest.Call("h2", "help_two", `{"input":"slow two"}`))
		}
		return answer(agents.AssistantMessage(saw))
	default: // solo
		switch {
		case !strings.Contains(user, "two steps"):
			return answer(agents.AssistantMessage(saw))
		case last.Type == agents.ItemMessage:
			return answer(workflowstest.Shell("a", "echo A > a.txt && echo ranA"))
		case strings.Contains(last.Output, "ranA"):
			if slowOnce("solo") {
				return nil, refused
			}
			return answer(workflowstest.Shell("b", "echo B > b.txt && echo ranB"))
		}
		return answer(agents.AssistantMessage("both ran"))
	}
}

func treeEnv(t *testing.T, m *treeModel) (*testsuite.TestWorkflowEnvironment, string) {
	t.Helper()
	g := agents.MustGraph("tree", "lead",
		&agents.Agent{Name: "lead", Instructions: "lead: fans out", Tools: []agents.Tool{
			agents.AsTool("helper", "help_one", "Helps."), agents.AsTool("helper", "help_two", "Helps too.")}},
		&agents.Agent{Name: "helper", Instructions: "helper: helps", Tools: []agents.Tool{
			agents.MustFunctionTool("note", "Takes a note.", func(context.Context, struct{}) (string, error) { return "noted", nil })}},
		&agents.Agent{Name: "solo", Instructions: "solo: works", Sandbox: &agents.Sandbox{}},
	)
	return workflowstest.LocalEnv(t, g, m, nil)
}

// Under the interrupt policy a message sent during a turn stops the turn
// at its next step boundary, keeping what it did, and is answered with
// that context: the agent's command that ran is kept (its file, its
// output in the conversation), the one the model asked for next is not
// run; agents-as-tools of the turn stop too, and their caller with them.
func TestSessionInterrupt(t *testing.T) {
	for _, tc := range []struct {
		name, agent, first string
		want               string
	}{
		{"an agent between steps", "solo", "two steps slow", "saw: Chunk"},
		{"agents-as-tools", "lead", "fan slow", "saw: Error: agent tool help_one was interrupted by the user before it finished | Error: agent tool help_two was interrupted by the user before it finished"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &treeModel{failed: map[string]bool{}}
			env, root := treeEnv(t, m)
			var first, second *workflowstest.Update
			env.RegisterDelayedCallback(func() {
				first = workflowstest.SendUpdate(env, troupe.SendUpdate, troupe.SendInput{Message: tc.first, Wait: true})
			}, time.Second)
			env.RegisterDelayedCallback(func() {
				second = workflowstest.SendUpdate(env, troupe.SendUpdate, troupe.SendInput{Message: "what happened?", Wait: true})
			}, time.Second+500*time.Millisecond)
			env.RegisterDelayedCallback(func() {
				workflowstest.SendUpdate(env, troupe.CommandUpdate, troupe.SessionCommand{Op: troupe.CommandStop})
			}, time.Hour)
			env.ExecuteWorkflow(troupe.SessionWorkflowName, troupe.SessionInput{Graph: "tree", Agent: tc.agent, Policy: runtime.PolicyInterrupt})
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			var r1, r2 troupe.SendResult
			first.Decode(t, &r1)
			second.Decode(t, &r2)
			if r1.Record == nil || r1.Record.Outcome != runtime.TurnInterrupted {
				t.Fatalf("the first turn ended %+v (err %v), want interrupted", r1.Record, first.Err())
			}
			if r2.Record == nil || r2.Record.Agent != tc.agent || !strings.HasPrefix(string(r2.Record.Output), `"`+tc.want) {
				t.Fatalf("the second turn: %+v; want %s to answer, having seen %q", r2.Record, tc.agent, tc.want)
			}
			if tc.agent == "solo" {
				out := string(r2.Record.Output)
				if !strings.Contains(out, "ranA") || !strings.Contains(out, "Error: not run: the user interrupted the turn") || strings.Contains(out, "ranB") {
					t.Errorf("solo saw %s; want A's output, B not run", out)
				}
			}
			if left := workflowstest.Leftovers(t, root); len(left) != 0 {
				t.Errorf("workspaces left after the session stopped: %v", left)
			}
		})
	}
}

// Pause holds the whole agent tree of a running turn: with two
// agents-as-tools mid-turn, no model call starts anywhere until resume,
// and the turn then ends as it would have.
func TestSessionPauseTree(t *testing.T) {
	m := &treeModel{failed: map[string]bool{}}
	env, _ := treeEnv(t, m)
	var turn *workflowstest.Update
	var atPause, later int
	var pausedInfo troupe.SessionInfo
	env.RegisterDelayedCallback(func() {
		turn = workflowstest.SendUpdate(env, troupe.SendUpdate, troupe.SendInput{Message: "fan slow", Wait: true})
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		// Both helpers wait on their model's retry.
		workflowstest.SendUpdate(env, troupe.CommandUpdate, troupe.SessionCommand{Op: troupe.CommandPause})
	}, time.Second+500*time.Millisecond)
	env.RegisterDelayedCallback(func() { atPause = m.count() }, time.Minute)
	env.RegisterDelayedCallback(func() {
		later = m.count()
		pausedInfo = workflowstest.SessionInfo(t, env)
		workflowstest.SendUpdate(env, troupe.CommandUpdate, troupe.SessionCommand{Op: troupe.CommandResume})
	}, time.Hour)
	env.RegisterDelayedCallback(func() {
		workflowstest.SendUpdate(env, troupe.CommandUpdate, troupe.SessionCommand{Op: troupe.CommandStop})
	}, 2*time.Hour)
	env.ExecuteWorkflow(troupe.SessionWorkflowName, troupe.SessionInput{Graph: "tree"})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if atPause != later {
		t.Errorf("%d model calls a minute into the pause, %d an hour in: want none while paused", atPause, later)
	}
	if pausedInfo.Status != runtime.SessionPaused || pausedInfo.Running != "t1" {
		t.Errorf("during the pause: %+v, want paused with t1 running", pausedInfo)
	}
	var r troupe.SendResult
	turn.Decode(t, &r)
	if r.Record == nil || r.Record.Outcome != runtime.TurnAnswered || string(r.Record.Output) != `"saw: helped | helped"` {
		t.Fatalf("the turn ended %+v (err %v), want answered with both helpers' help", r.Record, turn.Err())
	}
	if r.Record.Ended.Sub(r.Record.Started) < time.Hour-2*time.Second {
		t.Errorf("the turn ended %s after it started, before the resume an hour in", r.Record.Ended.Sub(r.Record.Started))
	}
}

// managerWithCode is a manager test environment over the "code" graph of
// sessionSandboxEnv, whose model runs workflowstest.ScriptedCoder, with two local
// backends ("local" and "other", separate roots).
func managerWithCode(t *testing.T) (*testsuite.TestWorkflowEnvironment, string, string, *blob.Store) {
	t.Helper()
	store, _ := blob.Open(context.Background(), "mem://")
	other := t.TempDir()
	oc, err := local.New(local.Config{Root: other})
	if err != nil {
		t.Fatal(err)
	}
	env, root := sessionSandboxEnv(t, workflowstest.ScriptedCoder, func(c *workflows.Config) {
		c.Store = store
		c.Sandboxes["other"] = oc
	})
	return env, root, other, store
}

// A fork copies the conversation and every workspace into a new session
// that is independent from then on: each branch's next turns see the
// conversation and files up to the fork and their own since, never the
// other's; the source goes on where it was; the manager lists both.
func TestSessionFork(t *testing.T) {
	env, _, _, store := managerWithCode(t)
	var forked, again *workflowstest.Update
	var src1, src2, src3, fork1, fork2 *workflowstest.Update
	env.RegisterDelayedCallback(func() {
		workflowstest.SendUpdate(env, troupe.CreateSessionUpdate, troupe.CreateSessionInput{ID: "src", Session: troupe.SessionInput{Graph: "code", Name: "main line"}})
	}, time.Second)
	env.RegisterDelayedCallback(func() { src1 = workflowstest.AskSession(t, env, "src", "run: echo base > f.txt && echo ok") }, 2*time.Second)
	env.RegisterDelayedCallback(func() {
		forked = workflowstest.SendUpdate(env, troupe.ForkUpdate, troupe.ForkInput{ID: "src", NewID: "branch"})
		again = workflowstest.SendUpdate(env, troupe.ForkUpdate, troupe.ForkInput{ID: "src", NewID: "src"})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		src2 = workflowstest.AskSession(t, env, "src", "run: echo main >> f.txt && cat f.txt")
		fork1 = workflowstest.AskSession(t, env, "branch", "run: echo branch >> f.txt && cat f.txt")
	}, 2*time.Minute)
	env.RegisterDelayedCallback(func() {
		fork2 = workflowstest.AskSession(t, env, "branch", "history?")
		src3 = workflowstest.AskSession(t, env, "src", "history?")
	}, 3*time.Minute)
	env.RegisterDelayedCallback(func() {
		for _, id := range []string{"src", "branch"} {
			workflowstest.SendUpdate(env, troupe.LifecycleUpdate, troupe.LifecycleInput{ID: id, Command: troupe.SessionCommand{Op: troupe.CommandStop}})
		}
	}, time.Hour)
	env.RegisterDelayedCallback(env.CancelWorkflow, 2*time.Hour)
	var listed []troupe.SessionEntry
	env.RegisterDelayedCallback(func() {
		listed = sessionsNow(t, env)
	}, 30*time.Minute)
	env.ExecuteWorkflow(troupe.SessionManagerWorkflowName, troupe.ManagerInput{})

	var e troupe.SessionEntry
	forked.Decode(t, &e)
	if forked.Err() != nil || e.ID != "branch" || e.Name != "main line (fork)" || e.Turns != 1 {
		t.Fatalf("fork: %+v, %v; want branch, named after its source, with its one turn", e, forked.Err())
	}
	if e.Created.IsZero() {
		t.Errorf("the fork's creation time is zero, want when it forked")
	}
	if again.Accepted() || troupe.ErrorType(again.Err()) != troupe.ErrBadCommand {
		t.Errorf("a fork onto an existing session: accepted %v, err %v", again.Accepted(), again.Err())
	}
	if got := src1.Output(t); got != `"out: ok"` {
		t.Errorf("first turn: %s", got)
	}
	if got := src2.Output(t); got != `"out: base\nmain"` {
		t.Errorf("the source after the fork reads %s, want its own line only", got)
	}
	if got := fork1.Output(t); got != `"out: base\nbranch"` {
		t.Errorf("the fork reads %s, want the file as forked plus its own line", got)
	}
	// Each conversation: the first message (shared), its own since.
	if got := fork2.Text(t); got != "run: echo base > f.txt && echo ok | run: echo branch >> f.txt && cat f.txt | history?" {
		t.Errorf("the fork's conversation: %s", got)
	}
	if got := src3.Text(t); got != "run: echo base > f.txt && echo ok | run: echo main >> f.txt && cat f.txt | history?" {
		t.Errorf("the source's conversation: %s", got)
	}
	if len(listed) != 2 || listed[0].ID != "src" || listed[1].ID != "branch" || listed[1].Turns != 3 || listed[0].Turns != 3 {
		t.Errorf("the manager lists %+v, want src and branch, 3 turns each", listed)
	} else if listed[1].Request == "" {
		t.Errorf("the fork's entry names no update, so the fork sent again past the updates remembered would fork again")
	}
	// The fork marked the source's data as shared, so retention keeps it.
	dirs, err := store.Dirs(context.Background(), "keep/src/")
	if err != nil || len(dirs) != 1 || dirs[0] != "branch" {
		t.Errorf("keep marks of src: %v, %v; want branch's", dirs, err)
	}
}

// Switch backend moves every workspace of the session to another backend
// between turns: the files are intact there, the conversation unchanged,
// and no workspace is left on the first.
func TestSessionSwitchBackend(t *testing.T) {
	env, root, other, _ := managerWithCode(t)
	var before, after *workflowstest.Update
	var switched *workflowstest.Update
	var between []string
	env.RegisterDelayedCallback(func() {
		workflowstest.SendUpdate(env, troupe.CreateSessionUpdate, troupe.CreateSessionInput{ID: "s", Session: troupe.SessionInput{Graph: "code"}})
	}, time.Second)
	env.RegisterDelayedCallback(func() { before = workflowstest.AskSession(t, env, "s", "run: echo kept > k.txt && echo ok") }, 2*time.Second)
	env.RegisterDelayedCallback(func() {
		switched = workflowstest.SendUpdate(env, troupe.LifecycleUpdate, troupe.LifecycleInput{ID: "s", Command: troupe.SessionCommand{Op: troupe.CommandSwitch, Arg: "other"}})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		between = dirs(workflowstest.Leftovers(t, root))
		after = workflowstest.AskSession(t, env, "s", "run: cat k.txt")
	}, 2*time.Minute)
	env.RegisterDelayedCallback(func() {
		if left := dirs(workflowstest.Leftovers(t, other)); len(left) != 1 {
			t.Errorf("workspaces on the new backend after a turn: %v, want one", left)
		}
		workflowstest.SendUpdate(env, troupe.LifecycleUpdate, troupe.LifecycleInput{ID: "s", Command: troupe.SessionCommand{Op: troupe.CommandStop}})
	}, 3*time.Minute)
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Hour)
	env.ExecuteWorkflow(troupe.SessionManagerWorkflowName, troupe.ManagerInput{})
	var e troupe.SessionEntry
	switched.Decode(t, &e)
	if switched.Err() != nil || len(e.Backends) != 1 || e.Backends[0] != "other" {
		t.Errorf("switch: %+v, %v", e, switched.Err())
	}
	if got := before.Output(t); got != `"out: ok"` {
		t.Errorf("before: %s", got)
	}
	if len(between) != 0 {
		t.Errorf("workspaces on the first backend after the switch: %v", between)
	}
	if got := after.Output(t); got != `"out: kept"` {
		t.Errorf("after the switch the file reads %s", got)
	}
	if left := workflowstest.Leftovers(t, other); len(left) != 0 {
		t.Errorf("workspaces left after stop: %v", left)
	}
}

// A fork that fails between its steps is finished when the step passes
// on a retry, and undone when it cannot: the caller is told, the manager
// never lists a half-made fork, and the source goes on.
func TestSessionForkFailsBetweenSteps(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fails int
		made  bool
	}{
		{"a step that passes on a retry", 2, true},
		{"a step that keeps failing", 1000, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, _, _, _ := managerWithCode(t)
			calls := 0
			env.OnActivity(retention.KeepActivityName, mock.Anything, mock.Anything).Return(func(context.Context, retention.KeepInput) error {
				calls++
				if calls <= tc.fails {
					return errors.New("blob store unreachable")
				}
				return nil
			})
			var forked, after *workflowstest.Update
			var listed []troupe.SessionEntry
			env.RegisterDelayedCallback(func() {
				workflowstest.SendUpdate(env, troupe.CreateSessionUpdate, troupe.CreateSessionInput{ID: "src", Session: troupe.SessionInput{Graph: "code"}})
			}, time.Second)
			env.RegisterDelayedCallback(func() { workflowstest.AskSession(t, env, "src", "run: echo base > f.txt && echo ok") }, 2*time.Second)
			env.RegisterDelayedCallback(func() {
				forked = workflowstest.SendUpdate(env, troupe.ForkUpdate, troupe.ForkInput{ID: "src", NewID: "branch"})
			}, time.Minute)
			env.RegisterDelayedCallback(func() {
				listed = sessionsNow(t, env)
				after = workflowstest.AskSession(t, env, "src", "run: cat f.txt")
			}, time.Hour)
			env.RegisterDelayedCallback(env.CancelWorkflow, 2*time.Hour)
			env.ExecuteWorkflow(troupe.SessionManagerWorkflowName, troupe.ManagerInput{})
			if tc.made != (forked.Err() == nil) {
				t.Fatalf("fork: err %v, want made %v", forked.Err(), tc.made)
			}
			var ids []string
			for _, e := range listed {
				ids = append(ids, e.ID)
			}
			want := "src"
			if tc.made {
				want = "src,branch"
			}
			if got := strings.Join(ids, ","); got != want {
				t.Errorf("the manager lists %s, want %s", got, want)
			}
			if got := after.Output(t); got != `"out: base"` {
				t.Errorf("the source after the fork: %s", got)
			}
		})
	}
}

// Pause and resume reach an agent by signals that may arrive out of
// order: an agent takes the newest, by sequence number.
func TestControlOutOfOrder(t *testing.T) {
	m := &treeModel{failed: map[string]bool{}}
	env, _ := treeEnv(t, m)
	env.RegisterDelayedCallback(func() {
		// The resume (2) before the pause (1) it undoes: the agent runs on.
		env.SignalWorkflow(troupe.ControlSignal, troupe.Control{Op: troupe.ControlResume, Seq: 2})
		env.SignalWorkflow(troupe.ControlSignal, troupe.Control{Op: troupe.ControlPause, Seq: 1})
	}, 500*time.Millisecond)
	env.ExecuteWorkflow(troupe.AgentWorkflowName, troupe.AgentInput{Graph: "tree", Agent: "helper", RunID: "run",
		Pending: []agents.Item{agents.UserMessage("slow help")}})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("agent ended %v; want it to finish, the late pause ignored", err)
	}
	var res troupe.AgentResult
	if err := env.GetWorkflowResult(&res); err != nil || string(res.Output) != `"helped"` {
		t.Errorf("result %+v, %v", res, err)
	}
}

// Callers waiting on their turns do not hold a session's run from
// continuing as new: at the bound, they are answered Continued (they wait
// again on the next run) and the run continues as new with the messages
// still queued.
func TestSessionWaitersDoNotHoldContinueAsNew(t *testing.T) {
	env, _ := newEnv(t, nil)
	var inputs []string
	workflowstest.SlowAgents(env, &inputs)
	var waiters []*workflowstest.Update
	env.RegisterDelayedCallback(func() {
		for _, m := range []string{"one", "two", "three"} {
			waiters = append(waiters, workflowstest.SendUpdate(env, troupe.SendUpdate, troupe.SendInput{Message: m, Wait: true}))
		}
	}, time.Second)
	env.RegisterDelayedCallback(func() { env.SetCurrentHistoryLength(100000) }, 2500*time.Millisecond)
	env.ExecuteWorkflow(troupe.SessionWorkflowName, troupe.SessionInput{Graph: "test", Agent: "c"})
	var cae *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &cae) {
		t.Fatalf("session ended %v, want it to continue as new", err)
	}
	var next troupe.SessionInput
	if err := converter.GetDefaultDataConverter().FromPayloads(cae.Input, &next); err != nil {
		t.Fatal(err)
	}
	answered, continued := 0, 0
	for _, w := range waiters {
		var r troupe.SendResult
		w.Decode(t, &r)
		switch {
		case r.Record != nil:
			answered++
		case r.Continued:
			continued++
		}
	}
	if answered+continued != 3 || continued == 0 || next.Carry == nil || len(next.Carry.State.Queue)+next.Carry.State.Turns != 3 {
		t.Errorf("%d answered, %d told to wait on the next run; carried %d queued after %d turns: want every caller answered or continued, every message carried",
			answered, continued, len(next.Carry.State.Queue), next.Carry.State.Turns)
	}
}

// A fork of a session paused in the middle of a turn fails at once, with
// the reason, rather than wait for a resume: the manager lists no fork.
func TestSessionForkWhilePausedMidTurn(t *testing.T) {
	env, _ := sessionSandboxEnv(t, nil, func(c *workflows.Config) { c.Model = &rollbackModel{failed: map[string]bool{}} })
	var forked *workflowstest.Update
	var listed []troupe.SessionEntry
	env.RegisterDelayedCallback(func() {
		workflowstest.SendUpdate(env, troupe.CreateSessionUpdate, troupe.CreateSessionInput{ID: "src", Session: troupe.SessionInput{Graph: "code"}})
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		// A turn whose model is unreachable: it retries for minutes.
		workflowstest.AskSession(t, env, "src", "stuck")
	}, 2*time.Second)
	env.RegisterDelayedCallback(func() {
		workflowstest.SendUpdate(env, troupe.LifecycleUpdate, troupe.LifecycleInput{ID: "src", Command: troupe.SessionCommand{Op: troupe.CommandPause}})
	}, 2*time.Second+200*time.Millisecond)
	env.RegisterDelayedCallback(func() {
		forked = workflowstest.SendUpdate(env, troupe.ForkUpdate, troupe.ForkInput{ID: "src", NewID: "branch"})
	}, 2*time.Second+400*time.Millisecond)
	env.RegisterDelayedCallback(func() {
		listed = sessionsNow(t, env)
	}, time.Minute)
	env.RegisterDelayedCallback(env.CancelWorkflow, 2*time.Minute)
	env.ExecuteWorkflow(troupe.SessionManagerWorkflowName, troupe.ManagerInput{})
	if forked == nil || !forked.Done() || forked.Err() == nil || !strings.Contains(forked.Err().Error(), "paused in the middle of a turn") {
		t.Fatalf("fork of a session paused mid-turn: %+v; want it refused at once, saying why", forked)
	}
	if len(listed) != 1 || listed[0].ID != "src" {
		t.Errorf("the manager lists %+v, want src only", listed)
	}
}

// A turn whose sandbox agent fails gives its workspace back to the
// session as the failure left it: the next turn sees what the failed one
// wrote, and the turn's record names the failure's type.
func TestSessionFailedTurnKeepsWorkspace(t *testing.T) {
	// "loop: CMD" runs CMD at every model turn until the agent runs out
	// of turns; anything else is workflowstest.ScriptedCoder's.
	coder := func(req model.Request) []agents.Item {
		var said string
		for _, it := range req.Input {
			if it.Type == agents.ItemMessage && it.Role == "user" {
				said = it.Content
			}
		}
		if cmd, ok := strings.CutPrefix(said, "loop: "); ok {
			return []agents.Item{workflowstest.Shell(fmt.Sprintf("c%d", len(req.Input)), cmd)}
		}
		return workflowstest.ScriptedCoder(req)
	}
	env, _ := sessionSandboxEnv(t, coder, nil)
	var base, failed, after *workflowstest.Update
	env.RegisterDelayedCallback(func() {
		base = workflowstest.SendUpdate(env, troupe.SendUpdate, troupe.SendInput{Message: "run: echo base > f.txt && echo ok", Wait: true})
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		failed = workflowstest.SendUpdate(env, troupe.SendUpdate, troupe.SendInput{Message: "loop: echo x >> f.txt", Wait: true})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		after = workflowstest.SendUpdate(env, troupe.SendUpdate, troupe.SendInput{Message: "run: wc -l < f.txt", Wait: true})
	}, 2*time.Minute)
	env.RegisterDelayedCallback(func() {
		workflowstest.SendUpdate(env, troupe.CommandUpdate, troupe.SessionCommand{Op: troupe.CommandStop})
	}, 3*time.Minute)
	env.ExecuteWorkflow(troupe.SessionWorkflowName, troupe.SessionInput{Graph: "code"})
	if got := base.Output(t); got != `"out: ok"` {
		t.Fatalf("first turn: %s", got)
	}
	var r troupe.SendResult
	failed.Decode(t, &r)
	if r.Record == nil || r.Record.Outcome != runtime.TurnFailed || r.Record.ErrorType != troupe.ErrMaxTurns {
		t.Fatalf("the looping turn: %+v, %v; want it failed with %s", r.Record, failed.Err(), troupe.ErrMaxTurns)
	}
	if !strings.Contains(r.Record.Error, "troupe.MaxTurnsExceeded: ") || strings.Count(r.Record.Error, "troupe.MaxTurnsExceeded") != 1 {
		t.Errorf("the failure reads %q", r.Record.Error)
	}
	// The base line and one line per turn of the failed agent.
	if got := after.Output(t); got != fmt.Sprintf(`"out: %d"`, 1+agents.DefaultMaxTurns) {
		t.Errorf("after the failed turn f.txt has %s lines, want the base line and the failed turn's %d", got, agents.DefaultMaxTurns)
	}
}

// A session manager continues as new with its registry in blob pages,
// however many sessions it holds: the next run lists every session, in
// order, from the pages, and when it continues in turn it saves its own
// pages and drops the ones it read. A manager started from a registry
// carried whole (runs from before the pages) moves it to pages.
func TestSessionManagerCarriesRegistryInPages(t *testing.T) {
	store, _ := blob.Open(context.Background(), "mem://")
	manager := func() *testsuite.TestWorkflowEnvironment {
		env := workflowstest.NewRunnerEnv(t, workflows.Config{Graphs: []*agents.Graph{testGraph(t)}, Model: &workflowstest.FuncModel{}, Store: store})
		return env
	}
	// continued runs a manager from in until it continues as new (a
	// session's news wakes it at its bound) and returns the next run's
	// input, and what the run listed first.
	continued := func(env *testsuite.TestWorkflowEnvironment, in troupe.ManagerInput, news troupe.SessionEntry) (troupe.ManagerInput, []troupe.SessionEntry) {
		t.Helper()
		var listed []troupe.SessionEntry
		// The registry's pages load in local activities, which on a
		// loaded machine may outlast a few seconds of the test's clock:
		// the query asks again until they have.
		var list func()
		tries := 0
		list = func() {
			q, err := env.QueryWorkflow(troupe.SessionsQuery)
			if err != nil && strings.Contains(err.Error(), "ask again") && tries < 100 {
				tries++
				env.RegisterDelayedCallback(list, time.Second)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := q.Get(&listed); err != nil {
				t.Fatal(err)
			}
			env.SignalWorkflow(troupe.SessionChangedSignal, news)
			env.RegisterDelayedCallback(func() {
				env.SetCurrentHistoryLength(100000)
				env.SignalWorkflow(troupe.SessionChangedSignal, news) // Wakes the manager at its bound.
			}, time.Second)
		}
		env.RegisterDelayedCallback(list, time.Second)
		env.ExecuteWorkflow(troupe.SessionManagerWorkflowName, in)
		var cae *workflow.ContinueAsNewError
		if err := env.GetWorkflowError(); !errors.As(err, &cae) {
			t.Fatalf("manager ended with %v, want it to continue as new", err)
		}
		var next troupe.ManagerInput
		if err := converter.GetDefaultDataConverter().FromPayloads(cae.Input, &next); err != nil {
			t.Fatal(err)
		}
		return next, listed
	}
	// More sessions than fit one payload, whole.
	const n = 1234
	long := strings.Repeat("x", 1000)
	var sessions []troupe.SessionEntry
	for i := range n {
		sessions = append(sessions, troupe.SessionEntry{ID: fmt.Sprintf("s%04d", i), Name: long, Graph: "test", Agent: "c", Status: runtime.SessionIdle, Turns: i})
	}
	news := sessions[7]
	news.Turns = 1000
	next, _ := continued(manager(), troupe.ManagerInput{Sessions: sessions}, news)
	if len(next.Sessions) != 0 || len(next.Pages) < 5 {
		t.Fatalf("continued with %d sessions whole and pages %v; want none whole, 5 pages or more", len(next.Sessions), next.Pages)
	}
	for _, key := range next.Pages {
		data, err := store.Get(context.Background(), key)
		if err != nil || len(data) > 256<<10 {
			t.Errorf("page %s: %d bytes, %v", key, len(data), err)
		}
	}
	// The next run holds every session, the news included; a run of
	// another id saves its own pages and drops these.
	news2 := sessions[1233]
	news2.Status = runtime.SessionStopped
	env := manager()
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "troupe-sessions-next"})
	after, listed := continued(env, next, news2)
	if len(listed) != n || listed[7].Turns != 1000 || listed[1233].Turns != 1233 || listed[500].ID != "s0500" {
		t.Fatalf("the next run lists %d sessions (s0007 at %d turns); want all %d, in order, with the news", len(listed), listed[7].Turns, n)
	}
	if len(after.Pages) != len(next.Pages) || after.Pages[0] == next.Pages[0] {
		t.Fatalf("pages %v after %v: want as many, the run's own", after.Pages, next.Pages)
	}
	// The pages a run read stay while it could be reset to its start,
	// and go when the run after it continues in turn.
	if _, err := store.Get(context.Background(), next.Pages[0]); err != nil || !slices.Equal(after.OldPages, next.Pages) {
		t.Errorf("after the second run: the pages it read: %v; old pages carried %v, want %v", err, after.OldPages, next.Pages)
	}
	env3 := manager()
	env3.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "troupe-sessions-third"})
	if third, _ := continued(env3, after, news2); len(third.Pages) != len(after.Pages) {
		t.Fatalf("the third run continued with pages %v", third.Pages)
	}
	if _, err := store.Get(context.Background(), next.Pages[0]); err == nil {
		t.Errorf("the pages the second run read are still there after the third run")
	}
	if _, err := store.Get(context.Background(), after.Pages[0]); err != nil {
		t.Errorf("the pages the third run read: %v", err)
	}
	var last []troupe.SessionEntry
	data, err := store.Get(context.Background(), after.Pages[len(after.Pages)-1])
	if err != nil || json.Unmarshal(data, &last) != nil || last[len(last)-1].Status != runtime.SessionStopped {
		t.Errorf("the last page ends with %+v (%v), want s1233 stopped", last[len(last)-1:], err)
	}
}

// A manager that continued as new takes updates while its registry loads:
// they wait for the load and are checked against the whole registry then
// (BenchmarkIdleSessions once failed with "unknown update").
func TestSessionManagerTakesUpdatesWhileItLoads(t *testing.T) {
	store, _ := blob.Open(context.Background(), "mem://")
	page, _ := json.Marshal([]troupe.SessionEntry{{ID: "old", Graph: "test", Agent: "c", Status: runtime.SessionIdle}})
	if err := store.Put(context.Background(), "managers/prev/page-000000.json", page); err != nil {
		t.Fatal(err)
	}
	env := workflowstest.NewRunnerEnv(t, workflows.Config{Graphs: []*agents.Graph{testGraph(t)}, Model: &workflowstest.FuncModel{}, Store: store})
	var created, dup, unknown *workflowstest.Update
	var listed []troupe.SessionEntry
	env.RegisterDelayedCallback(func() {
		created = workflowstest.SendUpdate(env, troupe.CreateSessionUpdate, troupe.CreateSessionInput{ID: "new", Session: troupe.SessionInput{Graph: "test", Agent: "c"}})
		dup = workflowstest.SendUpdate(env, troupe.CreateSessionUpdate, troupe.CreateSessionInput{ID: "old", Session: troupe.SessionInput{Graph: "test"}})
		unknown = workflowstest.SendUpdate(env, troupe.LifecycleUpdate, troupe.LifecycleInput{ID: "nope", Command: troupe.SessionCommand{Op: troupe.CommandPause}})
	}, 0)
	listThenCancel(t, env, &listed, time.Minute)
	env.ExecuteWorkflow(troupe.SessionManagerWorkflowName, troupe.ManagerInput{Pages: []string{"managers/prev/page-000000.json"}})

	var e troupe.SessionEntry
	created.Decode(t, &e)
	if created.Err() != nil || e.ID != "new" {
		t.Errorf("a create while the registry loads: %+v, %v", e, created.Err())
	}
	if troupe.ErrorType(dup.Err()) != troupe.ErrBadCommand {
		t.Errorf("a create of a session the registry holds, while it loads: %v; want %s", dup.Err(), troupe.ErrBadCommand)
	}
	if troupe.ErrorType(unknown.Err()) != troupe.ErrUnknownSession {
		t.Errorf("a command for no session, while the registry loads: %v; want %s", unknown.Err(), troupe.ErrUnknownSession)
	}
	if len(listed) != 2 || listed[0].ID != "old" || listed[1].ID != "new" {
		t.Errorf("listed %+v, want old and new", listed)
	}
}

// A session of a graph no worker serves is refused at create, with the
// graphs served named, and is never listed (it would start, fail at once,
// and stay listed idle with nothing to answer or remove it).
func TestSessionOfAnUnknownGraphIsRefused(t *testing.T) {
	env := workflowstest.NewRunnerEnv(t, workflows.Config{Graphs: []*agents.Graph{testGraph(t)}, Model: &workflowstest.FuncModel{}})
	var created *workflowstest.Update
	var listed []troupe.SessionEntry
	env.RegisterDelayedCallback(func() {
		created = workflowstest.SendUpdate(env, troupe.CreateSessionUpdate, troupe.CreateSessionInput{ID: "s", Session: troupe.SessionInput{Graph: "nosuch"}})
	}, time.Second)
	listThenCancel(t, env, &listed, time.Minute)
	env.ExecuteWorkflow(troupe.SessionManagerWorkflowName, troupe.ManagerInput{})
	if created.Accepted() || troupe.ErrorType(created.Err()) != troupe.ErrUnknownGraph || !strings.Contains(created.Err().Error(), `no graph "nosuch": the workers of this queue serve test`) {
		t.Errorf("a session of graph nosuch: accepted %v, err %v; want refused as %s", created.Accepted(), created.Err(), troupe.ErrUnknownGraph)
	}
	if len(listed) != 0 {
		t.Errorf("listed %+v, want no session", listed)
	}
}

// listThenCancel lists the manager's sessions into listed after d, then
// cancels it.
func listThenCancel(t *testing.T, env *testsuite.TestWorkflowEnvironment, listed *[]troupe.SessionEntry, d time.Duration) {
	env.RegisterDelayedCallback(func() {
		*listed = sessionsNow(t, env)
		env.CancelWorkflow()
	}, d)
}

// sessionsNow is what the manager env runs lists (troupe.SessionsQuery).
func sessionsNow(t *testing.T, env *testsuite.TestWorkflowEnvironment) []troupe.SessionEntry {
	t.Helper()
	q, err := env.QueryWorkflow(troupe.SessionsQuery)
	if err != nil {
		t.Fatal(err)
	}
	var es []troupe.SessionEntry
	if err := q.Get(&es); err != nil {
		t.Fatal(err)
	}
	return es
}

// A session's switch of backend reaches every sandbox its turns start,
// not only its own agents': an agent-as-tool with a sandbox, called by
// an agent with none, runs on the backend switched to.
func TestSessionSwitchReachesAgentTools(t *testing.T) {
	g := agents.MustGraph("tooled", "lead",
		&agents.Agent{Name: "lead", Instructions: "lead: delegates", Tools: []agents.Tool{agents.AsTool("coder", "code", "Runs code.")}},
		&agents.Agent{Name: "coder", Instructions: "coder: runs code", Sandbox: &agents.Sandbox{}},
	)
	lead := func(req model.Request) []agents.Item {
		if workflowstest.FirstWord(req.Instructions) != "lead:" {
			return workflowstest.ScriptedCoder(req)
		}
		last := workflowstest.LastItem(req)
		if last.Type == agents.ItemFunctionCallOutput {
			return []agents.Item{agents.AssistantMessage("lead " + last.Output)}
		}
		args, _ := json.Marshal(map[string]string{"input": "run: " + last.Content})
		return []agents.Item{workflowstest.Call(fmt.Sprintf("c%d", len(req.Input)), "code", string(args))}
	}
	other := t.TempDir()
	oc, err := local.New(local.Config{Root: other})
	if err != nil {
		t.Fatal(err)
	}
	env, root := workflowstest.LocalEnv(t, g, &workflowstest.FuncModel{Func: lead}, func(c *workflows.Config) { c.Sandboxes["other"] = oc })
	var before, after *workflowstest.Update
	env.RegisterDelayedCallback(func() {
		workflowstest.SendUpdate(env, troupe.CreateSessionUpdate, troupe.CreateSessionInput{ID: "s", Session: troupe.SessionInput{Graph: "tooled"}})
	}, time.Second)
	env.RegisterDelayedCallback(func() { before = workflowstest.AskSession(t, env, "s", "pwd") }, 2*time.Second)
	env.RegisterDelayedCallback(func() {
		workflowstest.SendUpdate(env, troupe.LifecycleUpdate, troupe.LifecycleInput{ID: "s", Command: troupe.SessionCommand{Op: troupe.CommandSwitch, Arg: "other"}})
	}, time.Minute)
	env.RegisterDelayedCallback(func() { after = workflowstest.AskSession(t, env, "s", "pwd") }, 2*time.Minute)
	env.RegisterDelayedCallback(func() {
		workflowstest.SendUpdate(env, troupe.LifecycleUpdate, troupe.LifecycleInput{ID: "s", Command: troupe.SessionCommand{Op: troupe.CommandStop}})
	}, 3*time.Minute)
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Hour)
	env.ExecuteWorkflow(troupe.SessionManagerWorkflowName, troupe.ManagerInput{})
	if got := before.Output(t); !strings.Contains(got, root) {
		t.Errorf("before the switch the agent tool ran in %s, want a workspace under %s", got, root)
	}
	if got := after.Output(t); !strings.Contains(got, other) {
		t.Errorf("after the switch the agent tool ran in %s, want a workspace under %s (the backend switched to)", got, other)
	}
}

// The manager drops a removed session from its list, whether the removal
// came by update or (with no worker up when it was asked) by signal, and
// news the session sent before it was terminated, arriving late, does
// not list it again. A removal of a turn's workflow id is refused.
func TestSessionManagerRemoves(t *testing.T) {
	env := workflowstest.NewRunnerEnv(t, workflows.Config{Graphs: []*agents.Graph{testGraph(t)}, Model: &workflowstest.FuncModel{}})
	news := func(id string) {
		env.SignalWorkflow(troupe.SessionChangedSignal, troupe.SessionEntry{ID: id, Graph: "test", Agent: "c", Status: runtime.SessionIdle})
	}
	var removed, again, turn *workflowstest.Update
	var listed [][]troupe.SessionEntry
	list := func() { listed = append(listed, sessionsNow(t, env)) }
	env.RegisterDelayedCallback(func() { news("s1"); news("s2"); news("s3") }, time.Second)
	env.RegisterDelayedCallback(func() {
		removed = workflowstest.SendUpdate(env, troupe.RemoveSessionUpdate, troupe.RemoveSessionInput{ID: "s1"})
		turn = workflowstest.SendUpdate(env, troupe.RemoveSessionUpdate, troupe.RemoveSessionInput{ID: "s2/t1/0-c"})
	}, 2*time.Second)
	env.RegisterDelayedCallback(func() {
		news("s1") // Late.
		env.SignalWorkflow(troupe.RemoveSessionSignal, troupe.RemoveSessionInput{ID: "s2"})
	}, 3*time.Second)
	env.RegisterDelayedCallback(list, 4*time.Second)
	env.RegisterDelayedCallback(func() {
		again = workflowstest.SendUpdate(env, troupe.RemoveSessionUpdate, troupe.RemoveSessionInput{ID: "s1"})
	}, 5*time.Second)
	listThenCancel(t, env, new([]troupe.SessionEntry), time.Minute)
	env.ExecuteWorkflow(troupe.SessionManagerWorkflowName, troupe.ManagerInput{})

	var res troupe.RemoveSessionResult
	removed.Decode(t, &res)
	if removed.Err() != nil || !res.Found || !res.Unlisted {
		t.Errorf("remove s1: %+v, %v; want found and unlisted", res, removed.Err())
	}
	again.Decode(t, &res)
	if again.Err() != nil || res.Found || res.Unlisted {
		t.Errorf("remove s1 again: %+v, %v; want not found", res, again.Err())
	}
	if turn.Accepted() || troupe.ErrorType(turn.Err()) != troupe.ErrBadCommand {
		t.Errorf("remove a turn's workflow: accepted %v, err %v; want refused as %s", turn.Accepted(), turn.Err(), troupe.ErrBadCommand)
	}
	if len(listed) != 1 || len(listed[0]) != 1 || listed[0][0].ID != "s3" {
		t.Errorf("listed %+v, want s3 alone", listed)
	}
}

// A create the manager took, sent again to its next run (the server
// knows update ids within one run only), gets the session it made, not a
// second one, with or without an id of its own; the manager carries the
// creates of its last runs on.
func TestSessionManagerCreatesOnceAcrossRuns(t *testing.T) {
	env, _ := newEnv(t, nil)
	made := troupe.SessionEntry{ID: "session-test-made", Graph: "test", Agent: "c", Status: runtime.SessionIdle}
	var again, named, fresh *workflowstest.Update
	env.RegisterDelayedCallback(func() {
		again = workflowstest.SendUpdateWithID(env, troupe.CreateSessionUpdate, "create-1", troupe.CreateSessionInput{Session: troupe.SessionInput{Graph: "test"}})
		named = workflowstest.SendUpdateWithID(env, troupe.CreateSessionUpdate, "create-2", troupe.CreateSessionInput{ID: "named", Session: troupe.SessionInput{Graph: "test"}})
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		fresh = workflowstest.SendUpdateWithID(env, troupe.CreateSessionUpdate, "create-3", troupe.CreateSessionInput{ID: "fresh", Session: troupe.SessionInput{Graph: "test"}})
	}, 2*time.Second)
	env.RegisterDelayedCallback(func() {
		workflowstest.SendUpdate(env, troupe.LifecycleUpdate, troupe.LifecycleInput{ID: "fresh", Command: troupe.SessionCommand{Op: troupe.CommandStop}})
	}, 30*time.Second)
	env.RegisterDelayedCallback(func() {
		env.SetCurrentHistoryLength(100000)
		env.SignalWorkflow(troupe.SessionChangedSignal, made) // Wakes the manager at its bound.
	}, time.Minute)
	env.ExecuteWorkflow(troupe.SessionManagerWorkflowName, troupe.ManagerInput{
		Sessions: []troupe.SessionEntry{made, {ID: "named", Graph: "test", Agent: "c", Status: runtime.SessionIdle}},
		Created:  []troupe.CreatedSession{{Update: "create-1", ID: made.ID}, {Update: "create-2", ID: "named"}},
	})
	var cae *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &cae) {
		t.Fatalf("manager ended with %v, want it to continue as new", err)
	}
	for name, tc := range map[string]struct {
		u  *workflowstest.Update
		id string
	}{"again": {again, made.ID}, "named": {named, "named"}, "fresh": {fresh, "fresh"}} {
		var e troupe.SessionEntry
		if tc.u.Err() != nil {
			t.Errorf("%s: %v", name, tc.u.Err())
			continue
		}
		tc.u.Decode(t, &e)
		if e.ID != tc.id {
			t.Errorf("%s: session %s, want %s", name, e.ID, tc.id)
		}
	}
	var next troupe.ManagerInput
	if err := converter.GetDefaultDataConverter().FromPayloads(cae.Input, &next); err != nil {
		t.Fatal(err)
	}
	// The stop is carried too (under the id the environment gave it).
	want := []troupe.CreatedSession{{Update: "create-1", ID: made.ID}, {Update: "create-2", ID: "named"}, {Update: "create-3", ID: "fresh"}}
	if len(next.Created) != 4 || !slices.Equal(next.Created[:3], want) || next.Created[3].ID != "fresh" {
		t.Errorf("the next run carries creates %v, want %v and the stop of fresh", next.Created, want)
	}
}

// A fork or a command the manager took, sent again to its next run, is
// answered with the session as it stands: a stop is not refused because
// the session is stopped by then, and a fork is neither refused because
// its session exists nor made twice.
func TestSessionManagerCommandsOnceAcrossRuns(t *testing.T) {
	env, _ := newEnv(t, nil)
	stopped := troupe.SessionEntry{ID: "stopped", Graph: "test", Agent: "c", Status: runtime.SessionStopped}
	parent := troupe.SessionEntry{ID: "parent", Graph: "test", Agent: "c", Status: runtime.SessionIdle}
	named := troupe.SessionEntry{ID: "named-fork", Graph: "test", Agent: "c", Status: runtime.SessionIdle}
	unnamed := troupe.SessionEntry{ID: "parent-fork-1234abcd", Graph: "test", Agent: "c", Status: runtime.SessionIdle}
	// A fork from long ago, its update past the ones remembered: its entry
	// names it.
	old := troupe.SessionEntry{ID: "parent-fork-0000abcd", Graph: "test", Agent: "c", Status: runtime.SessionIdle, Request: "fork-0"}
	var stop, forkNamed, forkUnnamed, forkOld, gone *workflowstest.Update
	env.RegisterDelayedCallback(func() {
		stop = workflowstest.SendUpdateWithID(env, troupe.LifecycleUpdate, "stop-1", troupe.LifecycleInput{ID: stopped.ID, Command: troupe.SessionCommand{Op: troupe.CommandStop}})
		forkNamed = workflowstest.SendUpdateWithID(env, troupe.ForkUpdate, "fork-1", troupe.ForkInput{ID: parent.ID, NewID: named.ID})
		forkUnnamed = workflowstest.SendUpdateWithID(env, troupe.ForkUpdate, "fork-2", troupe.ForkInput{ID: parent.ID})
		forkOld = workflowstest.SendUpdateWithID(env, troupe.ForkUpdate, "fork-0", troupe.ForkInput{ID: parent.ID})
		gone = workflowstest.SendUpdateWithID(env, troupe.LifecycleUpdate, "rename-1", troupe.LifecycleInput{ID: "removed", Command: troupe.SessionCommand{Op: troupe.CommandRename, Arg: "x"}})
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		env.SetCurrentHistoryLength(100000)
		env.SignalWorkflow(troupe.SessionChangedSignal, parent) // Wakes the manager at its bound.
	}, time.Minute)
	env.ExecuteWorkflow(troupe.SessionManagerWorkflowName, troupe.ManagerInput{
		Sessions: []troupe.SessionEntry{stopped, parent, named, unnamed, old},
		Created: []troupe.CreatedSession{{Update: "stop-1", ID: stopped.ID}, {Update: "fork-1", ID: named.ID},
			{Update: "fork-2", ID: unnamed.ID}, {Update: "rename-1", ID: "removed"}},
	})
	var cae *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &cae) {
		t.Fatalf("manager ended with %v, want it to continue as new", err)
	}
	for _, tc := range []struct {
		name string
		u    *workflowstest.Update
		want troupe.SessionEntry
	}{{"stop again", stop, stopped}, {"named fork again", forkNamed, named}, {"unnamed fork again", forkUnnamed, unnamed},
		{"a fork past the updates remembered, again", forkOld, old}} {
		var e troupe.SessionEntry
		if tc.u.Err() != nil {
			t.Errorf("%s: %v", tc.name, tc.u.Err())
			continue
		}
		tc.u.Decode(t, &e)
		if e.ID != tc.want.ID || e.Status != tc.want.Status {
			t.Errorf("%s: session %s (%s), want %s (%s)", tc.name, e.ID, e.Status, tc.want.ID, tc.want.Status)
		}
	}
	if troupe.ErrorType(gone.Err()) != troupe.ErrUnknownSession {
		t.Errorf("a command done before on a session removed since: %v, want %s", gone.Err(), troupe.ErrUnknownSession)
	}
	var next troupe.ManagerInput
	if err := converter.GetDefaultDataConverter().FromPayloads(cae.Input, &next); err != nil {
		t.Fatal(err)
	}
	if len(next.Sessions) != 5 && len(next.Pages) == 0 {
		t.Errorf("the next run carries sessions %+v, want the 5 it had (no second fork)", next.Sessions)
	}
}
