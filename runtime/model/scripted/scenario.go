package scripted

// This file holds the scenario: the rules a Server answers with, how they are
// read from YAML or JSON, and how they are checked and compiled before use.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
	"text/template"
	"time"
	"unicode"

	"gopkg.in/yaml.v3"
)

// Scenario is the script a Server follows: an ordered list of rules. For each
// request the first rule whose Match holds answers it.
type Scenario struct {
	// Intents name what a user may ask for, so rules can match a request
	// by what its user message means (Match.Intent) rather than by its
	// exact wording. Each intent is a list of alternatives, any of which
	// will do; an alternative is a space-separated list of terms, all of
	// which must appear in the message as words, in any order; a term is
	// one or more synonyms separated by "|", any of which will do; a
	// synonym ending in "*" is a prefix. Matching ignores case. For
	// example, with
	//
	//	intents:
	//	  fix: ["fix|repair|patch"]
	//	  pipeline: ["every|all deal|deals pipeline"]
	//
	// "Please repair it" has the intent fix, and "Review all the deals in
	// the pipeline" the intent pipeline.
	Intents map[string][]string `yaml:"intents,omitempty" json:"intents,omitempty"`
	// Rules are evaluated in order; the first match wins.
	Rules []Rule `yaml:"rules" json:"rules"`
}

// Rule pairs a condition on the request with the answer to give.
type Rule struct {
	// Name identifies the rule in errors and in the Server's statistics
	// (Calls, Count). It is required and unique within a scenario.
	Name string `yaml:"name" json:"name"`
	// Match says which requests the rule answers. Its zero value matches
	// every request.
	Match Match `yaml:"match" json:"match"`
	// Respond is the answer: exactly one of text, JSON or function calls.
	Respond Respond `yaml:"respond" json:"respond"`
	// Source names where the rule was written (a scenario file), so that
	// the answer to a request no rule matches can say where to add one.
	// LoadScenario sets it to the file's path; it is not read from the
	// scenario itself.
	Source string `yaml:"-" json:"-"`

	// intent is the definition of Match.Intent in the scenario the rule
	// was parsed from, so the rule keeps its meaning when it is copied
	// into another scenario (as scenario files are merged).
	intent []string
}

// Match is a condition on a request. Every condition that is set must hold;
// unset conditions (zero values) are not checked.
type Match struct {
	// Instructions must be a substring of the request's system instructions:
	// the Responses API's instructions field joined with any system or
	// developer messages of the input, or, for Chat Completions, the system
	// and developer messages joined by newlines.
	Instructions string `yaml:"instructions,omitempty" json:"instructions,omitempty"`
	// Tools must all be offered by the request (function tool names).
	Tools []string `yaml:"tools,omitempty" json:"tools,omitempty"`
	// NoTools must all be absent from the request's tools.
	NoTools []string `yaml:"no_tools,omitempty" json:"no_tools,omitempty"`
	// Turn, when positive, must equal the request's model turn: 1 plus the
	// number of model turns already in the input, where a model turn is a
	// maximal run of consecutive assistant-side items (assistant messages,
	// function calls, reasoning items).
	Turn int `yaml:"turn,omitempty" json:"turn,omitempty"`
	// MinTurn, when positive, is the lowest turn the rule answers.
	// It cannot be combined with Turn.
	MinTurn int `yaml:"min_turn,omitempty" json:"min_turn,omitempty"`
	// MaxTurn, when positive, is the highest turn the rule answers.
	// It cannot be combined with Turn.
	MaxTurn int `yaml:"max_turn,omitempty" json:"max_turn,omitempty"`
	// LastInput is a Go regular expression (so a plain substring works too)
	// matched against the text of the last input item: a message's text or a
	// function call output's output.
	LastInput string `yaml:"last_input,omitempty" json:"last_input,omitempty"`
	// Input is a Go regular expression matched against the text of the
	// first user message.
	Input string `yaml:"input,omitempty" json:"input,omitempty"`
	// HasOutputSchema, when set, must equal whether the request asks for
	// structured output with a JSON schema (Responses text.format or Chat
	// response_format of type json_schema).
	HasOutputSchema *bool `yaml:"has_output_schema,omitempty" json:"has_output_schema,omitempty"`
	// Intent names one of the scenario's Intents. It holds when the last
	// input item is a user message (the user has just spoken: not a tool's
	// output, nor a later turn of the same message) whose text has the
	// intent. A rule from ParseScenario keeps the definition its scenario
	// gave the intent, so rules copied from several scenario files into
	// one match as they did in their own.
	Intent string `yaml:"intent,omitempty" json:"intent,omitempty"`
}

