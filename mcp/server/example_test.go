package server_test

import (
	"context"
	"fmt"
	"log"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/examples/dealdesk"
	"github.com/troupe-dev/troupe/mcp/server"
)

// An MCP server for the deal-desk graph: its exposed coordinator is the
// tool dealdesk_coordinator (a run per call) and the session tool
// dealdesk_coordinator_session (a conversation), next to the run tools. Here an in-process MCP
// client lists the tools over an in-memory transport; serve real clients
// with HTTPHandler or Serve(ctx, &mcp.StdioTransport{}), with Client
// dialled to the Temporal cluster where workers run the graph.
func ExampleNew() {
	c, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:7233"}) // dials on first use
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	s, err := server.New(server.Config{Client: c, TaskQueue: "troupe", Graphs: []*agents.Graph{dealdesk.Graph()}})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	serverSide, clientSide := mcp.NewInMemoryTransports()
	go func() { _ = s.Serve(ctx, serverSide) }()

	cs, err := mcp.NewClient(&mcp.Implementation{Name: "example", Version: "v0"}, nil).Connect(ctx, clientSide, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range tools.Tools {
		fmt.Printf("%s (output schema: %v)\n", t.Name, t.OutputSchema != nil)
	}
	// Output:
	// dealdesk_coordinator (output schema: true)
	// dealdesk_coordinator_session (output schema: true)
	// troupe_run_approve (output schema: false)
	// troupe_run_result (output schema: false)
	// troupe_run_status (output schema: true)
}
