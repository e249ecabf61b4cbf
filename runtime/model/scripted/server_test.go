package scripted

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

// testScenario exercises every kind of match and answer.
const testScenario = `
rules:
  - name: ghost-call
    match: {instructions: ghost}
    respond: {calls: [{name: not_offered}]}
  - name: triage-hands-off
    match: {instructions: triage, tools: [transfer_to_pricing], turn: 1}
    respond:
      calls: [{name: transfer_to_pricing}]
  - name: pricing-lookup
    match: {instructions: pricing, tools: [get_document], turn: 1}
    respond:
      calls:
        - name: get_document
          arguments: {doc: pricing}
        - name: get_document
          arguments: {doc: "discounts-{{.CallIndex}}"}
  - name: pricing-answer
    match: {instructions: pricing, min_turn: 2}
    respond:
      text: 'Pricing: {{join .Outputs " | "}} (risk {{field .LastOutput "risk.level"}}, turn {{.Turn}})'
  - name: structured
    match: {has_output_schema: true}
    respond:
      json: {verdict: approve, user: "{{.User}}", score: 3, tags: [a, "{{.Turn}}"]}
  - name: greet-bob
    match: {input: "(?i)^hello.*bob"}
    respond: {text: "Hi Bob"}
  - name: saw-error
    match: {last_input: 'ERROR \d+'}
    respond: {text: "saw an error"}
  - name: no-search
    match: {instructions: plain, no_tools: [search]}
    respond: {text: "no search offered"}
  - name: echo
    match: {instructions: echo}
    respond:
      text: '{{.User}}|{{.LastInput}}|{{.LastOutput}}|{{json .Outputs}}|{{.Turn}}|{{.CallIndex}}'
  - name: raw-args
    match: {instructions: raw}
    respond:
      calls: [{name: save, arguments: '{"copied": {{.LastOutput}}}'}]
  - name: slow
    match: {instructions: slow}
    respond: {text: "done", delay_ms: 300}
  - name: ok
    match: {instructions: ok}
    respond: {text: "fine"}
`

func startServer(t *testing.T, src string) (*Server, string) {
	t.Helper()
	sc, err := ParseScenario([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	s := New(sc)
	baseURL, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, baseURL
}

func newClient(baseURL string) openai.Client {
	return openai.NewClient(option.WithBaseURL(baseURL), option.WithAPIKey("test-key"), option.WithMaxRetries(0))
}

func fnTool(name string) responses.ToolUnionParam {
	return responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{
		Name: name,
		Parameters: map[string]any{"type": "object", "properties": map[string]any{}, "additionalProperties": false,
			"required": []string{}},
		Strict: openai.Bool(true),
	}}
}

func userItem(text string) responses.ResponseInputItemUnionParam {
	return responses.ResponseInputItemParamOfMessage(text, responses.EasyInputMessageRoleUser)
}

func outputItem(callID, output string) responses.ResponseInputItemUnionParam {
	return responses.ResponseInputItemUnionParam{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
		CallID: openai.String(callID),
		Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String(output)},
	}}
}

func lastRule(t *testing.T, s *Server) string {
	t.Helper()
	calls := s.Calls()
	if len(calls) == 0 {
		t.Fatal("no calls recorded")
	}
	return calls[len(calls)-1].Rule
}

