package agents

import (
	"errors"
	"fmt"
)

// ErrUnknownAgent reports an agent name the graph does not hold.
var ErrUnknownAgent = errors.New("agents: unknown agent")

// ErrInvalidGraph reports a graph that fails validation.
var ErrInvalidGraph = errors.New("agents: invalid graph")

// ToolKind says how the runtime carries out a call of a tool.
type ToolKind int

// The kinds of tools.
const (
	// ToolUnknown is a name the agent does not offer.
	ToolUnknown ToolKind = iota
	// ToolFunction is a *FunctionTool.
	ToolFunction
	// ToolAgent is an *AgentTool.
	ToolAgent
	// ToolHandoff is a transfer_to_<agent> handoff.
	ToolHandoff
)

// toolKindNames are the kinds' names in JSON.
var toolKindNames = [...]string{ToolUnknown: "unknown", ToolFunction: "function", ToolAgent: "agent", ToolHandoff: "handoff"}

// String names the kind: unknown, function, agent or handoff.
func (k ToolKind) String() string {
	if k >= 0 && int(k) < len(toolKindNames) {
		return toolKindNames[k]
	}
	return fmt.Sprintf("ToolKind(%d)", int(k))
}

// MarshalText writes the kind's name, so that recorded kinds survive a
// reordering of the constants.
func (k ToolKind) MarshalText() ([]byte, error) {
	if k < 0 || int(k) >= len(toolKindNames) {
		return nil, fmt.Errorf("agents: invalid tool kind %d", int(k))
	}
	return []byte(toolKindNames[k]), nil
}

// UnmarshalText reads a kind's name.
func (k *ToolKind) UnmarshalText(b []byte) error {
	for i, n := range toolKindNames {
		if n == string(b) {
			*k = ToolKind(i)
			return nil
		}
	}
	return fmt.Errorf("agents: unknown tool kind %q", b)
}

// ToolRef is what a tool name of an agent resolves to.
type ToolRef struct {
	Kind     ToolKind
	Function *FunctionTool
	Agent    *AgentTool
	Handoff  *Handoff
}

// Graph is the set of agents a worker serves, by name, with the entry agent
// a run starts at unless the caller names another. It is immutable after
// NewGraph.
type Graph struct {
	name   string
	entry  string
	order  []string
	agents map[string]*Agent
	tools  map[string]map[string]ToolRef
	specs  map[string][]ToolSpec
	// budget and prices are the graph's default budget and its price
	// table (WithBudget, WithPrices).
	budget *Budget
	prices Prices
	// modelLimits are the graph's limits on its models' endpoints
	// (WithModelLimits).
	modelLimits map[string]ModelLimit
}

