package mcp

// A server's tools as fetched, and the view of them one declaration gives
// the model.

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/troupe-dev/troupe/agents"
)

// maxToolName is the longest tool name the model APIs accept.
const maxToolName = 64

// remoteListing is a server's tools as one session listed them.
type remoteListing struct {
	sess    *session
	version int64 // the server's version when the listing was fetched
	tools   []*remoteTool
}

// remoteTool is one tool as the server describes it, with its schema
// converted once.
type remoteTool struct {
	name         string
	description  string
	params       json.RawMessage // the input schema, normalized
	strictParams json.RawMessage // its strict form, when strictOK
	strictOK     bool
	nulls        *nullNode // where the strict form made properties nullable
	output       json.RawMessage
}

func newRemoteTool(t *sdk.Tool) (*remoteTool, error) {
	in, err := serverOrder(t.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	root, err := normalizeRoot(in)
	if err != nil {
		return nil, err
	}
	params, err := marshalJSON(root)
	if err != nil {
		return nil, err
	}
	strictParams, strict, nulls, err := convertSchema(in)
	if err != nil {
		return nil, err
	}
	rt := &remoteTool{
		name:         t.Name,
		description:  firstNonEmpty(t.Description, t.Title),
		params:       params,
		strictParams: strictParams,
		strictOK:     strict,
		nulls:        nulls,
	}
	if t.OutputSchema != nil {
		if rt.output, err = json.Marshal(t.OutputSchema); err != nil {
			return nil, fmt.Errorf("output schema: %w", err)
		}
	}
	return rt, nil
}

// serverOrder encodes a schema as the SDK decoded it, into a map, which
// lost the order of its properties; it puts each object's required
// properties first, in the order of its "required" list (which does keep
// the server's order), and the others after them, so the model reads (and
// in strict mode writes) the arguments that matter first.
func serverOrder(schema any) (json.RawMessage, error) {
	b, err := json.Marshal(schema)
	if err != nil {
		return nil, err
	}
	v, err := decodeJSON(b)
	if err != nil {
		return nil, err
	}
	requiredFirst(v)
	return marshalJSON(v)
}

func requiredFirst(v any) {
	switch t := v.(type) {
	case *object:
		if props, ok := t.vals["properties"].(*object); ok {
			if req, ok := t.vals["required"].([]any); ok {
				var keys []string
				for _, r := range req {
					if name, ok := r.(string); ok && props.has(name) && !slices.Contains(keys, name) {
						keys = append(keys, name)
					}
				}
				for _, k := range props.keys {
					if !slices.Contains(keys, k) {
						keys = append(keys, k)
					}
				}
				props.keys = keys
			}
		}
		for _, k := range t.keys {
			requiredFirst(t.vals[k])
		}
	case []any:
		for _, e := range t {
			requiredFirst(e)
		}
	}
}

// offeredTool is a tool as one declaration offers it.
type offeredTool struct {
	remote *remoteTool
	strict bool // sent with its strict schema
}

// view applies a declaration's Allow, Deny, Prefix and NonStrict to the
// listing.
func (rl *remoteListing) view(srv *agents.MCPServer) (*Listing, map[string]offeredTool, error) {
	l := &Listing{Server: srv.Name, Version: rl.version, Tools: []Tool{}}
	byName := map[string]offeredTool{}
	for _, rt := range rl.tools {
		if !srv.Offers(rt.name) {
			continue
		}
		name := toolName(srv.Prefix, rt.name)
		if name == "" {
			continue
		}
		if other, ok := byName[name]; ok {
			return nil, nil, &ServerError{Server: srv.Name, Op: "list tools", Err: fmt.Errorf(
				"tools %q and %q are both named %s for the model; tell them apart with Allow or Deny",
				other.remote.name, rt.name, name)}
		}
		strict := rt.strictOK && !srv.NonStrict
		spec := agents.ToolSpec{Name: name, Description: rt.description, Parameters: rt.params}
		if strict {
			spec.Parameters, spec.Strict = rt.strictParams, true
		}
		byName[name] = offeredTool{remote: rt, strict: strict}
		l.Tools = append(l.Tools, Tool{Name: name, Remote: rt.name, Spec: spec, OutputSchema: rt.output})
	}
	return l, byName, nil
}

// toolName is the model-facing name of a server's tool: every character
// outside [a-zA-Z0-9_-] becomes '_', and the name is cut to 64 characters.
func toolName(prefix, remote string) string {
	var b strings.Builder
	for _, r := range prefix + remote {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	s := b.String()
	if len(s) > maxToolName {
		s = s[:maxToolName]
	}
	return s
}
