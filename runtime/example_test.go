package runtime_test

import (
	"context"
	"fmt"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/model"
)

// The agent loop as plain Go: the state says what comes next, and its
// caller (an agent workflow, here a loop) carries it out and reports back.
// Nothing here needs Temporal, a model or a blob store.
func ExampleAgentState() {
	lookup := agents.MustFunctionTool("lookup", "Looks a key up.", func(_ context.Context, _ struct {
		Key string `json:"key"`
	}) (string, error) {
		return "42", nil
	})
	graph := agents.MustGraph("demo", "clerk", &agents.Agent{Name: "clerk", Instructions: "Answer from the records.", Tools: []agents.Tool{lookup}})
	clerk := runtime.SpecOf(graph, runtime.RunSettings{}).Agent("clerk")
	a, _ := graph.Agent("clerk")

	// What "the model" answers each turn: a call first, then the answer.
	answers := [][]agents.Item{
		{agents.FunctionCall("c1", "lookup", `{"key":"answer"}`)},
		{agents.AssistantMessage("The answer is 42.")},
	}
	st := runtime.NewAgentState("clerk", runtime.TranscriptRef{Key: "transcripts/demo"}, []agents.Item{agents.UserMessage("What is the answer?")})
	for next := st.Begin(clerk); ; {
		switch next.Action {
		case runtime.CallModel:
			step := runtime.Decide(a, answers[next.Turn-1])
			fmt.Printf("turn %d: %d call(s)\n", next.Turn, len(step.Calls))
			next = st.ModelDone(clerk, st.Transcript, step, model.Usage{Requests: 1})
		case runtime.RunCalls:
			var outputs []agents.Item
			for _, c := range runtime.Sort(clerk, next.Calls, nil).Functions {
				outputs = append(outputs, agents.FunctionCallOutput(c.CallID, "42"))
			}
			next = st.CallsDone(clerk, outputs, nil, model.Usage{})
		case runtime.Finish:
			fmt.Printf("final: %s after %d turns, %d tool call(s), %d model call(s)\n", next.Output, st.Turn, st.ToolCalls, st.Usage.Requests)
			return
		default:
			fmt.Println("failed:", next.Failure.Message)
			return
		}
	}
	// Output:
	// turn 1: 1 call(s)
	// turn 2: 0 call(s)
	// final: "The answer is 42." after 2 turns, 1 tool call(s), 2 model call(s)
}