// NewGraph validates the agents and returns their graph. It rejects empty
// or invalid names, duplicate agents, an unknown entry, handoffs and agent
// tools naming agents not in the graph, tools of unknown kinds, and two
// tools of one agent with the same name (including handoff tools).
func NewGraph(name, entry string, agents ...*Agent) (*Graph, error) {
	g := &Graph{
		name: name, entry: entry,
		agents: map[string]*Agent{}, tools: map[string]map[string]ToolRef{},
		specs: map[string][]ToolSpec{},
	}
	var errs []error
	if err := checkName("graph", name); err != nil {
		errs = append(errs, err)
	}
	for _, a := range agents {
		if a == nil {
			errs = append(errs, errors.New("nil agent"))
			continue
		}
		if err := checkName("agent", a.Name); err != nil {
			errs = append(errs, err)
		} else if len(a.Name) > 52 {
			errs = append(errs, fmt.Errorf("agent %q: name longer than 52 characters", a.Name))
		}
		if a.MaxConcurrentCalls < 0 {
			errs = append(errs, fmt.Errorf("agent %q: MaxConcurrentCalls %d is negative (0 takes the default, %d)", a.Name, a.MaxConcurrentCalls, DefaultMaxConcurrentCalls))
		}
		if _, dup := g.agents[a.Name]; dup {
			errs = append(errs, fmt.Errorf("duplicate agent %q", a.Name))
			continue
		}
		g.agents[a.Name] = a
		g.order = append(g.order, a.Name)
	}
	if _, ok := g.agents[entry]; !ok {
		errs = append(errs, fmt.Errorf("entry agent %q is not in the graph", entry))
	}
	exposed := map[string]string{}
	for _, n := range g.order {
		errs = append(errs, g.index(g.agents[n])...)
		if a := g.agents[n]; a.Expose != nil {
			if a.Expose.convert == nil {
				errs = append(errs, fmt.Errorf("agent %q: build its Exposure with agents.Expose or agents.ExposeAs", n))
				continue
			}
			tool := g.ExposedName(a)
			if err := checkName("tool", tool); err != nil {
				errs = append(errs, fmt.Errorf("agent %q: exposed as %w", n, err))
			} else if other, dup := exposed[tool]; dup {
				errs = append(errs, fmt.Errorf("agents %q and %q are both exposed as %q", other, n, tool))
			}
			exposed[tool] = n
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w %s: %w", ErrInvalidGraph, name, errors.Join(errs...))
	}
	return g, nil
}

// MustGraph is NewGraph that panics on error.
func MustGraph(name, entry string, agents ...*Agent) *Graph {
	g, err := NewGraph(name, entry, agents...)
	if err != nil {
		panic(err)
	}
	return g
}

func (g *Graph) index(a *Agent) []error {
	var errs []error
	refs := map[string]ToolRef{}
	var specs []ToolSpec
	add := func(spec ToolSpec, ref ToolRef) {
		if err := checkName("tool", spec.Name); err != nil {
			errs = append(errs, fmt.Errorf("agent %q: %w", a.Name, err))
			return
		}
		if _, dup := refs[spec.Name]; dup {
			errs = append(errs, fmt.Errorf("agent %q: two tools named %q", a.Name, spec.Name))
			return
		}
		refs[spec.Name] = ref
		specs = append(specs, spec)
	}
	if a.Sandbox != nil {
		if err := a.Sandbox.Manifest.Check(); err != nil {
			errs = append(errs, fmt.Errorf("agent %q: %w", a.Name, err))
		}
	}
	tools := a.Tools
	for _, c := range a.Capabilities {
		if c == nil {
			errs = append(errs, fmt.Errorf("agent %q: nil capability", a.Name))
			continue
		}
		if err := c.Manifest().Check(); err != nil {
			errs = append(errs, fmt.Errorf("agent %q: capability %s: %w", a.Name, c.Name(), err))
		}
		if a.Sandbox == nil && needsSandbox(c) {
			errs = append(errs, fmt.Errorf("agent %q: capability %s needs a sandbox agent (set Agent.Sandbox)", a.Name, c.Name()))
		}
		tools = append(tools, c.Tools()...)
	}
	for i, t := range tools {
		switch t := t.(type) {
		case *FunctionTool:
			if t == nil {
				errs = append(errs, fmt.Errorf("agent %q: tool %d is nil", a.Name, i))
				continue
			}
			if t.NeedsSandbox() && a.Sandbox == nil {
				errs = append(errs, fmt.Errorf("agent %q: tool %q acts on a sandbox, but the agent has none", a.Name, t.Spec().Name))
				continue
			}
			add(t.Spec(), ToolRef{Kind: ToolFunction, Function: t})
		case *AgentTool:
			if t == nil {
				errs = append(errs, fmt.Errorf("agent %q: tool %d is nil", a.Name, i))
				continue
			}
			if _, ok := g.agents[t.Agent]; !ok {
				errs = append(errs, fmt.Errorf("agent %q: agent tool %q runs unknown agent %q", a.Name, t.Spec().Name, t.Agent))
				continue
			}
			add(t.Spec(), ToolRef{Kind: ToolAgent, Agent: t})
		default:
			errs = append(errs, fmt.Errorf("agent %q: tool %d has unsupported type %T", a.Name, i, t))
		}
	}
	for i := range a.Handoffs {
		h := &a.Handoffs[i]
		target, ok := g.agents[h.Target]
		if !ok {
			errs = append(errs, fmt.Errorf("agent %q: handoff to unknown agent %q", a.Name, h.Target))
			continue
		}
		add(h.spec(target), ToolRef{Kind: ToolHandoff, Handoff: h})
	}
	seen := map[string]bool{}
	for _, srv := range a.MCPServers {
		if err := srv.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("agent %q: %w", a.Name, err))
			continue
		}
		if seen[srv.Name] {
			errs = append(errs, fmt.Errorf("agent %q: two MCP servers named %q", a.Name, srv.Name))
		}
		seen[srv.Name] = true
	}
	policies := map[string]bool{}
	for _, p := range a.Approvals {
		switch {
		case p.Tool == "":
			errs = append(errs, fmt.Errorf("agent %q: an approval policy names no tool", a.Name))
		case policies[p.Tool]:
			errs = append(errs, fmt.Errorf("agent %q: two approval policies for tool %q", a.Name, p.Tool))
		case p.Timeout < 0:
			errs = append(errs, fmt.Errorf("agent %q: approval policy of %q: negative timeout", a.Name, p.Tool))
		case refs[p.Tool].Kind == ToolHandoff:
			errs = append(errs, fmt.Errorf("agent %q: approval policy of %q: a handoff is not a call that can wait for approval", a.Name, p.Tool))
		case refs[p.Tool].Kind == ToolUnknown && len(a.MCPServers) == 0 && a.Sandbox == nil:
			// MCP tools are known only once their servers list them, and a
			// sandbox agent's default capabilities once a worker adds
			// them (CheckApprovals then).
			errs = append(errs, fmt.Errorf("agent %q: approval policy for unknown tool %q", a.Name, p.Tool))
		}
		policies[p.Tool] = true
	}
	errs = append(errs, g.checkGuardrails(a, refs)...)
	g.tools[a.Name] = refs
	g.specs[a.Name] = specs
	return errs
}

