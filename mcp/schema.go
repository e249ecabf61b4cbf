package mcp

// Strict conversion of MCP input schemas (ConvertSchema) and the removal of
// the nulls it introduces (stripNulls).
//
// OpenAI's strict mode accepts a subset of JSON Schema: every object closes
// its properties (additionalProperties false) and requires all of them, the
// root is an object, and only some keywords are understood. An MCP server
// may send any JSON Schema, so the conversion keeps a whitelist: what it
// knows how to express strictly is rewritten, anything else leaves the tool
// non-strict with its schema as the server gave it.

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Limits of OpenAI's strict mode: beyond them a schema is sent non-strict.
const (
	maxStrictDepth      = 10
	maxStrictProperties = 5000
)

// strictFormats are the string formats strict mode understands; others are
// moved into the description.
var strictFormats = map[string]bool{
	"date-time": true, "time": true, "date": true, "duration": true, "email": true,
	"hostname": true, "ipv4": true, "ipv6": true, "uuid": true,
}

// keyword classes of the conversion's whitelist.
var (
	// keptKeywords pass through unchanged.
	keptKeywords = map[string]bool{
		"description": true, "title": true, "pattern": true,
		"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true,
		"multipleOf": true, "minItems": true, "maxItems": true, "minLength": true, "maxLength": true,
	}
	// droppedKeywords are annotations strict mode may refuse; dropping them
	// changes no validation.
	droppedKeywords = map[string]bool{
		"$schema": true, "$id": true, "$comment": true, "examples": true,
		"deprecated": true, "readOnly": true, "writeOnly": true,
	}
	// structuralKeywords are rewritten by the converter itself.
	structuralKeywords = map[string]bool{
		"type": true, "properties": true, "required": true, "additionalProperties": true,
		"items": true, "enum": true, "const": true, "anyOf": true, "oneOf": true, "allOf": true,
		"$ref": true, "$defs": true, "definitions": true, "default": true, "format": true,
	}
)

// errNotStrict reports why a schema stays non-strict; it never leaves the
// package.
type errNotStrict struct{ reason string }

func (e *errNotStrict) Error() string { return "not strict: " + e.reason }

func notStrict(path, format string, args ...any) error {
	if path == "" {
		path = "root"
	}
	return &errNotStrict{reason: path + ": " + fmt.Sprintf(format, args...)}
}

// ConvertSchema makes an MCP tool's input schema OpenAI-strict where it
// can. Every object gets additionalProperties false and lists all of its
// properties as required; a property that was optional becomes nullable
// (its type gains "null", or its anyOf gains {"type":"null"}), and a
// "default" moves into the description. Keywords strict mode does not
// understand (oneOf at the root, allOf, not, if/then/else,
// patternProperties, additionalProperties other than false, a $ref that
// does not resolve within the schema's $defs or definitions, a value with
// no type, an array without items, ...) leave the schema non-strict:
// ConvertSchema then returns strict=false and the schema unchanged, except
// that it is normalized to an object schema with "properties".
//
// The error reports a schema that cannot describe a tool's arguments at
// all: invalid JSON, or a root that is not an object schema.
func ConvertSchema(schema json.RawMessage) (params json.RawMessage, strict bool, err error) {
	params, strict, _, err = convertSchema(schema)
	return params, strict, err
}

// convertSchema is ConvertSchema that also returns where the conversion made
// properties nullable, for stripNulls.
func convertSchema(schema json.RawMessage) (params json.RawMessage, strict bool, nulls *nullNode, err error) {
	root, err := normalizeRoot(schema)
	if err != nil {
		return nil, false, nil, err
	}
	normalized, err := marshalJSON(root)
	if err != nil {
		return nil, false, nil, err
	}
	c := &converter{root: clone(root).(*object), defs: map[string]*nullNode{}}
	nulls, err = c.convertRoot()
	var ns *errNotStrict
	if errors.As(err, &ns) {
		return normalized, false, nil, nil
	}
	if err != nil {
		return nil, false, nil, err
	}
	out, err := marshalJSON(c.root)
	if err != nil {
		return nil, false, nil, err
	}
	if nulls.empty() {
		nulls = nil
	}
	return out, true, nulls, nil
}

