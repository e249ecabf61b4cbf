// This file encodes the part of a Responses request that grows with the
// conversation, the input items, and decodes the stream's events, both by
// hand: openai-go's reflective encoder and decoder took most of a turn's
// client time on a long transcript (about 3 µs an item to encode, and
// every event of the stream decoded in full into a union of all events).
// What they produce and read is the same JSON: responses_wire_test.go
// checks the encoding against openai-go's own.

package model

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/openai/openai-go/v3/responses"

	"github.com/troupe-dev/troupe/agents"
)

// responsesBody is the JSON body of a streamed turn: "stream" and "input"
// encoded here, then the rest of the request, head (model, instructions,
// tools, settings: the JSON object of its params as openai-go encodes
// them, see responsesHead).
func responsesBody(head []byte, items []agents.Item) ([]byte, error) {
	// One allocation, as a rule: each item's strings, its members' names
	// and punctuation, and room for some escaping.
	size := len(head) + 32
	for _, it := range items {
		n := len(it.ID) + len(it.CallID) + len(it.Name) + len(it.Content) + len(it.Arguments) + len(it.Output) + len(it.Summary) + len(it.EncryptedContent)
		switch it.Type {
		case agents.ItemMessage:
			n += 128
		case agents.ItemFunctionCall:
			n += 80
		case agents.ItemReasoning:
			n += 112
		default:
			n += 72
		}
		for _, url := range it.Images {
			n += 48 + len(url)
		}
		size += n + n/16
	}
	body := make([]byte, 0, size)
	body = append(body, `{"stream":true,"input":`...)
	body, err := appendInput(body, items)
	if err != nil {
		return nil, err
	}
	if len(head) > 2 { // more than {}
		body = append(body, ',')
	}
	return append(body, head[1:]...), nil
}

// appendInput appends the Responses input items of a transcript, as a
// JSON array.
//
// A reasoning item can only be passed back with its encrypted content:
// with store=false the server keeps nothing to resolve its id against. One
// without is dropped, and so are the ids of the items that follow it in
// the same model turn, so that the server does not look for the reasoning
// item those ids were paired with.
func appendInput(b []byte, items []agents.Item) ([]byte, error) {
	b = append(b, '[')
	first := true
	sep := func() {
		if !first {
			b = append(b, ',')
		}
		first = false
	}
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
			if it.ContentRef != "" {
				return nil, invalid("input item %d: message is still a reference (%s); resolve it before calling the model", i, it.ContentRef)
			}
			switch it.Role {
			case agents.RoleAssistant, agents.RoleUser, agents.RoleSystem, agents.RoleDeveloper:
			default:
				return nil, invalid("input item %d: message role %q", i, it.Role)
			}
			sep()
			if it.Role == agents.RoleAssistant && id != "" {
				b = append(b, `{"id":`...)
				b = appendString(b, id)
				b = append(b, `,"content":[{"annotations":[],"text":`...)
				b = appendString(b, it.Content)
				b = append(b, `,"type":"output_text"}],"status":"completed","role":"assistant","type":"message"}`...)
				continue
			}
			b = append(b, `{"content":`...)
			b = appendString(b, it.Content)
			b = append(b, `,"role":`...)
			b = appendString(b, string(it.Role))
			b = append(b, `,"type":"message"}`...)

		case agents.ItemFunctionCall:
			sep()
			b = append(b, `{"arguments":`...)
			b = appendString(b, it.Arguments)
			b = append(b, `,"call_id":`...)
			b = appendString(b, it.CallID)
			b = append(b, `,"name":`...)
			b = appendString(b, it.Name)
			if id != "" {
				b = append(b, `,"id":`...)
				b = appendString(b, id)
			}
			b = append(b, `,"type":"function_call"}`...)

		case agents.ItemFunctionCallOutput:
			if it.OutputRef != "" && it.Output == "" {
				return nil, invalid("input item %d: output of call %q is still a reference (%s); resolve it before calling the model", i, it.CallID, it.OutputRef)
			}
			sep()
			b = append(b, `{"output":`...)
			if len(it.Images) == 0 {
				b = appendString(b, it.Output)
			} else {
				b = append(b, '[')
				if it.Output != "" {
					b = append(b, `{"text":`...)
					b = appendString(b, it.Output)
					b = append(b, `,"type":"input_text"}`...)
				}
				for j, url := range it.Images {
					if j > 0 || it.Output != "" {
						b = append(b, ',')
					}
					b = append(b, `{"image_url":`...)
					b = appendString(b, url)
					b = append(b, `,"type":"input_image"}`...)
				}
				b = append(b, ']')
			}
			b = append(b, `,"call_id":`...)
			b = appendString(b, it.CallID)
			b = append(b, `,"type":"function_call_output"}`...)

		case agents.ItemReasoning:
			if it.ID == "" || it.EncryptedContent == "" {
				droppedReasoning = true
				continue
			}
			droppedReasoning = false
			sep()
			b = append(b, `{"id":`...)
			b = appendString(b, it.ID)
			b = append(b, `,"summary":[`...)
			if it.Summary != "" {
				b = append(b, `{"text":`...)
				b = appendString(b, it.Summary)
				b = append(b, `,"type":"summary_text"}`...)
			}
			b = append(b, `],"encrypted_content":`...)
			b = appendString(b, it.EncryptedContent)
			b = append(b, `,"type":"reasoning"}`...)

		default:
			return nil, invalid("input item %d: unknown type %q", i, it.Type)
		}
	}
	return append(b, ']'), nil
}

