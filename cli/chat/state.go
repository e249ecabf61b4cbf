// Package chat is the model and the view of `troupe chat`, the terminal UI
// over sessions; package cli wires it to a Temporal client.
//
// The model is plain Go: State.Apply takes one Msg (a line the user
// entered, a navigation key, an event of the open session's follower, the
// outcome of a client call) and returns the client calls to make next, as
// Effects. The caller runs each Effect and feeds its outcome back as a Msg;
// Apply itself does no I/O, so its tests are tables of messages. The view
// (view.go) renders a State; UI (ui.go) is the Bubble Tea program that
// turns keys into messages and effects into commands.
//
// What the user sees of a turn comes from the session's events: each
// agent's reply (growing with the text_delta events of live streaming, or
// the start of it from its model_turn), the agent at work, tool calls and
// their results, handoffs, agents-as-tools with the events of their own
// agents indented under them, sandboxes, and the turn's answer, whose full
// text is read from the session's record of the turn (SessionInfo.Recent)
// once the session says the turn ended.
//
// What the session spent shows in the header (its cost, against its
// budget when it has one) and, per agent, with /budget; /budget SPEC
// changes the budget. A turn the budget stopped, or a message it refused,
// says which limit is reached and how to raise it. The words are package
// spend's, as the troupe commands' are.
package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/cli/spend"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/runtime"
)

// EventTextDelta is the kind of the ephemeral events of live streaming:
// each carries a fragment of an agent's reply (Detail) as the model
// generates it, before the turn's model_turn event.
const EventTextDelta = troupe.EventTextDelta

// Kind is what an Entry of the transcript is.
type Kind int

// The kinds of entries.
const (
	// KindUser is a message of the user's (from this chat or another
	// client of the session).
	KindUser Kind = iota
	// KindReply is an agent's text in one model turn: growing while it
	// streams, then whole.
	KindReply
	// KindAnswer is a turn's answer.
	KindAnswer
	// KindStep is a step of a turn: a model turn, a tool call or its
	// result, a handoff, an agent-as-tool, a sandbox.
	KindStep
	// KindNote is news: the session opened, paused, renamed, a message
	// queued.
	KindNote
	// KindProblem is something that went wrong: a refused message, a
	// failed call or turn.
	KindProblem
	// KindHelp is the list of commands.
	KindHelp
)

// Entry is one item of the transcript the chat shows.
type Entry struct {
	Kind Kind
	// Depth is how deep in agents-as-tools the entry happened: 0 for the
	// agents that answer the session, 1 for the agents they call as
	// tools, and so on.
	Depth int
	// Agent is the agent the entry is about, if any.
	Agent string
	Text  string
	// Streaming says a reply is still growing.
	Streaming bool
	// Workflow and Turn are the agent workflow and its model turn, for
	// replies and model-turn steps.
	Workflow string
	Turn     int
}

// Msg is what State.Apply takes. The types of this package that
// implement it are all there are.
type Msg interface{ chatMsg() }

type (
	// Line is a line the user entered.
	Line struct{ Text string }
	// Key is a key the input line does not take: "up", "down", "esc",
	// and "enter" on an empty line.
	Key struct{ Name string }
	// Followed is an event of session Session, from its follower.
	Followed struct {
		Session string
		Event   troupeclient.Event
	}
	// Created is a session created (DoCreate).
	Created struct{ Entry troupeclient.SessionEntry }
	// Opened is a session opened (DoOpen): where it stands, and the
	// calls of its turn that wait for approval.
	Opened struct {
		Info      troupeclient.SessionInfo
		Approvals []troupeclient.Approval
	}
	// Refreshed is where the open session stands now (DoInfo).
	Refreshed struct{ Info troupeclient.SessionInfo }
	// Listed is the sessions there are (DoList).
	Listed struct{ Sessions []troupeclient.SessionEntry }
	// Sent is a message the session took (DoSend).
	Sent struct {
		Session string
		Text    string
		Result  troupeclient.SendResult
	}
	// Commanded is a lifecycle command the session manager took
	// (DoCommand).
	Commanded struct {
		Session, Command string
		Entry            troupeclient.SessionEntry
	}
	// Forked is a session forked (DoFork): Entry is the new one.
	Forked struct {
		From  string
		Entry troupeclient.SessionEntry
	}
	// Switched is a session moved to another sandbox backend (DoSwitch).
	Switched struct {
		Session, Backend string
		Entry            troupeclient.SessionEntry
	}
	// Served says whether a worker serves the sessions' task queue
	// (DoCheckServed).
	Served struct {
		Queue string
		OK    bool
	}
	// Failed is a client call that failed.
	Failed struct {
		Do      Do
		Session string
		// Text is the message of a DoSend, the change of a DoBudget.
		Text string
		Err  error
	}
	// FollowEnded is the end of session Session's follower (DoFollow).
	FollowEnded struct {
		Session string
		Err     error
	}
	// Decided is a decision the session took on a call that waited
	// (DoDecide): Decisions are every call it settled.
	Decided struct {
		Session   string
		Decisions []troupeclient.Decision
	}
	// Budgeted is a session's budget changed (DoBudget): where the
	// session stands now.
	Budgeted struct {
		Session string
		Info    troupeclient.SessionInfo
	}
)

