package agents_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/troupe-dev/troupe/agents"
)

type flat struct {
	Name  string `json:"name"`
	Count int    `json:"count,omitempty"`
}

type nested struct {
	Items []flat   `json:"items"`
	Tags  []string `json:"tags,omitempty"`
	Inner *flat    `json:"inner,omitempty"`
	Level string   `json:"level" jsonschema:"enum=a,enum=b"`
	Maybe string   `json:"maybe,omitempty" jsonschema:"enum=x,enum=y"`
}

type withMap struct {
	M map[string]int `json:"m"`
}

type withAny struct {
	V any `json:"v"`
}

// checkStrict walks a schema and fails on any object that is not strict.
func checkStrict(t *testing.T, path string, s map[string]any) {
	t.Helper()
	if props, ok := s["properties"].(map[string]any); ok {
		if s["additionalProperties"] != false {
			t.Errorf("%s: additionalProperties = %v, want false", path, s["additionalProperties"])
		}
		req := map[string]bool{}
		for _, r := range s["required"].([]any) {
			req[r.(string)] = true
		}
		for name, p := range props {
			if !req[name] {
				t.Errorf("%s: property %s not required", path, name)
			}
			checkStrict(t, path+"/"+name, p.(map[string]any))
		}
	}
	if items, ok := s["items"].(map[string]any); ok {
		checkStrict(t, path+"/items", items)
	}
	if list, ok := s["anyOf"].([]any); ok {
		for _, sub := range list {
			checkStrict(t, path+"/anyOf", sub.(map[string]any))
		}
	}
}

func TestStrictSchemaFor(t *testing.T) {
	tests := []struct {
		name     string
		typ      reflect.Type
		wantErr  error
		nullable []string // top-level properties that must accept null
		required []string // top-level properties that must not accept null
	}{
		{"flat", reflect.TypeFor[flat](), nil, []string{"count"}, []string{"name"}},
		{"pointer to struct", reflect.TypeFor[*flat](), nil, []string{"count"}, []string{"name"}},
		{"nested", reflect.TypeFor[nested](), nil, []string{"tags", "inner", "maybe"}, []string{"items", "level"}},
		{"map rejected", reflect.TypeFor[withMap](), agents.ErrSchema, nil, nil},
		{"any rejected", reflect.TypeFor[withAny](), agents.ErrSchema, nil, nil},
		{"non-struct rejected", reflect.TypeFor[string](), agents.ErrSchema, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := agents.StrictSchemaFor(tc.typ)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var s map[string]any
			if err := json.Unmarshal(raw, &s); err != nil {
				t.Fatal(err)
			}
			if _, ok := s["$schema"]; ok {
				t.Error("$schema kept")
			}
			checkStrict(t, "#", s)
			props := s["properties"].(map[string]any)
			for _, n := range tc.nullable {
				if !acceptsNull(props[n].(map[string]any)) {
					t.Errorf("optional %s does not accept null: %v", n, props[n])
				}
			}
			for _, n := range tc.required {
				if acceptsNull(props[n].(map[string]any)) {
					t.Errorf("required %s accepts null: %v", n, props[n])
				}
			}
		})
	}
}

func acceptsNull(s map[string]any) bool {
	switch ty := s["type"].(type) {
	case []any:
		for _, x := range ty {
			if x == "null" {
				return true
			}
		}
	case string:
		return ty == "null"
	}
	if list, ok := s["anyOf"].([]any); ok {
		for _, sub := range list {
			if acceptsNull(sub.(map[string]any)) {
				return true
			}
		}
	}
	return false
}

func TestMakeStrictRejectsNonObjectRoot(t *testing.T) {
	for _, in := range []string{`{"type":"string"}`, `[1]`, `nope`} {
		if _, err := agents.MakeStrict(json.RawMessage(in)); err == nil {
			t.Errorf("MakeStrict(%s) succeeded", in)
		}
	}
}

func TestOutputValidate(t *testing.T) {
	out := agents.MustOutput[nested]()
	tests := []struct {
		name, doc string
		ok        bool
	}{
		{"valid", `{"items":[{"name":"a","count":null}],"tags":null,"inner":null,"level":"a","maybe":null}`, true},
		{"enum violated", `{"items":[],"tags":null,"inner":null,"level":"zzz","maybe":null}`, false},
		{"missing required", `{"items":[],"tags":null,"inner":null,"maybe":null}`, false},
		{"unknown field", `{"items":[],"tags":null,"inner":null,"level":"a","maybe":null,"extra":1}`, false},
		{"not JSON", `{"items":`, false},
		{"text", `Sure! Here is the result.`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := out.Validate(tc.doc)
			if (err == nil) != tc.ok {
				t.Errorf("Validate err = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}