func TestResponsesMatching(t *testing.T) {
	s, baseURL := startServer(t, testScenario)
	client := newClient(baseURL)
	outputSchema := responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{
		OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{
			Name:   "verdict",
			Strict: openai.Bool(true),
			Schema: map[string]any{"type": "object", "additionalProperties": false, "required": []string{"verdict"},
				"properties": map[string]any{"verdict": map[string]any{"type": "string"}}},
		}}}
	tests := []struct {
		name         string
		instructions string
		tools        []string
		input        []responses.ResponseInputItemUnionParam
		text         responses.ResponseTextConfigParam
		wantRule     string
		wantText     string
		wantCalls    []string // name(arguments)
	}{
		{
			name: "instructions, tools and turn", instructions: "You are the triage agent.",
			tools: []string{"transfer_to_pricing"}, input: []responses.ResponseInputItemUnionParam{userItem("quote?")},
			wantRule: "triage-hands-off", wantCalls: []string{"transfer_to_pricing({})"},
		},
		{
			name: "turn 1 needs the tool", instructions: "You are the triage agent.",
			input:    []responses.ResponseInputItemUnionParam{userItem("hello there Bob")},
			wantRule: "greet-bob", wantText: "Hi Bob",
		},
		{
			name: "parallel calls with templated arguments", instructions: "You are pricing.",
			tools: []string{"get_document"}, input: []responses.ResponseInputItemUnionParam{userItem("price?")},
			wantRule:  "pricing-lookup",
			wantCalls: []string{`get_document({"doc":"pricing"})`, `get_document({"doc":"discounts-1"})`},
		},
		{
			name: "template quotes the tool outputs", instructions: "You are pricing.",
			tools: []string{"get_document"},
			input: []responses.ResponseInputItemUnionParam{
				userItem("price?"),
				responses.ResponseInputItemParamOfFunctionCall(`{"doc":"pricing"}`, "call_a", "get_document"),
				responses.ResponseInputItemParamOfFunctionCall(`{"doc":"discounts"}`, "call_b", "get_document"),
				outputItem("call_a", `{"price": 10}`),
				outputItem("call_b", `{"risk": {"level": "low"}}`),
			},
			wantRule: "pricing-answer",
			wantText: `Pricing: {"price": 10} | {"risk": {"level": "low"}} (risk low, turn 2)`,
		},
		{
			name: "structured output", instructions: "You decide.", text: outputSchema,
			input:    []responses.ResponseInputItemUnionParam{userItem("deal 7")},
			wantRule: "structured", wantText: `{"score":3,"tags":["a","1"],"user":"deal 7","verdict":"approve"}`,
		},
		{
			name: "last input regexp", instructions: "You are support.",
			input:    []responses.ResponseInputItemUnionParam{userItem("first"), userItem("got ERROR 42 today")},
			wantRule: "saw-error", wantText: "saw an error",
		},
		{
			name: "no_tools holds", instructions: "plain agent", tools: []string{"lookup"},
			input:    []responses.ResponseInputItemUnionParam{userItem("x")},
			wantRule: "no-search", wantText: "no search offered",
		},
		{
			name: "template data", instructions: "echo",
			tools: []string{"lookup"},
			input: []responses.ResponseInputItemUnionParam{
				userItem("question"),
				responses.ResponseInputItemParamOfFunctionCall(`{}`, "c1", "lookup"),
				outputItem("c1", "first output"),
				responses.ResponseInputItemParamOfFunctionCall(`{}`, "c2", "lookup"),
				responses.ResponseInputItemParamOfFunctionCall(`{}`, "c3", "lookup"),
				outputItem("c2", "second"),
				outputItem("c3", "third"),
			},
			wantRule: "echo", wantText: `question|third|third|["second","third"]|3|0`,
		},
		{
			name: "arguments as a template string", instructions: "raw", tools: []string{"lookup", "save"},
			input: []responses.ResponseInputItemUnionParam{
				userItem("go"),
				responses.ResponseInputItemParamOfFunctionCall(`{}`, "c1", "lookup"),
				outputItem("c1", `{"a":[1,2]}`),
			},
			wantRule: "raw-args", wantCalls: []string{`save({"copied": {"a":[1,2]}})`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			params := responses.ResponseNewParams{
				Model:        "gpt-test",
				Instructions: openai.String(tt.instructions),
				Input:        responses.ResponseNewParamsInputUnion{OfInputItemList: tt.input},
				Text:         tt.text,
			}
			for _, name := range tt.tools {
				params.Tools = append(params.Tools, fnTool(name))
			}
			resp, err := client.Responses.New(context.Background(), params)
			if err != nil {
				t.Fatal(err)
			}
			if got := lastRule(t, s); got != tt.wantRule {
				t.Errorf("rule = %q, want %q", got, tt.wantRule)
			}
			if resp.Status != "completed" || resp.Model != "gpt-test" || !strings.HasPrefix(resp.ID, "resp_") {
				t.Errorf("response status %q model %q id %q", resp.Status, resp.Model, resp.ID)
			}
			if resp.Usage.InputTokens <= 0 || resp.Usage.OutputTokens <= 0 ||
				resp.Usage.TotalTokens != resp.Usage.InputTokens+resp.Usage.OutputTokens {
				t.Errorf("usage = %+v", resp.Usage)
			}
			if tt.wantText != "" {
				if got := resp.OutputText(); got != tt.wantText {
					t.Errorf("text = %q, want %q", got, tt.wantText)
				}
				if len(resp.Output) != 1 || resp.Output[0].AsMessage().Role != "assistant" {
					t.Errorf("output = %s", resp.RawJSON())
				}
			}
			var calls []string
			for _, item := range resp.Output {
				if item.Type == "function_call" {
					fc := item.AsFunctionCall()
					if !strings.HasPrefix(fc.CallID, "call_") || !strings.HasPrefix(fc.ID, "fc_") {
						t.Errorf("call ids %q %q", fc.CallID, fc.ID)
					}
					calls = append(calls, fc.Name+"("+fc.Arguments+")")
				}
			}
			if strings.Join(calls, " ") != strings.Join(tt.wantCalls, " ") {
				t.Errorf("calls = %q, want %q", calls, tt.wantCalls)
			}
		})
	}
}

func TestChatMatchingAndParallelCalls(t *testing.T) {
	s, baseURL := startServer(t, testScenario)
	client := newClient(baseURL)
	ctx := context.Background()
	tool := func(name string) openai.ChatCompletionToolUnionParam {
		return openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: name,
			Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"doc": map[string]any{
				"type": "string"}}, "required": []string{"doc"}, "additionalProperties": false},
			Strict: openai.Bool(true)})
	}
	params := openai.ChatCompletionNewParams{
		Model:    "gpt-test",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are pricing."), openai.UserMessage("price?")},
		Tools:    []openai.ChatCompletionToolUnionParam{tool("get_document")},
	}
	first, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if lastRule(t, s) != "pricing-lookup" {
		t.Fatalf("rule = %q", lastRule(t, s))
	}
	choice := first.Choices[0]
	if choice.FinishReason != "tool_calls" || len(choice.Message.ToolCalls) != 2 {
		t.Fatalf("first answer = %s", first.RawJSON())
	}
	if !strings.HasPrefix(first.ID, "chatcmpl-") || first.Object != "chat.completion" {
		t.Errorf("id %q object %q", first.ID, first.Object)
	}
	if first.Usage.PromptTokens <= 0 || first.Usage.TotalTokens != first.Usage.PromptTokens+first.Usage.CompletionTokens {
		t.Errorf("usage = %+v", first.Usage)
	}

	// Answer both calls and ask again: turn 2 quotes the outputs.
	params.Messages = append(params.Messages, choice.Message.ToParam())
	outputs := []string{`{"price": 10}`, `{"risk": {"level": "high"}}`}
	for i, tc := range choice.Message.ToolCalls {
		params.Messages = append(params.Messages, openai.ToolMessage(outputs[i], tc.ID))
	}
	second, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	want := `Pricing: {"price": 10} | {"risk": {"level": "high"}} (risk high, turn 2)`
	if got := second.Choices[0].Message.Content; got != want || second.Choices[0].FinishReason != "stop" {
		t.Errorf("second answer = %q (%s), want %q", got, second.Choices[0].FinishReason, want)
	}
	if got := s.Count("pricing-lookup"); got != 1 {
		t.Errorf("Count(pricing-lookup) = %d", got)
	}
	if calls := s.Calls(); len(calls) != 2 || calls[1].API != APIChat || calls[1].Turn != 2 || calls[1].Model != "gpt-test" {
		t.Errorf("calls = %+v", calls)
	}
}