func (Line) chatMsg()        {}
func (Key) chatMsg()         {}
func (Followed) chatMsg()    {}
func (Created) chatMsg()     {}
func (Opened) chatMsg()      {}
func (Refreshed) chatMsg()   {}
func (Listed) chatMsg()      {}
func (Sent) chatMsg()        {}
func (Commanded) chatMsg()   {}
func (Forked) chatMsg()      {}
func (Switched) chatMsg()    {}
func (Served) chatMsg()      {}
func (Failed) chatMsg()      {}
func (FollowEnded) chatMsg() {}
func (Decided) chatMsg()     {}
func (Budgeted) chatMsg()    {}

// Do is a client call an Effect asks for.
type Do string

// The client calls. Each answers with the Msg its comment names, or
// Failed.
const (
	// DoCheckServed asks whether a worker serves the sessions (Served).
	DoCheckServed Do = "check-served"
	// DoCreate creates a session of graph Arg (Created).
	DoCreate Do = "create"
	// DoOpen reads where session Session stands (Opened).
	DoOpen Do = "open"
	// DoFollow follows session Session from Cursor, sending each event
	// (Followed) until another DoFollow or the end (FollowEnded).
	DoFollow Do = "follow"
	// DoSend sends session Session the message Arg, without waiting for
	// its turn (Sent).
	DoSend Do = "send"
	// DoInfo reads where session Session stands (Refreshed).
	DoInfo Do = "info"
	// DoList lists the sessions (Listed).
	DoList Do = "list"
	// DoCommand runs the lifecycle command Command, with Arg, on
	// session Session (Commanded).
	DoCommand Do = "command"
	// DoFork forks session Session into a new one named Arg (Forked).
	DoFork Do = "fork"
	// DoSwitch moves session Session's workspaces to backend Arg
	// (Switched).
	DoSwitch Do = "switch"
	// DoDecide takes Decision on a call of session Session that waits
	// for approval (Decided).
	DoDecide Do = "decide"
	// DoBudget changes session Session's budget as Arg says (agents.
	// Budget.Change: "cost=2", "off") (Budgeted).
	DoBudget Do = "budget"
	// DoQuit ends the chat; the sessions go on.
	DoQuit Do = "quit"
)

// Effect is a client call for the caller of Apply to make.
type Effect struct {
	Do      Do
	Session string
	Arg     string
	Command string
	Cursor  troupeclient.Cursor
	// Decision is DoDecide's.
	Decision troupeclient.Decision
}

// Options set a State up.
type Options struct {
	// Graph is /new's graph when the command names none.
	Graph string
	// Graphs are the graphs this troupe serves, for messages.
	Graphs []string
}

// State is what the chat knows and shows.
type State struct {
	opts Options
	// Session is the id of the open session; empty when none is.
	Session string
	// Info is where the open session stands, as last heard.
	Info troupeclient.SessionInfo
	// Entries is the transcript, oldest first.
	Entries []Entry
	// Picking says the list of sessions (Picker) is shown, Pick the one
	// chosen.
	Picking bool
	Picker  []troupeclient.SessionEntry
	Pick    int
	// Quit says the user asked to leave.
	Quit bool
	// Approvals are the calls of the open session's turn that wait for
	// a decision, oldest first, as their events said.
	Approvals []Approval

	unserved bool
	inflight map[Do]int
	// budgetAsked says /budget waits for where the session stands
	// (DoInfo) to show its budget.
	budgetAsked bool
	// Of the open session's turns:
	depth     map[string]int    // workflow → depth
	announced map[string]bool   // children an agent_tool_started showed
	streams   map[string]int    // workflow/turn → index of its growing reply
	awaiting  map[string]int    // turn id → index of its answer, whose full text the record has
	working   []worker          // agents at work, in order of start
	echoes    []string          // messages sent from here whose message event has not come
	sent      map[string]string // turn id → message sent from here
	failures  map[string]int    // turn id → index of the line of its failure, which its record explains
	budgets   []string          // budget changes sent from here whose command event has not come
}

// Approval is a call that waits for a decision, as the chat shows it.
type Approval struct {
	ID, Agent, Tool, Arguments string
}

type worker struct {
	workflow, agent string
	depth           int
}

// NewState returns the state of a chat with no session open.
func NewState(o Options) *State {
	s := &State{opts: o, inflight: map[Do]int{}}
	s.resetTurns()
	s.add(Entry{Kind: KindNote, Text: "no session open: /new [graph] starts one, /sessions lists them, /help shows the commands"})
	return s
}

func (s *State) resetTurns() {
	s.Approvals = nil
	s.depth, s.announced, s.streams, s.awaiting, s.sent = map[string]int{}, map[string]bool{}, map[string]int{}, map[string]int{}, map[string]string{}
	s.failures, s.budgets = map[string]int{}, nil
	s.working, s.echoes = nil, nil
}

// AtWork returns the agents at work in the open session's turn, in the
// order they started.
func (s *State) AtWork() []string {
	var out []string
	for _, w := range s.working {
		out = append(out, w.agent)
	}
	return out
}

// Waiting returns what the chat waits for: the calls in flight that the
// user asked for.
func (s *State) Waiting() []string {
	labels := []struct {
		do   Do
		what string
	}{{DoCreate, "creating a session"}, {DoOpen, "opening the session"}, {DoList, "listing sessions"}, {DoSend, "sending"},
		{DoCommand, "asking the session manager"}, {DoFork, "forking"}, {DoSwitch, "switching backend"}, {DoBudget, "changing the budget"}}
	var out []string
	for _, l := range labels {
		if s.inflight[l.do] > 0 {
			out = append(out, l.what)
		}
	}
	return out
}

