package model_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/model"
)

// chatOK is a minimal successful Chat Completions answer.
const chatOK = `{
  "id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000, "model": "gpt-4.1",
  "choices": [{"index": 0, "finish_reason": "stop", "logprobs": null,
               "message": {"role": "assistant", "content": "Hello.", "refusal": null}}],
  "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
}`

func TestChatRequest(t *testing.T) {
	tests := []struct {
		name   string
		req    model.Request
		want   map[string]string
		absent []string
	}{
		{
			name: "defaults",
			req:  model.Request{Input: []agents.Item{agents.UserMessage("hi")}},
			want: map[string]string{
				"model":    `"gpt-4.1"`,
				"messages": `[{"role":"user","content":"hi"}]`,
			},
			absent: []string{"tools", "tool_choice", "parallel_tool_calls", "response_format", "temperature", "top_p", "max_tokens", "max_completion_tokens", "store"},
		},
		{
			name: "instructions come first as a system message",
			req: model.Request{Model: "llama3", Instructions: "Be brief.", Input: []agents.Item{
				{Type: agents.ItemMessage, Role: agents.RoleSystem, Content: "sys"},
				{Type: agents.ItemMessage, Role: agents.RoleDeveloper, Content: "dev"},
				agents.UserMessage("hi"),
				agents.AssistantMessage("hello"),
			}},
			want: map[string]string{
				"model": `"llama3"`,
				"messages": `[
					{"role":"system","content":"Be brief."},
					{"role":"system","content":"sys"},
					{"role":"developer","content":"dev"},
					{"role":"user","content":"hi"},
					{"role":"assistant","content":"hello"}
				]`,
			},
		},
		{
			name: "parallel calls join the turn's text on one assistant message",
			req: model.Request{Input: []agents.Item{
				agents.UserMessage("weather in Paris and Oslo?"),
				{Type: agents.ItemReasoning, ID: "rs_1", EncryptedContent: "gAAA"},
				{Type: agents.ItemMessage, Role: agents.RoleAssistant, Content: "Looking.", ID: "msg_1"},
				{Type: agents.ItemReasoning, ID: "rs_2", EncryptedContent: "gBBB"},
				{Type: agents.ItemFunctionCall, ID: "fc_1", CallID: "call_1", Name: "weather", Arguments: `{"city":"Paris"}`},
				{Type: agents.ItemFunctionCall, ID: "fc_2", CallID: "call_2", Name: "weather", Arguments: `{"city":"Oslo"}`},
				agents.FunctionCallOutput("call_1", "sunny"),
				agents.FunctionCallOutput("call_2", "rain"),
				agents.FunctionCall("call_3", "weather", `{"city":"Rome"}`),
				agents.FunctionCallOutput("call_3", ""),
				agents.AssistantMessage("Sunny, rain, and unknown."),
			}},
			want: map[string]string{"messages": `[
				{"role":"user","content":"weather in Paris and Oslo?"},
				{"role":"assistant","content":"Looking.","tool_calls":[
					{"id":"call_1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"}},
					{"id":"call_2","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Oslo\"}"}}
				]},
				{"role":"tool","tool_call_id":"call_1","content":"sunny"},
				{"role":"tool","tool_call_id":"call_2","content":"rain"},
				{"role":"assistant","tool_calls":[
					{"id":"call_3","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Rome\"}"}}
				]},
				{"role":"tool","tool_call_id":"call_3","content":""},
				{"role":"assistant","content":"Sunny, rain, and unknown."}
			]`},
		},
		{
			name: "a user message between calls starts a new assistant message",
			req: model.Request{Input: []agents.Item{
				agents.FunctionCall("call_1", "f", "{}"),
				agents.UserMessage("also"),
				agents.FunctionCall("call_2", "f", "{}"),
			}},
			want: map[string]string{"messages": `[
				{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]},
				{"role":"user","content":"also"},
				{"role":"assistant","tool_calls":[{"id":"call_2","type":"function","function":{"name":"f","arguments":"{}"}}]}
			]`},
		},
		{
			name: "images of tool outputs follow the turn's tool messages in a user message",
			req: model.Request{Input: []agents.Item{
				agents.UserMessage("what is in the pictures?"),
				agents.FunctionCall("call_1", "view_image", `{"path":"a.png"}`),
				agents.FunctionCall("call_2", "exec_command", `{"cmd":"ls"}`),
				agents.FunctionCall("call_3", "view_image", `{"path":"b.gif"}`),
				{Type: agents.ItemFunctionCallOutput, CallID: "call_1", Output: "Image a.png", Images: []string{"data:image/png;base64,iVBORw0K"}},
				agents.FunctionCallOutput("call_2", "a.png b.gif"),
				{Type: agents.ItemFunctionCallOutput, CallID: "call_3", Images: []string{"data:image/gif;base64,R0lG"}},
				{Type: agents.ItemReasoning, ID: "rs_1", EncryptedContent: "gAAA"},
				agents.AssistantMessage("A cat and a dog."),
				agents.FunctionCall("call_4", "view_image", `{"path":"c.png"}`),
				{Type: agents.ItemFunctionCallOutput, CallID: "call_4", Output: "Image c.png", Images: []string{"data:image/png;base64,AAAA"}},
			}},
			want: map[string]string{"messages": `[
				{"role":"user","content":"what is in the pictures?"},
				{"role":"assistant","tool_calls":[
					{"id":"call_1","type":"function","function":{"name":"view_image","arguments":"{\"path\":\"a.png\"}"}},
					{"id":"call_2","type":"function","function":{"name":"exec_command","arguments":"{\"cmd\":\"ls\"}"}},
					{"id":"call_3","type":"function","function":{"name":"view_image","arguments":"{\"path\":\"b.gif\"}"}}
				]},
				{"role":"tool","tool_call_id":"call_1","content":"Image a.png"},
				{"role":"tool","tool_call_id":"call_2","content":"a.png b.gif"},
				{"role":"tool","tool_call_id":"call_3","content":""},
				{"role":"user","content":[
					{"type":"text","text":"Images returned by tool call call_1:"},
					{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0K"}},
					{"type":"text","text":"Images returned by tool call call_3:"},
					{"type":"image_url","image_url":{"url":"data:image/gif;base64,R0lG"}}
				]},
				{"role":"assistant","content":"A cat and a dog.","tool_calls":[
					{"id":"call_4","type":"function","function":{"name":"view_image","arguments":"{\"path\":\"c.png\"}"}}
				]},
				{"role":"tool","tool_call_id":"call_4","content":"Image c.png"},
				{"role":"user","content":[
					{"type":"text","text":"Images returned by tool call call_4:"},
					{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}
				]}
			]`},
		},
		{
			name: "tools, strict and not",
			req: model.Request{Tools: []agents.ToolSpec{
				{Name: "weather", Description: "Looks up the weather.", Parameters: weatherParams, Strict: true},
				{Name: "loose", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)},
				{Name: "noargs", Strict: true},
			}},
			want: map[string]string{"tools": `[
				{"type":"function","function":{"name":"weather","description":"Looks up the weather.","strict":true,"parameters":` + string(weatherParams) + `}},
				{"type":"function","function":{"name":"loose","parameters":{"type":"object","properties":{}}}},
				{"type":"function","function":{"name":"noargs","strict":true,"parameters":{"type":"object","properties":{},"required":[],"additionalProperties":false}}}
			]`},
		},
		{
			name: "structured output as response_format",
			req: model.Request{Output: &agents.OutputSpec{
				Name: "Forecast", Strict: true,
				Schema: json.RawMessage(`{"type":"object","properties":{"sky":{"type":"string"}},"required":["sky"],"additionalProperties":false}`),
			}},
			want: map[string]string{"response_format": `{"type":"json_schema","json_schema":{"name":"Forecast","strict":true,
				"schema":{"type":"object","properties":{"sky":{"type":"string"}},"required":["sky"],"additionalProperties":false}}}`},
		},
		{
			name: "sampling settings; max_tokens becomes max_completion_tokens",
			req: model.Request{Settings: agents.ModelSettings{
				Temperature: agents.Float(0), TopP: agents.Float(0.5), MaxTokens: agents.Int(100),
			}},
			want:   map[string]string{"temperature": `0`, "top_p": `0.5`, "max_completion_tokens": `100`},
			absent: []string{"max_tokens"},
		},
		{
			name:   "tool settings without tools are left out",
			req:    model.Request{Settings: agents.ModelSettings{ToolChoice: "none", ParallelToolCalls: agents.Bool(true)}},
			absent: []string{"tool_choice", "parallel_tool_calls"},
		},
	}
	for _, choice := range []struct{ setting, wire string }{
		{"auto", `"auto"`},
		{"required", `"required"`},
		{"none", `"none"`},
		{"weather", `{"type":"function","function":{"name":"weather"}}`},
	} {
		tests = append(tests, struct {
			name   string
			req    model.Request
			want   map[string]string
			absent []string
		}{
			name: "tool_choice " + choice.setting,
			req: model.Request{
				Tools:    []agents.ToolSpec{{Name: "weather", Parameters: weatherParams, Strict: true}},
				Settings: agents.ModelSettings{ToolChoice: choice.setting, ParallelToolCalls: agents.Bool(true)},
			},
			want: map[string]string{"tool_choice": choice.wire, "parallel_tool_calls": `true`},
		})
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, w := serve(t, 200, chatOK)
			m := newModel(t, model.APIChat, srv.URL)
			if _, err := m.Respond(context.Background(), tt.req); err != nil {
				t.Fatal(err)
			}
			assertBody(t, w, tt.want, tt.absent)
		})
	}
}

