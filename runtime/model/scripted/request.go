package scripted

// This file reads a request of either API into one conversation view, and
// rejects what the real API rejects about its shape: missing or mistyped
// fields, bad tool names, non-strict schemas sent as strict, and function
// calls without their outputs (or outputs without their calls).

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// API names, as recorded in Call.API.
const (
	// APIResponses is the Responses API, POST /v1/responses.
	APIResponses = "responses"
	// APIChat is the Chat Completions API, POST /v1/chat/completions.
	APIChat = "chat"
)

// toolNamePattern is OpenAI's rule for function names.
var toolNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

type itemKind int

const (
	kindMessage itemKind = iota
	kindCall
	kindOutput
	kindReasoning
	kindOther
)

// item is one input item of either API, reduced to what matching needs.
type item struct {
	kind      itemKind
	role      string // messages: user, system, developer, assistant
	text      string // message text, call arguments or call output
	callID    string // calls and outputs
	name      string // calls
	assistant bool   // produced by the model: part of a model turn
}

// conversation is a request of either API, reduced to what matching,
// validation and answering need.
type conversation struct {
	api             string
	model           string
	stream          bool
	includeUsage    bool // chat: stream_options.include_usage
	instructions    string
	tools           []string // offered function and custom tool names
	hasOutputSchema bool
	items           []item

	// Echoed back in a Responses answer, as the real API does.
	rawInstructions   json.RawMessage
	rawTools          json.RawMessage
	rawToolChoice     json.RawMessage
	rawText           json.RawMessage
	parallelToolCalls bool
}

func (c *conversation) offers(name string) bool {
	for _, t := range c.tools {
		if t == name {
			return true
		}
	}
	return false
}

// toolChoiceForbids says why the request's tool_choice rules out a call to
// name ("" when it does not): "none", a forced function of another name, or
// an allowed_tools list without it. Both APIs' shapes are read.
func (c *conversation) toolChoiceForbids(name string) string {
	tc := gjson.ParseBytes(c.rawToolChoice)
	switch {
	case tc.Type == gjson.String && tc.String() == "none":
		return `tool_choice is "none"`
	case tc.Get("type").String() == "function":
		forced := tc.Get("name").String()
		if forced == "" {
			forced = tc.Get("function.name").String()
		}
		if forced != "" && forced != name {
			return fmt.Sprintf("tool_choice forces function %q", forced)
		}
	case tc.Get("type").String() == "allowed_tools":
		tools := tc.Get("tools")
		if !tools.Exists() {
			tools = tc.Get("allowed_tools.tools")
		}
		var allowed []string
		for _, t := range tools.Array() {
			n := t.Get("name").String()
			if n == "" {
				n = t.Get("function.name").String()
			}
			if n == name {
				return ""
			}
			allowed = append(allowed, n)
		}
		return fmt.Sprintf("tool_choice allows only [%s]", strings.Join(allowed, ", "))
	}
	return ""
}

// turn is 1 plus the number of maximal runs of assistant-side items.
func (c *conversation) turn() int {
	turns, prev := 0, false
	for _, it := range c.items {
		if it.assistant && !prev {
			turns++
		}
		prev = it.assistant
	}
	return turns + 1
}

// lastItem is the last input item, if there is one.
func (c *conversation) lastItem() (item, bool) {
	if len(c.items) == 0 {
		return item{}, false
	}
	return c.items[len(c.items)-1], true
}

func (c *conversation) lastInput() string {
	if len(c.items) == 0 {
		return ""
	}
	return c.items[len(c.items)-1].text
}

func (c *conversation) firstUser() string {
	for _, it := range c.items {
		if it.kind == kindMessage && it.role == "user" {
			return it.text
		}
	}
	return ""
}

// lastUser is the text of the last user message: in a conversation of
// several turns (a session), what the user said last.
func (c *conversation) lastUser() string {
	for i := len(c.items) - 1; i >= 0; i-- {
		if c.items[i].kind == kindMessage && c.items[i].role == "user" {
			return c.items[i].text
		}
	}
	return ""
}

func (c *conversation) lastOutput() string {
	for i := len(c.items) - 1; i >= 0; i-- {
		if c.items[i].kind == kindOutput {
			return c.items[i].text
		}
	}
	return ""
}

