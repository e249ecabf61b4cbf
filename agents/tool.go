package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"time"

	validator "github.com/santhosh-tekuri/jsonschema/v6"
)

// toolNamePattern is the tool-name rule of the OpenAI APIs.
var toolNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// ErrInvalidName reports an agent or tool name the model APIs would reject.
var ErrInvalidName = errors.New("agents: invalid name")

func checkName(kind, name string) error {
	if !toolNamePattern.MatchString(name) {
		return fmt.Errorf("%w: %s %q must match %s", ErrInvalidName, kind, name, toolNamePattern)
	}
	return nil
}

// Tool is something an agent's model can call. The implementations in this
// package are *FunctionTool (a Go func) and *AgentTool (another agent);
// the worker dispatches on the concrete type.
type Tool interface {
	// Spec is what the model sees of the tool.
	Spec() ToolSpec
}

// ToolArgsError reports tool arguments that do not match the tool's
// schema. The agent loop sends it back to the model as the tool's output.
type ToolArgsError struct {
	Tool string
	Err  error
}

func (e *ToolArgsError) Error() string {
	return fmt.Sprintf("invalid arguments for tool %s: %v", e.Tool, e.Err)
}

func (e *ToolArgsError) Unwrap() error { return e.Err }

// FunctionTool is a tool backed by a typed Go func. Build one with
// NewFunctionTool. It runs inside a Temporal activity: a local activity by
// default (cheap, for short pure-Go work), or a regular activity with
// AsActivity (for slow or side-effecting work that deserves its own retry
// and timeout bookkeeping).
type FunctionTool struct {
	spec     ToolSpec
	schema   *validator.Schema
	call     func(ctx context.Context, args []byte) (string, error)
	timeout  time.Duration
	activity bool
	sandbox  bool
	// once is whether the tool is not idempotent (NotIdempotent).
	once bool
	// optional are the top-level properties that may be null; a call that
	// leaves them out (servers that do not enforce strict mode do) gets
	// null for them.
	optional []string
}

// ToolOption tunes a FunctionTool.
type ToolOption func(*FunctionTool)

// WithTimeout bounds one call of the tool. The default is 30 seconds.
func WithTimeout(d time.Duration) ToolOption {
	return func(t *FunctionTool) { t.timeout = d }
}

// AsActivity runs the tool as a regular Temporal activity rather than a
// local one.
func AsActivity() ToolOption {
	return func(t *FunctionTool) { t.activity = true }
}

// NotIdempotent declares that a call of the tool must not run twice: it
// has an effect that a second run would repeat (charging a card, filing a
// ticket) and the service it calls takes no idempotency key.
//
// Function tools are idempotent by default: a call runs at least once,
// again after a worker crash or a timeout, with the same IdempotencyKey
// every time, which a tool passes on to the services it changes. Most
// tools read, compute or pass the key on, and a tool that runs again is
// what a crash should cost. A tool made NotIdempotent runs at most once:
// before its func runs, the worker records in the blob store that the
// call started; an attempt that finds the call started (its worker was
// lost mid-call, or the call timed out) does not run the func again and
// answers the model InDoubtOutput instead, so the model checks what
// happened, and the agent records a tool_in_doubt event. The record costs
// one conditional write to the blob store per call.
func NotIdempotent() ToolOption {
	return func(t *FunctionTool) { t.once = true }
}

// NewFunctionTool builds a tool from fn. Args must be a struct (its JSON
// schema, made strict, is the tool's parameters); Result is sent to the
// model as is when it is a string, and as JSON otherwise. An error returned
// by fn reaches the model as the tool's output, so it can recover.
func NewFunctionTool[Args, Result any](name, description string, fn func(context.Context, Args) (Result, error), opts ...ToolOption) (*FunctionTool, error) {
	if err := checkName("tool", name); err != nil {
		return nil, err
	}
	if fn == nil {
		return nil, fmt.Errorf("agents: tool %s: nil func", name)
	}
	params, err := StrictSchemaFor(reflect.TypeFor[Args]())
	if err != nil {
		return nil, fmt.Errorf("agents: tool %s arguments: %w", name, err)
	}
	sch, err := compileSchema(name, params)
	if err != nil {
		return nil, err
	}
	t := &FunctionTool{
		spec:     ToolSpec{Name: name, Description: description, Parameters: params, Strict: true},
		schema:   sch,
		timeout:  30 * time.Second,
		optional: nullableProperties(params),
	}
	t.call = func(ctx context.Context, raw []byte) (string, error) {
		var args Args
		if err := json.Unmarshal(raw, &args); err != nil {
			return "", &ToolArgsError{Tool: name, Err: err}
		}
		res, err := fn(ctx, args)
		if err != nil {
			return "", err
		}
		if s, ok := any(res).(string); ok {
			return s, nil
		}
		out, err := json.Marshal(res)
		if err != nil {
			return "", fmt.Errorf("agents: tool %s result: %w", name, err)
		}
		return string(out), nil
	}
	for _, o := range opts {
		o(t)
	}
	return t, nil
}