// normalizeRoot parses an input schema and makes it an object schema with
// "properties". An empty or null schema means a tool without arguments.
func normalizeRoot(schema json.RawMessage) (*object, error) {
	if len(strings.TrimSpace(string(schema))) == 0 {
		schema = json.RawMessage(`{}`)
	}
	v, err := decodeJSON(schema)
	if err != nil {
		return nil, fmt.Errorf("input schema is not valid JSON: %w", err)
	}
	var root *object
	switch t := v.(type) {
	case nil:
		root = newObject()
	case bool:
		if !t {
			return nil, errors.New("input schema is false: the tool accepts no arguments at all")
		}
		root = newObject()
	case *object:
		root = t
	default:
		return nil, fmt.Errorf("input schema is a JSON %s, not an object schema", jsonKind(v))
	}
	switch typ, ok := root.get("type"); {
	case !ok:
		root.set("type", "object")
	case typ != "object":
		return nil, fmt.Errorf("input schema has type %s; tool arguments must be an object", jsonText(typ))
	}
	if _, ok := root.get("properties"); !ok {
		root.set("properties", newObject())
	}
	return root, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "array"
	case string:
		return "string"
	case json.Number:
		return "number"
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	return "object"
}

// converter rewrites one schema in place.
type converter struct {
	root       *object
	defs       map[string]*nullNode // by $ref, for defs converted or being converted
	properties int
}

func (c *converter) convertRoot() (*nullNode, error) {
	for _, kw := range []string{"anyOf", "oneOf", "allOf", "$ref", "enum", "const"} {
		if c.root.has(kw) {
			return nil, notStrict("", "%s at the root", kw)
		}
	}
	// Every definition must be strict too, referenced or not.
	for _, defsKey := range []string{"$defs", "definitions"} {
		v, ok := c.root.get(defsKey)
		if !ok {
			continue
		}
		defs, ok := v.(*object)
		if !ok {
			return nil, notStrict("", "%s is not an object", defsKey)
		}
		for _, name := range defs.keys {
			if _, err := c.ref("#/"+defsKey+"/"+name, 1); err != nil {
				return nil, err
			}
		}
	}
	return c.schema(c.root, "", 0, true)
}

// ref converts the definition a $ref names (once) and returns its node.
func (c *converter) ref(ref string, depth int) (*nullNode, error) {
	if n, ok := c.defs[ref]; ok {
		return n, nil // converted, or being converted (a recursive schema)
	}
	if ref == "#" {
		return nil, notStrict("", "recursive $ref to the root")
	}
	rest, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, notStrict("", "$ref %q does not point into the schema", ref)
	}
	defsKey, name, ok := strings.Cut(rest, "/")
	if !ok || (defsKey != "$defs" && defsKey != "definitions") || strings.Contains(name, "/") || strings.Contains(name, "~") {
		return nil, notStrict("", "$ref %q does not name a definition", ref)
	}
	v, _ := c.root.get(defsKey)
	defs, _ := v.(*object)
	if defs == nil {
		return nil, notStrict("", "$ref %q does not resolve", ref)
	}
	def, ok := defs.get(name)
	if !ok {
		return nil, notStrict("", "$ref %q does not resolve", ref)
	}
	n := &nullNode{}
	c.defs[ref] = n
	got, err := c.schema(def, ref, depth, false)
	if err != nil {
		return nil, err
	}
	*n = *got
	return n, nil
}

