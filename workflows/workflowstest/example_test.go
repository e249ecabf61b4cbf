package workflowstest_test

import (
	"context"
	"fmt"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/workflowstest"
)

// A run of a real Runner on the SDK's test environment, with the model
// scripted: the agent looks a key up on its first turn, then answers with
// what the tool gave.
func Example() {
	lookup := agents.MustFunctionTool("lookup", "Looks a key up.", func(_ context.Context, a struct {
		Key string `json:"key"`
	}) (string, error) {
		return "value-of-" + a.Key, nil
	})
	g := agents.MustGraph("demo", "clerk", &agents.Agent{Name: "clerk", Instructions: "clerk: looks things up", Tools: []agents.Tool{lookup}})
	m := &workflowstest.FuncModel{Func: func(req model.Request) []agents.Item {
		if out, ok := workflowstest.OutputsOf(req)["c1"]; ok {
			return []agents.Item{agents.AssistantMessage("found " + out)}
		}
		return []agents.Item{workflowstest.Call("c1", "lookup", `{"key":"`+workflowstest.LastUser(req)+`"}`)}
	}}

	env := workflowstest.NewEnv()
	if _, err := workflowstest.Serve(env, workflows.Config{Graphs: []*agents.Graph{g}, Model: m}); err != nil {
		fmt.Println(err)
		return
	}
	env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "demo", Input: "colour"})
	var res troupe.RunResult
	if err := env.GetWorkflowResult(&res); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(res.Output))
	fmt.Println("model calls:", m.Calls("clerk:"), "tool calls:", res.ToolCalls)
	// Output:
	// "found value-of-colour"
	// model calls: 2 tool calls: 1
}
