package agents

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"

	validator "github.com/santhosh-tekuri/jsonschema/v6"
)

// OutputType is an agent's structured output: a Go type whose strict JSON
// schema is sent to the model, and against which the model's final output
// is validated. Build one with OutputOf.
type OutputType struct {
	spec   OutputSpec
	schema *validator.Schema
	typ    reflect.Type
}

var nonNameChars = regexp.MustCompile(`[^a-zA-Z0-9_-]+`)

// OutputOf returns the OutputType of T, which must be a struct.
func OutputOf[T any]() (*OutputType, error) {
	t := reflect.TypeFor[T]()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	schema, err := StrictSchemaFor(t)
	if err != nil {
		return nil, fmt.Errorf("agents: output type: %w", err)
	}
	name := nonNameChars.ReplaceAllString(t.Name(), "_")
	if name == "" {
		name = "final_output"
	}
	sch, err := compileSchema(name, schema)
	if err != nil {
		return nil, err
	}
	return &OutputType{spec: OutputSpec{Name: name, Schema: schema, Strict: true}, schema: sch, typ: t}, nil
}

// MustOutput is OutputOf that panics on error.
func MustOutput[T any]() *OutputType {
	o, err := OutputOf[T]()
	if err != nil {
		panic(err)
	}
	return o
}

// Spec is what the model sees of the output type.
func (o *OutputType) Spec() OutputSpec { return o.spec }

// Validate checks that text is a JSON document of the output type: it
// matches the schema and decodes into the Go type with no unknown fields.
// It returns the compact JSON.
func (o *OutputType) Validate(text string) (json.RawMessage, error) {
	if err := validateJSON(o.schema, []byte(text)); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(text)))
	dec.DisallowUnknownFields()
	v := reflect.New(o.typ)
	if err := dec.Decode(v.Interface()); err != nil {
		return nil, fmt.Errorf("does not decode into %s: %w", o.typ, err)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(text)); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Decode unmarshals a final output of this agent into v.
func Decode[T any](output json.RawMessage) (T, error) {
	var v T
	err := json.Unmarshal(output, &v)
	return v, err
}
