package agents

import "encoding/json"

// ModelSettings tune a model call. The zero value leaves every setting to
// the provider's default.
type ModelSettings struct {
	// Temperature, when set, is sent as the sampling temperature.
	Temperature *float64 `json:"temperature,omitempty"`
	// TopP, when set, is sent as nucleus-sampling top_p.
	TopP *float64 `json:"top_p,omitempty"`
	// MaxTokens, when set, caps the tokens the model may generate in a turn.
	MaxTokens *int `json:"max_tokens,omitempty"`
	// ToolChoice is "auto" (the default when empty), "required", "none", or
	// the name of one tool the model must call.
	ToolChoice string `json:"tool_choice,omitempty"`
	// ParallelToolCalls, when set, allows or forbids several tool calls in
	// one turn.
	ParallelToolCalls *bool `json:"parallel_tool_calls,omitempty"`
}

// Float returns a pointer to f, for ModelSettings fields.
func Float(f float64) *float64 { return &f }

// Int returns a pointer to i, for ModelSettings fields.
func Int(i int) *int { return &i }

// Bool returns a pointer to b, for ModelSettings fields.
func Bool(b bool) *bool { return &b }

// ToolSpec is what the model sees of a tool: its name, description and the
// JSON schema of its arguments.
type ToolSpec struct {
	// Name matches ^[a-zA-Z0-9_-]{1,64}$.
	Name string `json:"name"`
	// Description tells the model when to call the tool.
	Description string `json:"description,omitempty"`
	// Parameters is the JSON schema of the arguments object.
	Parameters json.RawMessage `json:"parameters"`
	// Strict asks the provider to enforce the schema exactly; Parameters is
	// then OpenAI-strict.
	Strict bool `json:"strict"`
}

// OutputSpec is what the model sees of an agent's structured output type.
type OutputSpec struct {
	// Name identifies the schema to the provider.
	Name string `json:"name"`
	// Schema is the OpenAI-strict JSON schema of the output.
	Schema json.RawMessage `json:"schema"`
	// Strict asks the provider to enforce the schema exactly.
	Strict bool `json:"strict"`
}
