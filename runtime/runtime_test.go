package runtime_test

import (
	"context"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
)

type verdict struct {
	OK bool `json:"ok"`
}

func TestDecide(t *testing.T) {
	plain := &agents.Agent{Name: "p"}
	typed := &agents.Agent{Name: "t", Output: agents.MustOutput[verdict]()}
	call := agents.FunctionCall("c1", "x", "{}")
	tests := []struct {
		name      string
		agent     *agents.Agent
		output    []agents.Item
		final     string
		calls     int
		outputErr string
	}{
		{"text final", plain, []agents.Item{agents.AssistantMessage("hi")}, `"hi"`, 0, ""},
		{"empty output is an empty final", plain, nil, `""`, 0, ""},
		{"calls win over text", plain, []agents.Item{agents.AssistantMessage("thinking"), call, call}, "", 2, ""},
		{"valid structured", typed, []agents.Item{agents.AssistantMessage(`{"ok": true}`)}, `{"ok":true}`, 0, ""},
		{"invalid structured", typed, []agents.Item{agents.AssistantMessage(`{"ok":"yes"}`)}, "", 0, "/ok"},
		{"structured without message", typed, nil, "", 0, "no final output"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := runtime.Decide(tc.agent, tc.output)
			if string(s.Final) != tc.final || len(s.Calls) != tc.calls {
				t.Errorf("step = %+v", s)
			}
			if (tc.outputErr == "") != (s.OutputError == "") || !strings.Contains(s.OutputError, tc.outputErr) {
				t.Errorf("output error = %q, want %q", s.OutputError, tc.outputErr)
			}
		})
	}
}

func TestSort(t *testing.T) {
	tool := agents.MustFunctionTool("f", "", func(context.Context, verdict) (string, error) { return "", nil })
	g := agents.MustGraph("g", "a",
		&agents.Agent{Name: "a", Tools: []agents.Tool{tool, agents.AsTool("b", "ask_b", "")},
			Handoffs: []agents.Handoff{agents.HandoffTo("b"), agents.HandoffTo("c")}},
		&agents.Agent{Name: "b"}, &agents.Agent{Name: "c"})
	d := runtime.Sort(runtime.SpecOf(g, runtime.RunSettings{MaxHandoffs: 5, MaxToolDepth: 3}).Agent("a"), []agents.Item{
		agents.FunctionCall("1", "f", "{}"),
		agents.FunctionCall("2", "ask_b", `{"input":"x"}`),
		agents.FunctionCall("3", "transfer_to_c", "{}"),
		agents.FunctionCall("4", "transfer_to_b", "{}"),
		agents.FunctionCall("5", "ghost", "{}"),
		agents.FunctionCall("6", "everything_echo", `{"message":"hi"}`),
		agents.FunctionCall("7", "f", "{}"),
	}, []string{"everything_echo", "f"})
	if len(d.Functions) != 2 || len(d.AgentTools) != 1 || d.Handoff == nil || d.Handoff.CallID != "3" {
		t.Fatalf("dispatch = %+v", d)
	}
	// An MCP tool never shadows the agent's own tool of the same name.
	if len(d.MCP) != 1 || d.MCP[0].CallID != "6" {
		t.Fatalf("MCP calls = %+v", d.MCP)
	}
	if len(d.Outputs) != 2 || !strings.Contains(d.Outputs[0].Output, "only the first (transfer_to_c)") ||
		!strings.Contains(d.Outputs[1].Output, `tool "ghost" does not exist`) || !strings.Contains(d.Outputs[1].Output, "transfer_to_b") ||
		!strings.Contains(d.Outputs[1].Output, "everything_echo") {
		t.Errorf("outputs = %+v", d.Outputs)
	}
}