// appendString appends s as a JSON string, escaped as encoding/json does
// without HTML escaping (as openai-go sends it): quotes, backslashes and
// control characters escaped, invalid UTF-8 as U+FFFD, and U+2028 and
// U+2029 escaped.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// streamEvent is what Respond reads of an event of a Responses stream:
// its type and the few members it acts on, the item and the response kept
// as JSON and decoded only where they are used.
type streamEvent struct {
	Type        string          `json:"type"`
	OutputIndex int64           `json:"output_index"`
	Delta       string          `json:"delta"`
	Item        json.RawMessage `json:"item"`
	Response    json.RawMessage `json:"response"`
	Code        string          `json:"code"`
	Message     string          `json:"message"`
}

// UnmarshalJSON decodes an event. One that does not fit streamEvent (a
// member of another type than the API documents, which some compatible
// servers send) is decoded by openai-go, which is lenient about such
// things, as Respond always did: a stream is not cut short for a member
// Respond would not have read.
//
// An event of a type Respond does not act on (most of a stream's bytes:
// response.created and .in_progress repeat the instructions and tools) is
// not decoded: its type is found by a look at its members' names.
func (e *streamEvent) UnmarshalJSON(data []byte) error {
	if t, ok := peekType(data); ok && !actedOn(t) {
		*e = streamEvent{Type: t}
		return nil
	}
	type plain streamEvent
	var p plain
	if json.Unmarshal(data, &p) == nil {
		*e = streamEvent(p)
		return nil
	}
	var u responses.ResponseStreamEventUnion
	if err := json.Unmarshal(data, &u); err != nil {
		return err
	}
	*e = streamEvent{Type: u.Type, OutputIndex: u.OutputIndex, Delta: u.Delta, Code: u.Code, Message: u.Message,
		Item: rawOrNil(u.Item.RawJSON()), Response: rawOrNil(u.Response.RawJSON())}
	return nil
}

// actedOn reports whether Respond acts on events of type t.
func actedOn(t string) bool {
	switch t {
	case "response.output_item.added", "response.output_text.delta", "response.output_item.done",
		"response.completed", "response.incomplete", "response.failed", "error":
		return true
	}
	return false
}

