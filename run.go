package troupe

import (
	"encoding/json"
	"strings"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/model"
)

// DefaultTaskQueue is the task queue workers listen on unless told otherwise.
const DefaultTaskQueue = "troupe"

// Names of the workflows of a run. They are stable: histories and
// clients refer to them.
const (
	OrchestratorWorkflowName = "troupe.Orchestrator"
	AgentWorkflowName        = "troupe.Agent"
)

// RunInput starts a run.
type RunInput struct {
	// Graph names the graph, as the worker knows it.
	Graph string `json:"graph"`
	// Agent is the agent to start at; empty means the graph's entry agent.
	Agent string `json:"agent,omitempty"`
	// Input is the user's message; its start (InputRef.Preview) when it
	// is stored apart.
	Input string `json:"input"`
	// InputRef, when set, is the user's message stored apart in the
	// workers' blob store: an input over MessageInline, which
	// client.Client.Start stores and sends so only to workers that take
	// it (TakesInputRefs).
	InputRef *MessageRef `json:"input_ref,omitempty"`
	// Vars are run variables, visible to agents' Go funcs in RunContext.
	Vars map[string]string `json:"vars,omitempty"`
	// MaxHandoffs bounds the handoffs of the run; 0 means the worker's
	// default.
	MaxHandoffs int `json:"max_handoffs,omitempty"`
	// Budget, when set, is the run's budget, over the graph's default
	// (agents.Graph.WithBudget); the zero Budget lifts it.
	Budget *agents.Budget `json:"budget,omitempty"`
	// MaxConcurrentCalls, when above 0, bounds the calls of one model
	// turn that run at once for every agent of the run, over each
	// agent's own bound (agents.Agent.MaxConcurrentCalls).
	MaxConcurrentCalls int `json:"max_concurrent_calls,omitempty"`
}

// Summary is what lists of runs and the Web UI show of a run: its graph
// and the user's message, its white space folded, cut at 200 bytes.
func (in RunInput) Summary() string {
	return in.Graph + ": " + Preview(strings.Join(strings.Fields(in.Input), " "), 200)
}

// RunResult is a finished run.
type RunResult struct {
	// WorkflowID is the orchestrator's workflow id.
	WorkflowID string `json:"workflow_id"`
	// Graph is the graph that ran.
	Graph string `json:"graph"`
	// Agent is the agent that gave the final output.
	Agent string `json:"agent"`
	// Output is the final output: a JSON document for agents with an output
	// type, a JSON string of the text otherwise.
	Output json.RawMessage `json:"output"`
	// Path lists the agents the run went through, in order of handoffs.
	Path []string `json:"path"`
	// Turns counts the model turns of the agents on the path.
	Turns int `json:"turns"`
	// ToolCalls counts the tool calls of the agents on the path.
	ToolCalls int `json:"tool_calls"`
	// Handoffs counts the handoffs taken.
	Handoffs int `json:"handoffs"`
	// Usage sums the model usage of the whole run, agents-as-tools included.
	Usage model.Usage `json:"usage"`
	// Agents is the same usage per agent, with its cost; failed
	// agents-as-tools count.
	Agents runtime.Usages `json:"agents,omitempty"`
	// Cost sums the cost of the run's model calls, by the run's price
	// table (0 without one).
	Cost float64 `json:"cost,omitempty"`
	// Budget, for a run with a budget, is the budget and what the run
	// spent of it.
	Budget *runtime.BudgetReport `json:"budget,omitempty"`
}

// RunOf returns the run a workflow id belongs to: the id of the run's
// orchestrator, which every agent workflow's id starts with.
func RunOf(workflowID string) string {
	run, _, _ := strings.Cut(workflowID, "/")
	return run
}
