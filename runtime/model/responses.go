// This file maps a Request onto the OpenAI Responses API and its answer
// back onto agents.Items. Requests are sent with store=false: the
// transcript travels in full every turn (it lives in workflow history), and
// nothing is kept at OpenAI between turns. Answers are streamed, so the
// turn's text reaches WithDeltas as it is generated.

package model

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/troupe-dev/troupe/agents"
)

// responsesModel is the Model over POST /responses.
type responsesModel struct {
	cfg Config
	svc responses.ResponseService
}

func newResponsesModel(cfg Config, opts []option.RequestOption) *responsesModel {
	return &responsesModel{cfg: cfg, svc: responses.NewResponseService(opts...)}
}

// Respond implements Model. It streams the answer (POST /responses with
// stream: true), hands each piece of text to the context's WithDeltas
// func as it arrives, and returns the response that response.completed
// (or .incomplete, or .failed) carries, as a non-streamed call would.
func (m *responsesModel) Respond(ctx context.Context, req Request) (*Response, error) {
	params, err := responsesParams(m.cfg, req)
	if err != nil {
		return nil, err
	}
	var httpResp *http.Response
	stream := m.svc.NewStreaming(ctx, params, option.WithResponseInto(&httpResp))
	defer stream.Close()
	if err := stream.Err(); err != nil {
		return nil, apiError(ctx, err, httpResp)
	}
	emit := deltasOf(ctx)
	if wholeJSON(httpResp) {
		var res responses.Response
		if err := decodeWhole(httpResp, &res); err != nil {
			return nil, apiError(ctx, err, httpResp)
		}
		out, err := responsesResult(&res)
		if err == nil {
			emitWhole(out, emit)
		}
		return out, err
	}

	// Each kept output item's place in Response.Output, by the server's
	// output index: responsesResult skips the kinds Troupe never asks for.
	place := map[int64]int{}
	kept := 0
	var final *responses.Response
	done := map[int64]responses.ResponseOutputItemUnion{}
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "response.output_item.added":
			if keptOutput(ev.Item.Type) {
				place[ev.OutputIndex] = kept
				kept++
			}
		case "response.output_text.delta":
			if ev.Delta != "" {
				emit(Delta{Item: place[ev.OutputIndex], Text: ev.Delta})
			}
		case "response.output_item.done":
			done[ev.OutputIndex] = ev.Item
		case "response.completed", "response.incomplete", "response.failed":
			res := ev.Response
			final = &res
		case "error":
			msg := ev.Message
			if msg == "" {
				msg = "an error event without a message"
			}
			return nil, &APIError{Type: "stream_error", Code: ev.Code, Message: "the server sent an error mid-stream: " + truncate(msg)}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, streamError(ctx, err)
	}
	if final == nil {
		return nil, streamError(ctx, errCutShort)
	}
	if len(final.Output) == 0 && len(done) > 0 {
		// A server that leaves the final response's output empty: the
		// items as each was done.
		for _, i := range slices.Sorted(maps.Keys(done)) {
			final.Output = append(final.Output, done[i])
		}
	}
	return responsesResult(final)
}

// keptOutput reports whether responsesResult keeps output items of type t.
func keptOutput(t string) bool {
	return t == "message" || t == "function_call" || t == "reasoning"
}

// emitWhole gives the text of each message of a response that was not
// streamed as one delta.
func emitWhole(res *Response, emit func(Delta)) {
	for i, it := range res.Output {
		if it.Type == agents.ItemMessage && it.Content != "" {
			emit(Delta{Item: i, Text: it.Content})
		}
	}
}

// responsesParams builds the request body of one turn.
func responsesParams(cfg Config, req Request) (responses.ResponseNewParams, error) {
	p := responses.ResponseNewParams{
		Model: modelName(cfg, req),
		Store: param.NewOpt(false),
	}
	if req.Instructions != "" {
		p.Instructions = param.NewOpt(req.Instructions)
	}
	input, err := responsesInput(req.Input)
	if err != nil {
		return p, err
	}
	p.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: input}

	for _, t := range req.Tools {
		params, err := jsonObject(t.Parameters, emptyParameters(t.Strict))
		if err != nil {
			return p, invalid("tool %q: parameters are not a JSON object: %v", t.Name, err)
		}
		fn := &responses.FunctionToolParam{
			Name:       t.Name,
			Parameters: params,
			Strict:     param.NewOpt(t.Strict),
		}
		if t.Description != "" {
			fn.Description = param.NewOpt(t.Description)
		}
		p.Tools = append(p.Tools, responses.ToolUnionParam{OfFunction: fn})
	}

	if out := req.Output; out != nil {
		schema, err := jsonObject(out.Schema, nil)
		if err != nil || schema == nil {
			return p, invalid("output %q: schema is not a JSON object", out.Name)
		}
		p.Text = responses.ResponseTextConfigParam{
			Format: responses.ResponseFormatTextConfigUnionParam{
				OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{
					Name:   outputName(out),
					Schema: schema,
					Strict: param.NewOpt(out.Strict),
				},
			},
		}
	}

	s := req.Settings
	if s.Temperature != nil {
		p.Temperature = param.NewOpt(*s.Temperature)
	}
	if s.TopP != nil {
		p.TopP = param.NewOpt(*s.TopP)
	}
	if s.MaxTokens != nil {
		p.MaxOutputTokens = param.NewOpt(int64(*s.MaxTokens))
	}
	// tool_choice and parallel_tool_calls mean nothing without tools, and
	// some servers reject them there.
	if len(req.Tools) > 0 {
		if s.ParallelToolCalls != nil {
			p.ParallelToolCalls = param.NewOpt(*s.ParallelToolCalls)
		}
		switch s.ToolChoice {
		case "":
		case "auto", "required", "none":
			p.ToolChoice = responses.ResponseNewParamsToolChoiceUnion{
				OfToolChoiceMode: param.NewOpt(responses.ToolChoiceOptions(s.ToolChoice)),
			}
		default:
			p.ToolChoice = responses.ResponseNewParamsToolChoiceUnion{
				OfFunctionTool: &responses.ToolChoiceFunctionParam{Name: s.ToolChoice},
			}
		}
	}
	return p, nil
}