func TestTurnCounting(t *testing.T) {
	src := `
rules:
  - name: turn
    respond: {text: "turn {{.Turn}}"}
`
	_, baseURL := startServer(t, src)
	// Responses: reasoning and two calls are one model turn, the assistant
	// message after the outputs is another.
	body := `{"model":"m","input":[
		{"role":"user","content":"a"},
		{"type":"reasoning","id":"rs_1","summary":[]},
		{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},
		{"type":"function_call","call_id":"c2","name":"f","arguments":"{}"},
		{"type":"function_call_output","call_id":"c1","output":"x"},
		{"type":"function_call_output","call_id":"c2","output":[{"type":"input_text","text":"y"}]},
		{"type":"message","role":"assistant","content":[{"type":"output_text","text":"done"}]},
		{"role":"user","content":[{"type":"input_text","text":"b"}]}]}`
	status, raw := post(t, baseURL+"/responses", body, "Bearer k")
	if status != 200 || !strings.Contains(raw, `"text":"turn 3"`) {
		t.Errorf("responses: %d %s", status, raw)
	}
	// Chat: consecutive assistant messages are one turn.
	body = `{"model":"m","messages":[
		{"role":"system","content":"s"},
		{"role":"user","content":"a"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"x"},
		{"role":"assistant","content":"part one"},
		{"role":"assistant","content":[{"type":"text","text":"part two"}]},
		{"role":"user","content":"b"}]}`
	status, raw = post(t, baseURL+"/chat/completions", body, "Bearer k")
	if status != 200 || !strings.Contains(raw, `"content":"turn 3"`) {
		t.Errorf("chat: %d %s", status, raw)
	}
}

// post sends body with the given Authorization header and returns the status
// and the body.
func post(t *testing.T, url, body, auth string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(b)
}

type errorBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

const (
	strictOK = `{"type":"object","properties":{"q":{"type":"string"}},"required":["q"],"additionalProperties":false}`
)

