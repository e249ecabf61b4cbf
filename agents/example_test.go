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
