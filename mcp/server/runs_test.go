package server

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/examples/dealdesk"
)

// TestLookupRefusesForeignRuns: the run tools read only runs the agent
// tools of a server of these graphs start, and answer every other id as
// they answer an unknown one, naming no graph.
func TestLookupRefusesForeignRuns(t *testing.T) {
	const hex = "0123456789abcdef0123456789abcdef"
	other := agents.MustGraph("other", "a", &agents.Agent{Name: "a", Instructions: "x", Expose: agents.Expose("", "d")})
	mine := troupe.RunInput{Graph: "dealdesk", Agent: "coordinator", Input: "deal"}
	known := map[string]fakeWorkflow{
		"mcp-dealdesk-" + hex: orchestrator(mine),
		// `troupe run` (workflows.StartRun) of a served graph.
		"troupe-dealdesk-1a2b3c4d": orchestrator(troupe.RunInput{Graph: "dealdesk", Input: "deal"}),
		// An agent's own workflow of a run this server started.
		"mcp-dealdesk-" + hex + "/0-coordinator": {typ: troupe.AgentWorkflowName, in: mine},
		// Another workflow type under an id of this server's form.
		"mcp-dealdesk-" + strings.Repeat("1", 32): {typ: "acme.Billing", in: mine},
		// Graphs and agents this server does not serve.
		"mcp-other-" + hex:                        orchestrator(troupe.RunInput{Graph: "other", Agent: "a", Input: "x"}),
		"mcp-dealdesk-" + strings.Repeat("2", 32): orchestrator(troupe.RunInput{Graph: "other", Agent: "a", Input: "x"}),
		"mcp-dealdesk-" + strings.Repeat("3", 32): orchestrator(troupe.RunInput{Graph: "dealdesk", Agent: "triage", Input: "x"}),
		"mcp-dealdesk-" + strings.Repeat("4", 32): orchestrator(troupe.RunInput{Graph: "dealdesk", Input: "x"}),
		// An id that is not of the form, of an exposed agent.
		"mcp-dealdesk-" + strings.ToUpper(hex): orchestrator(mine),
	}
	s, _ := newFakeServer(t, known, dealdesk.Graph())
	if _, err := s.lookup(context.Background(), "mcp-dealdesk-"+hex); err != nil {
		t.Fatalf("a run of dealdesk_coordinator: %v", err)
	}
	tests := []struct{ name, id string }{
		{"unknown", "no-such-run"},
		{"unknown, of this server's form", "mcp-dealdesk-" + strings.Repeat("f", 32)},
		{"a troupe run of a served graph", "troupe-dealdesk-1a2b3c4d"},
		{"an agent workflow", "mcp-dealdesk-" + hex + "/0-coordinator"},
		{"another workflow type", "mcp-dealdesk-" + strings.Repeat("1", 32)},
		{"a graph not served", "mcp-other-" + hex},
		{"another graph under a served graph's id", "mcp-dealdesk-" + strings.Repeat("2", 32)},
		{"an agent not exposed", "mcp-dealdesk-" + strings.Repeat("3", 32)},
		{"no agent", "mcp-dealdesk-" + strings.Repeat("4", 32)},
		{"upper-case digits", "mcp-dealdesk-" + strings.ToUpper(hex)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.lookup(context.Background(), tc.id)
			if want := fmt.Sprintf("no run with id %q", tc.id); err == nil || err.Error() != want {
				t.Errorf("lookup: %v, want %s", err, want)
			}
		})
	}
	// The run of graph other is refused above for its graph only.
	s2, _ := newFakeServer(t, known, other)
	if _, err := s2.lookup(context.Background(), "mcp-other-"+hex); err != nil {
		t.Errorf("the server of graph other: %v", err)
	}
}

// TestGraphOfRunID: ids name their graph unambiguously, also when graph
// names share a prefix.
func TestGraphOfRunID(t *testing.T) {
	const hex = "0123456789abcdef0123456789abcdef"
	g := func(name string) *agents.Graph {
		return agents.MustGraph(name, "a", &agents.Agent{Name: "a", Instructions: "x", Expose: agents.Expose(name+"_a", "d")})
	}
	s, _ := newFakeServer(t, nil, g("a"), g("a-b"))
	tests := []struct{ id, want string }{
		{"mcp-a-" + hex, "a"},
		{"mcp-a-b-" + hex, "a-b"},
		{"mcp-b-" + hex, ""},
		{"mcp-a-" + hex[1:], ""},
		{"mcp-a-" + hex + "0", ""},
		{"mcp-a" + hex, ""},
		{"troupe-a-" + hex, ""},
	}
	for _, tc := range tests {
		got := ""
		if gr := s.graphOfRunID(tc.id); gr != nil {
			got = gr.Name()
		}
		if got != tc.want {
			t.Errorf("graphOfRunID(%q) = %q, want %q", tc.id, got, tc.want)
		}
	}
}
