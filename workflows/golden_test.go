package workflows_test

import (
	"context"
	"encoding/json"
	"flag"
	"path/filepath"
	"testing"
	"time"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/examples/dealdesk"
	"github.com/troupe-dev/troupe/handoff"
	"github.com/troupe-dev/troupe/mcp"
	"github.com/troupe-dev/troupe/memory"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/events"
	"github.com/troupe-dev/troupe/workflows/guardrail"
	"github.com/troupe-dev/troupe/workflows/lease"
	"github.com/troupe-dev/troupe/workflows/retention"
	"github.com/troupe-dev/troupe/workflows/workflowstest"
)

var update = flag.Bool("update", false, "rewrite the golden payload fixtures")

// TestGoldenPayloads pins the JSON shape of every payload that crosses
// Temporal, so a change in shape is a visible diff in testdata/golden.
func TestGoldenPayloads(t *testing.T) {
	ref := runtime.TranscriptRef{Key: "transcripts/run-1/0-triage", Segments: 3}
	rc := agents.RunContext{WorkflowID: "run-1/0-triage", RunID: "run-1", Agent: "triage", Turn: 2, Vars: map[string]string{"tenant": "acme"}, Execution: "0190c4d2-7b1e-7f3a-9c6d-5e8f1a2b3c4d"}
	call := agents.FunctionCall("call_1", "get_document", `{"name":"pricing"}`)
	out := agents.Item{Type: agents.ItemFunctionCallOutput, CallID: "call_1", OutputRef: "outputs/run-1/2-call_1", Agent: "triage"}
	usage := model.Usage{Requests: 2, InputTokens: 100, OutputTokens: 20, TotalTokens: 120}
	payloads := map[string]any{
		"run_input":   troupe.RunInput{Graph: "dealdesk", Agent: "triage", Input: "Review the deal", Vars: rc.Vars, MaxHandoffs: 3},
		"run_result":  troupe.RunResult{WorkflowID: "run-1", Graph: "dealdesk", Agent: "coordinator", Output: json.RawMessage(`{"decision":"approve"}`), Path: []string{"triage", "coordinator"}, Turns: 4, ToolCalls: 3, Handoffs: 1, Usage: usage},
		"agent_input": troupe.AgentInput{Graph: "dealdesk", Agent: "triage", RunID: "run-1", Vars: rc.Vars, Transcript: ref, Pending: []agents.Item{agents.UserMessage("hi")}, Depth: 1},
		// The pinned spec is recorded in histories (a side effect, agent
		// inputs): its shape must not change.
		"graph_spec":      runtime.SpecOf(dealdesk.Graph(), runtime.RunSettings{MaxHandoffs: 5, MaxToolDepth: 3, ContinueAfterTurns: 100, ContinueAfterEvents: 2000}),
		"agent_result":    troupe.AgentResult{Agent: "triage", Handoff: &call, Transcript: ref, Pending: []agents.Item{out}, Turns: 2, ToolCalls: 1, Usage: usage},
		"model_input":     workflows.ModelInput{Graph: "dealdesk", Agent: "triage", Run: rc, Transcript: ref, Pending: []agents.Item{out}, MCPTools: "mcp/tools/5f0c", Guidance: "outputs/run-1/0-triage/guidance-1f2e3d4c5b6a7988.md"},
		"model_output":    workflows.ModelOutput{Transcript: ref, Step: runtime.Step{Calls: []agents.Item{call}}, Usage: usage, Text: "thinking"},
		"tool_input":      troupe.ToolInput{Graph: "dealdesk", Agent: "triage", Run: rc, Call: call, OutputKey: "outputs/run-1/2-call_1"},
		"handoff_input":   handoff.ActivityInput{Graph: "dealdesk", From: "triage", Tool: "transfer_to_coordinator", Run: rc, Transcript: ref, Pending: []agents.Item{out}, NewKey: "transcripts/run-1/1-coordinator"},
		"handoff_output":  handoff.ActivityOutput{Transcript: ref},
		"extract_input":   workflows.ExtractInput{Graph: "dealdesk", Agent: "coordinator", Tool: "review_pricing", Result: agents.ToolRunResult{Agent: "pricing_reviewer", Output: json.RawMessage(`{"risk_level":"high"}`)}},
		"mcp_tools_input": mcp.ToolsInput{Graph: "dealdesk", Agent: "triage", Run: rc},
		"mcp_catalog": runtime.MCPCatalog{Queue: "troupe-mcp-host-1a2b3c4d", Specs: "mcp/tools/5f0c", Tools: []runtime.MCPToolRef{
			{Name: "gh_create_issue", Server: "github", Remote: "create_issue", Approval: true}, {Name: "gh_search", Server: "github", Remote: "search"}}},
		"mcp_call_input":    mcp.CallInput{Graph: "dealdesk", Agent: "triage", Run: rc, Server: "github", Call: call, OutputKey: "outputs/run-1/2-call_1"},
		"save_events_input": events.SaveEventsInput{Key: "events/run-1/1-coordinator/000000001.json", Events: []troupe.Event{{Seq: 1, Time: time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC), Kind: troupe.EventAgentStarted, WorkflowID: "run-1/1-coordinator", Agent: "coordinator"}}},
		"event_pages":       []troupe.EventPage{{From: 1, To: 302, Key: "events/run-1/1-coordinator/000000001.json"}, {From: 303, To: 610, Key: "events/run-1/1-coordinator/000000303.json"}},
		"agent_carry": workflows.AgentCarry{State: runtime.AgentState{Agent: "coordinator", Transcript: ref, Turn: 101, ToolCalls: 100, Usage: usage}, NextEvent: 611,
			Pages: []troupe.EventPage{{From: 1, To: 302, Key: "events/run-1/1-coordinator/000000001.json"}, {From: 303, To: 610, Key: "events/run-1/1-coordinator/000000303.json"}}},
		"event": troupe.Event{Seq: 4, Time: time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC), Kind: troupe.EventAgentToolStarted, WorkflowID: "run-1/1-coordinator", Agent: "coordinator", Turn: 1, Tool: "review_pricing", CallID: "call_1", Detail: "Review pricing", Child: "run-1/1-coordinator/t1.0/0-pricing_reviewer"},
	}
	at := time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)
	leased := runtime.SandboxLease{State: runtime.LeaseSuspended, Snapshot: "snapshots/session-1/9f86d0.tar.zst", Generation: 2, Guidance: "outputs/session-1/t1/0-coordinator/guidance-1f2e3d4c5b6a7988.md"}
	rec := runtime.TurnRecord{Turn: "t3", Message: "what if the discount were 25%?", Outcome: runtime.TurnAnswered, Agent: "coordinator",
		Output: json.RawMessage(`{"decision":"approve"}`), Path: []string{"coordinator"}, Workflow: "session-1/t3", ModelTurns: 2, Usage: usage, Started: at, Ended: at.Add(time.Minute)}
	state := runtime.SessionState{Name: "acme renewal", Agent: "coordinator", Transcript: ref, Policy: runtime.PolicyEnqueue,
		Queue: []runtime.SessionMessage{{Turn: "t4", Text: "and at 30%?", At: at}}, Turns: 3, NextTurn: 4, Recent: []runtime.TurnRecord{rec}, Usage: usage,
		Leases: []runtime.AgentLease{{Agent: "coordinator", Lease: leased}}, LastActivity: at}
	payloads["session_input"] = troupe.SessionInput{Graph: "dealdesk", Agent: "triage", Name: "acme renewal", Policy: runtime.PolicyRollback, Vars: rc.Vars}
	payloads["session_carry"] = troupe.SessionCarry{State: state, NextEvent: 40, Pages: []troupe.EventPage{{From: 1, To: 39, Key: "events/session-1/session-1/000000001.json"}}}
	payloads["send_input"] = troupe.SendInput{Message: "what if the discount were 25%?", Wait: true}
	// A message too big for a payload, stored apart (troupe.MessageRef).
	big := troupe.MessageRef{Key: "inputs/session-1/9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", Size: 9437184, Preview: "line 000000000 of a message too big for one Temporal payload…"}
	payloads["send_input_ref"] = troupe.SendInput{Ref: &big, Wait: true}
	payloads["run_input_ref"] = troupe.RunInput{Graph: "dealdesk", Input: big.Preview, InputRef: &big}
	payloads["session_message_ref"] = runtime.SessionMessage{Turn: "t5", Text: big.Preview, Ref: big.Key, Size: big.Size, At: at}
	payloads["agent_input_ref"] = troupe.AgentInput{Graph: "dealdesk", Agent: "triage", RunID: "run-1", Transcript: ref, Pending: []agents.Item{agents.UserMessageRef(big.Key)}}
	payloads["send_result"] = troupe.SendResult{Turn: "t3", Ahead: 1, Cursor: troupe.Cursor{"session-1": 31}, Record: &rec}
	payloads["session_command"] = troupe.SessionCommand{Op: troupe.CommandRename, Arg: "acme renewal"}
	payloads["session_info"] = troupe.SessionInfo{ID: "session-1", Graph: "dealdesk", Name: "acme renewal", Status: runtime.SessionIdle, Agent: "coordinator",
		Policy: runtime.PolicyEnqueue, Turns: 3, Usage: usage, LastActivity: at, Recent: []runtime.TurnRecord{rec},
		Sandboxes: []troupe.SessionSandbox{{Agent: "coordinator", State: runtime.LeaseSuspended, Snapshot: leased.Snapshot}}, NextEvent: 40}
	payloads["agent_input_session"] = troupe.AgentInput{Graph: "dealdesk", Agent: "coordinator", RunID: "session-1", Transcript: ref,
		Pending: []agents.Item{agents.UserMessage("and at 30%?")}, Session: &troupe.SessionLink{ID: "session-1", Lease: &leased}}
	payloads["fork_input"] = troupe.ForkInput{ID: "session-1", NewID: "session-1-fork-1a2b3c4d", Name: "what if 25%"}
	payloads["fork_request"] = troupe.ForkRequest{NewID: "session-1-fork-1a2b3c4d", Name: "what if 25%", Manager: troupe.SessionManagerID}
	payloads["fork_failure"] = troupe.ForkFailure{NewID: "session-1-fork-1a2b3c4d", Error: "the session stopped"}
	payloads["fork_failure_typed"] = troupe.ForkFailure{NewID: "session-1-fork-1a2b3c4d", Error: "fork: the snapshot of coder's sandbox failed", Type: troupe.ErrSnapshotFailed}
	payloads["session_command_reply"] = troupe.SessionCommand{Op: troupe.CommandPause, Reply: "3f1c2b7a-update"}
	payloads["command_outcome"] = troupe.CommandOutcome{Reply: "3f1c2b7a-update", Error: "pause: the snapshot of coder's sandbox failed", Type: troupe.ErrSnapshotFailed}
	forked := state
	forked.Queue, forked.Transcript = nil, ref.Fork("transcripts/session-1-fork-1a2b3c4d/forked")
	payloads["session_image"] = troupe.SessionImage{From: "session-1", State: forked}
	payloads["keep_input"] = retention.KeepInput{For: "session-1-fork-1a2b3c4d", Runs: []string{"session-1"}}
	payloads["control"] = troupe.Control{Op: troupe.ControlInterrupt}
	payloads["sandbox_info"] = lease.SandboxInfo{State: sandbox.State{Backend: "bwrap", Host: "host-1", ID: "run-1-0-triage-1a2b3c4d-g1", Workspace: "/var/troupe/sandboxes/bwrap/run-1-0-triage-1a2b3c4d-g1"},
		Queue: "troupe-sandbox-host-1-1234abcd", NotInForce: []string{"memory_bytes: no cgroup v2 delegation"}, Guidance: "outputs/run-1/0-triage/guidance-1f2e3d4c5b6a7988.md"}
	payloads["lifecycle_input"] = troupe.LifecycleInput{ID: "session-1", Command: troupe.SessionCommand{Op: troupe.CommandSwitch, Arg: "bwrap"}}
	payloads["remove_session_input"] = troupe.RemoveSessionInput{ID: "session-1"}
	payloads["remove_session_result"] = troupe.RemoveSessionResult{ID: "session-1", Found: true, Terminated: []string{"session-1", "session-1/t3/0-coordinator"},
		Unlisted: true, Sandboxes: []string{"bwrap/session-1-coordinator-g1"}, Blobs: 42,
		Pending: []string{"its blob data, which its fork session-1-fork-1a2b3c4d still shares: the retention sweep deletes it once the fork is done"}}
	payloads["session_entry"] = troupe.SessionEntry{ID: "session-1", Name: "acme renewal", Graph: "dealdesk", Agent: "coordinator", Status: runtime.SessionIdle,
		Policy: runtime.PolicyEnqueue, Turns: 3, Usage: usage, Backends: []string{"bwrap"}, Created: at, LastActivity: at}
	// Memory: the scope's workflow input (carried through continue-as-new),
	// its signals, its activities' payloads, and a spec with a scope.
	settings := memory.MemorySettings{Phase1Model: "gpt-4.1-mini", Phase2Model: "gpt-4.1", Parallel: 4, Newest: 64, Phase2Turns: 3,
		MaxRolloutBytes: 65536, IdleTimeout: 10 * time.Minute, BatchesPerRun: 50}
	rollout := memory.MemoryRollout{ID: "session-1", Lines: 3}
	payloads["memory_input"] = memory.MemoryInput{Scope: "acme", Settings: settings, Pending: []memory.MemoryRollout{rollout}, Final: true, Owed: true, Batches: 7, Phase2s: 6}
	payloads["memory_rollout"] = rollout
	payloads["memory_final"] = memory.MemoryFinal{Rollout: "session-1"}
	payloads["memory_status"] = memory.MemoryStatus{Scope: "acme", Phase: "phase1", Pending: 2, Batches: 7, Phase2s: 6, Phase2Failures: 1, LastError: "phase 2: model unreachable"}
	payloads["memory_append_input"] = memory.MemoryAppendInput{Scope: "acme", Rollout: "session-1", Start: &ref, Transcript: &ref,
		Line: memory.Line{Seq: 3, Workflow: "session-1/t3", Agent: "coordinator", Input: "what if the discount were 25%?", Output: json.RawMessage(`{"decision":"approve"}`), Outcome: memory.OutcomeAnswered, Ended: at}}
	payloads["memory_signal_input"] = memory.MemorySignalInput{Scope: "acme", Rollout: &rollout}
	payloads["memory_phase1_input"] = memory.MemoryPhase1Input{Scope: "acme", Rollout: rollout, Settings: settings}
	payloads["memory_phase1_output"] = memory.MemoryPhase1Output{Slug: "acme-discount-rules"}
	payloads["memory_phase2_input"] = memory.MemoryPhase2Input{Scope: "acme", Settings: settings}
	payloads["memory_phase2_output"] = memory.MemoryPhase2Output{Added: []string{"session-2"}, Kept: []string{"session-1"}, Removed: []string{"run-9"}, Skills: []string{"price-review"},
		Replaced: []string{memory.HandbookPath}}
	// Not a Temporal payload, but what every worker on a store reads and
	// writes: a scope's generation and a takeover of it
	// (memory/writers.go).
	payloads["memory_generation"] = memory.Generation{Version: 1, Seq: 7, By: memory.ByWriteBack, Source: "session-1/t3-sandbox-2",
		Writer: "session-1/t3/12#1/N4QUVBLDJ7YS2XTRM6OHKE5PGW", At: at, ApplyBy: at.Add(30 * time.Second),
		Files: []memory.GenerationFile{{Path: memory.HandbookPath, Data: "# Handbook\n- discount: escalate above 25%\n"}}}
	payloads["memory_takeover"] = memory.Takeover{Version: 1, Seq: 7, N: 1, Writer: "memory-acme/5#2/B2ZJ6QWNXK3R7TLOV4M5YHPCAE",
		At: at.Add(time.Minute), ApplyBy: at.Add(90 * time.Second)}
	payloads["graph_spec_memory"] = runtime.SpecOf(agents.MustGraph("mem", "m", &agents.Agent{Name: "m", Memory: &agents.MemoryConfig{Scope: "acme"}}), runtime.RunSettings{MaxHandoffs: 5})
	payloads["memory_fork_input"] = memory.MemoryForkInput{From: "acme", To: memory.ForkScope("acme", "session-1-fork")}
	// Guardrails: a spec with one of each kind, the guardrail activity's
	// payloads, a trip's details, and the first agent of a chain.
	payloads["graph_spec_guardrails"] = runtime.SpecOf(guardrailsGolden(), runtime.RunSettings{MaxHandoffs: 5})
	payloads["guardrail_input"] = guardrail.GuardrailInput{Graph: "dealdesk", Agent: "triage", Run: rc, Kind: agents.GuardrailToolAfter,
		Calls: []guardrail.GuardrailCall{{Call: call, Guardrails: []string{"no_secrets"}}}, Result: &out, OutputKey: "outputs/run-1/2-call_1-guarded"}
	payloads["guardrail_input_ref"] = guardrail.GuardrailInput{Graph: "dealdesk", Agent: "triage", Run: rc, Kind: agents.GuardrailInput,
		Guardrails: []string{"no_secrets"}, InputRef: "inputs/session-1/9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}
	payloads["guardrail_output"] = guardrail.GuardrailOutput{Outcomes: []runtime.GuardrailOutcome{{Guardrail: "no_secrets", Kind: agents.GuardrailToolAfter,
		Action: runtime.GuardrailReplace, CallID: "call_1", Reason: "a key", Message: "[redacted]"}}, Result: &out}
	payloads["guardrail_trip"] = troupe.GuardrailTrip{Guardrail: "on_topic", Kind: agents.GuardrailInput, Agent: "triage", Workflow: "run-1/0-triage", Reason: "not about a deal"}
	payloads["agent_input_check"] = troupe.AgentInput{Graph: "dealdesk", Agent: "triage", RunID: "run-1", Transcript: ref, Pending: []agents.Item{agents.UserMessage("hi")}, CheckInput: true}
	// Tool guardrail agents: a spec with one, the prompt activity's input,
	// and what the guardrail agent reads (a ToolCheck) and answers.
	payloads["graph_spec_tool_guardrail_agents"] = runtime.SpecOf(toolGuardrailAgentsGolden(), runtime.RunSettings{MaxHandoffs: 5})
	payloads["guardrail_prompt_input"] = guardrail.GuardrailPromptInput{Check: agents.ToolCheck{Check: agents.GuardrailToolAfter, Guardrail: "privacy", Agent: "triage",
		Tool: "get_document", CallID: "call_1", Arguments: json.RawMessage(`{"name":"pricing"}`)}, Result: out,
		Transcript: "transcripts/run-1/0-triage/t2.call_1-tool_after-guardrail-privacy/0-output_checker"}
	output := "pricing: 20% off"
	payloads["tool_check"] = agents.ToolCheck{Check: agents.GuardrailToolAfter, Guardrail: "privacy", Agent: "triage", Tool: "get_document", CallID: "call_1",
		Arguments: json.RawMessage(`{"name":"pricing"}`), Output: &output}
	payloads["tool_call_verdict"] = agents.ToolCallVerdict{Action: agents.ToolCallReject, Message: "Ask for the public price list.", Reason: "internal pricing"}
	payloads["tool_output_verdict"] = agents.ToolOutputVerdict{Action: agents.ToolOutputReplace, Message: "pricing: [internal]", Reason: "internal pricing"}
	for name, v := range payloads {
		t.Run(name, func(t *testing.T) {
			workflowstest.Golden(t, filepath.Join("testdata", "golden", name+".json"), v, *update)
		})
	}
}

