package mcp

import (
	"bytes"
	"encoding/json"
	"testing"
)

// compact normalizes JSON text for comparison, keeping key order.
func compact(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		t.Fatalf("bad JSON in test: %v\n%s", err, s)
	}
	return b.String()
}

func TestConvertSchema(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		want   string
		strict bool
	}{{
		name:   "empty schema is a tool without arguments",
		in:     `{}`,
		want:   `{"type":"object","properties":{},"additionalProperties":false,"required":[]}`,
		strict: true,
	}, {
		name:   "null schema is a tool without arguments",
		in:     `null`,
		want:   `{"type":"object","properties":{},"additionalProperties":false,"required":[]}`,
		strict: true,
	}, {
		name: "optional becomes nullable and required, order kept, $schema dropped",
		in: `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
			"properties":{"z":{"type":"string"},"a":{"type":"integer","description":"count"}},"required":["z"]}`,
		want: `{"type":"object","properties":{"z":{"type":"string"},"a":{"type":["integer","null"],"description":"count"}},
			"additionalProperties":false,"required":["z","a"]}`,
		strict: true,
	}, {
		name: "default moves into the description",
		in: `{"type":"object","properties":{
			"duration":{"default":10,"description":"Duration in seconds","type":"number"},
			"flag":{"type":"boolean","default":false},
			"name":{"type":"string","default":"x","description":"Name."}}}`,
		want: `{"type":"object","properties":{
			"duration":{"description":"Duration in seconds. Default: 10.","type":["number","null"]},
			"flag":{"type":["boolean","null"],"description":"Default: false."},
			"name":{"type":["string","null"],"description":"Name. Default: \"x\"."}},
			"additionalProperties":false,"required":["duration","flag","name"]}`,
		strict: true,
	}, {
		name: "enum gains null with its type",
		in:   `{"type":"object","properties":{"kind":{"type":"string","enum":["a","b"]},"lit":{"enum":[1,2]}}}`,
		want: `{"type":"object","properties":{"kind":{"type":["string","null"],"enum":["a","b",null]},"lit":{"enum":[1,2,null]}},
			"additionalProperties":false,"required":["kind","lit"]}`,
		strict: true,
	}, {
		name:   "const becomes enum",
		in:     `{"type":"object","properties":{"k":{"const":"v"}},"required":["k"]}`,
		want:   `{"type":"object","properties":{"k":{"enum":["v"]}},"additionalProperties":false,"required":["k"]}`,
		strict: true,
	}, {
		name: "nested objects and arrays of objects",
		in: `{"type":"object","properties":{
			"user":{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name"]},
			"tags":{"type":"array","items":{"type":"object","properties":{"k":{"type":"string"},"v":{"type":"string"}},"required":["k"]},"maxItems":5}
			},"required":["user","tags"]}`,
		want: `{"type":"object","properties":{
			"user":{"type":"object","properties":{"name":{"type":"string"},"age":{"type":["integer","null"]}},"required":["name","age"],"additionalProperties":false},
			"tags":{"type":"array","items":{"type":"object","properties":{"k":{"type":"string"},"v":{"type":["string","null"]}},"required":["k","v"],"additionalProperties":false},"maxItems":5}
			},"required":["user","tags"],"additionalProperties":false}`,
		strict: true,
	}, {
		name: "optional nested object becomes nullable",
		in:   `{"type":"object","properties":{"o":{"type":"object","properties":{"x":{"type":"number"}},"required":["x"]}}}`,
		want: `{"type":"object","properties":{"o":{"type":["object","null"],"properties":{"x":{"type":"number"}},"required":["x"],"additionalProperties":false}},
			"additionalProperties":false,"required":["o"]}`,
		strict: true,
	}, {
		name: "already nullable stays as it is",
		in:   `{"type":"object","properties":{"a":{"type":["string","null"]},"b":{"anyOf":[{"type":"string"},{"type":"null"}],"default":null}}}`,
		want: `{"type":"object","properties":{"a":{"type":["string","null"]},"b":{"anyOf":[{"type":"string"},{"type":"null"}]}},
			"additionalProperties":false,"required":["a","b"]}`,
		strict: true,
	}, {
		name: "anyOf gains a null variant; nested oneOf becomes anyOf",
		in:   `{"type":"object","properties":{"v":{"oneOf":[{"type":"string"},{"type":"object","properties":{"n":{"type":"number"}}}]}}}`,
		want: `{"type":"object","properties":{"v":{"anyOf":[{"type":"string"},{"type":"object","properties":{"n":{"type":["number","null"]}},"additionalProperties":false,"required":["n"]},{"type":"null"}]}},
			"additionalProperties":false,"required":["v"]}`,
		strict: true,
	}, {
		name: "refs to $defs, optional ref wrapped, ref with description wrapped",
		in: `{"type":"object","$defs":{"P":{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"}},"required":["x"]}},
			"properties":{"a":{"$ref":"#/$defs/P"},"b":{"$ref":"#/$defs/P","description":"second"},"c":{"$ref":"#/$defs/P"}},"required":["a","b"]}`,
		want: `{"type":"object","$defs":{"P":{"type":"object","properties":{"x":{"type":"number"},"y":{"type":["number","null"]}},"required":["x","y"],"additionalProperties":false}},
			"properties":{"a":{"$ref":"#/$defs/P"},"b":{"description":"second","anyOf":[{"$ref":"#/$defs/P"}]},"c":{"anyOf":[{"$ref":"#/$defs/P"},{"type":"null"}]}},
			"required":["a","b","c"],"additionalProperties":false}`,
		strict: true,
	}, {
		name: "recursive definition",
		in: `{"type":"object","definitions":{"N":{"type":"object","properties":{"v":{"type":"string"},"next":{"$ref":"#/definitions/N"}},"required":["v"]}},
			"properties":{"head":{"$ref":"#/definitions/N"}},"required":["head"]}`,
		want: `{"type":"object","definitions":{"N":{"type":"object","properties":{"v":{"type":"string"},"next":{"anyOf":[{"$ref":"#/definitions/N"},{"type":"null"}]}},"required":["v","next"],"additionalProperties":false}},
			"properties":{"head":{"$ref":"#/definitions/N"}},"required":["head"],"additionalProperties":false}`,
		strict: true,
	}, {
		name: "unsupported format moves into the description",
		in:   `{"type":"object","properties":{"u":{"type":"string","format":"uri"},"d":{"type":"string","format":"date-time"}},"required":["u","d"]}`,
		want: `{"type":"object","properties":{"u":{"type":"string","description":"Format: uri."},"d":{"type":"string","format":"date-time"}},
			"required":["u","d"],"additionalProperties":false}`,
		strict: true,
	}, {
		name:   "missing properties and type are normalized, non-strict keeps the rest",
		in:     `{"additionalProperties":true}`,
		want:   `{"additionalProperties":true,"type":"object","properties":{}}`,
		strict: false,
	}, {
		name:   "additionalProperties schema",
		in:     `{"type":"object","properties":{"m":{"type":"object","additionalProperties":{"type":"string"}}}}`,
		want:   `{"type":"object","properties":{"m":{"type":"object","additionalProperties":{"type":"string"}}}}`,
		strict: false,
	}, {
		name:   "free-form nested object",
		in:     `{"type":"object","properties":{"m":{"type":"object"}}}`,
		want:   `{"type":"object","properties":{"m":{"type":"object"}}}`,
		strict: false,
	}, {
		name:   "patternProperties",
		in:     `{"type":"object","properties":{},"patternProperties":{"^x":{"type":"string"}}}`,
		want:   `{"type":"object","properties":{},"patternProperties":{"^x":{"type":"string"}}}`,
		strict: false,
	}, {
		name:   "oneOf at the root",
		in:     `{"type":"object","properties":{},"oneOf":[{"required":["a"]},{"required":["b"]}]}`,
		want:   `{"type":"object","properties":{},"oneOf":[{"required":["a"]},{"required":["b"]}]}`,
		strict: false,
	}, {
		name:   "unresolvable $ref",
		in:     `{"type":"object","properties":{"a":{"$ref":"#/$defs/Missing"}}}`,
		want:   `{"type":"object","properties":{"a":{"$ref":"#/$defs/Missing"}}}`,
		strict: false,
	}, {
		name:   "external $ref",
		in:     `{"type":"object","properties":{"a":{"$ref":"https://example.com/s.json"}}}`,
		want:   `{"type":"object","properties":{"a":{"$ref":"https://example.com/s.json"}}}`,
		strict: false,
	}, {
		name:   "property without a type",
		in:     `{"type":"object","properties":{"any":{"description":"anything"}}}`,
		want:   `{"type":"object","properties":{"any":{"description":"anything"}}}`,
		strict: false,
	}, {
		name:   "array without items",
		in:     `{"type":"object","properties":{"l":{"type":"array"}}}`,
		want:   `{"type":"object","properties":{"l":{"type":"array"}}}`,
		strict: false,
	}, {
		name:   "allOf intersection",
		in:     `{"type":"object","properties":{"a":{"allOf":[{"type":"string"},{"minLength":2}]}}}`,
		want:   `{"type":"object","properties":{"a":{"allOf":[{"type":"string"},{"minLength":2}]}}}`,
		strict: false,
	}, {
		name:   "unknown keyword",
		in:     `{"type":"object","properties":{"a":{"type":"array","items":{"type":"string"},"uniqueItems":true}}}`,
		want:   `{"type":"object","properties":{"a":{"type":"array","items":{"type":"string"},"uniqueItems":true}}}`,
		strict: false,
	}, {
		name:   "if/then/else",
		in:     `{"type":"object","properties":{"a":{"type":"string"}},"if":{"required":["a"]},"then":{}}`,
		want:   `{"type":"object","properties":{"a":{"type":"string"}},"if":{"required":["a"]},"then":{}}`,
		strict: false,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, strict, err := ConvertSchema(json.RawMessage(tt.in))
			if err != nil {
				t.Fatalf("ConvertSchema: %v", err)
			}
			if strict != tt.strict {
				t.Errorf("strict = %v, want %v", strict, tt.strict)
			}
			// Key order matters for the model, so the comparison is textual.
			if g, w := compact(t, string(got)), compact(t, tt.want); !jsonEqualOrdered(g, w) {
				t.Errorf("schema\n got: %s\nwant: %s", g, w)
			}
		})
	}
}