// Name is the graph's name.
func (g *Graph) Name() string { return g.name }

// Entry is the agent a run starts at by default.
func (g *Graph) Entry() string { return g.entry }

// Agent returns the named agent, or an error wrapping ErrUnknownAgent.
func (g *Graph) Agent(name string) (*Agent, error) {
	a, ok := g.agents[name]
	if !ok {
		return nil, fmt.Errorf("%w %q in graph %s", ErrUnknownAgent, name, g.name)
	}
	return a, nil
}

// Agents returns the agents in the order they were given.
func (g *Graph) Agents() []*Agent {
	out := make([]*Agent, len(g.order))
	for i, n := range g.order {
		out[i] = g.agents[n]
	}
	return out
}

// Tool resolves a tool name of an agent. An unknown agent or tool gives a
// ToolRef of kind ToolUnknown.
func (g *Graph) Tool(agent, tool string) ToolRef {
	return g.tools[agent][tool]
}

// ToolSpecs returns what the named agent's model sees of its tools:
// function tools and agent tools in order, then its capabilities' tools,
// then its handoffs.
func (g *Graph) ToolSpecs(agent string) []ToolSpec {
	return g.specs[agent]
}

// needsSandbox reports whether a capability acts on a workspace: it adds
// manifest entries or environment, or a tool that runs in the sandbox. One
// that only adds instructions, plain tools or compaction serves plain
// agents too.
func needsSandbox(c Capability) bool {
	m := c.Manifest()
	if len(m.Entries) > 0 || len(m.Env) > 0 {
		return true
	}
	for _, t := range c.Tools() {
		if ft, ok := t.(*FunctionTool); ok && ft != nil && ft.NeedsSandbox() {
			return true
		}
	}
	return false
}

// CheckApprovals reports the approval policies of g's agents that name no
// tool of their agent, as the graph stands (a worker calls it once it has
// added a sandbox agent's default capabilities). An agent with MCP
// servers may name tools its servers will list.
func (g *Graph) CheckApprovals() error {
	var errs []error
	for _, n := range g.order {
		a := g.agents[n]
		if len(a.MCPServers) > 0 {
			continue
		}
		for _, p := range a.Approvals {
			if g.tools[n][p.Tool].Kind == ToolUnknown {
				errs = append(errs, fmt.Errorf("agent %q: approval policy for unknown tool %q", n, p.Tool))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w %s: %w", ErrInvalidGraph, g.name, errors.Join(errs...))
	}
	return nil
}