// toolGuardrailAgentsGolden is a graph whose agent has a tool guardrail
// whose checks are agents, and one that mixes a func and an agent.
func toolGuardrailAgentsGolden() *agents.Graph {
	after := func(context.Context, agents.ToolCall, string) (agents.ToolVerdict, error) {
		return agents.ToolVerdict{}, nil
	}
	lookup := agents.MustFunctionTool("lookup", "Looks up.", func(context.Context, struct{}) (string, error) { return "", nil })
	return agents.MustGraph("guarded", "triage",
		&agents.Agent{Name: "triage", Tools: []agents.Tool{lookup},
			ToolGuardrails: []agents.ToolGuardrail{{Name: "privacy", Tool: "lookup", BeforeAgent: "call_checker", AfterAgent: "output_checker"},
				{Name: "mixed", BeforeAgent: "call_checker", After: after}}},
		&agents.Agent{Name: "call_checker", Output: agents.MustOutput[agents.ToolCallVerdict]()},
		&agents.Agent{Name: "output_checker", Output: agents.MustOutput[agents.ToolOutputVerdict]()})
}

// guardrailsGolden is a graph whose agent has a guardrail of each kind.
func guardrailsGolden() *agents.Graph {
	in := func(context.Context, agents.RunContext, string) (agents.GuardrailVerdict, error) {
		return agents.Pass(), nil
	}
	after := func(context.Context, agents.ToolCall, string) (agents.ToolVerdict, error) {
		return agents.ToolVerdict{}, nil
	}
	lookup := agents.MustFunctionTool("lookup", "Looks up.", func(context.Context, struct{}) (string, error) { return "", nil })
	return agents.MustGraph("guarded", "triage",
		&agents.Agent{Name: "triage", Tools: []agents.Tool{lookup},
			InputGuardrails:  []agents.InputGuardrail{{Name: "on_topic", Func: in, Blocking: true}},
			OutputGuardrails: []agents.OutputGuardrail{{Name: "judged", Agent: "judge"}},
			ToolGuardrails:   []agents.ToolGuardrail{{Name: "no_secrets", Tool: "lookup", After: after}}},
		&agents.Agent{Name: "judge", Output: agents.MustOutput[agents.GuardrailVerdict]()})
}