// Respond is a rule's answer. Exactly one of Text, JSON and Calls is set.
type Respond struct {
	// Text is the assistant's message, a Go text/template executed with
	// TemplateData. It must not be empty.
	Text string `yaml:"text,omitempty" json:"text,omitempty"`
	// JSON is any YAML or JSON value (object, array, string, number, bool);
	// the answer is its JSON encoding as the assistant's message text.
	// String values anywhere inside it are templates. A null JSON value
	// cannot be told from an absent one; use Text: "null" for that.
	JSON any `yaml:"json,omitempty" json:"json,omitempty"`
	// Calls are function calls to answer with, in order. Several calls in
	// one answer are parallel tool calls.
	Calls []ToolCall `yaml:"calls,omitempty" json:"calls,omitempty"`
	// DelayMS is how long to wait, in milliseconds, before answering.
	DelayMS int `yaml:"delay_ms,omitempty" json:"delay_ms,omitempty"`
	// PaceMS, for a streamed answer, is how long to wait between two of
	// its text pieces (about 16 bytes each), as a model generating tokens
	// does: a client then sees the text grow. A whole answer is not
	// slowed.
	PaceMS int `yaml:"pace_ms,omitempty" json:"pace_ms,omitempty"`
}

// ToolCall is one function call of an answer.
type ToolCall struct {
	// Name is the tool to call. The request must offer it, or the Server
	// rejects the request, since a real model cannot call a tool it was not
	// given.
	Name string `yaml:"name" json:"name"`
	// Arguments are the call's arguments: an object whose string values
	// (at any depth) are templates, JSON-encoded into the call. A string is
	// accepted too: a template whose result must be a JSON object. Nil means
	// no arguments ({}).
	Arguments any `yaml:"arguments,omitempty" json:"arguments,omitempty"`
}

// ParseScenario reads a scenario from YAML or JSON (a document starting with
// '{' is read as JSON) and validates it. Unknown fields are errors, so a typo
// in a scenario fails loudly. The returned error names every invalid rule.
func ParseScenario(data []byte) (*Scenario, error) {
	var sc Scenario
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&sc); err != nil {
			return nil, fmt.Errorf("scripted: parse scenario JSON: %w", err)
		}
	} else {
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		// An empty document is io.EOF; Validate then reports "no rules".
		if err := dec.Decode(&sc); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("scripted: parse scenario YAML: %w", err)
		}
	}
	for i, r := range sc.Rules {
		if alts, ok := sc.Intents[r.Match.Intent]; ok {
			sc.Rules[i].intent = alts
		}
	}
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	return &sc, nil
}

// LoadScenario reads and validates the scenario file at path (YAML or JSON).
func LoadScenario(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scripted: %w", err)
	}
	sc, err := ParseScenario(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for i := range sc.Rules {
		sc.Rules[i].Source = path
	}
	return sc, nil
}

// Validate checks a scenario built in Go the way ParseScenario checks a
// parsed one: at least one rule; names present and unique; exactly one of
// text, json and calls per rule; tool names valid; turn bounds coherent;
// templates parse and name only TemplateData fields; regular expressions
// compile; intents are well formed and every intent a rule names exists.
// The error names each invalid rule.
func (sc *Scenario) Validate() error {
	_, err := compileScenario(sc)
	return err
}

// rule is a compiled Rule.
type rule struct {
	Rule
	lastInput *regexp.Regexp
	input     *regexp.Regexp
	intent    intent
	text      *template.Template
	json      valueTemplate
	calls     []compiledCall
	delay     time.Duration
	pace      time.Duration
}

type compiledCall struct {
	name      string
	arguments valueTemplate // nil means {}
	rawArgs   *template.Template
}

