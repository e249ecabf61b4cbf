package gate_test

import (
	"fmt"
	"io"
	"log/slog"
	"slices"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe/agents"
	_ "github.com/troupe-dev/troupe/internal/binarychecksum" // no executable hashed in workflow code
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/workflows/gate"
)

// allowList is a gate of its own: it answers the calls of tools not on its
// list, which the model then reads instead of running them. A gate
// implements only the points it needs; this one, BeforeCall.
type allowList []string

func (l allowList) Name() string { return "allow-list" }

func (l allowList) BeforeCall(_ workflow.Context, _ *gate.Turn, c gate.Call) string {
	if slices.Contains(l, c.Item.Name) {
		return ""
	}
	return c.Item.Name + " is not allowed here"
}

// A chain of gates, asked as an agent workflow asks it for each call of a
// turn (here in a workflow of its own, on the SDK's test environment).
func Example() {
	turn := func(ctx workflow.Context) ([]string, error) {
		agent := &runtime.AgentSpec{Name: "clerk"}
		chain := gate.New(&gate.Turn{Agent: agent, Spec: &runtime.GraphSpec{}}, allowList{"lookup"})
		var seen []string
		for _, c := range []agents.Item{agents.FunctionCall("c1", "lookup", "{}"), agents.FunctionCall("c2", "delete_all", "{}")} {
			if why := chain.BeforeCall(ctx, gate.Call{Item: c, Kind: gate.KindFunction}); why != "" {
				seen = append(seen, c.Name+": Error: "+why)
				continue
			}
			seen = append(seen, c.Name+": runs")
		}
		return seen, nil
	}
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(turn, workflow.RegisterOptions{Name: "turn"})
	env.ExecuteWorkflow("turn")
	var seen []string
	if err := env.GetWorkflowResult(&seen); err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range seen {
		fmt.Println(s)
	}
	// Output:
	// lookup: runs
	// delete_all: Error: delete_all is not allowed here
}