// Apply takes m and returns the client calls it asks for.
func (s *State) Apply(m Msg) []Effect {
	switch m := m.(type) {
	case Line:
		return s.line(m.Text)
	case Key:
		return s.key(m.Name)
	case Followed:
		return s.event(m.Session, m.Event)
	case Created:
		s.done(DoCreate)
		return s.open(m.Entry.ID)
	case Opened:
		s.done(DoOpen)
		effects := s.opened(m.Info)
		for _, a := range m.Approvals {
			if s.waits(Approval{ID: a.ID, Agent: a.Agent, Tool: a.Tool, Arguments: a.Arguments}) {
				s.add(Entry{Kind: KindStep, Agent: a.Agent, Text: question(a.Agent, a.Tool, a.Arguments, a.ID)})
			}
		}
		return effects
	case Refreshed:
		s.refreshed(m.Info)
		if m.Info.ID == s.Session && s.budgetAsked {
			s.budgetAsked = false
			s.showBudget()
		}
	case Budgeted:
		s.done(DoBudget)
		if m.Info.ID == s.Session {
			s.refreshed(m.Info)
			s.showBudget()
		}
	case Listed:
		s.done(DoList)
		s.listed(m.Sessions)
	case Sent:
		s.done(DoSend)
		if m.Session == s.Session {
			if _, seen := s.sent[m.Result.Turn]; !seen {
				// Its message event has not come: it is this chat's.
				if i := slices.Index(s.echoes, m.Text); i >= 0 {
					s.echoes = slices.Delete(s.echoes, i, i+1)
				}
			}
			s.sent[m.Result.Turn] = m.Text
			if m.Result.Ahead > 0 {
				s.note(fmt.Sprintf("queued as turn %s, after %d %s", m.Result.Turn, m.Result.Ahead, plural(m.Result.Ahead, "turn", "turns")))
			}
		}
	case Commanded:
		s.done(DoCommand)
		if m.Session == s.Session {
			s.merge(m.Entry)
			return []Effect{{Do: DoInfo, Session: s.Session}}
		}
	case Forked:
		s.done(DoFork)
		s.note(fmt.Sprintf("forked session %s into %s: the fork opens; /open %s goes back", m.From, describeEntry(m.Entry), m.From))
		return s.open(m.Entry.ID)
	case Switched:
		s.done(DoSwitch)
		if m.Session == s.Session {
			s.note(fmt.Sprintf("session %s: its workspaces move to the %s backend", m.Session, m.Backend))
			s.merge(m.Entry)
			return []Effect{{Do: DoInfo, Session: s.Session}}
		}
	case Served:
		if !m.OK && !s.unserved {
			s.problem(fmt.Sprintf("no worker serves task queue %s: the session waits until `troupe dev` or `troupe worker` runs", m.Queue))
		}
		s.unserved = !m.OK
	case Failed:
		s.done(m.Do)
		s.failed(m)
	case Decided:
		s.done(DoDecide)
		if m.Session == s.Session {
			for _, d := range m.Decisions {
				s.settle(d.ID)
			}
		}
	case FollowEnded:
		if m.Err != nil && m.Session == s.Session {
			s.problem(fmt.Sprintf("stopped following session %s: %v (/open %s follows it again)", m.Session, m.Err, m.Session))
		}
	}
	return nil
}

// line takes a line the user entered: a command, or a message.
func (s *State) line(text string) []Effect {
	text = strings.TrimSpace(text)
	if text == "" {
		return s.key("enter")
	}
	s.Picking = false
	if short, ok := approvalAnswers[strings.ToLower(text)]; ok && len(s.Approvals) > 0 {
		text = short // y, n, a: the oldest call that waits
	}
	if !strings.HasPrefix(text, "/") {
		if s.Session == "" {
			s.problem("no session open: /new [graph] starts one, /sessions lists them")
			return nil
		}
		if s.stopped() {
			return nil
		}
		s.add(Entry{Kind: KindUser, Text: text})
		s.echoes = append(s.echoes, text)
		if s.Info.Status == runtime.SessionPaused {
			s.note("the session is paused: this message waits for /resume")
		}
		return []Effect{s.call(Effect{Do: DoSend, Session: s.Session, Arg: text}), {Do: DoCheckServed}}
	}
	name, arg, _ := strings.Cut(text, " ")
	arg = strings.TrimSpace(arg)
	switch name {
	case "/help", "/?":
		s.add(Entry{Kind: KindHelp, Text: Help})
		return nil
	case "/done", "/quit", "/exit":
		s.Quit = true
		return []Effect{{Do: DoQuit}}
	case "/new":
		graph := arg
		if graph == "" {
			graph = s.opts.Graph
		}
		if graph == "" {
			s.problem("name a graph: /new GRAPH" + s.servedGraphs())
			return nil
		}
		return []Effect{s.call(Effect{Do: DoCreate, Arg: graph}), {Do: DoCheckServed}}
	case "/sessions", "/ls":
		return []Effect{s.call(Effect{Do: DoList})}
	case "/open":
		if arg == "" {
			s.problem("name a session: /open SESSION (/sessions lists them)")
			return nil
		}
		return s.open(arg)
	}
	usage, ok := sessionCommands[name]
	if !ok {
		s.problem(fmt.Sprintf("unknown command %s: /help shows the commands", name))
		return nil
	}
	if s.Session == "" {
		s.problem(fmt.Sprintf("%s needs a session: /new [graph] starts one, /sessions lists them", name))
		return nil
	}
	if s.stopped() {
		return nil
	}
	if usage.needsArg && arg == "" {
		s.problem("usage: " + usage.text)
		return nil
	}
	switch name {
	case "/approve", "/reject", "/always":
		return s.decide(name, arg)
	case "/budget":
		if arg == "" {
			s.budgetAsked = true
			return []Effect{{Do: DoInfo, Session: s.Session}}
		}
		if _, err := spend.Parse(arg); err != nil {
			s.problem(fmt.Sprintf("/budget %v: usage: %s", err, usage.text))
			return nil
		}
		s.budgets = append(s.budgets, arg)
		return []Effect{s.call(Effect{Do: DoBudget, Session: s.Session, Arg: arg})}
	case "/fork":
		return []Effect{s.call(Effect{Do: DoFork, Session: s.Session, Arg: arg})}
	case "/switch":
		return []Effect{s.call(Effect{Do: DoSwitch, Session: s.Session, Arg: arg})}
	}
	if !usage.needsArg && arg != "" {
		s.problem(fmt.Sprintf("usage: %s (it takes no argument)", usage.text))
		return nil
	}
	return []Effect{s.call(Effect{Do: DoCommand, Session: s.Session, Command: strings.TrimPrefix(name, "/"), Arg: arg})}
}

