package scripted

// This file holds the templates of a scenario's answers: the data they see,
// the functions they may call, and templated JSON values.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"text/template"

	"github.com/tidwall/gjson"
)

// TemplateData is what a scenario's templates see (respond.text, string
// values in respond.json and in call arguments).
type TemplateData struct {
	// Instructions are the request's instructions (its system or
	// developer message): what the agent was told, its memory included.
	Instructions string
	// User is the text of the first user message.
	User string
	// LastUser is the text of the last user message: what the user said
	// last, in a conversation of several turns (a session).
	LastUser string
	// LastInput is the text of the last input item: a message's text or a
	// function call output's output.
	LastInput string
	// LastOutput is the output of the last function call output item in the
	// input, or "" when there is none.
	LastOutput string
	// Outputs are the outputs of the function call output items after the
	// last model turn, in input order: the results of the calls the model
	// made last.
	Outputs []string
	// Turn is the model turn being answered, starting at 1.
	Turn int
	// CallIndex is the index of the call being rendered in respond.calls,
	// and 0 for text and json answers.
	CallIndex int
}

// templateFuncs are the functions templates may call:
//
//	field: {{field .LastOutput "risk.level"}} extracts a value from a JSON
//	       document with a gjson path (strings unquoted, objects as JSON).
//	json:  {{json .Outputs}} JSON-encodes a value.
//	join:  {{join .Outputs ", "}} joins strings.
//	after: {{after .LastOutput "Output:\n"}} is the text after the first
//	       marker (all of it when the marker is missing), e.g. the output of
//	       an exec_command result, to pass on to field.
//	before: {{before .User "# REMOVED"}} is the text before the first
//	       marker (all of it when the marker is missing).
//	match: {{match .LastOutput `(?m)^\+\+\+ b/(\S+)`}} is the first submatch of
//	       the first match of a Go regular expression (the whole match when
//	       it has no group), or "" when nothing matches, e.g. a file name or
//	       a line number in a command's output. Raw `...` strings spare the
//	       backslashes.
//	matches: {{matches .User `(?m)^(- .+)$` "\n"}} joins, with the
//	       separator, the distinct first submatches (whole matches when
//	       there is no group) of every match, in order: e.g. every bullet
//	       of a list.
//	sha256: {{sha256 .LastUser}} is the hex SHA-256 of a text, e.g. to show
//	       that a big message arrived whole ({{len .LastUser}} its bytes).
//	add:   {{add (match .LastInput `^ok (\d+)$`) 1}} is the sum of integers
//	       given as numbers or as decimal text ("" counts as 0), e.g. to
//	       count turns that a trimmed context no longer shows.
var templateFuncs = template.FuncMap{
	"add": add,
	"sha256": func(s string) string {
		sum := sha256.Sum256([]byte(s))
		return hex.EncodeToString(sum[:])
	},
	"after": func(s, marker string) string {
		if _, rest, ok := strings.Cut(s, marker); ok {
			return rest
		}
		return s
	},
	"field": func(doc, path string) string { return gjson.Get(doc, path).String() },
	"json": func(v any) (string, error) {
		b, err := marshal(v)
		return string(b), err
	},
	"join":    func(elems []string, sep string) string { return strings.Join(elems, sep) },
	"match":   match,
	"matches": matches,
	"before": func(s, marker string) string {
		before, _, _ := strings.Cut(s, marker)
		return before
	},
}

// patterns caches the compiled expressions of match: a scenario uses a
// few, on every request.
var patterns sync.Map // string → *regexp.Regexp

func compiled(fn, pattern string) (*regexp.Regexp, error) {
	re, ok := patterns.Load(pattern)
	if !ok {
		c, err := regexp.Compile(pattern)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", fn, err)
		}
		re, _ = patterns.LoadOrStore(pattern, c)
	}
	return re.(*regexp.Regexp), nil
}

