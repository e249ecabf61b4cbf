package workflows_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/model/scripted"
	"github.com/troupe-dev/troupe/workflows"
)

// A Runner serves a graph: its workflows and the activities of every room.
// Here it runs on the SDK's test environment, with the scripted model
// server over HTTP and an in-memory blob store; on a real worker,
// runner.StartWorkers(temporalClient, queue, worker.Options{}) starts
// every worker the graph needs, and package client starts and follows
// the runs.
func ExampleNewRunner() {
	graph := agents.MustGraph("greet", "greeter", &agents.Agent{Name: "greeter", Instructions: "greeter: greet the user by name."})
	sc, err := scripted.ParseScenario([]byte("rules:\n  - {name: hello, match: {instructions: greeter}, respond: {text: 'Hello, {{.User}}!'}}\n"))
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := scripted.New(sc)
	url, err := srv.Start("127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	m, err := model.New(model.Config{APIKey: "offline", BaseURL: url})
	if err != nil {
		fmt.Println(err)
		return
	}
	store, err := blob.Open(context.Background(), "mem://")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()

	runner, err := workflows.NewRunner(workflows.Config{Graphs: []*agents.Graph{graph}, Model: m, Store: store})
	if err != nil {
		fmt.Println(err)
		return
	}
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := s.NewTestWorkflowEnvironment()
	runner.Register(env)
	env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "greet", Input: "Ada"})
	var res troupe.RunResult
	if err := env.GetWorkflowResult(&res); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Agent, string(res.Output), res.Turns)
	// Output: greeter "Hello, Ada!" 1
}