// sessionCommands are the commands on the open session, with their usage.
var sessionCommands = map[string]struct {
	needsArg bool
	text     string
}{
	"/rename":  {true, "/rename NAME"},
	"/fork":    {false, "/fork [NAME]"},
	"/switch":  {true, "/switch BACKEND (bwrap, docker or local)"},
	"/pause":   {false, "/pause"},
	"/resume":  {false, "/resume"},
	"/policy":  {true, "/policy enqueue|reject|interrupt|rollback"},
	"/stop":    {false, "/stop"},
	"/approve": {false, "/approve [CALL] (default: the oldest call that waits)"},
	"/reject":  {false, "/reject [CALL] [MESSAGE FOR THE MODEL]"},
	"/always":  {false, "/always [CALL]: approve, and every later call of the tool by that agent"},
	"/budget":  {false, "/budget [" + spend.Syntax + "]"},
}

// approvalAnswers are the short answers to the oldest call that waits.
var approvalAnswers = map[string]string{"y": "/approve", "yes": "/approve", "n": "/reject", "no": "/reject", "a": "/always", "always": "/always"}

// decide takes /approve, /reject or /always on the call arg names (its
// id first), else on the oldest call that waits.
func (s *State) decide(name, arg string) []Effect {
	if len(s.Approvals) == 0 {
		s.problem("no call waits for approval")
		return nil
	}
	target := s.Approvals[0]
	first, rest, _ := strings.Cut(arg, " ")
	if i := slices.IndexFunc(s.Approvals, func(a Approval) bool { return a.ID == first }); i >= 0 {
		target, arg = s.Approvals[i], strings.TrimSpace(rest)
	}
	d := troupeclient.Decision{ID: target.ID}
	switch name {
	case "/approve":
		d.Approve = true
	case "/always":
		d.Approve, d.Remember = true, runtime.RememberTool
	case "/reject":
		d.Message = arg
	}
	return []Effect{s.call(Effect{Do: DoDecide, Session: s.Session, Decision: d})}
}

// waits adds a to the calls that wait, unless it is there already, and
// reports whether it added it.
func (s *State) waits(a Approval) bool {
	if slices.ContainsFunc(s.Approvals, func(b Approval) bool { return b.ID == a.ID }) {
		return false
	}
	s.Approvals = append(s.Approvals, a)
	return true
}

// question is how the chat shows a call that waits.
func question(agent, tool, args, id string) string {
	return fmt.Sprintf("⏸ %s wants to run %s %s: approve? press y / n / a (always), or /approve %s, /reject %s MESSAGE", agent, tool, args, id, id)
}

// takesKeys reports whether y, n and a pressed on an empty input line
// decide the oldest call that waits: one does, and no decision is on
// its way (a key pressed twice decides once).
func (s *State) takesKeys() bool {
	return len(s.Approvals) > 0 && s.inflight[DoDecide] == 0
}

// settle takes the call id off the calls that wait.
func (s *State) settle(id string) {
	s.Approvals = slices.DeleteFunc(s.Approvals, func(a Approval) bool { return a.ID == id })
}

// Help is what /help shows.
const Help = `Type a message and press Enter to send it to the open session. Commands:
  /new [GRAPH]        start a session of GRAPH (default: --graph) and open it
  /sessions           list the sessions; ↑/↓ choose one, Enter opens it, Esc closes the list
  /open SESSION       open a session by id
  /rename NAME        rename the open session
  /fork [NAME]        fork the open session (conversation, workspaces, settings) and open the fork
  /switch BACKEND     move the open session's workspaces to bwrap, docker or local
  /pause, /resume     pause the session's whole agent tree; resume where it stopped
  /policy P           what a message sent during a turn does: enqueue, reject, interrupt or rollback
  /budget             show the session's budget and what it spent, per agent
  /budget SPEC        change the budget from the next model call on: cost=N, model_calls=N, input_tokens=N,
                      output_tokens=N (comma-separated; the others stay; 0 lifts one), or off for none
  /stop               stop the session for good (its sandboxes too)
  /approve [CALL]     approve a call that waits for approval (y does it for the oldest)
  /reject [CALL] [M]  reject it, telling the model M (n does it for the oldest)
  /always [CALL]      approve it and every later call of that tool by that agent (a)
  /done               leave the chat; the session stays, waiting for you
While a call waits, y, n or a pressed on an empty input line answers the oldest call at once (no Enter).
PgUp/PgDn scroll; Ctrl-C leaves like /done.`

