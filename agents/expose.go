package agents

import (
	"encoding/json"
	"fmt"
	"reflect"
)

// Exposure makes an agent callable from outside its graph: `troupe mcp
// serve` offers every exposed agent as an MCP tool. Build one with Expose
// (the tool takes a plain "input" string) or ExposeAs (the tool takes a
// typed input document).
type Exposure struct {
	// Name is the tool name; empty means <graph>_<agent>.
	Name string
	// Description tells callers what the agent does; empty means the
	// agent's HandoffDescription.
	Description string
	schema      json.RawMessage
	convert     func(args json.RawMessage) (ExposedRun, error)
}

// ExposedRun is the run an exposed agent's call starts: the user message
// and the run variables.
type ExposedRun struct {
	Input string
	Vars  map[string]string
}

type plainInput struct {
	Input string `json:"input" jsonschema_description:"The request for the agent, in plain language."`
}

// Expose returns an Exposure whose tool takes {"input": "..."}. NewGraph
// checks the name.
func Expose(name, description string) *Exposure {
	e, err := exposeAs(name, description, func(in plainInput) (ExposedRun, error) {
		return ExposedRun{Input: in.Input}, nil
	})
	if err != nil {
		panic(err) // plainInput's schema always builds
	}
	return e
}

// ExposeAs returns an Exposure whose tool takes an In document (a struct;
// its strict JSON schema is the tool's input schema), turned into the run
// by fn, for example to set run variables from typed fields.
func ExposeAs[In any](name, description string, fn func(In) (ExposedRun, error)) (*Exposure, error) {
	if name != "" {
		if err := checkName("tool", name); err != nil {
			return nil, err
		}
	}
	return exposeAs(name, description, fn)
}

func exposeAs[In any](name, description string, fn func(In) (ExposedRun, error)) (*Exposure, error) {
	if fn == nil {
		return nil, fmt.Errorf("agents: exposed %s: nil func", name)
	}
	schema, err := StrictSchemaFor(reflect.TypeFor[In]())
	if err != nil {
		return nil, fmt.Errorf("agents: exposed input: %w", err)
	}
	sch, err := compileSchema("input", schema)
	if err != nil {
		return nil, err
	}
	optional := nullableProperties(schema)
	tool := name
	if tool == "" {
		tool = "of the exposed agent"
	}
	return &Exposure{Name: name, Description: description, schema: schema,
		convert: func(args json.RawMessage) (ExposedRun, error) {
			// Callers other than OpenAI's models leave optional
			// arguments out rather than sending null.
			args = json.RawMessage(fillOptional(string(args), optional))
			if err := validateJSON(sch, args); err != nil {
				return ExposedRun{}, &ToolArgsError{Tool: tool, Err: err}
			}
			var in In
			if err := json.Unmarshal(args, &in); err != nil {
				return ExposedRun{}, &ToolArgsError{Tool: tool, Err: err}
			}
			return fn(in)
		}}, nil
}

// InputSchema is the JSON schema of the tool's arguments.
func (e *Exposure) InputSchema() json.RawMessage { return e.schema }

// Run validates a call's arguments and returns the run they start. An
// argument error is a *ToolArgsError.
func (e *Exposure) Run(args json.RawMessage) (ExposedRun, error) {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	return e.convert(args)
}

// Exposed lists the graph's exposed agents in the order NewGraph got them.
func (g *Graph) Exposed() []*Agent {
	var out []*Agent
	for _, name := range g.order {
		if a := g.agents[name]; a.Expose != nil {
			out = append(out, a)
		}
	}
	return out
}

// ExposedName is the tool name of an exposed agent of graph g.
func (g *Graph) ExposedName(a *Agent) string {
	if a.Expose != nil && a.Expose.Name != "" {
		return a.Expose.Name
	}
	return g.name + "_" + a.Name
}