// schema rewrites s (at path, depth objects deep) and returns where it made
// properties nullable.
func (c *converter) schema(s any, path string, depth int, root bool) (*nullNode, error) {
	o, ok := s.(*object)
	if !ok {
		return nil, notStrict(path, "schema is a JSON %s", jsonKind(s))
	}
	if depth > maxStrictDepth {
		return nil, notStrict(path, "nested deeper than %d levels", maxStrictDepth)
	}
	for _, k := range slices.Clone(o.keys) {
		switch {
		case keptKeywords[k], structuralKeywords[k]:
		case droppedKeywords[k]:
			o.del(k)
		default:
			return nil, notStrict(path, "keyword %q", k)
		}
	}
	if (o.has("$defs") || o.has("definitions")) && !root {
		return nil, notStrict(path, "$defs below the root")
	}

	if err := c.moveToDescription(o, path); err != nil {
		return nil, err
	}
	if v, ok := o.get("const"); ok {
		if o.has("enum") {
			return nil, notStrict(path, "both const and enum")
		}
		o.rename("const", "enum")
		o.set("enum", []any{v})
	}
	if v, ok := o.get("allOf"); ok {
		// A single-entry allOf is how some generators attach a description
		// to a $ref; more entries mean an intersection strict mode lacks.
		all, _ := v.([]any)
		if len(all) != 1 || o.has("anyOf") || o.has("oneOf") || o.has("$ref") {
			return nil, notStrict(path, "allOf")
		}
		o.rename("allOf", "anyOf")
	}
	if o.has("oneOf") {
		if o.has("anyOf") {
			return nil, notStrict(path, "both oneOf and anyOf")
		}
		// Strict mode has no oneOf; anyOf accepts the same values when the
		// variants exclude each other, as a tagged union's do.
		o.rename("oneOf", "anyOf")
	}

	node := &nullNode{}
	types, hasType, err := schemaTypes(o, path)
	if err != nil {
		return nil, err
	}

	if v, ok := o.get("$ref"); ok {
		ref, ok := v.(string)
		if !ok {
			return nil, notStrict(path, "$ref is not a string")
		}
		for _, k := range o.keys {
			if k != "$ref" && k != "description" && k != "title" {
				return nil, notStrict(path, "$ref beside %q", k)
			}
		}
		target, err := c.ref(ref, depth)
		if err != nil {
			return nil, err
		}
		node.alts = append(node.alts, target)
		if len(o.keys) > 1 {
			// Strict mode wants a $ref alone; keep the annotations on an
			// anyOf around it.
			o.del("$ref")
			wrapped := newObject()
			wrapped.set("$ref", ref)
			o.set("anyOf", []any{wrapped})
		}
		return node, nil
	}

	if v, ok := o.get("anyOf"); ok {
		variants, ok := v.([]any)
		if !ok || len(variants) == 0 {
			return nil, notStrict(path, "anyOf is not a list of schemas")
		}
		if hasType || o.has("enum") || o.has("properties") || o.has("items") {
			return nil, notStrict(path, "anyOf beside type constraints")
		}
		for i, variant := range variants {
			n, err := c.schema(variant, fmt.Sprintf("%s/anyOf/%d", path, i), depth, false)
			if err != nil {
				return nil, err
			}
			node.alts = append(node.alts, n)
		}
		return node, nil
	}

	if !hasType && !o.has("enum") {
		return nil, notStrict(path, "no type")
	}
	if types["object"] {
		if err := c.object(o, path, depth, root, node); err != nil {
			return nil, err
		}
	} else if o.has("properties") || o.has("additionalProperties") || o.has("required") {
		return nil, notStrict(path, "object keywords on a non-object type")
	}
	if types["array"] {
		items, ok := o.get("items")
		if !ok {
			return nil, notStrict(path, "array without items")
		}
		n, err := c.schema(items, path+"/items", depth, false)
		if err != nil {
			return nil, err
		}
		node.items = n
	} else if o.has("items") {
		return nil, notStrict(path, "items on a non-array type")
	}
	return node, nil
}