func (s *State) servedGraphs() string {
	if len(s.opts.Graphs) == 0 {
		return ""
	}
	return " (this troupe serves " + strings.Join(s.opts.Graphs, ", ") + ")"
}

// stopped reports whether the open session is stopped, and says so.
func (s *State) stopped() bool {
	if s.Info.Status != runtime.SessionStopped {
		return false
	}
	s.problem(fmt.Sprintf("session %s is stopped: /new starts another, /sessions lists them", s.Session))
	return true
}

// key takes a navigation key: it moves in the list of sessions.
func (s *State) key(name string) []Effect {
	if !s.Picking || len(s.Picker) == 0 {
		return nil
	}
	switch name {
	case "up":
		s.Pick = max(0, s.Pick-1)
	case "down":
		s.Pick = min(len(s.Picker)-1, s.Pick+1)
	case "esc":
		s.Picking = false
	case "enter":
		s.Picking = false
		return s.open(s.Picker[s.Pick].ID)
	}
	return nil
}

func (s *State) open(id string) []Effect {
	return []Effect{s.call(Effect{Do: DoOpen, Session: id}), {Do: DoCheckServed}}
}

// call counts e in flight and returns it.
func (s *State) call(e Effect) Effect {
	s.inflight[e.Do]++
	return e
}

func (s *State) done(d Do) {
	if s.inflight[d] > 0 {
		s.inflight[d]--
	}
}

// opened shows a session opened: its conversation so far, then what
// happens from now on.
func (s *State) opened(info troupeclient.SessionInfo) []Effect {
	if info.ID == s.Session {
		s.Info = info
		s.note(fmt.Sprintf("session %s is open already", info.ID))
		return nil
	}
	if s.Session == "" && len(s.Entries) == 1 && s.Entries[0].Kind == KindNote {
		s.Entries = nil // the welcome
	}
	s.Session, s.Info = info.ID, info
	s.resetTurns()
	s.add(Entry{Kind: KindNote, Text: fmt.Sprintf("── session %s of %s: %s, %d %s, next answered by %s ──",
		describeInfo(info), info.Graph, info.Status, info.Turns, plural(info.Turns, "turn", "turns"), info.Agent)})
	if earlier := info.Turns - len(info.Recent); earlier > 0 {
		s.note(fmt.Sprintf("(%d earlier %s not shown)", earlier, plural(earlier, "turn", "turns")))
	}
	for _, rec := range info.Recent {
		s.add(Entry{Kind: KindUser, Text: rec.Message})
		s.record(rec)
	}
	if info.Running != "" {
		s.note(fmt.Sprintf("turn %s is running", info.Running))
	}
	if info.Status == runtime.SessionStopped {
		s.note("this session is stopped: it takes no more messages")
	}
	return []Effect{{Do: DoFollow, Session: info.ID, Cursor: troupeclient.Cursor{info.ID: max(0, info.NextEvent-1)}}}
}

// record shows how a turn ended, from the session's record of it.
func (s *State) record(rec troupeclient.TurnRecord) {
	switch rec.Outcome {
	case runtime.TurnAnswered:
		s.add(Entry{Kind: KindAnswer, Agent: rec.Agent, Text: FormatOutput(rec.Output)})
	case runtime.TurnFailed:
		if rec.ErrorType == troupe.ErrBudgetExceeded {
			s.problem(s.budgetStopped(rec.Turn))
			return
		}
		s.problem(fmt.Sprintf("turn %s failed: %s", rec.Turn, rec.Error))
	default:
		s.note(fmt.Sprintf("turn %s: %s", rec.Turn, strings.ReplaceAll(rec.Outcome, "_", " ")))
	}
}

func (s *State) refreshed(info troupeclient.SessionInfo) {
	if info.ID != s.Session {
		return
	}
	s.Info = info
	for _, rec := range info.Recent {
		if i, ok := s.failures[rec.Turn]; ok && rec.Outcome == runtime.TurnFailed {
			if rec.ErrorType == troupe.ErrBudgetExceeded && i < len(s.Entries) {
				s.Entries[i].Text = s.budgetStopped(rec.Turn)
			}
			delete(s.failures, rec.Turn)
		}
		i, ok := s.awaiting[rec.Turn]
		if !ok || rec.Outcome != runtime.TurnAnswered {
			continue
		}
		s.Entries[i].Text = FormatOutput(rec.Output)
		delete(s.awaiting, rec.Turn)
	}
}

// merge takes what the session manager says of the open session.
func (s *State) merge(e troupeclient.SessionEntry) {
	if e.ID != s.Session {
		return
	}
	s.Info.Name, s.Info.Status, s.Info.Policy, s.Info.Turns, s.Info.Usage = e.Name, e.Status, e.Policy, e.Turns, e.Usage
	if e.Agent != "" {
		s.Info.Agent = e.Agent
	}
	if !e.LastActivity.IsZero() {
		s.Info.LastActivity = e.LastActivity
	}
}