// outputsSinceLastTurn are the outputs after the last assistant-side item.
func (c *conversation) outputsSinceLastTurn() []string {
	start := 0
	for i, it := range c.items {
		if it.assistant {
			start = i + 1
		}
	}
	outs := []string{}
	for _, it := range c.items[start:] {
		if it.kind == kindOutput {
			outs = append(outs, it.text)
		}
	}
	return outs
}

// digest identifies the request's content, so answers to retries of the same
// request carry the same ids.
func (c *conversation) digest() []byte {
	h := sha256.New()
	field := func(s string) { fmt.Fprintf(h, "%d:%s", len(s), s) }
	field(c.api)
	field(c.model)
	field(c.instructions)
	for _, it := range c.items {
		field(strconv.Itoa(int(it.kind)))
		field(it.role)
		field(it.text)
		field(it.callID)
		field(it.name)
	}
	return h.Sum(nil)
}

// id derives a deterministic id from the request digest and a label.
func id(digest []byte, prefix, label string, n int) string {
	h := sha256.New()
	h.Write(digest)
	h.Write([]byte(label))
	return prefix + hex.EncodeToString(h.Sum(nil))[:n]
}

// inputChars approximates the request's size for usage accounting.
func (c *conversation) inputChars() int {
	n := len(c.instructions) + len(c.rawTools)
	for _, it := range c.items {
		n += len(it.text) + len(it.name)
	}
	return n
}

// object is a JSON object whose values are decoded on demand, so a wrong type
// can be reported with the field's path, as OpenAI does.
type object map[string]json.RawMessage

func decodeObject(raw json.RawMessage, param string) (object, *apiError) {
	var o object
	if jsonKind(raw) != "an object" {
		return nil, invalidType(param, "an object", raw)
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, invalidType(param, "an object", raw)
	}
	return o, nil
}