func TestChatResult(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		want  []agents.Item
		usage model.Usage
		// finish and model are the response's finish reason and model.
		finish, model string
	}{
		{
			name:  "text",
			body:  chatOK,
			want:  []agents.Item{agents.AssistantMessage("Hello.")},
			usage: model.Usage{Requests: 1, InputTokens: 5, OutputTokens: 2, TotalTokens: 7},
		},
		{
			name: "text and parallel tool calls",
			body: `{"id": "chatcmpl-2", "object": "chat.completion", "model": "gpt-4.1",
			  "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": "Checking both.",
			    "tool_calls": [
			      {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}},
			      {"id": "call_2", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}}
			    ]}}],
			  "usage": {"prompt_tokens": 100, "completion_tokens": 40, "total_tokens": 140}}`,
			want: []agents.Item{
				agents.AssistantMessage("Checking both."),
				agents.FunctionCall("call_1", "weather", `{"city":"Paris"}`),
				agents.FunctionCall("call_2", "weather", `{"city":"Oslo"}`),
			},
			usage:  model.Usage{Requests: 1, InputTokens: 100, OutputTokens: 40, TotalTokens: 140},
			finish: "tool_calls", model: "gpt-4.1",
		},
		{
			name: "tool calls only",
			body: `{"id": "chatcmpl-3", "choices": [{"index": 0, "finish_reason": "tool_calls",
			  "message": {"role": "assistant", "content": null,
			    "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}}]}`,
			want:   []agents.Item{agents.FunctionCall("call_1", "f", "{}")},
			usage:  model.Usage{Requests: 1},
			finish: "tool_calls",
		},
		{
			name: "refusal",
			body: `{"id": "chatcmpl-4", "choices": [{"index": 0, "finish_reason": "stop",
			  "message": {"role": "assistant", "content": null, "refusal": "I can't help with that."}}]}`,
			want:   []agents.Item{agents.AssistantMessage("I can't help with that.")},
			usage:  model.Usage{Requests: 1},
			finish: "stop",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := serve(t, 200, tt.body)
			m := newModel(t, model.APIChat, srv.URL)
			res, err := m.Respond(context.Background(), model.Request{Input: []agents.Item{agents.UserMessage("hi")}})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(res.Output, tt.want) {
				t.Errorf("Output:\n got %+v\nwant %+v", res.Output, tt.want)
			}
			if res.Usage != tt.usage {
				t.Errorf("Usage = %+v; want %+v", res.Usage, tt.usage)
			}
			if res.ID == "" {
				t.Errorf("ID is empty")
			}
			if tt.finish != "" && (res.FinishReason != tt.finish || res.Model != tt.model) {
				t.Errorf("FinishReason, Model = %q, %q; want %q, %q", res.FinishReason, res.Model, tt.finish, tt.model)
			}
		})
	}
}

func TestChatNoChoices(t *testing.T) {
	srv, _ := serve(t, 200, `{"id": "chatcmpl-5", "choices": []}`)
	m := newModel(t, model.APIChat, srv.URL)
	_, err := m.Respond(context.Background(), model.Request{Input: []agents.Item{agents.UserMessage("hi")}})
	var ae *model.APIError
	if !errors.As(err, &ae) || !model.IsRetryable(err) {
		t.Fatalf("error = %v; want a retryable *model.APIError", err)
	}
}