func (s *State) listed(list []troupeclient.SessionEntry) {
	if len(list) == 0 {
		s.note("no sessions yet: /new [graph] starts one")
		return
	}
	s.Picking, s.Picker, s.Pick = true, list, len(list)-1
	for i, e := range list {
		if e.ID == s.Session {
			s.Pick = i
		}
	}
}

// event shows an event of the open session's follower.
func (s *State) event(session string, e troupeclient.Event) []Effect {
	if session != s.Session || session == "" {
		return nil // a follower of a session left behind
	}
	top := e.WorkflowID == s.Session
	// A budget_exceeded event names the agent the root refused, not a
	// child it started.
	if e.Child != "" && e.Kind != troupe.EventBudgetExceeded {
		if top {
			s.depth[e.Child] = 0
		} else if _, ok := s.depth[e.Child]; !ok {
			s.depth[e.Child] = s.depth[e.WorkflowID] + 1
		}
	}
	d := s.depth[e.WorkflowID]
	step := func(text string) { s.add(Entry{Kind: KindStep, Depth: d, Agent: e.Agent, Text: text}) }
	switch e.Kind {
	case EventTextDelta:
		s.delta(e, d)
	case troupe.EventMessage:
		s.message(e)
	case troupe.EventMessageRefused:
		s.problem("message refused: " + e.Detail)
	case troupe.EventAgentStarted:
		switch {
		case e.Child == "":
			s.startWork(e.WorkflowID, e.Agent, d)
		case !s.announced[e.Child]:
			s.add(Entry{Kind: KindStep, Depth: s.depth[e.Child], Agent: e.Agent, Text: "● " + e.Agent})
		}
	case troupe.EventTurn:
		s.startWork(e.WorkflowID, e.Agent, d)
		s.modelTurn(e, d)
	case troupe.EventToolCalled:
		step(fmt.Sprintf("%s → %s %s", e.Agent, e.Tool, e.Detail))
	case troupe.EventToolResult:
		step(fmt.Sprintf("%s ← %s: %s", e.Agent, e.Tool, e.Detail))
	case troupe.EventToolInDoubt:
		step(fmt.Sprintf("%s ⚠ %s may or may not have taken effect, %s", e.Agent, e.Tool, e.Detail))
	case troupe.EventAgentToolStarted:
		s.announced[e.Child] = true
		step(fmt.Sprintf("%s ⇉ %s (agent as tool): %s", e.Agent, e.Tool, e.Detail))
	case troupe.EventAgentToolFinished:
		step(fmt.Sprintf("%s ⇇ %s: %s", e.Agent, e.Tool, e.Detail))
	case troupe.EventHandoff:
		if e.Turn == 0 { // the route's, not the agent's own
			step("↪ handoff: " + e.Detail)
		} else {
			s.stopWork(e.WorkflowID)
		}
	case troupe.EventOutputInvalid:
		step(e.Agent + ": invalid output, asking again: " + e.Detail)
	case troupe.EventModelRetry:
		step(e.Agent + ": " + e.Detail)
	case troupe.EventSandboxProvisioned, troupe.EventSandboxRestored, troupe.EventSandboxSuspended,
		troupe.EventSandboxLost, troupe.EventSandboxStopped, troupe.EventSandboxSnapshotFailed:
		step(fmt.Sprintf("▣ %s: %s: %s", e.Agent, strings.ReplaceAll(e.Kind, "_", " "), e.Detail))
	case troupe.EventFinal:
		if top {
			s.answer(e)
		} else {
			s.stopWork(e.WorkflowID)
		}
	case troupe.EventBudgetExceeded:
		// The agent fails next, for that reason.
		s.add(Entry{Kind: KindStep, Depth: s.depth[e.Child], Agent: e.Agent, Text: e.Agent + ": no model call, the budget is spent"})
	case troupe.EventFailed:
		if top {
			s.working = nil
			if e.Turn > 0 {
				// Its record says whether the budget stopped it.
				s.failures[fmt.Sprintf("t%d", e.Turn)] = len(s.Entries)
			}
			switch {
			case e.Turn > 0 && s.shownSinceMessage(KindProblem, e.Detail):
				s.problem(fmt.Sprintf("turn t%d failed", e.Turn)) // the agent's failure says why
			case e.Turn > 0:
				s.problem(fmt.Sprintf("turn t%d failed: %s", e.Turn, e.Detail))
			default:
				s.problem("the session failed: " + e.Detail)
			}
		} else {
			s.stopWork(e.WorkflowID)
			text := e.Agent + " failed: " + e.Detail
			if strings.HasPrefix(e.Detail, troupe.ErrBudgetExceeded+": ") {
				// The turn's line says which limit, and how to go on.
				text = e.Agent + " stopped: the budget is spent"
			}
			s.add(Entry{Kind: KindProblem, Depth: d, Agent: e.Agent, Text: text})
		}
	case troupe.EventLiveText:
		s.note("no live text: " + e.Detail)
	case troupe.EventTurnRolledBack:
		s.working = nil
		s.note(fmt.Sprintf("turn t%d rolled back: %s", e.Turn, e.Detail))
	case troupe.EventSessionCommand:
		s.command(e.Detail)
	case troupe.EventApprovalRequested:
		s.waits(Approval{ID: e.Approval, Agent: e.Agent, Tool: e.Tool, Arguments: e.Detail})
		step(question(e.Agent, e.Tool, e.Detail, e.Approval))
	case troupe.EventApprovalDecided:
		s.settle(e.Approval)
		step(fmt.Sprintf("%s %s: %s", e.Agent, e.Tool, e.Detail))
	case troupe.EventSessionStopped:
		s.working = nil
		s.note("session stopped " + e.Detail)
	}
	if top {
		return []Effect{{Do: DoInfo, Session: s.Session}}
	}
	return nil
}