func TestRejections(t *testing.T) {
	_, baseURL := startServer(t, testScenario)
	responsesTool := func(name, schema string, strict bool) string {
		return `{"type":"function","name":"` + name + `","parameters":` + schema + `,"strict":` + boolString(strict) + `}`
	}
	respBody := func(tools ...string) string {
		return `{"model":"m","instructions":"ok","input":"hi","tools":[` + strings.Join(tools, ",") + `]}`
	}
	chatTool := func(name, schema string, strict bool) string {
		return `{"type":"function","function":{"name":"` + name + `","parameters":` + schema + `,"strict":` + boolString(strict) + `}}`
	}
	chatBody := func(tools ...string) string {
		return `{"model":"m","messages":[{"role":"system","content":"ok"},{"role":"user","content":"hi"}],"tools":[` +
			strings.Join(tools, ",") + `]}`
	}
	tests := []struct {
		name       string
		path       string
		body       string
		auth       string // default "Bearer test-key"
		wantStatus int
		wantMsg    string // exact, unless wantSub
		wantSub    []string
		wantParam  string
		wantCode   string
	}{
		// 1. Strict schemas.
		{name: "strict tool without additionalProperties", path: "/responses",
			body:       respBody(responsesTool("lookup", `{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`, true)),
			wantStatus: 400, wantParam: "tools[0].parameters", wantCode: "invalid_function_parameters",
			wantMsg: "Invalid schema for function 'lookup': In context=(), 'additionalProperties' is required to be supplied and to be false."},
		{name: "strict tool with a property not required", path: "/responses",
			body: respBody(responsesTool("ok_tool", strictOK, true), responsesTool("lookup",
				`{"type":"object","properties":{"address":{"type":"object","properties":{"street":{"type":"string"},"zip":{"type":"string"}},"required":["street"],"additionalProperties":false}},"required":["address"],"additionalProperties":false}`, true)),
			wantStatus: 400, wantParam: "tools[1].parameters", wantCode: "invalid_function_parameters",
			wantMsg: "Invalid schema for function 'lookup': In context=('properties', 'address'), 'required' is required to be supplied and to be an array including every key in properties. Missing 'zip'."},
		{name: "strict tool, object in array items", path: "/responses",
			body:       respBody(responsesTool("lookup", `{"type":"object","properties":{"tags":{"type":"array","items":{"type":"object","properties":{"k":{"type":"string"}},"required":["k"]}}},"required":["tags"],"additionalProperties":false}`, true)),
			wantStatus: 400, wantCode: "invalid_function_parameters",
			wantMsg: "Invalid schema for function 'lookup': In context=('properties', 'tags', 'items'), 'additionalProperties' is required to be supplied and to be false."},
		{name: "strict tool, object in anyOf", path: "/responses",
			body:       respBody(responsesTool("lookup", `{"type":"object","properties":{"x":{"anyOf":[{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false},{"type":"null"}]}},"required":["x"],"additionalProperties":false}`, true)),
			wantStatus: 400, wantCode: "invalid_function_parameters",
			wantMsg: "Invalid schema for function 'lookup': In context=('properties', 'x', 'anyOf', '0'), 'required' is required to be supplied and to be an array including every key in properties. Missing 'a'."},
		{name: "strict tool, object in $defs", path: "/responses",
			body:       respBody(responsesTool("lookup", `{"type":"object","properties":{"a":{"$ref":"#/$defs/Addr"}},"required":["a"],"additionalProperties":false,"$defs":{"Addr":{"type":"object","properties":{"s":{"type":"string"}},"required":["s"],"additionalProperties":true}}}`, true)),
			wantStatus: 400, wantCode: "invalid_function_parameters",
			wantMsg: "Invalid schema for function 'lookup': In context=('$defs', 'Addr'), 'additionalProperties' is required to be supplied and to be false."},
		{name: "strict tool, object without properties", path: "/responses",
			body:       respBody(responsesTool("lookup", `{"type":"object","additionalProperties":false}`, true)),
			wantStatus: 400, wantCode: "invalid_function_parameters",
			wantMsg: "Invalid schema for function 'lookup': In context=(), object schema missing properties."},
		{name: "strict tool, root not an object", path: "/responses",
			body:       respBody(responsesTool("lookup", `{"type":"array","items":{"type":"string"}}`, true)),
			wantStatus: 400, wantCode: "invalid_function_parameters",
			wantMsg: `Invalid schema for function 'lookup': schema must be a JSON Schema of 'type: "object"', got 'type: "array"'.`},
		{name: "non-strict tool with a loose schema is fine", path: "/responses",
			body:       respBody(responsesTool("lookup", `{"type":"object","properties":{"q":{"type":"string"}}}`, false)),
			wantStatus: 200},
		{name: "strict Responses output schema", path: "/responses",
			body:       `{"model":"m","input":"hi","text":{"format":{"type":"json_schema","name":"verdict","strict":true,"schema":{"type":"object","properties":{"v":{"type":"string"}},"additionalProperties":false}}}}`,
			wantStatus: 400, wantParam: "text.format.schema", wantCode: "invalid_json_schema",
			wantMsg: "Invalid schema for response_format 'verdict': In context=(), 'required' is required to be supplied and to be an array including every key in properties. Missing 'v'."},
		{name: "Responses output schema without a name", path: "/responses",
			body:       `{"model":"m","input":"hi","text":{"format":{"type":"json_schema","schema":{"type":"object"}}}}`,
			wantStatus: 400, wantParam: "text.format.name", wantCode: "missing_required_parameter",
			wantMsg: "Missing required parameter: 'text.format.name'."},
		{name: "strict chat tool", path: "/chat/completions",
			body:       chatBody(chatTool("lookup", `{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`, true)),
			wantStatus: 400, wantParam: "tools[0].function.parameters", wantCode: "invalid_function_parameters",
			wantMsg: "Invalid schema for function 'lookup': In context=(), 'additionalProperties' is required to be supplied and to be false."},
		{name: "strict chat response_format", path: "/chat/completions",
			body:       `{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"out","strict":true,"schema":{"type":"object","properties":{"items":{"type":"array","items":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}}},"required":["items"],"additionalProperties":false}}}}`,
			wantStatus: 400, wantParam: "response_format", wantCode: "invalid_json_schema",
			wantMsg: "Invalid schema for response_format 'out': In context=('properties', 'items', 'items'), 'additionalProperties' is required to be supplied and to be false."},

		// 2. Tool names.
		{name: "tool name pattern", path: "/responses", body: respBody(responsesTool("get document", strictOK, true)),
			wantStatus: 400, wantParam: "tools[0].name", wantCode: "invalid_value",
			wantMsg: "Invalid 'tools[0].name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'."},
		{name: "chat tool name pattern", path: "/chat/completions", body: chatBody(chatTool("a.b", strictOK, true)),
			wantStatus: 400, wantParam: "tools[0].function.name", wantCode: "invalid_value",
			wantMsg: "Invalid 'tools[0].function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'."},
		{name: "tool name too long", path: "/responses", body: respBody(responsesTool(strings.Repeat("x", 65), strictOK, true)),
			wantStatus: 400, wantParam: "tools[0].name", wantCode: "string_above_max_length",
			wantMsg: "Invalid 'tools[0].name': string too long. Expected a string with maximum length 64, but got a string with length 65 instead."},
		// Text past OpenAI's 10 MiB in one message, as a string or a part.
		{name: "message too long", path: "/responses",
			body:       `{"model":"m","instructions":"ok","input":[{"role":"user","content":"` + strings.Repeat("x", 10<<20+1) + `"}]}`,
			wantStatus: 400, wantParam: "input[0].content", wantCode: "string_above_max_length",
			wantMsg: "Invalid 'input[0].content': string too long. Expected a string with maximum length 10485760, but got a string with length 10485761 instead."},
		{name: "chat message part too long", path: "/chat/completions",
			body:       `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"` + strings.Repeat("x", 10<<20+1) + `"}]}]}`,
			wantStatus: 400, wantParam: "messages[0].content[0].text", wantCode: "string_above_max_length"},
		{name: "duplicate tool names", path: "/responses",
			body:       respBody(responsesTool("lookup", strictOK, true), responsesTool("lookup", strictOK, false)),
			wantStatus: 400, wantParam: "tools", wantSub: []string{"duplicate function name 'lookup'", "tools[0].name", "tools[1].name"}},
		{name: "chat duplicate tool names", path: "/chat/completions",
			body:       chatBody(chatTool("lookup", strictOK, true), chatTool("lookup", strictOK, true)),
			wantStatus: 400, wantParam: "tools", wantSub: []string{"duplicate function name 'lookup'"}},

		// 3. Calls and outputs must pair up.
		{name: "function call without output", path: "/responses",
			body:       `{"model":"m","instructions":"ok","input":[{"role":"user","content":"hi"},{"type":"function_call","call_id":"call_1","name":"f","arguments":"{}"}]}`,
			wantStatus: 400, wantParam: "input", wantMsg: "No tool output found for function call call_1."},
		{name: "output without function call", path: "/responses",
			body:       `{"model":"m","instructions":"ok","input":[{"role":"user","content":"hi"},{"type":"function_call_output","call_id":"call_9","output":"x"}]}`,
			wantStatus: 400, wantParam: "input", wantMsg: "No tool call found for function call output with call_id call_9."},
		{name: "output before its call", path: "/responses",
			body:       `{"model":"m","instructions":"ok","input":[{"type":"function_call_output","call_id":"c","output":"x"},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}]}`,
			wantStatus: 400, wantMsg: "No tool call found for function call output with call_id c."},
		{name: "chat tool_calls without tool messages", path: "/chat/completions",
			body:       `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"call_2","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_1","content":"x"},{"role":"user","content":"more"}]}`,
			wantStatus: 400, wantParam: "messages",
			wantMsg: "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: call_2"},
		{name: "chat tool_calls at the end", path: "/chat/completions",
			body:       `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`,
			wantStatus: 400, wantSub: []string{"did not have response messages: call_1"}},
		{name: "chat tool message without call", path: "/chat/completions",
			body:       `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"call_7","content":"x"}]}`,
			wantStatus: 400, wantParam: "messages.[1].role",
			wantSub: []string{"messages with role 'tool' must be a response to a preceeding message with 'tool_calls'",
				"No tool call found for function call output with call_id call_7."}},

		// 4. Calls to tools the request does not offer.
		{name: "rule calls a tool not offered", path: "/responses",
			body:       `{"model":"m","instructions":"ghost","input":"hi","tools":[` + responsesTool("real_tool", strictOK, true) + `]}`,
			wantStatus: 400, wantCode: CodeUnknownTool,
			wantSub: []string{`rule "ghost-call"`, `tool "not_offered"`, "offered: [real_tool]"}},
		{name: "tool_choice none rules out calls", path: "/responses",
			body:       `{"model":"m","instructions":"pricing","input":"hi","tool_choice":"none","tools":[` + responsesTool("get_document", strictOK, true) + `]}`,
			wantStatus: 400, wantCode: CodeUnknownTool,
			wantSub: []string{`rule "pricing-lookup"`, `tool "get_document"`, `tool_choice is "none"`}},
		{name: "chat tool_choice forcing another function", path: "/chat/completions",
			body: `{"model":"m","messages":[{"role":"system","content":"pricing"},{"role":"user","content":"hi"}],` +
				`"tool_choice":{"type":"function","function":{"name":"other"}},"tools":[` +
				chatTool("get_document", strictOK, true) + `,` + chatTool("other", strictOK, true) + `]}`,
			wantStatus: 400, wantCode: CodeUnknownTool, wantSub: []string{`tool_choice forces function "other"`}},
		{name: "tool_choice required allows the call", path: "/responses",
			body:       `{"model":"m","instructions":"pricing","input":"hi","tool_choice":"required","tools":[` + responsesTool("get_document", strictOK, true) + `]}`,
			wantStatus: 200},
		{name: "history may call tools no longer offered", path: "/responses",
			body:       `{"model":"m","instructions":"ok","input":[{"role":"user","content":"hi"},{"type":"function_call","call_id":"c","name":"transfer_to_ok","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"{}"}]}`,
			wantStatus: 200},

		// 5. Shape of the request.
		{name: "missing model", path: "/responses", body: `{"input":"hi"}`,
			wantStatus: 400, wantParam: "model", wantCode: "missing_required_parameter",
			wantMsg: "Missing required parameter: 'model'."},
		{name: "chat missing model", path: "/chat/completions", body: `{"messages":[{"role":"user","content":"hi"}]}`,
			wantStatus: 400, wantParam: "model", wantMsg: "Missing required parameter: 'model'."},
		{name: "missing input", path: "/responses", body: `{"model":"m"}`,
			wantStatus: 400, wantParam: "input", wantMsg: "Missing required parameter: 'input'."},
		{name: "empty input array", path: "/responses", body: `{"model":"m","input":[]}`,
			wantStatus: 400, wantParam: "input", wantCode: "empty_array",
			wantMsg: "Invalid 'input': empty array. Expected an array with minimum length 1, but got an empty array instead."},
		{name: "empty input string", path: "/responses", body: `{"model":"m","input":""}`,
			wantStatus: 400, wantParam: "input", wantCode: "empty_string",
			wantMsg: "Invalid 'input': empty string. Expected a string with minimum length 1, but got an empty string instead."},
		{name: "chat missing messages", path: "/chat/completions", body: `{"model":"m"}`,
			wantStatus: 400, wantParam: "messages", wantMsg: "Missing required parameter: 'messages'."},
		{name: "chat empty messages", path: "/chat/completions", body: `{"model":"m","messages":[]}`,
			wantStatus: 400, wantCode: "empty_array",
			wantMsg: "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead."},
		{name: "tools not an array", path: "/responses", body: `{"model":"m","input":"hi","tools":{"type":"function"}}`,
			wantStatus: 400, wantParam: "tools", wantCode: "invalid_type",
			wantMsg: "Invalid type for 'tools': expected an array, but got an object instead."},
		{name: "model not a string", path: "/chat/completions", body: `{"model":4,"messages":[{"role":"user","content":"hi"}]}`,
			wantStatus: 400, wantParam: "model", wantCode: "invalid_type",
			wantMsg: "Invalid type for 'model': expected a string, but got a number instead."},
		{name: "input item not an object", path: "/responses", body: `{"model":"m","input":["hi"]}`,
			wantStatus: 400, wantParam: "input[0]", wantMsg: "Invalid type for 'input[0]': expected an object, but got a string instead."},
		{name: "stream not a boolean", path: "/responses", body: `{"model":"m","input":"hi","stream":"yes"}`,
			wantStatus: 400, wantParam: "stream", wantCode: "invalid_type"},
		{name: "invalid JSON", path: "/responses", body: `{"model":`,
			wantStatus: 400, wantSub: []string{"We could not parse the JSON body of your request."}},
		{name: "unknown fields are accepted", path: "/responses",
			body: `{"model":"m","instructions":"ok","input":"hi","some_future_field":{"x":1}}`, wantStatus: 200},
		{name: "previous_response_id is not supported", path: "/responses",
			body: `{"model":"m","input":"hi","previous_response_id":"resp_1"}`, wantStatus: 400,
			wantParam: "previous_response_id", wantCode: "unsupported_parameter", wantSub: []string{"stores no responses"}},

		// 6. No rule matches.
		{name: "no rule matches", path: "/responses",
			body:       `{"model":"m","instructions":"` + strings.Repeat("You are the billing agent. ", 5) + `","input":"refund order 66"}`,
			wantStatus: 400, wantCode: CodeNoMatch,
			wantSub: []string{"no rule matches this responses request", "turn 1",
				`instructions "You are the billing agent. You are the billing agent. You are the billing agent...."`,
				`last input "refund order 66"`}},
		{name: "chat no rule matches", path: "/chat/completions",
			body:       `{"model":"m","messages":[{"role":"system","content":"billing"},{"role":"user","content":"refund"}]}`,
			wantStatus: 400, wantCode: CodeNoMatch, wantSub: []string{"chat request", `instructions "billing"`, `last input "refund"`}},

		// Authentication.
		{name: "no Authorization header", path: "/responses", auth: "-", body: respBody(),
			wantStatus: 401, wantSub: []string{"You didn't provide an API key."}},
		{name: "empty bearer key", path: "/chat/completions", auth: "Bearer ", body: chatBody(),
			wantStatus: 401, wantSub: []string{"You didn't provide an API key."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			auth := tt.auth
			switch auth {
			case "":
				auth = "Bearer test-key"
			case "-":
				auth = ""
			}
			status, raw := post(t, baseURL+tt.path, tt.body, auth)
			if status != tt.wantStatus {
				t.Fatalf("status = %d, want %d; body %s", status, tt.wantStatus, raw)
			}
			if status == 200 {
				return
			}
			var eb errorBody
			if err := json.Unmarshal([]byte(raw), &eb); err != nil {
				t.Fatalf("error body %s: %v", raw, err)
			}
			if eb.Error.Type != "invalid_request_error" {
				t.Errorf("type = %q", eb.Error.Type)
			}
			if tt.wantMsg != "" && eb.Error.Message != tt.wantMsg {
				t.Errorf("message =\n%s\nwant\n%s", eb.Error.Message, tt.wantMsg)
			}
			for _, sub := range tt.wantSub {
				if !strings.Contains(eb.Error.Message, sub) {
					t.Errorf("message %q does not contain %q", eb.Error.Message, sub)
				}
			}
			if tt.wantParam != "" && (eb.Error.Param == nil || *eb.Error.Param != tt.wantParam) {
				t.Errorf("param = %v, want %q", deref(eb.Error.Param), tt.wantParam)
			}
			if tt.wantCode != "" && (eb.Error.Code == nil || *eb.Error.Code != tt.wantCode) {
				t.Errorf("code = %v, want %q", deref(eb.Error.Code), tt.wantCode)
			}
		})
	}
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func deref(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}

// TestErrorsThroughOpenAIGo checks that openai-go reads the error shape.
func TestErrorsThroughOpenAIGo(t *testing.T) {
	_, baseURL := startServer(t, testScenario)
	client := newClient(baseURL)
	_, err := client.Responses.New(context.Background(), responses.ResponseNewParams{
		Model: "m",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
		Tools: []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{
			Name:       "lookup",
			Parameters: map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}},
			Strict:     openai.Bool(true),
		}}},
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("err = %v, want *openai.Error", err)
	}
	if apiErr.StatusCode != 400 || apiErr.Type != "invalid_request_error" || apiErr.Code != "invalid_function_parameters" ||
		apiErr.Param != "tools[0].parameters" ||
		apiErr.Message != "Invalid schema for function 'lookup': In context=(), 'additionalProperties' is required to be supplied and to be false." {
		t.Errorf("error = %d %q %q %q %q", apiErr.StatusCode, apiErr.Type, apiErr.Code, apiErr.Param, apiErr.Message)
	}

	_, err = client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("nothing matches this")},
	})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != CodeNoMatch {
		t.Errorf("no match: %v", err)
	}

	bad := openai.NewClient(option.WithBaseURL(baseURL), option.WithAPIKey(""), option.WithMaxRetries(0))
	_, err = bad.Models.List(context.Background())
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 {
		t.Errorf("no key: %v", err)
	}
}