// jsonEqualOrdered compares two JSON texts as values, except that the
// order of "properties" and "required" entries must match.
func jsonEqualOrdered(a, b string) bool {
	va, err1 := decodeJSON([]byte(a))
	vb, err2 := decodeJSON([]byte(b))
	if err1 != nil || err2 != nil {
		return false
	}
	return sameValue(va, vb, "")
}

func sameValue(a, b any, key string) bool {
	switch ta := a.(type) {
	case *object:
		tb, ok := b.(*object)
		if !ok || len(ta.keys) != len(tb.keys) {
			return false
		}
		if key == "properties" {
			for i := range ta.keys {
				if ta.keys[i] != tb.keys[i] {
					return false
				}
			}
		}
		for _, k := range ta.keys {
			vb, ok := tb.get(k)
			if !ok || !sameValue(ta.vals[k], vb, k) {
				return false
			}
		}
		return true
	case []any:
		tb, ok := b.([]any)
		if !ok || len(ta) != len(tb) {
			return false
		}
		for i := range ta {
			if !sameValue(ta[i], tb[i], "") {
				return false
			}
		}
		return true
	default:
		return a == b
	}
}

func TestConvertSchemaErrors(t *testing.T) {
	for _, in := range []string{`{`, `[1]`, `"x"`, `false`, `{"type":"string"}`, `{"type":["object","null"]}`} {
		t.Run(in, func(t *testing.T) {
			if _, _, err := ConvertSchema(json.RawMessage(in)); err == nil {
				t.Errorf("ConvertSchema(%s) = nil error", in)
			}
		})
	}
}