// shownSinceMessage reports whether an entry of kind that holds text
// shows after the last message.
func (s *State) shownSinceMessage(kind Kind, text string) bool {
	for i := len(s.Entries) - 1; i >= 0 && s.Entries[i].Kind != KindUser; i-- {
		if s.Entries[i].Kind == kind && strings.Contains(s.Entries[i].Text, text) {
			return true
		}
	}
	return false
}

// message shows a message the session took, unless this chat sent it
// and shows it already.
func (s *State) message(e troupeclient.Event) {
	turn := fmt.Sprintf("t%d", e.Turn)
	if _, ok := s.sent[turn]; ok {
		return
	}
	if i := slices.IndexFunc(s.echoes, func(text string) bool { return sameMessage(text, e.Detail) }); i >= 0 {
		s.echoes = slices.Delete(s.echoes, i, i+1)
		s.sent[turn] = e.Detail
		return
	}
	s.add(Entry{Kind: KindUser, Text: e.Detail})
}

// sameMessage reports whether a message event's detail (the message, cut
// after 200 bytes with "…") is of text.
func sameMessage(text, detail string) bool {
	return text == detail || strings.HasSuffix(detail, "…") && strings.HasPrefix(text, strings.TrimSuffix(detail, "…"))
}

func streamKey(e troupeclient.Event) string { return fmt.Sprintf("%s#%d", e.WorkflowID, e.Turn) }

// delta grows an agent's reply by a streamed fragment.
func (s *State) delta(e troupeclient.Event, depth int) {
	s.startWork(e.WorkflowID, e.Agent, depth)
	if i, ok := s.streams[streamKey(e)]; ok {
		s.Entries[i].Text += e.Detail
		return
	}
	s.streams[streamKey(e)] = len(s.Entries)
	s.add(Entry{Kind: KindReply, Depth: depth, Agent: e.Agent, Text: e.Detail, Streaming: true, Workflow: e.WorkflowID, Turn: e.Turn})
}

// modelTurn ends an agent's model turn: its streamed reply is whole; a
// turn that did not stream shows the start of its text, or its calls.
func (s *State) modelTurn(e troupeclient.Event, depth int) {
	if i, ok := s.streams[streamKey(e)]; ok {
		delete(s.streams, streamKey(e))
		s.Entries[i].Streaming = false
		if !strings.HasSuffix(e.Detail, "tool call(s)") {
			return
		}
	}
	text := fmt.Sprintf("%s · turn %d", e.Agent, e.Turn)
	if e.Detail != "" {
		text += ": " + e.Detail
	}
	s.add(Entry{Kind: KindStep, Depth: depth, Agent: e.Agent, Text: text, Workflow: e.WorkflowID, Turn: e.Turn})
}

// answer shows a turn's answer. The event holds its start; the session's
// record of the turn, read next (DoInfo), holds all of it. A reply that
// the answering agent streamed in its last model turn is the answer, and
// becomes it.
func (s *State) answer(e troupeclient.Event) {
	s.working = nil
	turn := fmt.Sprintf("t%d", e.Turn)
	for i := len(s.Entries) - 1; i >= 0; i-- {
		en := s.Entries[i]
		if en.Kind == KindUser || en.Kind == KindAnswer {
			break
		}
		if en.Depth != 0 || en.Agent != e.Agent || en.Turn == 0 {
			continue
		}
		if en.Kind == KindReply {
			s.Entries[i].Kind, s.Entries[i].Streaming = KindAnswer, false
			s.awaiting[turn] = i
			return
		}
		break // its last model turn did not stream
	}
	s.awaiting[turn] = len(s.Entries)
	s.add(Entry{Kind: KindAnswer, Agent: e.Agent, Text: FormatOutput(json.RawMessage(e.Detail))})
}

// command shows a lifecycle command the session took (or refused).
func (s *State) command(detail string) {
	op, arg, _ := strings.Cut(detail, " ")
	if strings.HasPrefix(arg, "refused:") {
		s.problem(fmt.Sprintf("the session refused %s: %s", op, strings.TrimSpace(strings.TrimPrefix(arg, "refused:"))))
		return
	}
	switch op {
	case troupe.CommandPause:
		s.note("paused: no turn starts, and a running turn's agents start no model call or tool")
	case troupe.CommandResume:
		s.note("resumed")
	case troupe.CommandStop:
		s.working = nil
		s.note("stopping: a running turn is cancelled, the sandboxes stopped")
	case troupe.CommandRename:
		s.note("renamed " + arg)
	case troupe.CommandPolicy:
		s.note("input policy " + arg)
	case troupe.CommandBudget:
		if i := slices.Index(s.budgets, arg); i >= 0 {
			s.budgets = slices.Delete(s.budgets, i, i+1) // this chat's: Budgeted shows it
			return
		}
		s.note("budget changed: " + arg + " (from the next model call on; /budget shows it)")
	default:
		s.note(detail)
	}
}

