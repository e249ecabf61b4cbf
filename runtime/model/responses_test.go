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

// responsesOK is a minimal successful Responses API answer.
const responsesOK = `{
  "id": "resp_1", "object": "response", "created_at": 1700000000, "status": "completed", "model": "gpt-4.1",
  "output": [
    {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
     "content": [{"type": "output_text", "text": "Hello.", "annotations": []}]}
  ],
  "usage": {"input_tokens": 5, "output_tokens": 2, "total_tokens": 7}
}`

var weatherParams = json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`)

func TestResponsesRequest(t *testing.T) {
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
				"model": `"gpt-4.1"`,
				"store": `false`,
				"input": `[{"type":"message","role":"user","content":"hi"}]`,
			},
			absent: []string{"instructions", "tools", "tool_choice", "parallel_tool_calls", "text", "temperature", "top_p", "max_output_tokens", "include", "previous_response_id"},
		},
		{
			name: "model and instructions",
			req:  model.Request{Model: "gpt-5-mini", Instructions: "Be brief.", Input: []agents.Item{agents.UserMessage("hi")}},
			want: map[string]string{"model": `"gpt-5-mini"`, "instructions": `"Be brief."`},
		},
		{
			name: "a whole transcript",
			req: model.Request{Input: []agents.Item{
				{Type: agents.ItemMessage, Role: agents.RoleSystem, Content: "sys"},
				{Type: agents.ItemMessage, Role: agents.RoleDeveloper, Content: "dev"},
				agents.UserMessage("weather in Paris and Oslo?"),
				{Type: agents.ItemReasoning, ID: "rs_1", Summary: "Two lookups.", EncryptedContent: "gAAA"},
				{Type: agents.ItemMessage, Role: agents.RoleAssistant, Content: "Looking.", ID: "msg_1", Agent: "weather"},
				{Type: agents.ItemFunctionCall, ID: "fc_1", CallID: "call_1", Name: "weather", Arguments: `{"city":"Paris"}`},
				{Type: agents.ItemFunctionCall, ID: "fc_2", CallID: "call_2", Name: "weather", Arguments: `{"city":"Oslo"}`},
				agents.FunctionCallOutput("call_1", "sunny"),
				{Type: agents.ItemFunctionCallOutput, CallID: "call_2", Output: "rain", OutputRef: "blob/2"},
				agents.AssistantMessage("Sunny in Paris, rain in Oslo."),
			}},
			want: map[string]string{"input": `[
				{"type":"message","role":"system","content":"sys"},
				{"type":"message","role":"developer","content":"dev"},
				{"type":"message","role":"user","content":"weather in Paris and Oslo?"},
				{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"Two lookups."}],"encrypted_content":"gAAA"},
				{"type":"message","role":"assistant","id":"msg_1","status":"completed",
				 "content":[{"type":"output_text","text":"Looking.","annotations":[]}]},
				{"type":"function_call","id":"fc_1","call_id":"call_1","name":"weather","arguments":"{\"city\":\"Paris\"}"},
				{"type":"function_call","id":"fc_2","call_id":"call_2","name":"weather","arguments":"{\"city\":\"Oslo\"}"},
				{"type":"function_call_output","call_id":"call_1","output":"sunny"},
				{"type":"function_call_output","call_id":"call_2","output":"rain"},
				{"type":"message","role":"assistant","content":"Sunny in Paris, rain in Oslo."}
			]`},
		},
		{
			name: "reasoning without encrypted content is dropped with its turn's ids",
			req: model.Request{Input: []agents.Item{
				agents.UserMessage("q"),
				{Type: agents.ItemReasoning, ID: "rs_1"},
				{Type: agents.ItemMessage, Role: agents.RoleAssistant, Content: "a", ID: "msg_1"},
				{Type: agents.ItemFunctionCall, ID: "fc_1", CallID: "call_1", Name: "f", Arguments: "{}"},
				agents.FunctionCallOutput("call_1", ""),
				{Type: agents.ItemReasoning, ID: "rs_2", EncryptedContent: "gBBB"},
				{Type: agents.ItemFunctionCall, ID: "fc_2", CallID: "call_2", Name: "f", Arguments: "{}"},
			}},
			want: map[string]string{"input": `[
				{"type":"message","role":"user","content":"q"},
				{"type":"message","role":"assistant","content":"a"},
				{"type":"function_call","call_id":"call_1","name":"f","arguments":"{}"},
				{"type":"function_call_output","call_id":"call_1","output":""},
				{"type":"reasoning","id":"rs_2","summary":[],"encrypted_content":"gBBB"},
				{"type":"function_call","id":"fc_2","call_id":"call_2","name":"f","arguments":"{}"}
			]`},
		},
		{
			name: "function call outputs with images become content parts",
			req: model.Request{Input: []agents.Item{
				agents.UserMessage("what is in the pictures?"),
				agents.FunctionCall("call_1", "view_image", `{"path":"a.png"}`),
				agents.FunctionCall("call_2", "view_image", `{"path":"b.png"}`),
				{Type: agents.ItemFunctionCallOutput, CallID: "call_1", Output: "Image a.png (image/png, 67 bytes)", Images: []string{"data:image/png;base64,iVBORw0K"}},
				{Type: agents.ItemFunctionCallOutput, CallID: "call_2", Images: []string{"data:image/gif;base64,R0lG", "data:image/webp;base64,UklG"}},
			}},
			want: map[string]string{"input": `[
				{"type":"message","role":"user","content":"what is in the pictures?"},
				{"type":"function_call","call_id":"call_1","name":"view_image","arguments":"{\"path\":\"a.png\"}"},
				{"type":"function_call","call_id":"call_2","name":"view_image","arguments":"{\"path\":\"b.png\"}"},
				{"type":"function_call_output","call_id":"call_1","output":[
					{"type":"input_text","text":"Image a.png (image/png, 67 bytes)"},
					{"type":"input_image","image_url":"data:image/png;base64,iVBORw0K"}
				]},
				{"type":"function_call_output","call_id":"call_2","output":[
					{"type":"input_image","image_url":"data:image/gif;base64,R0lG"},
					{"type":"input_image","image_url":"data:image/webp;base64,UklG"}
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
				{"type":"function","name":"weather","description":"Looks up the weather.","strict":true,"parameters":` + string(weatherParams) + `},
				{"type":"function","name":"loose","strict":false,"parameters":{"type":"object","properties":{}}},
				{"type":"function","name":"noargs","strict":true,"parameters":{"type":"object","properties":{},"required":[],"additionalProperties":false}}
			]`},
		},
		{
			name: "structured output as text.format",
			req: model.Request{Output: &agents.OutputSpec{
				Name: "Forecast", Strict: true,
				Schema: json.RawMessage(`{"type":"object","properties":{"sky":{"type":"string"}},"required":["sky"],"additionalProperties":false}`),
			}},
			want: map[string]string{"text": `{"format":{"type":"json_schema","name":"Forecast","strict":true,
				"schema":{"type":"object","properties":{"sky":{"type":"string"}},"required":["sky"],"additionalProperties":false}}}`},
		},
		{
			name: "structured output without a name",
			req:  model.Request{Output: &agents.OutputSpec{Schema: json.RawMessage(`{"type":"object"}`)}},
			want: map[string]string{"text": `{"format":{"type":"json_schema","name":"output","strict":false,"schema":{"type":"object"}}}`},
		},
		{
			name: "sampling settings",
			req: model.Request{Settings: agents.ModelSettings{
				Temperature: agents.Float(0.2), TopP: agents.Float(0.9), MaxTokens: agents.Int(256),
			}},
			want: map[string]string{"temperature": `0.2`, "top_p": `0.9`, "max_output_tokens": `256`},
		},
		{
			name:   "tool settings without tools are left out",
			req:    model.Request{Settings: agents.ModelSettings{ToolChoice: "required", ParallelToolCalls: agents.Bool(false)}},
			absent: []string{"tool_choice", "parallel_tool_calls"},
		},
	}
	for _, choice := range []struct{ setting, wire string }{
		{"auto", `"auto"`},
		{"required", `"required"`},
		{"none", `"none"`},
		{"weather", `{"type":"function","name":"weather"}`},
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
				Settings: agents.ModelSettings{ToolChoice: choice.setting, ParallelToolCalls: agents.Bool(false)},
			},
			want: map[string]string{"tool_choice": choice.wire, "parallel_tool_calls": `false`},
		})
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, w := serve(t, 200, responsesOK)
			m := newModel(t, model.APIResponses, srv.URL)
			if _, err := m.Respond(context.Background(), tt.req); err != nil {
				t.Fatal(err)
			}
			assertBody(t, w, tt.want, tt.absent)
		})
	}
}

func TestResponsesResult(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		want  []agents.Item
		usage model.Usage
		// finish is the response's finish reason, mapped from its status
		// and output.
		finish string
	}{
		{
			name: "reasoning, text and parallel calls, in order",
			body: `{
			  "id": "resp_2", "object": "response", "status": "completed", "model": "o4-mini",
			  "output": [
			    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "First."}, {"type": "summary_text", "text": "Second."}], "encrypted_content": "gAAA"},
			    {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
			     "content": [{"type": "output_text", "text": "Checking ", "annotations": []}, {"type": "output_text", "text": "both.", "annotations": []}]},
			    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather", "arguments": "{\"city\":\"Paris\"}", "status": "completed"},
			    {"type": "function_call", "id": "fc_2", "call_id": "call_2", "name": "weather", "arguments": "{\"city\":\"Oslo\"}", "status": "completed"},
			    {"type": "web_search_call", "id": "ws_1", "status": "completed"}
			  ],
			  "usage": {"input_tokens": 120, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 30, "output_tokens_details": {"reasoning_tokens": 10}, "total_tokens": 150}
			}`,
			want: []agents.Item{
				{Type: agents.ItemReasoning, ID: "rs_1", Summary: "First.\n\nSecond.", EncryptedContent: "gAAA"},
				{Type: agents.ItemMessage, Role: agents.RoleAssistant, Content: "Checking both.", ID: "msg_1"},
				{Type: agents.ItemFunctionCall, ID: "fc_1", CallID: "call_1", Name: "weather", Arguments: `{"city":"Paris"}`},
				{Type: agents.ItemFunctionCall, ID: "fc_2", CallID: "call_2", Name: "weather", Arguments: `{"city":"Oslo"}`},
			},
			usage:  model.Usage{Requests: 1, InputTokens: 120, OutputTokens: 30, TotalTokens: 150},
			finish: "tool_calls",
		},
		{
			name: "a refusal stands in for missing text",
			body: `{"id": "resp_3", "status": "completed", "output": [
			  {"type": "message", "id": "msg_9", "role": "assistant", "status": "completed",
			   "content": [{"type": "refusal", "refusal": "I can't help with that."}]}],
			  "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}}`,
			want:   []agents.Item{{Type: agents.ItemMessage, Role: agents.RoleAssistant, Content: "I can't help with that.", ID: "msg_9"}},
			usage:  model.Usage{Requests: 1, InputTokens: 1, OutputTokens: 1, TotalTokens: 2},
			finish: "stop",
		},
		{
			name:   "no usage reported",
			body:   `{"id": "resp_4", "status": "completed", "output": []}`,
			usage:  model.Usage{Requests: 1},
			finish: "stop",
		},
		{
			name: "cut at the output token limit",
			body: `{"id": "resp_5", "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}, "output": [
			  {"type": "message", "id": "msg_5", "role": "assistant", "status": "incomplete",
			   "content": [{"type": "output_text", "text": "Once upon", "annotations": []}]}]}`,
			want:   []agents.Item{{Type: agents.ItemMessage, Role: agents.RoleAssistant, Content: "Once upon", ID: "msg_5"}},
			usage:  model.Usage{Requests: 1},
			finish: "length",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := serve(t, 200, tt.body)
			m := newModel(t, model.APIResponses, srv.URL)
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
			if res.FinishReason != tt.finish {
				t.Errorf("FinishReason = %q; want %q", res.FinishReason, tt.finish)
			}
		})
	}
}

// TestResponsesFailedStatus checks that a response the server marks failed
// with HTTP 200 is an error, classified by its error code.
func TestResponsesFailedStatus(t *testing.T) {
	tests := []struct {
		code      string
		status    int
		retryable bool
	}{
		{"server_error", 500, true},
		{"rate_limit_exceeded", 429, true},
		{"invalid_prompt", 400, false},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			srv, _ := serve(t, 200, `{"id": "resp_5", "status": "failed", "output": [],
			  "error": {"code": "`+tt.code+`", "message": "it failed"}}`)
			m := newModel(t, model.APIResponses, srv.URL)
			_, err := m.Respond(context.Background(), model.Request{Input: []agents.Item{agents.UserMessage("hi")}})
			var ae *model.APIError
			if !errors.As(err, &ae) {
				t.Fatalf("error = %v; want *model.APIError", err)
			}
			want := model.APIError{StatusCode: tt.status, Type: "response_failed", Code: tt.code, Message: "it failed"}
			if *ae != want {
				t.Errorf("APIError = %+v; want %+v", *ae, want)
			}
			if model.IsRetryable(err) != tt.retryable {
				t.Errorf("IsRetryable = %v; want %v", model.IsRetryable(err), tt.retryable)
			}
		})
	}
}
