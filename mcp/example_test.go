package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/mcp"
)

// An agent's MCP server, listed and called the way the worker's activities
// do it. The server here is a go-sdk server on a loopback HTTP listener; a
// stdio server is declared with Command instead of URL.
func ExamplePool() {
	type greetArgs struct {
		Name     string `json:"name"`
		Greeting string `json:"greeting,omitempty"`
	}
	server := sdk.NewServer(&sdk.Implementation{Name: "greeter", Version: "1"}, nil)
	sdk.AddTool(server, &sdk.Tool{Name: "greet", Description: "Greets someone."},
		func(_ context.Context, _ *sdk.CallToolRequest, in greetArgs) (*sdk.CallToolResult, any, error) {
			if in.Greeting == "" {
				in.Greeting = "Hello"
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: in.Greeting + ", " + in.Name + "!"}}}, nil, nil
		})
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil))
	defer ts.Close()

	pool := mcp.NewPool(mcp.PoolConfig{})
	defer pool.Close()
	srv := &agents.MCPServer{Name: "greeter", URL: ts.URL, Prefix: "greeter_"}

	ctx := context.Background()
	listing, err := pool.Tools(ctx, srv)
	if err != nil {
		log.Fatal(err)
	}
	for _, tool := range listing.Tools {
		fmt.Println(tool.Name, "calls", tool.Remote, "strict:", tool.Spec.Strict)
		fmt.Println(string(tool.Spec.Parameters))
	}

	// In strict mode the model sends null for the optional greeting; the
	// pool leaves it out of the call, so the server sees it unset.
	res, err := pool.Call(ctx, srv, "greeter_greet", `{"name":"Ada","greeting":null}`)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Text)
	// Output:
	// greeter_greet calls greet strict: true
	// {"additionalProperties":false,"properties":{"name":{"type":"string"},"greeting":{"type":["string","null"]}},"required":["name","greeting"],"type":"object"}
	// Hello, Ada!
}

// ConvertSchema on the input schema of a tool with an optional argument.
func ExampleConvertSchema() {
	params, strict, err := mcp.ConvertSchema(json.RawMessage(`{
		"type": "object",
		"properties": {
			"path": {"type": "string"},
			"limit": {"type": "integer", "default": 100}
		},
		"required": ["path"]
	}`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(strict)
	fmt.Println(string(params))
	// Output:
	// true
	// {"type":"object","properties":{"path":{"type":"string"},"limit":{"type":["integer","null"],"description":"Default: 100."}},"required":["path","limit"],"additionalProperties":false}
}
