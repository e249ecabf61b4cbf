package agents

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"

	"github.com/invopop/jsonschema"
	validator "github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

var englishPrinter = message.NewPrinter(language.English)

// ErrSchema reports a Go type that cannot be described by an OpenAI-strict
// JSON schema (for example a map, or an interface field).
var ErrSchema = errors.New("agents: type has no strict JSON schema")

// StrictSchemaFor returns the OpenAI-strict JSON schema of t's type.
//
// The schema comes from invopop/jsonschema (so `json` and `jsonschema`
// struct tags apply) and is then made strict: every object has
// additionalProperties false and lists all its properties as required, and
// properties that were optional (omitempty) become nullable. The root must
// be a struct. Maps and untyped fields are rejected with ErrSchema, because
// strict mode cannot express them.
func StrictSchemaFor(t reflect.Type) (json.RawMessage, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("%w: %s is a %s, want a struct", ErrSchema, t, t.Kind())
	}
	r := jsonschema.Reflector{DoNotReference: true, ExpandedStruct: true, Anonymous: true}
	raw, err := json.Marshal(r.ReflectFromType(t))
	if err != nil {
		return nil, fmt.Errorf("agents: schema of %s: %w", t, err)
	}
	return MakeStrict(raw)
}

// MakeStrict rewrites a JSON schema into OpenAI's strict subset, as
// StrictSchemaFor describes. It is exported for tools whose schema is
// written by hand.
func MakeStrict(schema json.RawMessage) (json.RawMessage, error) {
	var root map[string]any
	if err := json.Unmarshal(schema, &root); err != nil {
		return nil, fmt.Errorf("agents: schema is not a JSON object: %w", err)
	}
	delete(root, "$schema")
	delete(root, "$id")
	if root["type"] != "object" {
		return nil, fmt.Errorf("%w: the root must be an object, got type %v", ErrSchema, root["type"])
	}
	if err := strictify(root, "#"); err != nil {
		return nil, err
	}
	out, err := json.Marshal(root)
	if err != nil {
		return nil, fmt.Errorf("agents: schema: %w", err)
	}
	return out, nil
}

func strictify(s map[string]any, path string) error {
	if one, ok := s["oneOf"]; ok { // strict mode knows anyOf only
		s["anyOf"] = one
		delete(s, "oneOf")
	}
	if _, ok := s["additionalProperties"].(map[string]any); ok {
		return fmt.Errorf("%w: %s is a map; strict schemas allow only fixed properties", ErrSchema, path)
	}
	_, hasType := s["type"]
	_, hasAny := s["anyOf"]
	_, hasRef := s["$ref"]
	_, hasEnum := s["enum"]
	_, hasConst := s["const"]
	if !hasType && !hasAny && !hasRef && !hasEnum && !hasConst {
		return fmt.Errorf("%w: %s has no type (an interface or any field?)", ErrSchema, path)
	}
	if props, ok := s["properties"].(map[string]any); ok || s["type"] == "object" {
		s["additionalProperties"] = false
		required := map[string]bool{}
		if req, ok := s["required"].([]any); ok {
			for _, r := range req {
				if name, ok := r.(string); ok {
					required[name] = true
				}
			}
		}
		names := make([]string, 0, len(props))
		for name := range props {
			names = append(names, name)
		}
		sort.Strings(names)
		all := make([]any, 0, len(names))
		for _, name := range names {
			ps, ok := props[name].(map[string]any)
			if !ok {
				return fmt.Errorf("%w: %s/properties/%s is not a schema object", ErrSchema, path, name)
			}
			if err := strictify(ps, path+"/properties/"+name); err != nil {
				return err
			}
			if !required[name] {
				makeNullable(ps)
			}
			all = append(all, name)
		}
		if props == nil {
			s["properties"] = map[string]any{}
		}
		s["required"] = all
	}
	if items, ok := s["items"].(map[string]any); ok {
		if err := strictify(items, path+"/items"); err != nil {
			return err
		}
	}
	for _, key := range []string{"anyOf", "allOf"} {
		if list, ok := s[key].([]any); ok {
			for i, sub := range list {
				if m, ok := sub.(map[string]any); ok {
					if err := strictify(m, fmt.Sprintf("%s/%s/%d", path, key, i)); err != nil {
						return err
					}
				}
			}
		}
	}
	for _, key := range []string{"$defs", "definitions"} {
		if defs, ok := s[key].(map[string]any); ok {
			for name, sub := range defs {
				if m, ok := sub.(map[string]any); ok {
					if err := strictify(m, path+"/"+key+"/"+name); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// makeNullable lets an optional property be null, which is how strict mode
// spells "may be absent".
func makeNullable(s map[string]any) {
	switch t := s["type"].(type) {
	case string:
		if t != "null" {
			s["type"] = []any{t, "null"}
		}
	case []any:
		for _, x := range t {
			if x == "null" {
				return
			}
		}
		s["type"] = append(t, "null")
	default:
		if list, ok := s["anyOf"].([]any); ok {
			s["anyOf"] = append(list, map[string]any{"type": "null"})
		}
	}
	if enum, ok := s["enum"].([]any); ok {
		s["enum"] = append(enum, nil)
	}
}

// compileSchema compiles a JSON schema for validation.
func compileSchema(name string, schema json.RawMessage) (*validator.Schema, error) {
	doc, err := validator.UnmarshalJSON(bytesReader(schema))
	if err != nil {
		return nil, fmt.Errorf("agents: schema %s: %w", name, err)
	}
	c := validator.NewCompiler()
	url := "mem://" + name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("agents: schema %s: %w", name, err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("agents: schema %s: %w", name, err)
	}
	return sch, nil
}

// validateJSON checks that data is one JSON value matching sch.
func validateJSON(sch *validator.Schema, data []byte) error {
	v, err := validator.UnmarshalJSON(bytesReader(data))
	if err != nil {
		return fmt.Errorf("not valid JSON: %w", err)
	}
	if err := sch.Validate(v); err != nil {
		var ve *validator.ValidationError
		if errors.As(err, &ve) {
			return errors.New(flattenValidation(ve))
		}
		return err
	}
	return nil
}

// flattenValidation renders the leaf causes of a validation error, one per
// line, each with its JSON pointer, so a model can act on it.
func flattenValidation(ve *validator.ValidationError) string {
	var lines []string
	var walk func(e *validator.ValidationError)
	walk = func(e *validator.ValidationError) {
		if len(e.Causes) == 0 {
			loc := "/" + joinPath(e.InstanceLocation)
			lines = append(lines, fmt.Sprintf("at %s: %s", loc, e.ErrorKind.LocalizedString(englishPrinter)))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	sort.Strings(lines)
	out := ""
	for i, l := range lines {
		if i > 0 {
			out += "; "
		}
		out += l
	}
	return out
}

func joinPath(p []string) string {
	s := ""
	for i, x := range p {
		if i > 0 {
			s += "/"
		}
		s += x
	}
	return s
}