func TestStreamingResponses(t *testing.T) {
	s, baseURL := startServer(t, testScenario)
	client := newClient(baseURL)
	tests := []struct {
		name      string
		params    responses.ResponseNewParams
		wantTypes []string
		wantText  string
		wantCalls int
	}{
		{
			name: "text",
			params: responses.ResponseNewParams{Model: "m", Instructions: openai.String("echo"),
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("a question long enough to need several deltas")}},
			wantTypes: []string{"response.created", "response.in_progress", "response.output_item.added",
				"response.content_part.added", "response.output_text.delta", "response.output_text.done",
				"response.content_part.done", "response.output_item.done", "response.completed"},
			wantText: "a question long enough to need several deltas|a question long enough to need several deltas||[]|1|0",
		},
		{
			name: "parallel calls",
			params: responses.ResponseNewParams{Model: "m", Instructions: openai.String("pricing"),
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("price?")},
				Tools: []responses.ToolUnionParam{fnTool("get_document")}},
			wantTypes: []string{"response.created", "response.in_progress",
				"response.output_item.added", "response.function_call_arguments.delta",
				"response.function_call_arguments.done", "response.output_item.done",
				"response.output_item.added", "response.function_call_arguments.delta",
				"response.function_call_arguments.done", "response.output_item.done", "response.completed"},
			wantCalls: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stream := client.Responses.NewStreaming(context.Background(), tt.params)
			var types []string
			var text strings.Builder
			args := map[string]*strings.Builder{}
			var final responses.Response
			lastSeq := int64(-1)
			for stream.Next() {
				ev := stream.Current()
				if ev.SequenceNumber != lastSeq+1 {
					t.Errorf("sequence %d after %d", ev.SequenceNumber, lastSeq)
				}
				lastSeq = ev.SequenceNumber
				if len(types) == 0 || types[len(types)-1] != ev.Type {
					types = append(types, ev.Type)
				}
				switch ev.Type {
				case "response.output_text.delta":
					text.WriteString(ev.Delta)
				case "response.output_item.added":
					if ev.Item.Type == "function_call" {
						args[ev.Item.ID] = &strings.Builder{}
					}
				case "response.function_call_arguments.delta":
					args[ev.ItemID].WriteString(ev.Delta)
				case "response.output_item.done":
					if ev.Item.Type == "function_call" {
						fc := ev.Item.AsFunctionCall()
						if got := args[fc.ID].String(); got != fc.Arguments {
							t.Errorf("argument deltas %q, item %q", got, fc.Arguments)
						}
					}
				case "response.completed":
					final = ev.Response
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if strings.Join(types, " ") != strings.Join(tt.wantTypes, " ") {
				t.Errorf("events:\n%s\nwant\n%s", strings.Join(types, " "), strings.Join(tt.wantTypes, " "))
			}
			if final.Status != "completed" || final.Usage.TotalTokens == 0 {
				t.Errorf("final response = %s", final.RawJSON())
			}
			if tt.wantText != "" && (text.String() != tt.wantText || final.OutputText() != tt.wantText) {
				t.Errorf("deltas %q, final %q, want %q", text.String(), final.OutputText(), tt.wantText)
			}
			if n := len(final.Output); tt.wantCalls > 0 && n != tt.wantCalls {
				t.Errorf("final output has %d items, want %d", n, tt.wantCalls)
			}
			if calls := s.Calls(); !calls[len(calls)-1].Stream {
				t.Error("call not recorded as streamed")
			}
		})
	}
}

