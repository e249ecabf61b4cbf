package runtime

// MCPCatalog is an agent's MCP tools as listed by one worker.
type MCPCatalog struct {
	// Queue is the MCP queue of the process that holds the sessions; ""
	// (a Runner whose workers StartWorkers did not start) means the
	// workflow's own queue.
	Queue string `json:"queue,omitempty"`
	// Tools are the tools offered to the model, in the servers' order.
	Tools []MCPToolRef `json:"tools"`
	// Specs is the blob key of the tools' specs ([]agents.ToolSpec), which
	// the model activity adds to the agent's own.
	Specs string `json:"specs,omitempty"`
}

// MCPToolRef is one MCP tool of a catalog.
type MCPToolRef struct {
	// Name is the tool's name as the model sees it.
	Name string `json:"name"`
	// Server and Remote are the server's name and its name for the tool.
	Server string `json:"server"`
	Remote string `json:"remote"`
	// Approval says that a call needs a human's approval.
	Approval bool `json:"approval,omitempty"`
}