// MustFunctionTool is NewFunctionTool that panics on error, for
// package-level graph definitions whose tools are known to be valid.
func MustFunctionTool[Args, Result any](name, description string, fn func(context.Context, Args) (Result, error), opts ...ToolOption) *FunctionTool {
	t, err := NewFunctionTool(name, description, fn, opts...)
	if err != nil {
		panic(err)
	}
	return t
}

// Spec implements Tool.
func (t *FunctionTool) Spec() ToolSpec { return t.spec }

// Timeout is the bound of one call.
func (t *FunctionTool) Timeout() time.Duration { return t.timeout }

// Idempotent reports whether a call of the tool may run more than once
// (the default); see NotIdempotent.
func (t *FunctionTool) Idempotent() bool { return !t.once }

// RunsAsActivity reports whether the tool runs as a regular activity
// rather than a local one.
func (t *FunctionTool) RunsAsActivity() bool { return t.activity }

// Call validates the JSON arguments against the tool's schema and runs the
// tool. Invalid arguments give a *ToolArgsError.
func (t *FunctionTool) Call(ctx context.Context, arguments string) (string, error) {
	if strings.TrimSpace(arguments) == "" {
		arguments = "{}"
	}
	arguments = fillOptional(arguments, t.optional)
	if err := validateJSON(t.schema, []byte(arguments)); err != nil {
		return "", &ToolArgsError{Tool: t.spec.Name, Err: err}
	}
	return t.call(ctx, []byte(arguments))
}

// Answer calls the tool as Call does and returns what the model reads:
// the tool's output or, when it fails (invalid arguments included) or
// panics, "Error: " and why, so the model can recover.
func (t *FunctionTool) Answer(ctx context.Context, arguments string) (output string) {
	defer func() {
		if p := recover(); p != nil {
			output = fmt.Sprintf("Error: tool %s panicked: %v", t.Spec().Name, p)
		}
	}()
	out, err := t.Call(ctx, arguments)
	if err != nil {
		return "Error: " + err.Error()
	}
	return out
}

// AgentToolInput is the arguments object of every agent tool.
type AgentToolInput struct {
	// Input is the request for the tool agent.
	Input string `json:"input" jsonschema:"description=The input to send to the agent."`
}

// ToolRunResult is what an agent tool's run produced, handed to an
// OutputExtractor.
type ToolRunResult struct {
	// Agent is the name of the agent that gave the final output (after any
	// handoffs inside the tool run).
	Agent string `json:"agent"`
	// Output is the final output: a JSON document for agents with an
	// output type, a JSON string otherwise.
	Output json.RawMessage `json:"output"`
}

// OutputExtractor turns a tool agent's run into the text the calling
// model sees. It runs in an activity.
type OutputExtractor func(ctx context.Context, r ToolRunResult) (string, error)

// AgentTool exposes an agent as a tool of another agent. Each call starts
// the tool agent's own child workflow; calls from one model turn run in
// parallel. The caller receives the tool agent's final output as JSON (the
// structured document itself, or the text), or what Extractor makes of it.
type AgentTool struct {
	// Agent is the graph name of the agent to run.
	Agent string
	// Name is the tool name; the default is the agent's name.
	Name string
	// Description tells the calling model when to use the tool.
	Description string
	// Extractor, when set, post-processes the tool agent's result.
	Extractor OutputExtractor
}

// AsTool returns agent as a tool named name.
func AsTool(agent, name, description string) *AgentTool {
	return &AgentTool{Agent: agent, Name: name, Description: description}
}

var agentToolParams = func() json.RawMessage {
	s, err := StrictSchemaFor(reflect.TypeFor[AgentToolInput]())
	if err != nil {
		panic(err)
	}
	return s
}()

// Spec implements Tool.
func (t *AgentTool) Spec() ToolSpec {
	name := t.Name
	if name == "" {
		name = t.Agent
	}
	return ToolSpec{Name: name, Description: t.Description, Parameters: agentToolParams, Strict: true}
}

// fillOptional adds null for the optional top-level properties a call
// left out. Arguments that are not a JSON object are left as they are,
// for validation to reject.
func fillOptional(arguments string, optional []string) string {
	if len(optional) == 0 {
		return arguments
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(arguments), &obj) != nil || obj == nil {
		return arguments
	}
	changed := false
	for _, name := range optional {
		if _, ok := obj[name]; !ok {
			obj[name] = json.RawMessage("null")
			changed = true
		}
	}
	if !changed {
		return arguments
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return arguments
	}
	return string(out)
}

// nullableProperties lists the top-level properties of a strict schema
// that accept null.
func nullableProperties(schema json.RawMessage) []string {
	var s struct {
		Properties map[string]map[string]any `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return nil
	}
	var names []string
	for name, p := range s.Properties {
		if acceptsNull(p) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

func acceptsNull(s map[string]any) bool {
	switch ty := s["type"].(type) {
	case string:
		return ty == "null"
	case []any:
		for _, x := range ty {
			if x == "null" {
				return true
			}
		}
	}
	if list, ok := s["anyOf"].([]any); ok {
		for _, sub := range list {
			if m, ok := sub.(map[string]any); ok && acceptsNull(m) {
				return true
			}
		}
	}
	return false
}