func TestStreamingChat(t *testing.T) {
	_, baseURL := startServer(t, testScenario)
	client := newClient(baseURL)
	tool := openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_document"})
	tests := []struct {
		name       string
		params     openai.ChatCompletionNewParams
		wantText   string
		wantCalls  []string
		wantFinish string
	}{
		{
			name: "text with usage",
			params: openai.ChatCompletionNewParams{Model: "m",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("echo"),
					openai.UserMessage("ünïcödé text that spans more than one delta")},
				StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}},
			wantText:   "ünïcödé text that spans more than one delta|ünïcödé text that spans more than one delta||[]|1|0",
			wantFinish: "stop",
		},
		{
			name: "parallel tool calls",
			params: openai.ChatCompletionNewParams{Model: "m",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("pricing"), openai.UserMessage("price?")},
				Tools:    []openai.ChatCompletionToolUnionParam{tool}},
			wantCalls:  []string{`get_document({"doc":"pricing"})`, `get_document({"doc":"discounts-1"})`},
			wantFinish: "tool_calls",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stream := client.Chat.Completions.NewStreaming(context.Background(), tt.params)
			acc := openai.ChatCompletionAccumulator{}
			chunks := 0
			for stream.Next() {
				chunk := stream.Current()
				if chunk.Object != "chat.completion.chunk" {
					t.Errorf("object = %q", chunk.Object)
				}
				if !acc.AddChunk(chunk) {
					t.Fatalf("accumulator rejected chunk %s", chunk.RawJSON())
				}
				chunks++
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if chunks < 3 {
				t.Errorf("only %d chunks", chunks)
			}
			if len(acc.Choices) != 1 {
				t.Fatalf("choices = %d", len(acc.Choices))
			}
			msg := acc.Choices[0].Message
			if msg.Content != tt.wantText {
				t.Errorf("content = %q, want %q", msg.Content, tt.wantText)
			}
			var calls []string
			for _, tc := range msg.ToolCalls {
				if !strings.HasPrefix(tc.ID, "call_") {
					t.Errorf("tool call id %q", tc.ID)
				}
				calls = append(calls, tc.Function.Name+"("+tc.Function.Arguments+")")
			}
			if strings.Join(calls, " ") != strings.Join(tt.wantCalls, " ") {
				t.Errorf("calls = %q, want %q", calls, tt.wantCalls)
			}
			if acc.Choices[0].FinishReason != tt.wantFinish {
				t.Errorf("finish = %q, want %q", acc.Choices[0].FinishReason, tt.wantFinish)
			}
			if tt.params.StreamOptions.IncludeUsage.Value && acc.Usage.TotalTokens == 0 {
				t.Error("no usage accumulated")
			}
		})
	}
}