func (s *State) startWork(workflow, agent string, depth int) {
	if workflow == s.Session || slices.ContainsFunc(s.working, func(w worker) bool { return w.workflow == workflow }) {
		return
	}
	s.working = append(s.working, worker{workflow, agent, depth})
}

func (s *State) stopWork(workflow string) {
	s.working = slices.DeleteFunc(s.working, func(w worker) bool { return w.workflow == workflow })
}

// failed shows a failed call as the user can act on it.
func (s *State) failed(m Failed) {
	if m.Do == DoSend {
		if i := slices.Index(s.echoes, m.Text); i >= 0 {
			s.echoes = slices.Delete(s.echoes, i, i+1)
		}
	}
	if m.Do == DoBudget {
		if i := slices.Index(s.budgets, m.Text); i >= 0 {
			s.budgets = slices.Delete(s.budgets, i, i+1)
		}
	}
	if m.Do == DoInfo && (m.Session != s.Session || s.Info.Status == runtime.SessionStopped) {
		return // a stopped session need not answer
	}
	if m.Do == DoInfo {
		s.budgetAsked = false
	}
	if m.Do == DoSend && m.Session == s.Session && troupe.ErrorType(m.Err) == troupe.ErrBudgetExceeded {
		s.problem("message refused: " + s.budgetSpent())
		return
	}
	s.problem(Describe(m.Session, m.Err))
}

// budgetSpent says which limits of the open session's budget are
// reached, as it last said, and how to go on.
func (s *State) budgetSpent() string {
	rep := s.Info.Budget
	spent := spend.Spent(rep)
	if spent == "" {
		return "the session's budget is spent: /budget shows it, /budget off lifts it"
	}
	return fmt.Sprintf("the session's budget is spent (%s): /budget %s raises it (N the new limit), /budget off lifts it", spent, spend.Raise(rep))
}

// budgetStopped is the line of a turn the budget stopped.
func (s *State) budgetStopped(turn string) string {
	if spend.Spent(s.Info.Budget) == "" {
		// Raised since: the turn's record does not say which limit.
		return fmt.Sprintf("turn %s stopped: the session's budget was spent (/budget shows it now)", turn)
	}
	return fmt.Sprintf("turn %s stopped: %s", turn, s.budgetSpent())
}

// showBudget shows the open session's budget, and what it spent in all
// and per agent.
func (s *State) showBudget() {
	in := s.Info
	lines := []string{"budget " + spend.Budget(in.Budget)}
	if spend.Spent(in.Budget) != "" {
		lines[0] += ": spent; /budget " + spend.Raise(in.Budget) + " raises it, /budget off lifts it"
	}
	lines = append(lines, "usage: "+spend.Usage(in.Usage, in.Cost))
	if len(in.Agents) > 1 {
		for _, l := range spend.Table(in.Agents) {
			lines = append(lines, "  "+l)
		}
	}
	s.note(strings.Join(lines, "\n"))
}

// Describe says what went wrong with a call about session (empty for
// none), and what to do about it.
func Describe(session string, err error) string {
	var ae *temporal.ApplicationError
	msg := err.Error()
	if errors.As(err, &ae) {
		msg = ae.Message()
	}
	switch troupe.ErrorType(err) {
	case troupe.ErrSessionBusy:
		return fmt.Sprintf("session %s is busy with a turn, and its policy refuses messages meanwhile: send it again once the turn ends, or /policy enqueue", session)
	case troupe.ErrSessionStopped:
		return fmt.Sprintf("session %s is stopped: /new starts another, /sessions lists them", session)
	case troupe.ErrUnknownSession:
		return fmt.Sprintf("no session %s: /sessions lists them", session)
	case troupe.ErrBadCommand:
		return msg
	case troupe.ErrBadBudget:
		return "the session refused the budget: " + spend.Refusal(msg)
	}
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) && session != "" {
		return fmt.Sprintf("session %s is not running (stopped, or no such session): /sessions lists them", session)
	}
	return msg
}

func (s *State) add(e Entry) { s.Entries = append(s.Entries, e) }

func (s *State) note(text string) { s.add(Entry{Kind: KindNote, Text: text}) }

// problem shows text, once when it comes again at once.
func (s *State) problem(text string) {
	if n := len(s.Entries); n > 0 && s.Entries[n-1].Kind == KindProblem && s.Entries[n-1].Text == text {
		return
	}
	s.add(Entry{Kind: KindProblem, Text: text})
}

// FormatOutput is an answer as text: a string as it is, a JSON document
// indented, anything else (such as the cut start of one) as it came.
func FormatOutput(out json.RawMessage) string {
	var text string
	if json.Unmarshal(out, &text) == nil {
		return text
	}
	var buf bytes.Buffer
	if json.Indent(&buf, out, "", "  ") == nil {
		return buf.String()
	}
	return string(out)
}

func describeInfo(info troupeclient.SessionInfo) string {
	if info.Name == "" {
		return info.ID
	}
	return fmt.Sprintf("%s (%s)", info.ID, info.Name)
}

func describeEntry(e troupeclient.SessionEntry) string {
	if e.Name == "" {
		return e.ID
	}
	return fmt.Sprintf("%s (%s)", e.ID, e.Name)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
