package model

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/troupe-dev/troupe/agents"
)

// The encoding of the input must be openai-go's, byte for byte: the
// reference below is the mapping Respond used before it encoded the input
// itself.
func TestInputEncodingIsOpenAIs(t *testing.T) {
	odd := []string{"", "plain", "go <&> \"q\" \\ é", "\u2028\u2029", "\x00\x01\x1f\b\f\n\r\t", "bad \xff\xfe utf8", "emoji 😀", `{"turn":"1"}`}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		var sb strings.Builder
		for range r.IntN(40) {
			switch r.IntN(4) {
			case 0:
				sb.WriteByte(byte(r.IntN(256)))
			case 1:
				sb.WriteRune(rune(r.IntN(0x10FFFF)))
			default:
				sb.WriteByte(byte(0x20 + r.IntN(95)))
			}
		}
		odd = append(odd, sb.String())
	}
	var tables [][]agents.Item
	for _, s := range odd {
		tables = append(tables, []agents.Item{
			agents.UserMessage(s),
			{Type: agents.ItemMessage, Role: agents.RoleSystem, Content: s},
			{Type: agents.ItemMessage, Role: agents.RoleDeveloper, Content: s},
			{Type: agents.ItemMessage, Role: agents.RoleAssistant, Content: s, ID: "msg_" + s},
			{Type: agents.ItemMessage, Role: agents.RoleAssistant, Content: s},
			{Type: agents.ItemReasoning, ID: "rs_" + s, EncryptedContent: "enc" + s, Summary: s},
			{Type: agents.ItemReasoning, ID: "rs_2", EncryptedContent: "enc"},
			{Type: agents.ItemFunctionCall, ID: "fc_" + s, CallID: "call_" + s, Name: "noop" + s, Arguments: s},
			{Type: agents.ItemFunctionCall, CallID: "call_2", Name: "noop", Arguments: `{}`},
			agents.FunctionCallOutput("call_"+s, s),
			{Type: agents.ItemFunctionCallOutput, CallID: "call_3", Output: s, Images: []string{"data:image/png;base64,AAA" + s, "u2"}},
			{Type: agents.ItemFunctionCallOutput, CallID: "call_4", Images: []string{"data:image/png;base64,AAA"}},
			// A reasoning item without its content is dropped, and the ids
			// of the model's items after it.
			{Type: agents.ItemReasoning, ID: "rs_3"},
			{Type: agents.ItemMessage, Role: agents.RoleAssistant, Content: s, ID: "msg_2"},
			{Type: agents.ItemFunctionCall, ID: "fc_2", CallID: "call_5", Name: "noop", Arguments: s},
			agents.FunctionCallOutput("call_5", s),
			{Type: agents.ItemFunctionCall, ID: "fc_3", CallID: "call_6", Name: "noop", Arguments: s},
		})
	}
	tables = append(tables, nil, []agents.Item{})
	for i, items := range tables {
		want, err := openAIInput(items)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendInput(nil, items)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("table %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

func TestInputEncodingErrors(t *testing.T) {
	for _, items := range [][]agents.Item{
		{{Type: agents.ItemMessage, Role: "robot", Content: "x"}},
		{{Type: "nope"}},
		{{Type: agents.ItemFunctionCallOutput, CallID: "c", OutputRef: "outputs/x"}},
	} {
		_, want := responsesInput(items)
		_, got := appendInput(nil, items)
		if want == nil || got == nil || got.Error() != want.Error() {
			t.Errorf("%+v: got %v, want %v", items, got, want)
		}
	}
}

// openAIInput is the input as openai-go encodes it.
func openAIInput(items []agents.Item) ([]byte, error) {
	in, err := responsesInput(items)
	if err != nil {
		return nil, err
	}
	if len(in) == 0 {
		return []byte("[]"), nil
	}
	return responses.ResponseNewParamsInputUnion{OfInputItemList: in}.MarshalJSON()
}

// responsesInput is the mapping of a transcript onto openai-go's input
// items that Respond used before appendInput, kept as the reference the
// encoding is checked against.
//
// A reasoning item can only be passed back with its encrypted content:
// with store=false the server keeps nothing to resolve its id against. One
// without is dropped, and so are the ids of the items that follow it in
// the same model turn, so that the server does not look for the reasoning
// item those ids were paired with.
func responsesInput(items []agents.Item) (responses.ResponseInputParam, error) {
	out := make(responses.ResponseInputParam, 0, len(items))
	droppedReasoning := false
	for i, it := range items {
		fromModel := it.Type == agents.ItemReasoning || it.Type == agents.ItemFunctionCall ||
			(it.Type == agents.ItemMessage && it.Role == agents.RoleAssistant)
		if !fromModel {
			droppedReasoning = false
		}
		id := it.ID
		if droppedReasoning {
			id = ""
		}

		switch it.Type {
		case agents.ItemMessage:
			switch it.Role {
			case agents.RoleAssistant:
				if id != "" {
					out = append(out, responses.ResponseInputItemUnionParam{
						OfOutputMessage: &responses.ResponseOutputMessageParam{
							ID:     id,
							Status: responses.ResponseOutputMessageStatusCompleted,
							Content: []responses.ResponseOutputMessageContentUnionParam{{
								OfOutputText: &responses.ResponseOutputTextParam{
									Text:        it.Content,
									Annotations: []responses.ResponseOutputTextAnnotationUnionParam{},
								},
							}},
						},
					})
					continue
				}
				fallthrough
			case agents.RoleUser, agents.RoleSystem, agents.RoleDeveloper:
				out = append(out, responses.ResponseInputItemUnionParam{
					OfMessage: &responses.EasyInputMessageParam{
						Role:    responses.EasyInputMessageRole(it.Role),
						Content: responses.EasyInputMessageContentUnionParam{OfString: param.NewOpt(it.Content)},
						Type:    responses.EasyInputMessageTypeMessage,
					},
				})
			default:
				return nil, invalid("input item %d: message role %q", i, it.Role)
			}

		case agents.ItemFunctionCall:
			fc := &responses.ResponseFunctionToolCallParam{
				CallID:    it.CallID,
				Name:      it.Name,
				Arguments: it.Arguments,
			}
			if id != "" {
				fc.ID = param.NewOpt(id)
			}
			out = append(out, responses.ResponseInputItemUnionParam{OfFunctionCall: fc})

		case agents.ItemFunctionCallOutput:
			if it.OutputRef != "" && it.Output == "" {
				return nil, invalid("input item %d: output of call %q is still a reference (%s); resolve it before calling the model", i, it.CallID, it.OutputRef)
			}
			output := responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: param.NewOpt(it.Output)}
			if len(it.Images) > 0 {
				output = responses.ResponseInputItemFunctionCallOutputOutputUnionParam{
					OfResponseFunctionCallOutputItemArray: outputParts(it),
				}
			}
			out = append(out, responses.ResponseInputItemUnionParam{
				OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
					CallID: param.NewOpt(it.CallID),
					Output: output,
				},
			})

		case agents.ItemReasoning:
			if it.ID == "" || it.EncryptedContent == "" {
				droppedReasoning = true
				continue
			}
			droppedReasoning = false
			r := &responses.ResponseReasoningItemParam{
				ID:               it.ID,
				Summary:          []responses.ResponseReasoningItemSummaryParam{},
				EncryptedContent: param.NewOpt(it.EncryptedContent),
			}
			if it.Summary != "" {
				r.Summary = append(r.Summary, responses.ResponseReasoningItemSummaryParam{Text: it.Summary})
			}
			out = append(out, responses.ResponseInputItemUnionParam{OfReasoning: r})

		default:
			return nil, invalid("input item %d: unknown type %q", i, it.Type)
		}
	}
	return out, nil
}