func TestDeterministicIDs(t *testing.T) {
	_, baseURL := startServer(t, testScenario)
	client := newClient(baseURL)
	ask := func(input string) *responses.Response {
		t.Helper()
		resp, err := client.Responses.New(context.Background(), responses.ResponseNewParams{
			Model: "m", Instructions: openai.String("pricing"),
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(input)},
			Tools: []responses.ToolUnionParam{fnTool("get_document")},
		})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	a, b, c := ask("price?"), ask("price?"), ask("other price?")
	idsOf := func(r *responses.Response) string {
		ids := []string{r.ID}
		for _, it := range r.Output {
			ids = append(ids, it.ID, it.CallID)
		}
		return strings.Join(ids, " ")
	}
	if idsOf(a) != idsOf(b) {
		t.Errorf("retry changed ids: %s vs %s", idsOf(a), idsOf(b))
	}
	if idsOf(a) == idsOf(c) {
		t.Errorf("different inputs share ids: %s", idsOf(a))
	}
	if a.Output[0].CallID == a.Output[1].CallID {
		t.Error("parallel calls share a call id")
	}
}

func TestDelayOverlapAndCancel(t *testing.T) {
	s, baseURL := startServer(t, testScenario)
	client := newClient(baseURL)
	params := responses.ResponseNewParams{Model: "m", Instructions: openai.String("slow"),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("go")}}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if _, err := client.Responses.New(context.Background(), params); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	calls := s.Calls()
	if len(calls) != 2 {
		t.Fatalf("calls = %+v", calls)
	}
	if !calls[0].Start.Before(calls[1].End) || !calls[1].Start.Before(calls[0].End) {
		t.Errorf("calls did not overlap: %+v", calls)
	}
	if d := calls[0].End.Sub(calls[0].Start); d < 300*time.Millisecond {
		t.Errorf("delay not applied: %s", d)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := client.Responses.New(ctx, params); err == nil {
		t.Fatal("request outlived its context")
	}
	deadline := time.Now().Add(2 * time.Second)
	for len(s.Calls()) < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	calls = s.Calls()
	if len(calls) != 3 || !calls[2].Canceled {
		t.Errorf("canceled call not recorded: %+v", calls)
	}
	if got := s.Count("slow"); got != 2 {
		t.Errorf("Count(slow) = %d, want 2", got)
	}
}