// jsonKind names the JSON type of raw the way OpenAI's messages do.
func jsonKind(raw json.RawMessage) string {
	s := bytes.TrimLeft(raw, " \t\r\n") // not string(raw): a copy of the whole input
	if len(s) == 0 {
		return "nothing"
	}
	switch s[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

func childParam(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// has reports whether key is present and not null.
func (o object) has(key string) bool {
	raw, ok := o[key]
	return ok && jsonKind(raw) != "null"
}

func (o object) str(key, parent string) (string, bool, *apiError) {
	if !o.has(key) {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(o[key], &s); err != nil {
		return "", false, invalidType(childParam(parent, key), "a string", o[key])
	}
	return s, true, nil
}

func (o object) boolean(key, parent string) (bool, bool, *apiError) {
	if !o.has(key) {
		return false, false, nil
	}
	var b bool
	if err := json.Unmarshal(o[key], &b); err != nil {
		return false, false, invalidType(childParam(parent, key), "a boolean", o[key])
	}
	return b, true, nil
}

func (o object) array(key, parent string) ([]json.RawMessage, bool, *apiError) {
	if !o.has(key) {
		return nil, false, nil
	}
	var a []json.RawMessage
	if jsonKind(o[key]) != "an array" || json.Unmarshal(o[key], &a) != nil {
		return nil, false, invalidType(childParam(parent, key), "an array", o[key])
	}
	return a, true, nil
}

func (o object) obj(key, parent string) (object, bool, *apiError) {
	if !o.has(key) {
		return nil, false, nil
	}
	v, err := decodeObject(o[key], childParam(parent, key))
	if err != nil {
		return nil, false, err
	}
	return v, true, nil
}

// requireStr reads a required string field.
func (o object) requireStr(key, parent string) (string, *apiError) {
	s, ok, err := o.str(key, parent)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", missingParam(childParam(parent, key))
	}
	return s, nil
}

// contentText reads message content: a string, null, or an array of parts
// whose text fields are joined by newlines (input_text, output_text, text).
func contentText(raw json.RawMessage, param string) (string, *apiError) {
	switch jsonKind(raw) {
	case "nothing", "null":
		return "", nil
	case "a string":
		var s string
		_ = json.Unmarshal(raw, &s)
		return s, stringTooLong(param, s)
	case "an array":
		var parts []json.RawMessage
		_ = json.Unmarshal(raw, &parts)
		var texts []string
		for i, p := range parts {
			po, err := decodeObject(p, fmt.Sprintf("%s[%d]", param, i))
			if err != nil {
				return "", err
			}
			t, ok, err := po.str("text", fmt.Sprintf("%s[%d]", param, i))
			if err != nil {
				return "", err
			}
			if ok {
				if err := stringTooLong(fmt.Sprintf("%s[%d].text", param, i), t); err != nil {
					return "", err
				}
				texts = append(texts, t)
			}
		}
		return strings.Join(texts, "\n"), nil
	default:
		return "", invalidType(param, "a string or an array", raw)
	}
}

// maxString is the longest text OpenAI takes in one message's content
// or one output, in characters: 10 MiB.
const maxString = 10 << 20

// stringTooLong is OpenAI's refusal of a text s at param longer than
// maxString, or nil.
func stringTooLong(param, s string) *apiError {
	if len(s) <= maxString {
		return nil
	}
	if n := utf8.RuneCountInString(s); n > maxString {
		return &apiError{status: 400, param: param, code: "string_above_max_length",
			msg: fmt.Sprintf("Invalid '%s': string too long. Expected a string with maximum length %d, "+
				"but got a string with length %d instead.", param, maxString, n)}
	}
	return nil
}

// parseTop decodes the request body and reads the fields both APIs share.
func parseTop(body []byte, api string) (object, *conversation, *apiError) {
	var top object
	if err := json.Unmarshal(body, &top); err != nil || top == nil {
		return nil, nil, &apiError{
			status: 400,
			msg: "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your " +
				"HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)",
		}
	}
	c := &conversation{api: api, parallelToolCalls: true}
	model, ok, err := top.str("model", "")
	if err != nil {
		return nil, nil, err
	}
	if !ok || model == "" {
		return nil, nil, missingParam("model")
	}
	c.model = model
	if c.stream, _, err = top.boolean("stream", ""); err != nil {
		return nil, nil, err
	}
	if p, ok, err := top.boolean("parallel_tool_calls", ""); err != nil {
		return nil, nil, err
	} else if ok {
		c.parallelToolCalls = p
	}
	c.rawToolChoice = top["tool_choice"]
	return top, c, nil
}

// parseResponses reads a Responses API request (POST /v1/responses).
func parseResponses(body []byte) (*conversation, *apiError) {
	top, c, err := parseTop(body, APIResponses)
	if err != nil {
		return nil, err
	}
	for _, unsupported := range []string{"previous_response_id", "conversation", "prompt"} {
		if top.has(unsupported) {
			return nil, &apiError{status: 400, param: unsupported, code: "unsupported_parameter",
				msg: fmt.Sprintf("Unsupported parameter: '%s'. The scripted model server stores no responses, "+
					"conversations or prompts; send the whole conversation in 'input'.", unsupported)}
		}
	}
	var instructions []string
	if s, ok, err := top.str("instructions", ""); err != nil {
		return nil, err
	} else if ok {
		c.rawInstructions = top["instructions"]
		if s != "" {
			instructions = append(instructions, s)
		}
	}

	// Tools: function and custom tools have names; hosted tools do not.
	toolsRaw, _, err := top.array("tools", "")
	if err != nil {
		return nil, err
	}
	c.rawTools = top["tools"]
	var named []namedTool
	for i, raw := range toolsRaw {
		param := fmt.Sprintf("tools[%d]", i)
		t, err := decodeObject(raw, param)
		if err != nil {
			return nil, err
		}
		typ, err := t.requireStr("type", param)
		if err != nil {
			return nil, err
		}
		if typ != "function" && typ != "custom" {
			continue
		}
		name, err := t.requireStr("name", param)
		if err != nil {
			return nil, err
		}
		nt := namedTool{name: name, param: param + ".name", schemaParam: param + ".parameters"}
		if typ == "function" {
			if nt.strict, _, err = t.boolean("strict", param); err != nil {
				return nil, err
			}
			if t.has("parameters") {
				if _, err := decodeObject(t["parameters"], param+".parameters"); err != nil {
					return nil, err
				}
				nt.schema = t["parameters"]
			}
		}
		named = append(named, nt)
	}
	if err := checkTools(named); err != nil {
		return nil, err
	}
	for _, t := range named {
		c.tools = append(c.tools, t.name)
	}

	// Structured output: text.format.
	if text, ok, err := top.obj("text", ""); err != nil {
		return nil, err
	} else if ok {
		c.rawText = top["text"]
		if f, ok, err := text.obj("format", "text"); err != nil {
			return nil, err
		} else if ok {
			typ, err := f.requireStr("type", "text.format")
			if err != nil {
				return nil, err
			}
			if typ == "json_schema" {
				if err := checkOutputSchema(f, "text.format", "text.format.schema"); err != nil {
					return nil, err
				}
				c.hasOutputSchema = true
			}
		}
	}

	// Input: a string, or an array of items.
	if !top.has("input") {
		return nil, missingParam("input")
	}
	switch jsonKind(top["input"]) {
	case "a string":
		var s string
		_ = json.Unmarshal(top["input"], &s)
		if s == "" {
			return nil, emptyParam("input", "string")
		}
		c.items = append(c.items, item{kind: kindMessage, role: "user", text: s})
	case "an array":
		inputs, _, _ := top.array("input", "")
		if len(inputs) == 0 {
			return nil, emptyParam("input", "array")
		}
		for i, raw := range inputs {
			it, extra, err := parseResponsesItem(raw, fmt.Sprintf("input[%d]", i))
			if err != nil {
				return nil, err
			}
			if it.kind == kindMessage && (it.role == "system" || it.role == "developer") && it.text != "" {
				instructions = append(instructions, it.text)
			}
			c.tools = append(c.tools, extra...)
			c.items = append(c.items, it)
		}
	default:
		return nil, invalidType("input", "a string or an array", top["input"])
	}
	c.instructions = strings.Join(instructions, "\n")
	if err := checkResponsesPairing(c.items); err != nil {
		return nil, err
	}
	return c, nil
}

// parseResponsesItem reads one Responses input item. extra holds the names
// of tools an additional_tools item offers.
func parseResponsesItem(raw json.RawMessage, param string) (it item, extra []string, aerr *apiError) {
	o, err := decodeObject(raw, param)
	if err != nil {
		return it, nil, err
	}
	typ, _, err := o.str("type", param)
	if err != nil {
		return it, nil, err
	}
	if typ == "" {
		if !o.has("role") {
			return it, nil, missingParam(param + ".type")
		}
		typ = "message"
	}
	switch typ {
	case "message":
		role, err := o.requireStr("role", param)
		if err != nil {
			return it, nil, err
		}
		text, err := contentText(o["content"], param+".content")
		if err != nil {
			return it, nil, err
		}
		return item{kind: kindMessage, role: role, text: text, assistant: role == "assistant"}, nil, nil
	case "function_call":
		callID, err := o.requireStr("call_id", param)
		if err != nil {
			return it, nil, err
		}
		name, err := o.requireStr("name", param)
		if err != nil {
			return it, nil, err
		}
		args, _, err := o.str("arguments", param)
		if err != nil {
			return it, nil, err
		}
		return item{kind: kindCall, callID: callID, name: name, text: args, assistant: true}, nil, nil
	case "function_call_output":
		callID, err := o.requireStr("call_id", param)
		if err != nil {
			return it, nil, err
		}
		if !o.has("output") {
			return it, nil, missingParam(param + ".output")
		}
		out, err := contentText(o["output"], param+".output")
		if err != nil {
			return it, nil, err
		}
		return item{kind: kindOutput, callID: callID, text: out}, nil, nil
	case "reasoning":
		return item{kind: kindReasoning, assistant: true}, nil, nil
	case "additional_tools":
		tools, _, err := o.array("tools", param)
		if err != nil {
			return it, nil, err
		}
		for _, t := range tools {
			var named struct {
				Name string `json:"name"`
			}
			if json.Unmarshal(t, &named) == nil && named.Name != "" {
				extra = append(extra, named.Name)
			}
		}
		return item{kind: kindOther}, extra, nil
	default:
		// Hosted tool calls (web_search_call, custom_tool_call, ...) are the
		// model's; their outputs and anything else are not.
		text, _, _ := o.str("output", param)
		return item{kind: kindOther, text: text, assistant: strings.HasSuffix(typ, "_call")}, nil, nil
	}
}

// checkResponsesPairing rejects, as the Responses API does, a function call
// without its output and an output without an earlier call.
func checkResponsesPairing(items []item) *apiError {
	called := map[string]bool{}
	answered := map[string]bool{}
	for _, it := range items {
		switch it.kind {
		case kindCall:
			called[it.callID] = true
		case kindOutput:
			if !called[it.callID] {
				return &apiError{status: 400, param: "input",
					msg: fmt.Sprintf("No tool call found for function call output with call_id %s.", it.callID)}
			}
			answered[it.callID] = true
		}
	}
	for _, it := range items {
		if it.kind == kindCall && !answered[it.callID] {
			return &apiError{status: 400, param: "input",
				msg: fmt.Sprintf("No tool output found for function call %s.", it.callID)}
		}
	}
	return nil
}

// parseChat reads a Chat Completions request (POST /v1/chat/completions).
func parseChat(body []byte) (*conversation, *apiError) {
	top, c, err := parseTop(body, APIChat)
	if err != nil {
		return nil, err
	}
	if so, ok, err := top.obj("stream_options", ""); err != nil {
		return nil, err
	} else if ok {
		if c.includeUsage, _, err = so.boolean("include_usage", "stream_options"); err != nil {
			return nil, err
		}
	}

	toolsRaw, _, err := top.array("tools", "")
	if err != nil {
		return nil, err
	}
	c.rawTools = top["tools"]
	var named []namedTool
	for i, raw := range toolsRaw {
		param := fmt.Sprintf("tools[%d]", i)
		t, err := decodeObject(raw, param)
		if err != nil {
			return nil, err
		}
		typ, _, err := t.str("type", param)
		if err != nil {
			return nil, err
		}
		if typ == "" {
			typ = "function"
		}
		if typ != "function" && typ != "custom" {
			continue
		}
		fn, ok, err := t.obj(typ, param)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, missingParam(param + "." + typ)
		}
		fparam := param + "." + typ
		name, err := fn.requireStr("name", fparam)
		if err != nil {
			return nil, err
		}
		nt := namedTool{name: name, param: fparam + ".name", schemaParam: fparam + ".parameters"}
		if typ == "function" {
			if nt.strict, _, err = fn.boolean("strict", fparam); err != nil {
				return nil, err
			}
			if fn.has("parameters") {
				if _, err := decodeObject(fn["parameters"], fparam+".parameters"); err != nil {
					return nil, err
				}
				nt.schema = fn["parameters"]
			}
		}
		named = append(named, nt)
	}
	if err := checkTools(named); err != nil {
		return nil, err
	}
	for _, t := range named {
		c.tools = append(c.tools, t.name)
	}

	if rf, ok, err := top.obj("response_format", ""); err != nil {
		return nil, err
	} else if ok {
		typ, err := rf.requireStr("type", "response_format")
		if err != nil {
			return nil, err
		}
		if typ == "json_schema" {
			js, ok, err := rf.obj("json_schema", "response_format")
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, missingParam("response_format.json_schema")
			}
			if err := checkOutputSchema(js, "response_format.json_schema", "response_format"); err != nil {
				return nil, err
			}
			c.hasOutputSchema = true
		}
	}

	if !top.has("messages") {
		return nil, missingParam("messages")
	}
	msgs, _, err := top.array("messages", "")
	if err != nil {
		return nil, err
	}
	if len(msgs) == 0 {
		return nil, emptyParam("messages", "array")
	}
	var instructions []string
	// expect holds the tool_call_ids of the latest assistant message that
	// still lack their tool messages.
	var expect []string
	missing := func() *apiError {
		return &apiError{status: 400, param: "messages", msg: "An assistant message with 'tool_calls' must be followed by " +
			"tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: " +
			strings.Join(expect, ", ")}
	}
	for i, raw := range msgs {
		param := fmt.Sprintf("messages[%d]", i)
		m, err := decodeObject(raw, param)
		if err != nil {
			return nil, err
		}
		role, err := m.requireStr("role", param)
		if err != nil {
			return nil, err
		}
		if role != "tool" && len(expect) > 0 {
			return nil, missing()
		}
		text, err := contentText(m["content"], param+".content")
		if err != nil {
			return nil, err
		}
		switch role {
		case "system", "developer":
			if text != "" {
				instructions = append(instructions, text)
			}
			c.items = append(c.items, item{kind: kindMessage, role: role, text: text})
		case "user":
			c.items = append(c.items, item{kind: kindMessage, role: role, text: text})
		case "assistant":
			calls, _, err := m.array("tool_calls", param)
			if err != nil {
				return nil, err
			}
			if text != "" || len(calls) == 0 {
				c.items = append(c.items, item{kind: kindMessage, role: role, text: text, assistant: true})
			}
			for j, craw := range calls {
				cparam := fmt.Sprintf("%s.tool_calls[%d]", param, j)
				call, err := decodeObject(craw, cparam)
				if err != nil {
					return nil, err
				}
				callID, err := call.requireStr("id", cparam)
				if err != nil {
					return nil, err
				}
				fn, _, err := call.obj("function", cparam)
				if err != nil {
					return nil, err
				}
				var name, args string
				if fn != nil {
					if name, _, err = fn.str("name", cparam+".function"); err != nil {
						return nil, err
					}
					if args, _, err = fn.str("arguments", cparam+".function"); err != nil {
						return nil, err
					}
				}
				c.items = append(c.items, item{kind: kindCall, callID: callID, name: name, text: args, assistant: true})
				expect = append(expect, callID)
			}
		case "tool":
			callID, err := m.requireStr("tool_call_id", param)
			if err != nil {
				return nil, err
			}
			k := indexOf(expect, callID)
			if k < 0 {
				return nil, &apiError{status: 400, param: fmt.Sprintf("messages.[%d].role", i),
					msg: "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with " +
						fmt.Sprintf("'tool_calls'. No tool call found for function call output with call_id %s.", callID)}
			}
			expect = append(expect[:k], expect[k+1:]...)
			c.items = append(c.items, item{kind: kindOutput, callID: callID, text: text})
		case "function": // the deprecated function-calling protocol
			c.items = append(c.items, item{kind: kindOutput, text: text})
		default:
			return nil, &apiError{status: 400, param: param + ".role", code: "invalid_value",
				msg: fmt.Sprintf("Invalid value: '%s'. Supported values are: 'system', 'developer', 'user', 'assistant', "+
					"'tool', and 'function'.", role)}
		}
	}
	if len(expect) > 0 {
		return nil, missing()
	}
	c.instructions = strings.Join(instructions, "\n")
	return c, nil
}

func indexOf(list []string, s string) int {
	for i, e := range list {
		if e == s {
			return i
		}
	}
	return -1
}

// namedTool is a function or custom tool of a request, for validation.
type namedTool struct {
	name        string
	param       string // where the name is, e.g. tools[0].name
	strict      bool
	schema      json.RawMessage
	schemaParam string
}

// checkTools rejects bad and duplicate names and, for strict tools, schemas
// that strict mode does not accept.
func checkTools(tools []namedTool) *apiError {
	seen := map[string]string{}
	for _, t := range tools {
		switch {
		case t.name == "":
			return &apiError{status: 400, param: t.param, code: "empty_string",
				msg: fmt.Sprintf("Invalid '%s': empty string. Expected a string with minimum length 1, "+
					"but got an empty string instead.", t.param)}
		case len(t.name) > 64:
			return &apiError{status: 400, param: t.param, code: "string_above_max_length",
				msg: fmt.Sprintf("Invalid '%s': string too long. Expected a string with maximum length 64, "+
					"but got a string with length %d instead.", t.param, len(t.name))}
		case !toolNamePattern.MatchString(t.name):
			return &apiError{status: 400, param: t.param, code: "invalid_value",
				msg: fmt.Sprintf("Invalid '%s': string does not match pattern. Expected a string that matches "+
					"the pattern '^[a-zA-Z0-9_-]+$'.", t.param)}
		}
		if first, dup := seen[t.name]; dup {
			return &apiError{status: 400, param: "tools", code: "invalid_value",
				msg: fmt.Sprintf("Invalid 'tools': duplicate function name '%s' (%s and %s). Tool names must be unique.",
					t.name, first, t.param)}
		}
		seen[t.name] = t.param
		if t.strict && t.schema != nil {
			if msg := strictSchemaError(t.schema); msg != "" {
				return &apiError{status: 400, param: t.schemaParam, code: "invalid_function_parameters",
					msg: fmt.Sprintf("Invalid schema for function '%s': %s", t.name, msg)}
			}
		}
	}
	return nil
}

// checkOutputSchema validates a json_schema output format: f holds name,
// schema and strict (Responses text.format, Chat response_format.json_schema).
func checkOutputSchema(f object, where, schemaParam string) *apiError {
	name, err := f.requireStr("name", where)
	if err != nil {
		return err
	}
	if !f.has("schema") {
		return missingParam(where + ".schema")
	}
	if _, err := decodeObject(f["schema"], where+".schema"); err != nil {
		return err
	}
	strict, _, err := f.boolean("strict", where)
	if err != nil {
		return err
	}
	if strict {
		if msg := strictSchemaError(f["schema"]); msg != "" {
			return &apiError{status: 400, param: schemaParam, code: "invalid_json_schema",
				msg: fmt.Sprintf("Invalid schema for response_format '%s': %s", name, msg)}
		}
	}
	return nil
}