// outputParts is a function call output with images as content parts:
// its text, when there is any, then each image.
func outputParts(it agents.Item) responses.ResponseFunctionCallOutputItemListParam {
	var parts responses.ResponseFunctionCallOutputItemListParam
	if it.Output != "" {
		parts = append(parts, responses.ResponseFunctionCallOutputItemUnionParam{
			OfInputText: &responses.ResponseInputTextContentParam{Text: it.Output},
		})
	}
	for _, url := range it.Images {
		parts = append(parts, responses.ResponseFunctionCallOutputItemUnionParam{
			OfInputImage: &responses.ResponseInputImageContentParam{ImageURL: param.NewOpt(url)},
		})
	}
	return parts
}

// Respond reads a response as openai-go does.
func TestResponseDecodingIsOpenAIs(t *testing.T) {
	for _, body := range []string{
		`{"id":"resp_1","object":"response","status":"completed","model":"gpt-4.1","output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"hello ","annotations":[]},{"type":"output_text","text":"world","annotations":[]}]}],"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":4},"output_tokens":3,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":13},"tools":[{"type":"function","name":"noop","parameters":{"type":"object"},"strict":true}],"instructions":"be brief","error":null,"incomplete_details":null}`,
		`{"id":"resp_2","status":"completed","model":"m","output":[{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"a"},{"type":"summary_text","text":"b"}],"encrypted_content":"enc"},{"type":"function_call","id":"fc_1","call_id":"call_1","name":"noop","arguments":"{\"turn\":\"1\"}","status":"completed"},{"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search","query":"q"}}]}`,
		`{"id":"resp_3","status":"completed","model":"m","output":[{"type":"message","id":"msg_1","role":"assistant","content":[{"type":"refusal","refusal":"no"}]}]}`,
		`{"id":"resp_4","status":"incomplete","model":"m","incomplete_details":{"reason":"max_output_tokens"},"output":[]}`,
		`{"id":"resp_5","status":"incomplete","model":"m","output":[]}`,
		`{"id":"resp_6","status":"failed","model":"m","error":{"code":"rate_limit_exceeded","message":"slow down"},"output":[]}`,
		`{"id":"resp_7","status":"failed","model":"m","error":{"code":"server_error","message":""}}`,
		// Members of other types than documented: openai-go's leniency.
		`{"id":"resp_8","status":"completed","model":"m","usage":{"input_tokens":"12"},"output":[{"type":"function_call","id":"fc_1","call_id":"call_1","name":"noop","arguments":{"turn":"1"}}]}`,
	} {
		wire, err := decodeResponse([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		oai, err := openAIResponse([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		got, gotErr := responsesResult(wire)
		want, wantErr := responsesResult(oai)
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v, %v\nwant %+v, %v", body, got, gotErr, want, wantErr)
		}
	}
}

// The whole request Respond sends is the one openai-go's NewStreaming sent
// when it encoded the input itself: the same members with the same values
// (the order of the top-level members aside), and the same headers.
func TestRequestIsOpenAIs(t *testing.T) {
	params := json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"z":{"type":"integer"},"a":{"type":"boolean"}},"required":["city","z","a"],"additionalProperties":false}`)
	items := []agents.Item{
		{Type: agents.ItemMessage, Role: agents.RoleSystem, Content: "sys \u2028 <b>"},
		agents.UserMessage("weather in Paris? \x00 bad \xff"),
		{Type: agents.ItemReasoning, ID: "rs_1", Summary: "Two lookups.", EncryptedContent: "gAAA"},
		{Type: agents.ItemMessage, Role: agents.RoleAssistant, Content: "Looking.", ID: "msg_1"},
		{Type: agents.ItemFunctionCall, ID: "fc_1", CallID: "call_1", Name: "weather", Arguments: `{"city":"Paris"}`},
		{Type: agents.ItemFunctionCallOutput, CallID: "call_1", Output: "sunny", Images: []string{"data:image/png;base64,AAA"}},
		agents.AssistantMessage("Sunny."),
	}
	var requests []Request
	for _, req := range []Request{
		{Input: items},
		{Model: "gpt-5-mini", Instructions: "Be brief.\n\nAnd \"kind\".", Input: items},
		{Input: items, Tools: []agents.ToolSpec{
			{Name: "weather", Description: "Looks up the weather.", Parameters: params, Strict: true},
			{Name: "loose", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)},
			{Name: "noargs", Strict: true},
		}, Settings: agents.ModelSettings{ToolChoice: "weather", ParallelToolCalls: agents.Bool(false), Temperature: agents.Float(0.2), TopP: agents.Float(0.9), MaxTokens: agents.Int(256)}},
		{Input: items, Output: &agents.OutputSpec{Name: "Forecast", Strict: true, Schema: params}},
		{Input: nil},
	} {
		requests = append(requests, req)
	}
	for _, choice := range []string{"auto", "required", "none"} {
		requests = append(requests, Request{Input: items, Tools: []agents.ToolSpec{{Name: "noargs"}}, Settings: agents.ModelSettings{ToolChoice: choice}})
	}

	type seen struct {
		body   []byte
		header http.Header
	}
	var got []seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h := r.Header.Clone()
		h.Set("X-Test-Request-Line", r.Method+" "+r.URL.String())
		got = append(got, seen{body, h})
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"status\":\"completed\",\"model\":\"m\",\"output\":[]}}\n\n")
	}))
	defer srv.Close()
	cfg := Config{APIKey: "sk-test", BaseURL: srv.URL, DefaultModel: "gpt-4.1"}
	opts := []option.RequestOption{option.WithBaseURL(srv.URL), option.WithAPIKey("sk-test"), option.WithMaxRetries(0)}
	m := newResponsesModel(cfg, opts)
	svc := responses.NewResponseService(opts...)
	for i, req := range requests {
		// The reference: the input mapped onto openai-go's params, and
		// the whole body encoded and sent by openai-go.
		p, err := responsesParams(cfg, req)
		if err != nil {
			t.Fatal(err)
		}
		in, err := responsesInput(req.Input)
		if err != nil {
			t.Fatal(err)
		}
		p.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: in}
		stream := svc.NewStreaming(context.Background(), p)
		for stream.Next() {
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		stream.Close()
		// Sent twice: the second time with the head encoded the first.
		for range 2 {
			if _, err := m.Respond(context.Background(), req); err != nil {
				t.Fatal(err)
			}
		}
		want := got[3*i]
		for _, have := range got[3*i+1 : 3*i+3] {
			sameRequest(t, fmt.Sprint("request ", i), have.body, have.header, want.body, want.header)
		}
	}
}

// sameRequest fails t unless a request's body has the same members with
// the same values as another's, the same length, and the same headers.
func sameRequest(t *testing.T, what string, body []byte, header http.Header, wantBody []byte, wantHeader http.Header) {
	t.Helper()
	var w, g map[string]any
	if err := json.Unmarshal(wantBody, &w); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(body, &g); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s:\n got %s\nwant %s", what, body, wantBody)
	}
	if !reflect.DeepEqual(header, wantHeader) {
		t.Errorf("%s: headers\n%v\nwant\n%v", what, header, wantHeader)
	}
	if len(body) != len(wantBody) {
		t.Errorf("%s: %d bytes, want %d", what, len(body), len(wantBody))
	}
}

// A request's head is encoded anew when anything in it changed, in place
// included (the caller's tools, schema, settings), and when it was
// pushed out by more recent ones.
func TestRequestHeadCache(t *testing.T) {
	var bodies [][]byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		bodies = append(bodies, body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"status\":\"completed\",\"model\":\"m\",\"output\":[]}}\n\n")
	}))
	defer srv.Close()
	cfg := Config{APIKey: "sk-test", BaseURL: srv.URL, DefaultModel: "gpt-4.1"}
	m := newResponsesModel(cfg, []option.RequestOption{option.WithBaseURL(srv.URL), option.WithAPIKey("sk-test"), option.WithMaxRetries(0)})
	member := func(name string) string {
		t.Helper()
		var b map[string]json.RawMessage
		if err := json.Unmarshal(bodies[len(bodies)-1], &b); err != nil {
			t.Fatal(err)
		}
		return string(b[name])
	}
	send := func(req Request) {
		t.Helper()
		if _, err := m.Respond(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	req := Request{
		Instructions: "one",
		Input:        []agents.Item{agents.UserMessage("hi")},
		Tools:        []agents.ToolSpec{{Name: "f", Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}}}`)}},
		Output:       &agents.OutputSpec{Name: "o", Schema: json.RawMessage(`{"type":"object","title":"x"}`)},
		Settings:     agents.ModelSettings{Temperature: agents.Float(0.5), ToolChoice: "auto"},
	}
	send(req)
	req.Tools[0].Parameters[len(`{"type":"object","properties":{"`)] = 'b'
	send(req)
	if got := member("tools"); !strings.Contains(got, `"b"`) {
		t.Errorf("tools after a change in place: %s", got)
	}
	req.Output.Schema[len(`{"type":"object","title":"`)] = 'y'
	send(req)
	if got := member("text"); !strings.Contains(got, `"y"`) {
		t.Errorf("text after a change in place: %s", got)
	}
	*req.Settings.Temperature = 0.25
	send(req)
	if got := member("temperature"); got != "0.25" {
		t.Errorf("temperature after a change in place: %s", got)
	}
	req.Input = append(req.Input, agents.AssistantMessage("hello"))
	send(req)
	if got := member("temperature"); got != "0.25" || !strings.Contains(member("input"), "hello") {
		t.Errorf("another input: temperature %s, input %s", got, member("input"))
	}
	// More heads than are kept, twice over: each is its own.
	for round := range 2 {
		for i := range maxHeads + 3 {
			send(Request{Instructions: fmt.Sprint("agent ", i), Input: req.Input})
			if got := member("instructions"); got != fmt.Sprintf(`"agent %d"`, i) {
				t.Fatalf("round %d: instructions %s, want agent %d", round, got, i)
			}
		}
	}
}