// peekType is the type of an event, data, as encoding/json decodes it
// into streamEvent, when that is plain to see: data (valid JSON, as the
// stream's decoder checked) is an object, one member's name is "type" in
// any case (encoding/json matches names so), no other's is and no name
// has an escape, and its value is a string without one. Otherwise ok is
// false, and the event is to be decoded.
func peekType(data []byte) (t string, ok bool) {
	i := skipSpace(data, 0)
	if i == len(data) || data[i] != '{' {
		return "", false
	}
	found := false
	for i = skipSpace(data, i+1); i < len(data) && data[i] != '}'; {
		// A member: its name, a colon, its value, and a comma or the end.
		if data[i] != '"' {
			return "", false
		}
		end := stringEnd(data, i)
		if end < 0 {
			return "", false
		}
		name := data[i+1 : end-1]
		if bytes.IndexByte(name, '\\') >= 0 {
			return "", false
		}
		i = skipSpace(data, end)
		if i == len(data) || data[i] != ':' {
			return "", false
		}
		i = skipSpace(data, i+1)
		if len(name) == 4 && name[0]|0x20 == 't' && name[1]|0x20 == 'y' && name[2]|0x20 == 'p' && name[3]|0x20 == 'e' {
			if found || i == len(data) || data[i] != '"' {
				return "", false
			}
			end := stringEnd(data, i)
			if end < 0 {
				return "", false
			}
			if bytes.IndexByte(data[i+1:end-1], '\\') >= 0 {
				return "", false
			}
			t, found = string(data[i+1:end-1]), true
			i = end
		} else if i = valueEnd(data, i); i < 0 {
			return "", false
		}
		i = skipSpace(data, i)
		if i < len(data) && data[i] == ',' {
			i = skipSpace(data, i+1)
		}
	}
	return t, found
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// stringEnd is the index after the JSON string that starts at data[i], or
// -1.
func stringEnd(data []byte, i int) int {
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// valueEnd is the index after the JSON value that starts at data[i], or
// -1: a string, an object or array (its strings skipped whole), or a
// number or literal, which ends where the member does.
func valueEnd(data []byte, i int) int {
	depth := 0
	for i < len(data) {
		switch c := data[i]; c {
		case '"':
			if i = stringEnd(data, i); i < 0 {
				return -1
			}
			if depth == 0 {
				return i
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i // the end of the enclosing object
			}
			if depth--; depth == 0 {
				return i + 1
			}
		case ',':
			if depth == 0 {
				return i
			}
		}
		i++
	}
	return -1
}

func rawOrNil(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

// itemType is the type of an output item, as JSON.
func itemType(raw json.RawMessage) string {
	var it struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(raw, &it)
	return it.Type
}

// wireResponse is what Respond reads of a Responses response object.
type wireResponse struct {
	ID     string     `json:"id"`
	Status string     `json:"status"`
	Model  string     `json:"model"`
	Output []wireItem `json:"output"`
	Usage  struct {
		InputTokens        int64 `json:"input_tokens"`
		InputTokensDetails struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"input_tokens_details"`
		OutputTokens int64 `json:"output_tokens"`
		TotalTokens  int64 `json:"total_tokens"`
	} `json:"usage"`
	IncompleteDetails struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// wireItem is what Respond reads of an output item: a message's, a
// function call's, a reasoning item's members.
type wireItem struct {
	Type             string     `json:"type"`
	ID               string     `json:"id"`
	CallID           string     `json:"call_id"`
	Name             string     `json:"name"`
	Arguments        string     `json:"arguments"`
	Content          []wirePart `json:"content"`
	Summary          []wirePart `json:"summary"`
	EncryptedContent string     `json:"encrypted_content"`
}

// wirePart is a part of a message's content or of a reasoning summary.
type wirePart struct {
	Type    string `json:"type"`
	Text    string `json:"text"`
	Refusal string `json:"refusal"`
}

// decodeResponse decodes a response object. One that does not fit
// wireResponse (a member of a type other than the API documents, which
// some compatible servers send) is decoded by openai-go, which is lenient
// about such things, as Respond always did.
func decodeResponse(data []byte) (*wireResponse, error) {
	var w wireResponse
	if len(data) == 0 {
		return &w, nil // an event without its response: an empty one
	}
	if json.Unmarshal(data, &w) == nil {
		return &w, nil
	}
	return openAIResponse(data)
}

// openAIResponse decodes a response object with openai-go.
func openAIResponse(data []byte) (*wireResponse, error) {
	var res responses.Response
	if err := json.Unmarshal(data, &res); err != nil {
		return nil, err
	}
	w := wireResponse{ID: res.ID, Status: string(res.Status), Model: string(res.Model)}
	w.Usage.InputTokens, w.Usage.OutputTokens, w.Usage.TotalTokens = res.Usage.InputTokens, res.Usage.OutputTokens, res.Usage.TotalTokens
	w.Usage.InputTokensDetails.CachedTokens = res.Usage.InputTokensDetails.CachedTokens
	w.IncompleteDetails.Reason = res.IncompleteDetails.Reason
	w.Error.Code, w.Error.Message = string(res.Error.Code), res.Error.Message
	for _, o := range res.Output {
		w.Output = append(w.Output, openAIItem(o))
	}
	return &w, nil
}

// decodeOutputItem decodes an output item, as decodeResponse does.
func decodeOutputItem(data []byte) (wireItem, error) {
	var it wireItem
	if len(data) == 0 {
		return it, nil // an event without its item: nothing to keep
	}
	if json.Unmarshal(data, &it) == nil {
		return it, nil
	}
	var o responses.ResponseOutputItemUnion
	if err := json.Unmarshal(data, &o); err != nil {
		return it, err
	}
	return openAIItem(o), nil
}

// openAIItem is what Respond reads of an output item openai-go decoded.
func openAIItem(o responses.ResponseOutputItemUnion) wireItem {
	it := wireItem{Type: o.Type, ID: o.ID}
	switch o.Type {
	case "message":
		for _, c := range o.AsMessage().Content {
			it.Content = append(it.Content, wirePart{Type: c.Type, Text: c.Text, Refusal: c.Refusal})
		}
	case "function_call":
		fc := o.AsFunctionCall()
		it.ID, it.CallID, it.Name, it.Arguments = fc.ID, fc.CallID, fc.Name, fc.Arguments
	case "reasoning":
		r := o.AsReasoning()
		it.ID, it.EncryptedContent = r.ID, r.EncryptedContent
		for _, s := range r.Summary {
			it.Summary = append(it.Summary, wirePart{Type: string(s.Type), Text: s.Text})
		}
	}
	return it
}