// object closes an object schema and makes its optional properties
// nullable.
func (c *converter) object(o *object, path string, depth int, root bool, node *nullNode) error {
	switch ap, ok := o.get("additionalProperties"); {
	case !ok:
		if !o.has("properties") && !root {
			return notStrict(path, "an object with no properties accepts any keys")
		}
		o.set("additionalProperties", false)
	case ap != false:
		return notStrict(path, "additionalProperties is not false")
	}
	propsV, ok := o.get("properties")
	if !ok {
		propsV = newObject()
		o.set("properties", propsV)
	}
	props, ok := propsV.(*object)
	if !ok {
		return notStrict(path, "properties is not an object")
	}
	required := map[string]bool{}
	if v, ok := o.get("required"); ok {
		list, ok := v.([]any)
		if !ok {
			return notStrict(path, "required is not a list")
		}
		for _, r := range list {
			if name, ok := r.(string); ok {
				required[name] = true
			}
		}
	}
	c.properties += len(props.keys)
	if c.properties > maxStrictProperties {
		return notStrict(path, "more than %d properties", maxStrictProperties)
	}
	all := make([]any, 0, len(props.keys))
	for _, name := range props.keys {
		all = append(all, name)
		ppath := path + "/properties/" + name
		p, err := c.schema(props.vals[name], ppath, depth+1, false)
		if err != nil {
			return err
		}
		pn := &nullProp{child: p}
		if isNullable(props.vals[name].(*object)) {
			pn.keep = true // null is one of the property's own values
		} else if !required[name] {
			props.vals[name] = makeNullable(props.vals[name].(*object))
			pn.strip = true
		}
		if node.props == nil {
			node.props = map[string]*nullProp{}
		}
		node.props[name] = pn
	}
	o.set("required", all)
	return nil
}

// moveToDescription turns "default" and formats strict mode lacks into
// words, so the model still learns of them.
func (c *converter) moveToDescription(o *object, path string) error {
	var notes []string
	if v, ok := o.get("format"); ok {
		f, ok := v.(string)
		if !ok {
			return notStrict(path, "format is not a string")
		}
		if !strictFormats[f] {
			notes = append(notes, "Format: "+f+".")
			o.del("format")
		}
	}
	if v, ok := o.get("default"); ok {
		if v != nil {
			notes = append(notes, "Default: "+jsonText(v)+".")
		}
		o.del("default")
	}
	if len(notes) == 0 {
		return nil
	}
	desc := ""
	if v, ok := o.get("description"); ok {
		s, ok := v.(string)
		if !ok {
			return notStrict(path, "description is not a string")
		}
		desc = strings.TrimSpace(s)
	}
	if desc != "" && !strings.HasSuffix(desc, ".") {
		desc += "."
	}
	if desc != "" {
		desc += " "
	}
	o.set("description", desc+strings.Join(notes, " "))
	return nil
}

// schemaTypes reads a schema's "type", a name or a list of names.
func schemaTypes(o *object, path string) (map[string]bool, bool, error) {
	v, ok := o.get("type")
	if !ok {
		return map[string]bool{}, false, nil
	}
	known := map[string]bool{"string": true, "number": true, "integer": true, "boolean": true, "object": true, "array": true, "null": true}
	types := map[string]bool{}
	add := func(t any) error {
		s, ok := t.(string)
		if !ok || !known[s] {
			return notStrict(path, "type %s", jsonText(t))
		}
		types[s] = true
		return nil
	}
	switch t := v.(type) {
	case []any:
		if len(t) == 0 {
			return nil, false, notStrict(path, "empty type list")
		}
		for _, e := range t {
			if err := add(e); err != nil {
				return nil, false, err
			}
		}
	default:
		if err := add(t); err != nil {
			return nil, false, err
		}
	}
	return types, true, nil
}

// isNullable reports whether a (converted) schema accepts null already.
func isNullable(o *object) bool {
	if v, ok := o.get("type"); ok {
		switch t := v.(type) {
		case string:
			return t == "null"
		case []any:
			return slices.Contains(t, any("null"))
		}
	}
	if v, ok := o.get("enum"); ok && !o.has("type") {
		if list, ok := v.([]any); ok && slices.Contains(list, nil) {
			return true
		}
	}
	if v, ok := o.get("anyOf"); ok {
		if list, ok := v.([]any); ok {
			for _, variant := range list {
				if vo, ok := variant.(*object); ok && !vo.has("$ref") && isNullable(vo) {
					return true
				}
			}
		}
	}
	return false
}