// TestInFlightCountsCallsUnderWay: a call is in flight from the moment
// its rule matched until its answer is sent or its client left, and only
// under its own rule.
func TestInFlightCountsCallsUnderWay(t *testing.T) {
	s, baseURL := startServer(t, testScenario)
	client := newClient(baseURL)
	params := responses.ResponseNewParams{Model: "m", Instructions: openai.String("slow"),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("go")}}
	if n := s.InFlight("slow"); n != 0 {
		t.Fatalf("InFlight before any call = %d", n)
	}
	done := make(chan error, 1)
	go func() {
		_, err := client.Responses.New(context.Background(), params)
		done <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for s.InFlight("slow") != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the slow call never showed in flight")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := s.Count("slow"); n != 0 {
		t.Errorf("Count while in flight = %d, want 0", n)
	}
	if n := s.InFlight("other"); n != 0 {
		t.Errorf("InFlight of another rule = %d", n)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n, c := s.InFlight("slow"), s.Count("slow"); n != 0 || c != 1 {
		t.Errorf("after the answer: InFlight = %d, Count = %d; want 0 and 1", n, c)
	}
}

// TestRequestsCountsARequestSentAgainOnce: a request sent twice with the
// same body (a model call made again, at least once) is two answers
// (Count) but one request (Requests); another body is another request.
func TestRequestsCountsARequestSentAgainOnce(t *testing.T) {
	s, baseURL := startServer(t, testScenario)
	client := newClient(baseURL)
	ask := func(user string) {
		t.Helper()
		params := openai.ChatCompletionNewParams{
			Model:    "gpt-test",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are pricing."), openai.UserMessage(user)},
			Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_document",
				Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{}}})},
		}
		if _, err := client.Chat.Completions.New(context.Background(), params); err != nil {
			t.Fatal(err)
		}
	}
	ask("price?")
	ask("price?")
	ask("price, again?")
	if count, requests := s.Count("pricing-lookup"), s.Requests("pricing-lookup"); count != 3 || requests != 2 {
		t.Errorf("Count = %d, Requests = %d; want 3 answers to 2 requests", count, requests)
	}
	calls := s.Calls()
	if len(calls) != 3 || calls[0].Digest == "" || calls[0].Digest != calls[1].Digest || calls[1].Digest == calls[2].Digest {
		t.Errorf("digests %q, want the first two equal, the third another", []string{calls[0].Digest, calls[1].Digest, calls[2].Digest})
	}
}

func TestModelsAndRoutes(t *testing.T) {
	_, baseURL := startServer(t, testScenario)
	client := newClient(baseURL)
	page, err := client.Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.Data[0].ID != ModelName {
		t.Errorf("models = %+v", page.Data)
	}
	m, err := client.Models.Get(context.Background(), "gpt-anything")
	if err != nil || m.ID != "gpt-anything" {
		t.Errorf("model = %+v, %v", m, err)
	}
	status, raw := post(t, strings.TrimSuffix(baseURL, "/v1")+"/v1/embeddings", `{}`, "Bearer k")
	if status != 404 || !strings.Contains(raw, "Invalid URL (POST /v1/embeddings)") {
		t.Errorf("unknown route: %d %s", status, raw)
	}
	// The /v1 prefix is optional.
	status, _ = post(t, strings.TrimSuffix(baseURL, "/v1")+"/responses",
		`{"model":"m","instructions":"ok","input":"hi"}`, "Bearer k")
	if status != 200 {
		t.Errorf("POST /responses = %d", status)
	}
}

func TestServe(t *testing.T) {
	path := t.TempDir() + "/scenario.yaml"
	if err := os.WriteFile(path, []byte("rules:\n  - {name: hello, respond: {text: hi}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	log := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, path, "127.0.0.1:0", log) }()
	var baseURL string
	for deadline := time.Now().Add(5 * time.Second); baseURL == "" && time.Now().Before(deadline); {
		for _, line := range strings.Split(log.String(), "\n") {
			if u, ok := strings.CutPrefix(line, "OPENAI_BASE_URL="); ok {
				baseURL = u
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	if baseURL == "" {
		t.Fatalf("no base URL in log %q", log.String())
	}
	client := newClient(baseURL)
	resp, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "m",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hey")}})
	if err != nil || resp.OutputText() != "hi" {
		t.Fatalf("answer = %v, %v", resp, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve = %v", err)
	}
	if !strings.Contains(log.String(), `rule "hello" answered`) {
		t.Errorf("log lacks the answered request: %q", log.String())
	}
	if err := Serve(context.Background(), t.TempDir()+"/missing.yaml", "127.0.0.1:0", nil); err == nil {
		t.Error("Serve with a missing scenario succeeded")
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// leavingWriter is a response writer whose client leaves the moment the
// answer's last piece reached it, as a streaming client that stops at [DONE]
// or response.completed and closes its connection does: the request's context
// is canceled on that write.
type leavingWriter struct {
	*httptest.ResponseRecorder
	last   string // the piece after which the client leaves; "" for any write
	cancel context.CancelFunc
}

func (w *leavingWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseRecorder.Write(b)
	if w.last == "" || strings.Contains(string(b), w.last) {
		w.cancel()
	}
	return n, err
}

func TestAnswerReadWholeIsCounted(t *testing.T) {
	sc, err := ParseScenario([]byte(testScenario))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, body, last string
	}{
		{"responses stream", "/v1/responses", `{"model":"m","instructions":"ok","input":"go","stream":true}`, "response.completed"},
		{"responses", "/v1/responses", `{"model":"m","instructions":"ok","input":"go"}`, ""},
		{"chat stream", "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"system","content":"ok"},{"role":"user","content":"go"}]}`, "[DONE]"},
		{"chat", "/v1/chat/completions", `{"model":"m","messages":[{"role":"system","content":"ok"},{"role":"user","content":"go"}]}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(sc)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			r := httptest.NewRequestWithContext(ctx, http.MethodPost, tc.path, strings.NewReader(tc.body))
			r.Header.Set("Authorization", "Bearer k")
			w := &leavingWriter{ResponseRecorder: httptest.NewRecorder(), last: tc.last, cancel: cancel}
			s.ServeHTTP(w, r)
			if w.Code != http.StatusOK || ctx.Err() == nil {
				t.Fatalf("status %d, client left %v: %s", w.Code, ctx.Err() != nil, w.Body)
			}
			if calls := s.Calls(); len(calls) != 1 || calls[0].Canceled || s.Count("ok") != 1 {
				t.Errorf("an answer read whole was not counted: %+v", calls)
			}
		})
	}
}
