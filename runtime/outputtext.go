package runtime

import "encoding/json"

// OutputText renders an agent's final output for a model to read (the
// calling agent's, of an agent tool; a guardrail's): the JSON document
// itself, or the plain text of a text output (a JSON string).
func OutputText(out json.RawMessage) string {
	var s string
	if json.Unmarshal(out, &s) == nil {
		return s
	}
	return string(out)
}