// makeNullable lets a (converted) schema accept null as well.
func makeNullable(o *object) *object {
	nullSchema := func() *object {
		n := newObject()
		n.set("type", "null")
		return n
	}
	if v, ok := o.get("type"); ok {
		switch t := v.(type) {
		case string:
			o.set("type", []any{t, "null"})
		case []any:
			o.set("type", append(t, "null"))
		}
		if e, ok := o.get("enum"); ok {
			if list, ok := e.([]any); ok {
				o.set("enum", append(list, nil))
			}
		}
		return o
	}
	if e, ok := o.get("enum"); ok {
		if list, ok := e.([]any); ok {
			o.set("enum", append(list, nil))
		}
		return o
	}
	if v, ok := o.get("anyOf"); ok {
		if list, ok := v.([]any); ok {
			o.set("anyOf", append(list, nullSchema()))
		}
		return o
	}
	// A bare $ref: wrap it, keeping its annotations outside.
	wrapped := newObject()
	for _, k := range o.keys {
		if k == "description" || k == "title" {
			wrapped.set(k, o.vals[k])
		}
	}
	inner := newObject()
	inner.set("$ref", o.vals["$ref"])
	wrapped.set("anyOf", []any{inner, nullSchema()})
	return wrapped
}

// nullNode records, for one schema, where the strict conversion made
// optional properties nullable, so the nulls a model sends for them can be
// removed again before the call. It may be cyclic (a recursive $ref).
type nullNode struct {
	props map[string]*nullProp // an object's properties
	items *nullNode            // an array's elements
	alts  []*nullNode          // the schemas of an anyOf or $ref: a value may match any
}

// nullProp is one property of an object.
type nullProp struct {
	strip bool // optional before the conversion: a null means "left out"
	keep  bool // nullable before the conversion: a null is a value
	child *nullNode
}

// empty reports whether no null is ever stripped under n.
func (n *nullNode) empty() bool {
	seen := map[*nullNode]bool{}
	var walk func(*nullNode) bool
	walk = func(n *nullNode) bool {
		if n == nil || seen[n] {
			return true
		}
		seen[n] = true
		for _, p := range n.props {
			if p.strip || !walk(p.child) {
				return false
			}
		}
		if !walk(n.items) {
			return false
		}
		for _, a := range n.alts {
			if !walk(a) {
				return false
			}
		}
		return true
	}
	return walk(n)
}

// expandAlts returns the nodes a value described by nodes may match: the nodes
// and, recursively, their alternatives.
func expandAlts(nodes []*nullNode) []*nullNode {
	var out []*nullNode
	seen := map[*nullNode]bool{}
	var add func(*nullNode)
	add = func(n *nullNode) {
		if n == nil || seen[n] {
			return
		}
		seen[n] = true
		out = append(out, n)
		for _, a := range n.alts {
			add(a)
		}
	}
	for _, n := range nodes {
		add(n)
	}
	return out
}

// stripNulls removes, at any depth, the properties the strict conversion
// made nullable and the model set to null. A property that some schema the
// value may match declares nullable itself keeps its null.
func stripNulls(args json.RawMessage, nulls *nullNode) (json.RawMessage, error) {
	if nulls == nil {
		return args, nil
	}
	v, err := decodeJSON(args)
	if err != nil {
		return nil, err
	}
	if !stripValue(v, []*nullNode{nulls}) {
		return args, nil
	}
	return marshalJSON(v)
}

// stripValue strips v in place and reports whether it changed.
func stripValue(v any, nodes []*nullNode) bool {
	nodes = expandAlts(nodes)
	if len(nodes) == 0 {
		return false
	}
	changed := false
	switch t := v.(type) {
	case *object:
		for _, k := range slices.Clone(t.keys) {
			strip, keep := false, false
			var children []*nullNode
			for _, n := range nodes {
				if p := n.props[k]; p != nil {
					strip = strip || p.strip
					keep = keep || p.keep
					if p.child != nil {
						children = append(children, p.child)
					}
				}
			}
			if t.vals[k] == nil {
				if strip && !keep {
					t.del(k)
					changed = true
				}
				continue
			}
			if len(children) > 0 && stripValue(t.vals[k], children) {
				changed = true
			}
		}
	case []any:
		var items []*nullNode
		for _, n := range nodes {
			if n.items != nil {
				items = append(items, n.items)
			}
		}
		if len(items) == 0 {
			return false
		}
		for _, e := range t {
			if stripValue(e, items) {
				changed = true
			}
		}
	}
	return changed
}