func compileScenario(sc *Scenario) ([]*rule, error) {
	if sc == nil || len(sc.Rules) == 0 {
		return nil, errors.New("scripted: scenario has no rules")
	}
	var errs []error
	intents := make(map[string]intent, len(sc.Intents))
	names := make([]string, 0, len(sc.Intents))
	for name := range sc.Intents {
		names = append(names, name)
	}
	sort.Strings(names) // Errors in a stable order.
	for _, name := range names {
		in, err := compileIntent(sc.Intents[name])
		if err != nil {
			errs = append(errs, fmt.Errorf("scripted: intent %q: %w", name, err))
		}
		intents[name] = in
	}
	seen := map[string]int{}
	rules := make([]*rule, 0, len(sc.Rules))
	for i, r := range sc.Rules {
		label := fmt.Sprintf("rule %d %q", i, r.Name)
		fail := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("scripted: %s: %s", label, fmt.Sprintf(format, args...)))
		}
		if r.Name == "" {
			fail("name is required")
		} else if j, dup := seen[r.Name]; dup {
			fail("name is already used by rule %d", j)
		} else {
			seen[r.Name] = i
		}
		cr := &rule{Rule: r}
		m := r.Match
		if m.Turn < 0 || m.MinTurn < 0 || m.MaxTurn < 0 {
			fail("match: turn, min_turn and max_turn must not be negative")
		}
		if m.Turn > 0 && (m.MinTurn > 0 || m.MaxTurn > 0) {
			fail("match: turn cannot be combined with min_turn or max_turn")
		}
		if m.MinTurn > 0 && m.MaxTurn > 0 && m.MinTurn > m.MaxTurn {
			fail("match: min_turn %d is greater than max_turn %d", m.MinTurn, m.MaxTurn)
		}
		var err error
		if m.LastInput != "" {
			if cr.lastInput, err = regexp.Compile(m.LastInput); err != nil {
				fail("match.last_input: %v", err)
			}
		}
		if m.Input != "" {
			if cr.input, err = regexp.Compile(m.Input); err != nil {
				fail("match.input: %v", err)
			}
		}
		if m.Intent != "" {
			in, ok := intents[m.Intent]
			if r.intent != nil {
				// Defined where the rule was parsed (and checked there).
				in, err = compileIntent(r.intent)
				ok = err == nil
			}
			if !ok {
				fail("match.intent %q is not one of the scenario's intents", m.Intent)
			}
			cr.intent = in
		}
		res := r.Respond
		set := 0
		if res.Text != "" {
			set++
		}
		if res.JSON != nil {
			set++
		}
		if len(res.Calls) > 0 {
			set++
		}
		if set != 1 {
			fail("respond: exactly one of text, json and calls must be set, got %d", set)
		}
		if res.DelayMS < 0 {
			fail("respond.delay_ms must not be negative")
		}
		cr.delay = time.Duration(res.DelayMS) * time.Millisecond
		if res.PaceMS < 0 {
			fail("respond.pace_ms must not be negative")
		}
		cr.pace = time.Duration(res.PaceMS) * time.Millisecond
		if res.Text != "" {
			if cr.text, err = parseTemplate("respond.text", res.Text); err != nil {
				fail("%v", err)
			}
		}
		if res.JSON != nil {
			if cr.json, err = compileValue("respond.json", res.JSON); err != nil {
				fail("%v", err)
			}
		}
		for j, c := range res.Calls {
			where := fmt.Sprintf("respond.calls[%d]", j)
			if !toolNamePattern.MatchString(c.Name) {
				fail("%s.name %q must match %s", where, c.Name, toolNamePattern)
			}
			cc := compiledCall{name: c.Name}
			switch args := c.Arguments.(type) {
			case nil:
			case string:
				if cc.rawArgs, err = parseTemplate(where+".arguments", args); err != nil {
					fail("%v", err)
				}
			case map[string]any, map[any]any:
				if cc.arguments, err = compileValue(where+".arguments", args); err != nil {
					fail("%v", err)
				}
			default:
				fail("%s.arguments must be an object or a template string, got %T", where, args)
			}
			cr.calls = append(cr.calls, cc)
		}
		rules = append(rules, cr)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return rules, nil
}

// matches reports whether the rule's Match holds for the conversation.
func (r *rule) matches(c *conversation) bool {
	m := r.Match
	if m.Instructions != "" && !strings.Contains(c.instructions, m.Instructions) {
		return false
	}
	for _, t := range m.Tools {
		if !c.offers(t) {
			return false
		}
	}
	for _, t := range m.NoTools {
		if c.offers(t) {
			return false
		}
	}
	turn := c.turn()
	if m.Turn > 0 && turn != m.Turn {
		return false
	}
	if m.MinTurn > 0 && turn < m.MinTurn {
		return false
	}
	if m.MaxTurn > 0 && turn > m.MaxTurn {
		return false
	}
	if r.lastInput != nil && !r.lastInput.MatchString(c.lastInput()) {
		return false
	}
	if r.input != nil && !r.input.MatchString(c.firstUser()) {
		return false
	}
	if m.HasOutputSchema != nil && *m.HasOutputSchema != c.hasOutputSchema {
		return false
	}
	if r.intent != nil {
		last, ok := c.lastItem()
		if !ok || last.kind != kindMessage || last.role != "user" || !r.intent.in(last.text) {
			return false
		}
	}
	return true
}

// intent is a compiled Scenario intent: alternatives of terms of
// synonyms (see Scenario.Intents).
type intent [][]term

// term is one word of an alternative, with its synonyms.
type term []synonym

type synonym struct {
	word   string // lower case
	prefix bool   // written with a trailing "*"
}

func compileIntent(alts []string) (intent, error) {
	if len(alts) == 0 {
		return nil, errors.New("has no alternatives")
	}
	var in intent
	for _, alt := range alts {
		var terms []term
		for _, t := range strings.Fields(alt) {
			var tm term
			for _, w := range strings.Split(t, "|") {
				s := synonym{word: strings.ToLower(w)}
				s.word, s.prefix = strings.CutSuffix(s.word, "*")
				if s.word == "" || len(words(s.word)) != 1 || words(s.word)[0] != s.word {
					return nil, fmt.Errorf("alternative %q: %q is not a word (letters and digits; a trailing * for a prefix)", alt, w)
				}
				tm = append(tm, s)
			}
			terms = append(terms, tm)
		}
		if len(terms) == 0 {
			return nil, fmt.Errorf("alternative %q has no terms", alt)
		}
		in = append(in, terms)
	}
	return in, nil
}

// in reports whether text has the intent: every term of some alternative
// is among its words.
func (in intent) in(text string) bool {
	ws := words(text)
	for _, alt := range in {
		all := true
		for _, t := range alt {
			if !t.among(ws) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

func (t term) among(ws []string) bool {
	for _, s := range t {
		for _, w := range ws {
			if w == s.word || s.prefix && strings.HasPrefix(w, s.word) {
				return true
			}
		}
	}
	return false
}

// words splits text into lower-case words: runs of letters and digits.
func words(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}