func matches(s, pattern, sep string) (string, error) {
	re, err := compiled("matches", pattern)
	if err != nil {
		return "", err
	}
	var out []string
	seen := map[string]bool{}
	for _, m := range re.FindAllStringSubmatch(s, -1) {
		v := m[0]
		if len(m) > 1 {
			v = m[1]
		}
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return strings.Join(out, sep), nil
}

func match(s, pattern string) (string, error) {
	re, err := compiled("match", pattern)
	if err != nil {
		return "", err
	}
	m := re.FindStringSubmatch(s)
	switch {
	case m == nil:
		return "", nil
	case len(m) > 1:
		return m[1], nil
	}
	return m[0], nil
}

// parseTemplate parses text and executes it once on sample data, so a
// reference to a field TemplateData lacks fails when the scenario loads rather
// than when a request arrives. Other execution errors (an index out of range
// on empty sample data, say) depend on the request and are left for then.
func parseTemplate(where, text string) (*template.Template, error) {
	t, err := template.New(where).Funcs(templateFuncs).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	sample := TemplateData{Outputs: []string{}, Turn: 1}
	if err := t.Execute(&bytes.Buffer{}, sample); err != nil && strings.Contains(err.Error(), "can't evaluate field") {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return t, nil
}

func execTemplate(t *template.Template, data TemplateData) (string, error) {
	var b strings.Builder
	if err := t.Execute(&b, data); err != nil {
		return "", err
	}
	return b.String(), nil
}

// valueTemplate is a YAML/JSON value whose strings are templates.
type valueTemplate interface {
	render(data TemplateData) (any, error)
}

type stringValue struct{ t *template.Template }

func (v stringValue) render(d TemplateData) (any, error) { return execTemplate(v.t, d) }

type objectValue map[string]valueTemplate

func (v objectValue) render(d TemplateData) (any, error) {
	out := make(map[string]any, len(v))
	for k, e := range v {
		r, err := e.render(d)
		if err != nil {
			return nil, err
		}
		out[k] = r
	}
	return out, nil
}

type arrayValue []valueTemplate

func (v arrayValue) render(d TemplateData) (any, error) {
	out := make([]any, len(v))
	for i, e := range v {
		r, err := e.render(d)
		if err != nil {
			return nil, err
		}
		out[i] = r
	}
	return out, nil
}

type literalValue struct{ v any }

func (v literalValue) render(TemplateData) (any, error) { return v.v, nil }

// compileValue turns a decoded YAML or JSON value into a valueTemplate.
func compileValue(where string, v any) (valueTemplate, error) {
	switch v := v.(type) {
	case string:
		t, err := parseTemplate(where, v)
		if err != nil {
			return nil, err
		}
		return stringValue{t}, nil
	case map[string]any:
		out := make(objectValue, len(v))
		for k, e := range v {
			c, err := compileValue(where+"."+k, e)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case map[any]any: // YAML maps with non-string keys
		out := make(objectValue, len(v))
		for k, e := range v {
			key := fmt.Sprint(k)
			c, err := compileValue(where+"."+key, e)
			if err != nil {
				return nil, err
			}
			out[key] = c
		}
		return out, nil
	case []any:
		out := make(arrayValue, len(v))
		for i, e := range v {
			c, err := compileValue(fmt.Sprintf("%s[%d]", where, i), e)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case nil, bool, int, int64, uint64, float64, json.Number:
		return literalValue{v}, nil
	default:
		// Other YAML scalars (timestamps, for one) are kept as decoded;
		// encoding/json decides how they look.
		if _, err := marshal(v); err != nil {
			return nil, fmt.Errorf("%s: value of type %T cannot be JSON-encoded: %w", where, v, err)
		}
		return literalValue{v}, nil
	}
}

// marshal JSON-encodes v without escaping <, > and &, as a model would
// write them, and without encoding/json's trailing newline.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func add(terms ...any) (int, error) {
	sum := 0
	for _, t := range terms {
		switch v := t.(type) {
		case int:
			sum += v
		case string:
			v = strings.TrimSpace(v)
			if v == "" {
				continue
			}
			n, err := strconv.Atoi(v)
			if err != nil {
				return 0, fmt.Errorf("add: %q is not an integer", v)
			}
			sum += n
		default:
			return 0, fmt.Errorf("add: %v (%T) is not an integer", t, t)
		}
	}
	return sum, nil
}