// An event with a member of another type than documented is read as
// openai-go reads it, not taken for a broken stream.
func TestStreamEventDecodingIsOpenAIs(t *testing.T) {
	for _, data := range []string{
		`{"type":"response.output_text.delta","output_index":1,"delta":"hi","sequence_number":4}`,
		`{"type":"response.output_text.delta","output_index":"1","delta":"hi"}`,
		`{"type":"response.output_text.delta","output_index":1,"delta":7}`,
		`{"type":"response.output_item.added","output_index":0,"item":{"type":"message","id":"m"}}`,
		`{"type":"response.output_item.done","output_index":2.0,"item":{"type":"function_call","call_id":"c","arguments":{"a":1}}}`,
		`{"type":"response.completed","response":{"id":"r","status":"completed","output":[]}}`,
		`{"type":"error","code":null,"message":"boom"}`,
		`{"type":"error","code":429,"message":["boom"]}`,
	} {
		var got streamEvent
		if err := json.Unmarshal([]byte(data), &got); err != nil {
			t.Errorf("%s: %v", data, err)
			continue
		}
		var u responses.ResponseStreamEventUnion
		if err := json.Unmarshal([]byte(data), &u); err != nil {
			t.Fatal(err)
		}
		if got.Type != u.Type || got.OutputIndex != u.OutputIndex || got.Delta != u.Delta || got.Code != u.Code || got.Message != u.Message {
			t.Errorf("%s: got %+v, openai-go read %q %d %q %q %q", data, got, u.Type, u.OutputIndex, u.Delta, u.Code, u.Message)
		}
		if itemType(got.Item) != u.Item.Type {
			t.Errorf("%s: item type %q, openai-go read %q", data, itemType(got.Item), u.Item.Type)
		}
		if len(got.Response) > 0 && string(got.Response) != u.Response.RawJSON() {
			t.Errorf("%s: response %s, openai-go read %s", data, got.Response, u.Response.RawJSON())
		}
	}
}

