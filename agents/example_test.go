package agents_test

import (
	"context"
	"fmt"

	"github.com/troupe-dev/troupe/agents"
)

// A graph of two agents: a triage agent that hands off to a weather agent
// with a typed function tool.
func ExampleNewGraph() {
	type cityArgs struct {
		City string `json:"city" jsonschema:"description=The city to look up."`
	}
	weather := agents.MustFunctionTool("get_weather", "Returns the weather in a city.",
		func(_ context.Context, a cityArgs) (string, error) { return "sunny in " + a.City, nil })
	g, err := agents.NewGraph("weather", "triage",
		&agents.Agent{Name: "triage", Instructions: "Route weather questions.", Handoffs: []agents.Handoff{agents.HandoffTo("forecaster")}},
		&agents.Agent{Name: "forecaster", Instructions: "Answer with the weather.", Tools: []agents.Tool{weather}},
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range g.ToolSpecs("triage") {
		fmt.Println(s.Name)
	}
	fmt.Println(string(g.ToolSpecs("forecaster")[0].Parameters))
	// Output:
	// transfer_to_forecaster
	// {"additionalProperties":false,"properties":{"city":{"description":"The city to look up.","type":"string"}},"required":["city"],"type":"object"}
}

// An output type makes an agent's final output a validated JSON document.
func ExampleOutputOf() {
	type review struct {
		Risk  string `json:"risk" jsonschema:"enum=low,enum=high"`
		Notes string `json:"notes,omitempty"`
	}
	out, _ := agents.OutputOf[review]()
	_, err := out.Validate(`{"risk":"medium","notes":null}`)
	fmt.Println(err)
	doc, _ := out.Validate(`{"risk":"low","notes":null}`)
	fmt.Println(string(doc))
	// Output:
	// at /risk: value must be one of 'low', 'high'
	// {"risk":"low","notes":null}
}

// An agent that uses an MCP server's tools. The worker starts the stdio
// server and holds its session; the token is read from the worker's
// environment when it connects, so it never enters a workflow history.
func ExampleMCPServer() {
	g, err := agents.NewGraph("github", "helper", &agents.Agent{
		Name:         "helper",
		Instructions: "Answer questions about our repositories.",
		MCPServers: []*agents.MCPServer{{
			Name:    "github",
			Command: []string{"npx", "-y", "@modelcontextprotocol/server-github"},
			Env:     map[string]string{"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}"},
			Prefix:  "gh_",
			Allow:   []string{"search_repositories", "get_file_contents", "create_issue"},
			// Issue creation waits for a human's approval.
			RequireApproval: func(tool string) bool { return tool == "create_issue" },
		}},
	})
	fmt.Println(g.Name(), err)
	// Output: github <nil>
}

// Exposing an agent makes it an MCP tool of `troupe mcp serve`; ExposeAs
// gives the tool a typed input and turns it into the run.
func ExampleExposeAs() {
	type request struct {
		Customer string `json:"customer" jsonschema:"description=The customer's name."`
	}
	e, _ := agents.ExposeAs("brief", "Writes a customer brief.", func(r request) (agents.ExposedRun, error) {
		return agents.ExposedRun{Input: "Write a brief for " + r.Customer, Vars: map[string]string{"customer": r.Customer}}, nil
	})
	g := agents.MustGraph("crm", "writer", &agents.Agent{Name: "writer", Expose: e})
	run, _ := e.Run([]byte(`{"customer":"Acme"}`))
	fmt.Println(g.ExposedName(g.Exposed()[0]), "→", run.Input, run.Vars)
	fmt.Println(string(e.InputSchema()))
	// Output:
	// brief → Write a brief for Acme map[customer:Acme]
	// {"additionalProperties":false,"properties":{"customer":{"description":"The customer's name.","type":"string"}},"required":["customer"],"type":"object"}
}

// A tool that changes the world passes its call's idempotency key on, so a
// call run again after a worker crash charges once; a tool whose service
// takes no key declares itself NotIdempotent and runs at most once.
func ExampleIdempotencyKey() {
	type chargeArgs struct {
		Customer string `json:"customer"`
		Cents    int    `json:"cents"`
	}
	charge := agents.MustFunctionTool("charge", "Charges a customer.", func(ctx context.Context, a chargeArgs) (string, error) {
		key := agents.IdempotencyKey(ctx) // Sent as the payment API's Idempotency-Key.
		return fmt.Sprintf("charged %s %d cents (key %d chars, prefix %s)", a.Customer, a.Cents, len(key), key[:7]), nil
	})
	fileTicket := agents.MustFunctionTool("file_ticket", "Files a ticket.", func(ctx context.Context, a chargeArgs) (string, error) {
		return "filed", nil
	}, agents.NotIdempotent())

	// The worker sets the call's RunContext; here, by hand.
	rc := agents.RunContext{RunID: "run-1", WorkflowID: "run-1/0-billing", Agent: "billing", Turn: 1}
	ctx := agents.WithRunContext(context.Background(), rc.ForCall("call_1"))
	fmt.Println(charge.Answer(ctx, `{"customer":"acme","cents":500}`))
	fmt.Println(charge.Idempotent(), fileTicket.Idempotent())
	// Output:
	// charged acme 500 cents (key 39 chars, prefix troupe-)
	// true false
}
