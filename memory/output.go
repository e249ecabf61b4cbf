package memory

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Sentinel errors of a model's answer; an *OutputError wraps one.
var (
	// ErrNotJSON: the answer is not one JSON object (prose, a code fence,
	// trailing text).
	ErrNotJSON = errors.New("not a JSON object")
	// ErrFields: a field is missing, unknown, or not of its type.
	ErrFields = errors.New("wrong fields")
	// ErrBadSlug: rollout_slug is not lower-case words joined by hyphens.
	ErrBadSlug = errors.New("bad rollout_slug")
	// ErrTooLarge: a field is larger than its bound.
	ErrTooLarge = errors.New("too large")
	// ErrBadSkill: a skill's name or SKILL.md is not valid.
	ErrBadSkill = errors.New("bad skill")
	// ErrEmpty: some fields are empty and others not, or a required text
	// is empty.
	ErrEmpty = errors.New("empty field")
)

// OutputError is what is wrong with a model's answer: the phase, the field
// (when one is to blame), and one of the sentinel errors. Its message is
// written to be fed back to the model.
type OutputError struct {
	// Phase is 1 or 2.
	Phase int
	// Field names the field at fault, if one is.
	Field string
	// Err is one of ErrNotJSON, ErrFields, ErrBadSlug, ErrTooLarge,
	// ErrBadSkill, ErrEmpty.
	Err error
	// Detail says more.
	Detail string
}

func (e *OutputError) Error() string {
	msg := fmt.Sprintf("memory phase %d answer: %v", e.Phase, e.Err)
	if e.Field != "" {
		msg += " (" + e.Field + ")"
	}
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Unwrap returns the sentinel error.
func (e *OutputError) Unwrap() error { return e.Err }

// strictObject decodes answer, which must be exactly one JSON object with
// exactly the fields named (required lists those that must be there;
// every field must be one of allowed), into a map of raw values.
func strictObject(phase int, answer string, required, allowed []string) (map[string]json.RawMessage, error) {
	data := bytes.TrimSpace([]byte(answer))
	if len(data) == 0 || data[0] != '{' {
		return nil, &OutputError{Phase: phase, Err: ErrNotJSON, Detail: "the answer must be one JSON object and nothing else"}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var fields map[string]json.RawMessage
	if err := dec.Decode(&fields); err != nil {
		return nil, &OutputError{Phase: phase, Err: ErrNotJSON, Detail: err.Error()}
	}
	if dec.More() || dec.InputOffset() != int64(len(data)) {
		return nil, &OutputError{Phase: phase, Err: ErrNotJSON, Detail: "text follows the JSON object"}
	}
	for _, name := range slices.Sorted(mapsKeys(fields)) {
		if !slices.Contains(allowed, name) {
			return nil, &OutputError{Phase: phase, Field: name, Err: ErrFields, Detail: "unknown field; the fields are " + strings.Join(allowed, ", ")}
		}
	}
	for _, name := range required {
		if _, ok := fields[name]; !ok {
			return nil, &OutputError{Phase: phase, Field: name, Err: ErrFields, Detail: "missing field"}
		}
	}
	return fields, nil
}

func mapsKeys(m map[string]json.RawMessage) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// stringField decodes a field that must be a JSON string.
func stringField(phase int, fields map[string]json.RawMessage, name string) (string, error) {
	raw, ok := fields[name]
	if !ok {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", &OutputError{Phase: phase, Field: name, Err: ErrFields, Detail: "must be a string"}
	}
	return s, nil
}

// bounded checks a text against its bound.
func bounded(phase int, field, text string, max int) error {
	if len(text) > max {
		return &OutputError{Phase: phase, Field: field, Err: ErrTooLarge, Detail: fmt.Sprintf("%d bytes, at most %d", len(text), max)}
	}
	return nil
}