// A body is one allocation when its items need little escaping, whatever
// their kinds.
func TestBodyIsOneAllocation(t *testing.T) {
	items := []agents.Item{agents.UserMessage("go")}
	for i := range 50 {
		c := agents.FunctionCall(fmt.Sprint("call_", i), "noop", `{"turn":"1"}`)
		c.ID = fmt.Sprint("fc_", i)
		items = append(items, c, agents.FunctionCallOutput(c.CallID, "ok"),
			agents.Item{Type: agents.ItemReasoning, ID: "r", EncryptedContent: "e", Summary: "s"},
			agents.Item{Type: agents.ItemMessage, Role: agents.RoleAssistant, ID: "m", Content: "a"},
			agents.Item{Type: agents.ItemMessage, Role: agents.RoleDeveloper, Content: "d"},
			agents.Item{Type: agents.ItemFunctionCallOutput, CallID: "c", Output: "o", Images: []string{"u", "v"}})
	}
	head := []byte(`{"model":"gpt-4.1","store":false}`)
	if n := testing.AllocsPerRun(5, func() { _, _ = responsesBody(head, items) }); n != 1 {
		t.Errorf("%v allocations, want 1", n)
	}
}

// peekType finds an event's type as encoding/json decodes it, or says it
// cannot; and an event it lets Respond skip is one the decoders (ours,
// or openai-go's for an odd event) would have had it skip too.
func TestPeekType(t *testing.T) {
	names := []string{`"type"`, `"Type"`, `"TYPE"`, `"tYpE"`, `"\u0074ype"`, `"typ"`, `"types"`, `"item"`, `"output_index"`, `"delta"`, `"ty\"pe"`, `"ſ"`, `"é"`}
	values := []string{`"response.created"`, `"response.completed"`, `"error"`, `"resp\u006fnse.created"`, `"a\"b"`, `5`, `-1.5e3`, `null`, `true`, `false`, `"1"`,
		`{"type":"response.completed","a":[1,{"b":"}"}]}`, `["type","]",{}]`, `{}`, `[]`, `""`, `"response.in_progress"`}
	r := rand.New(rand.NewPCG(3, 4))
	var cases []string
	for range 20000 {
		var sb strings.Builder
		sb.WriteString([]string{"{", " {\n", "{\t"}[r.IntN(3)])
		for m := range r.IntN(5) {
			if m > 0 {
				sb.WriteString([]string{",", " , ", ",\n"}[r.IntN(3)])
			}
			sb.WriteString(names[r.IntN(len(names))])
			sb.WriteString([]string{":", " : "}[r.IntN(2)])
			sb.WriteString(values[r.IntN(len(values))])
		}
		sb.WriteString([]string{"}", " }"}[r.IntN(2)])
		cases = append(cases, sb.String())
	}
	cases = append(cases, `[]`, `"x"`, `5`, `null`, `{}`, `{"type":"response.created"}`)
	peeked := 0
	for _, data := range cases {
		if !json.Valid([]byte(data)) {
			t.Fatalf("the test made invalid JSON: %s", data)
		}
		typ, ok := peekType([]byte(data))
		if !ok {
			continue
		}
		peeked++
		type plain streamEvent
		var p plain
		if err := json.Unmarshal([]byte(data), &p); err == nil {
			if p.Type != typ {
				t.Errorf("%s: peeked %q, encoding/json reads %q", data, typ, p.Type)
			}
			continue
		}
		var u responses.ResponseStreamEventUnion
		if err := json.Unmarshal([]byte(data), &u); err != nil {
			t.Errorf("%s: peeked %q; openai-go fails: %v", data, typ, err)
		} else if !actedOn(typ) && actedOn(u.Type) {
			t.Errorf("%s: peeked %q, skipped; openai-go reads %q, acted on", data, typ, u.Type)
		}
	}
	if peeked < 1000 {
		t.Errorf("only %d of %d events peeked", peeked, len(cases))
	}
}