// outputName is the schema name sent for a structured output; the API
// requires one.
func outputName(out *agents.OutputSpec) string {
	if out.Name != "" {
		return out.Name
	}
	return "output"
}

// responsesInput maps a transcript onto Responses input items.
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

// responsesResult maps a response onto items, in the order the model
// produced them. Output kinds Troupe never asks for (hosted tools) are
// skipped.
func responsesResult(res *responses.Response) (*Response, error) {
	if res.Status == responses.ResponseStatusFailed {
		return nil, failedResponse(res)
	}
	out := &Response{
		ID: res.ID,
		Usage: Usage{
			Requests:          1,
			InputTokens:       int(res.Usage.InputTokens),
			CachedInputTokens: int(res.Usage.InputTokensDetails.CachedTokens),
			OutputTokens:      int(res.Usage.OutputTokens),
			TotalTokens:       int(res.Usage.TotalTokens),
		},
	}
	for _, o := range res.Output {
		switch o.Type {
		case "message":
			out.Output = append(out.Output, agents.Item{
				Type:    agents.ItemMessage,
				Role:    agents.RoleAssistant,
				Content: messageText(o.AsMessage()),
				ID:      o.ID,
			})
		case "function_call":
			fc := o.AsFunctionCall()
			out.Output = append(out.Output, agents.Item{
				Type:      agents.ItemFunctionCall,
				ID:        fc.ID,
				CallID:    fc.CallID,
				Name:      fc.Name,
				Arguments: fc.Arguments,
			})
		case "reasoning":
			r := o.AsReasoning()
			parts := make([]string, 0, len(r.Summary))
			for _, s := range r.Summary {
				parts = append(parts, s.Text)
			}
			out.Output = append(out.Output, agents.Item{
				Type:             agents.ItemReasoning,
				ID:               r.ID,
				Summary:          strings.Join(parts, "\n\n"),
				EncryptedContent: r.EncryptedContent,
			})
		}
	}
	out.Model, out.FinishReason = string(res.Model), finishReason(res, out.Output)
	return out, nil
}

// finishReason maps a response's end onto the Chat Completions API's
// finish reasons: length or content_filter for an incomplete response
// (the Responses API's incomplete reasons), tool_calls when the model
// called a tool, else stop.
func finishReason(res *responses.Response, out []agents.Item) string {
	if res.Status == responses.ResponseStatusIncomplete {
		switch r := res.IncompleteDetails.Reason; r {
		case "max_output_tokens":
			return "length"
		case "":
			return "incomplete"
		default:
			return r
		}
	}
	for _, it := range out {
		if it.Type == agents.ItemFunctionCall {
			return "tool_calls"
		}
	}
	return "stop"
}

// messageText concatenates a message's output_text parts. A message that
// holds only a refusal yields the refusal text, so that the agent loop
// sees why there is no answer.
func messageText(m responses.ResponseOutputMessage) string {
	var text, refusal strings.Builder
	for _, c := range m.Content {
		switch c.Type {
		case "output_text":
			text.WriteString(c.Text)
		case "refusal":
			refusal.WriteString(c.Refusal)
		}
	}
	if text.Len() == 0 {
		return refusal.String()
	}
	return text.String()
}

// failedResponse classifies a response the server marked failed although
// the HTTP call succeeded. The response's error code stands in for the
// status a direct error would have carried: rate limits as 429, server
// errors and timeouts as 500, anything else (an invalid prompt or image, a
// policy violation) as 400, which no retry fixes.
func failedResponse(res *responses.Response) error {
	code := string(res.Error.Code)
	status := http.StatusBadRequest
	switch code {
	case "rate_limit_exceeded":
		status = http.StatusTooManyRequests
	case "server_error", "vector_store_timeout":
		status = http.StatusInternalServerError
	}
	msg := res.Error.Message
	if msg == "" {
		msg = fmt.Sprintf("response %s failed", res.ID)
	}
	return &APIError{StatusCode: status, Type: "response_failed", Code: code, Message: msg}
}
