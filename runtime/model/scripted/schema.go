package scripted

// This file checks JSON schemas sent in strict mode (strict function tools
// and strict structured outputs) the way OpenAI does, with its messages, so a
// schema the real API would refuse is refused offline too.

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// strictSchemaError returns OpenAI's complaint about a strict schema, or ""
// when the schema is acceptable. Every object, at any depth (properties,
// items, anyOf, allOf, $defs, definitions), must set additionalProperties to
// false, have properties, and list every property in required; the root must
// be an object. Keys are visited in document order, so the first problem
// reported is the one a reader meets first.
func strictSchemaError(raw json.RawMessage) string {
	root := gjson.ParseBytes(raw)
	if !isObjectSchema(root) {
		typ := "None"
		if t := child(root, "type"); t.Exists() {
			typ = t.String()
		}
		return fmt.Sprintf(`schema must be a JSON Schema of 'type: "object"', got 'type: "%s"'.`, typ)
	}
	return checkStrict(root, nil)
}

func checkStrict(s gjson.Result, path []string) string {
	if !s.IsObject() {
		return ""
	}
	if isObjectSchema(s) {
		ctx := contextString(path)
		if ap := child(s, "additionalProperties"); !ap.Exists() || ap.Type != gjson.False {
			return fmt.Sprintf("In context=%s, 'additionalProperties' is required to be supplied and to be false.", ctx)
		}
		props := child(s, "properties")
		if !props.IsObject() {
			return fmt.Sprintf("In context=%s, object schema missing properties.", ctx)
		}
		required := map[string]bool{}
		for _, r := range child(s, "required").Array() {
			required[r.String()] = true
		}
		var msg string
		props.ForEach(func(k, _ gjson.Result) bool {
			if !required[k.String()] {
				msg = fmt.Sprintf("In context=%s, 'required' is required to be supplied and to be an array "+
					"including every key in properties. Missing '%s'.", ctx, k.String())
				return false
			}
			return true
		})
		if msg != "" {
			return msg
		}
		if msg := eachMember(props, path, "properties"); msg != "" {
			return msg
		}
	}
	if items := child(s, "items"); items.IsObject() {
		if msg := checkStrict(items, appendPath(path, "items")); msg != "" {
			return msg
		}
	} else if items.IsArray() {
		if msg := eachElement(items, path, "items"); msg != "" {
			return msg
		}
	}
	for _, key := range []string{"anyOf", "allOf", "prefixItems"} {
		if msg := eachElement(child(s, key), path, key); msg != "" {
			return msg
		}
	}
	for _, key := range []string{"$defs", "definitions"} {
		if msg := eachMember(child(s, key), path, key); msg != "" {
			return msg
		}
	}
	return ""
}

// eachMember checks the schemas that are the values of an object such as
// properties or $defs.
func eachMember(obj gjson.Result, path []string, key string) string {
	var msg string
	if !obj.IsObject() {
		return ""
	}
	obj.ForEach(func(k, v gjson.Result) bool {
		msg = checkStrict(v, appendPath(path, key, k.String()))
		return msg == ""
	})
	return msg
}

// eachElement checks the schemas of an array such as anyOf.
func eachElement(arr gjson.Result, path []string, key string) string {
	if !arr.IsArray() {
		return ""
	}
	for i, v := range arr.Array() {
		if msg := checkStrict(v, appendPath(path, key, strconv.Itoa(i))); msg != "" {
			return msg
		}
	}
	return ""
}

func appendPath(path []string, elems ...string) []string {
	return append(append([]string(nil), path...), elems...)
}

// isObjectSchema reports whether s describes an object: type "object" (alone
// or in a type list), or no type but properties.
func isObjectSchema(s gjson.Result) bool {
	if !s.IsObject() {
		return false
	}
	t := child(s, "type")
	switch {
	case t.Type == gjson.String:
		return t.String() == "object"
	case t.IsArray():
		for _, e := range t.Array() {
			if e.String() == "object" {
				return true
			}
		}
		return false
	default:
		return !t.Exists() && child(s, "properties").IsObject()
	}
}

// child returns the value of key in obj. It compares keys exactly instead of
// using a gjson path, in which characters of property names could be special.
func child(obj gjson.Result, key string) gjson.Result {
	var found gjson.Result
	if !obj.IsObject() {
		return found
	}
	obj.ForEach(func(k, v gjson.Result) bool {
		if k.String() == key {
			found = v
			return false
		}
		return true
	})
	return found
}

// contextString writes a path the way OpenAI's messages do: as a Python
// tuple, e.g. () or ('properties', 'address').
func contextString(path []string) string {
	quoted := make([]string, len(path))
	for i, p := range path {
		quoted[i] = "'" + p + "'"
	}
	switch len(path) {
	case 0:
		return "()"
	case 1:
		return "(" + quoted[0] + ",)"
	default:
		return "(" + strings.Join(quoted, ", ") + ")"
	}
}
