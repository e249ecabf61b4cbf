package runtime

import (
	"encoding/json"
	"fmt"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/model"
)

// AgentState is one agent's loop state: everything its workflow carries
// from one turn to the next, as plain data. The loop's transitions are its
// methods; each takes what an effect (a model turn, a turn's tool calls)
// gave and returns the next thing to do, so the loop is testable without a
// server and its state can be carried whole (through continue-as-new, or
// by a session). The agent's limits (turns, output retries, tools) are in
// the spec the run pinned (AgentSpec), which every transition takes.
type AgentState struct {
	// Agent is the agent's name.
	Agent string `json:"agent"`
	// Transcript is the conversation so far, in the blob store.
	Transcript TranscriptRef `json:"transcript"`
	// Pending are the items to append before the next model call: the
	// input, the last turn's tool outputs, or a correction.
	Pending []agents.Item `json:"pending,omitempty"`
	// Turn counts the model turns taken.
	Turn int `json:"turn"`
	// Corrections counts the invalid final outputs fed back.
	Corrections int `json:"corrections,omitempty"`
	// ToolCalls counts the tool calls asked for.
	ToolCalls int `json:"tool_calls,omitempty"`
	// Usage sums the model usage of the agent's turns and of the agents it
	// ran as tools.
	Usage model.Usage `json:"usage"`
	// Agents is the same usage per agent, the agent's own first, with its
	// cost; it counts the agents run as tools that failed too.
	Agents Usages `json:"agents,omitempty"`
	// Lease is the agent's sandbox lease, nil for an agent without a
	// sandbox or before its first sandbox call.
	Lease *SandboxLease `json:"lease,omitempty"`
	// MCP is the agent's catalog of MCP tools, nil before they were
	// listed; MCPLost says they could not be (the agent goes on without).
	MCP     *MCPCatalog `json:"mcp,omitempty"`
	MCPLost bool        `json:"mcp_lost,omitempty"`
}

// NewAgentState is the state of an agent about to take its first turn on
// the conversation transcript followed by pending.
func NewAgentState(agent string, transcript TranscriptRef, pending []agents.Item) *AgentState {
	return &AgentState{Agent: agent, Transcript: transcript, Pending: pending}
}

// Action is what an agent workflow does next.
type Action int

// The actions.
const (
	// CallModel: take a turn (Next.Turn is its number).
	CallModel Action = iota + 1
	// RunCalls: carry out Next.Calls, then call CallsDone.
	RunCalls
	// Finish: the agent gave its final output, Next.Output.
	Finish
	// HandOff: the agent hands off with Next.Handoff.
	HandOff
	// Fail: the agent failed, as Next.Failure says.
	Fail
)

// Failure kinds: why an agent fails.
const (
	FailMaxTurns      = "max_turns"
	FailOutputInvalid = "output_invalid"
)

// Failure is why an agent failed.
type Failure struct {
	Kind    string
	Message string
}

// Next is the outcome of a transition: the action, and what it needs.
type Next struct {
	Action Action
	// Turn is the number of the turn to take (CallModel).
	Turn int
	// Calls are the calls to carry out (RunCalls).
	Calls []agents.Item
	// Output is the final output (Finish).
	Output json.RawMessage
	// Handoff is the handoff call taken (HandOff).
	Handoff *agents.Item
	// Failure says why the agent failed (Fail).
	Failure *Failure
	// Correction, on a CallModel after an invalid final output, is what
	// was wrong with it.
	Correction string
}

// Begin is the first transition: take the first turn.
func (s *AgentState) Begin(a *AgentSpec) Next { return s.nextTurn(a) }

// nextTurn takes another turn, unless the agent has used its turns.
func (s *AgentState) nextTurn(a *AgentSpec) Next {
	if s.Turn >= a.MaxTurns {
		return Next{Action: Fail, Failure: &Failure{FailMaxTurns,
			fmt.Sprintf("agent %s used its %d turns without a final output", a.Name, a.MaxTurns)}}
	}
	s.Turn++
	return Next{Action: CallModel, Turn: s.Turn}
}

// ModelDone takes a model turn: the transcript it left (pending items
// included), the step it decided and its usage.
func (s *AgentState) ModelDone(a *AgentSpec, transcript TranscriptRef, step Step, usage model.Usage) Next {
	s.Usage = s.Usage.Add(usage)
	s.Transcript, s.Pending = transcript, nil
	switch {
	case step.Final != nil:
		return Next{Action: Finish, Output: step.Final}
	case step.OutputError != "":
		if s.Corrections >= a.MaxOutputRetries {
			return Next{Action: Fail, Correction: step.OutputError, Failure: &Failure{FailOutputInvalid,
				fmt.Sprintf("agent %s gave an invalid final output %d time(s); last error: %s", a.Name, s.Corrections+1, step.OutputError)}}
		}
		s.Corrections++
		s.Pending = []agents.Item{Correction(step.OutputError)}
		next := s.nextTurn(a)
		next.Correction = step.OutputError
		return next
	}
	s.ToolCalls += len(step.Calls)
	return Next{Action: RunCalls, Calls: step.Calls}
}

// CallsDone takes a turn's calls carried out: their outputs in the
// model's order, the handoff taken (if any), and the model usage of the
// agents run as tools.
func (s *AgentState) CallsDone(a *AgentSpec, outputs []agents.Item, handoff *agents.Item, usage model.Usage) Next {
	s.Usage = s.Usage.Add(usage)
	s.Pending = outputs
	if handoff != nil {
		return Next{Action: HandOff, Handoff: handoff}
	}
	return s.nextTurn(a)
}

// Count adds what agents used (the agent's own model call, the agents it
// ran as tools) to its usage per agent.
func (s *AgentState) Count(u ...AgentUsage) { s.Agents = s.Agents.Add(u...) }