func TestStripNulls(t *testing.T) {
	schema := `{"type":"object","$defs":{"N":{"type":"object","properties":{"v":{"type":"string"},"next":{"$ref":"#/$defs/N"}},"required":["v"]}},
		"properties":{
		"req":{"type":"string"},
		"opt":{"type":"string"},
		"nullable":{"type":["string","null"]},
		"obj":{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"}},"required":["x"]},
		"list":{"type":"array","items":{"type":"object","properties":{"k":{"type":"string"},"v":{"type":"string"}},"required":["k"]}},
		"either":{"anyOf":[{"type":"object","properties":{"a":{"type":"string"}}},{"type":"object","properties":{"a":{"type":["string","null"]}},"required":["a"]}]},
		"chain":{"$ref":"#/$defs/N"}
		},"required":["req","nullable","obj","list","either","chain"]}`
	_, strict, nulls, err := convertSchema(json.RawMessage(schema))
	if err != nil || !strict {
		t.Fatalf("convertSchema: strict=%v err=%v", strict, err)
	}
	tests := []struct{ name, in, want string }{
		{"top-level optional null", `{"req":null,"opt":null,"nullable":null}`, `{"req":null,"nullable":null}`},
		{"values stay", `{"opt":"x","obj":{"x":1,"y":2}}`, `{"opt":"x","obj":{"x":1,"y":2}}`},
		{"nested", `{"obj":{"x":1,"y":null}}`, `{"obj":{"x":1}}`},
		{"array elements", `{"list":[{"k":"a","v":null},{"k":"b","v":"c"},{"k":null,"v":null}]}`, `{"list":[{"k":"a"},{"k":"b","v":"c"},{"k":null}]}`},
		{"anyOf where a variant declares null keeps it", `{"either":{"a":null}}`, `{"either":{"a":null}}`},
		{"recursive ref", `{"chain":{"v":"1","next":{"v":"2","next":null}}}`, `{"chain":{"v":"1","next":{"v":"2"}}}`},
		{"big numbers survive", `{"opt":null,"req":"x","n":12345678901234567890.5}`, `{"req":"x","n":12345678901234567890.5}`},
		{"html characters survive", `{"opt":null,"req":"<a&b>"}`, `{"req":"<a&b>"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := stripNulls(json.RawMessage(tt.in), nulls)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != compact(t, tt.want) {
				t.Errorf("stripNulls(%s)\n got: %s\nwant: %s", tt.in, got, compact(t, tt.want))
			}
		})
	}
}

func TestStripNullsWithoutNullableProperties(t *testing.T) {
	_, strict, nulls, err := convertSchema(json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`))
	if err != nil || !strict {
		t.Fatalf("convertSchema: strict=%v err=%v", strict, err)
	}
	if nulls != nil {
		t.Fatalf("nulls = %+v, want nil when nothing was made nullable", nulls)
	}
	in := `{ "a" : null }`
	got, err := stripNulls(json.RawMessage(in), nulls)
	if err != nil || string(got) != in {
		t.Errorf("stripNulls = %s, %v; want the arguments untouched", got, err)
	}
}

func TestToolName(t *testing.T) {
	long := "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz"
	tests := []struct{ prefix, remote, want string }{
		{"", "echo", "echo"},
		{"gh_", "create-issue", "gh_create-issue"},
		{"fs.", "read.file", "fs_read_file"},
		{"", "día/ñ", "d_a__"},
		{"", long, long[:64]},
	}
	for _, tt := range tests {
		if got := toolName(tt.prefix, tt.remote); got != tt.want {
			t.Errorf("toolName(%q, %q) = %q, want %q", tt.prefix, tt.remote, got, tt.want)
		}
	}
}
