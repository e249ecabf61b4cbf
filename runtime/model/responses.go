// This file maps a Request onto the OpenAI Responses API and its answer
// back onto agents.Items. Requests are sent with store=false: the
// transcript travels in full every turn (it lives in workflow history), and
// nothing is kept at OpenAI between turns. Answers are streamed, so the
// turn's text reaches WithDeltas as it is generated.

package model

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/troupe-dev/troupe/agents"
)

// responsesModel is the Model over POST /responses.
type responsesModel struct {
	cfg    Config
	client openai.Client
	heads  heads
}

func newResponsesModel(cfg Config, opts []option.RequestOption) *responsesModel {
	// Not openai.NewClient, which would read OPENAI_* variables: only the
	// options are set, which is all Post uses.
	return &responsesModel{cfg: cfg, client: openai.Client{Options: opts}}
}

// Respond implements Model. It streams the answer (POST /responses with
// stream: true), hands each piece of text to the context's WithDeltas
// func as it arrives, and returns the response that response.completed
// (or .incomplete, or .failed) carries, as a non-streamed call would.
func (m *responsesModel) Respond(ctx context.Context, req Request) (*Response, error) {
	head, err := m.heads.encoded(req, m.responsesHead)
	if err != nil {
		return nil, err
	}
	body, err := responsesBody(head, req.Input)
	if err != nil {
		return nil, err
	}
	// The body is sent as it is, and the answer read by its own decoder
	// (streamEvent), not openai-go's: the request NewStreaming sends, but
	// for its params, which it would encode again (empty, at a tenth of a
	// millisecond) only to drop them for this body.
	var httpResp *http.Response
	if err := m.client.Post(ctx, "responses", nil, &httpResp, option.WithRequestBody("application/json", body)); err != nil {
		if httpResp != nil && httpResp.Body != nil {
			httpResp.Body.Close()
		}
		return nil, apiError(ctx, err, httpResp)
	}
	if httpResp == nil || httpResp.Body == nil {
		return nil, streamError(ctx, errCutShort)
	}
	emit := deltasOf(ctx)
	if wholeJSON(httpResp) {
		defer httpResp.Body.Close()
		body, err := io.ReadAll(httpResp.Body)
		var res *wireResponse
		if err == nil {
			res, err = decodeResponse(body)
		}
		if err != nil {
			return nil, apiError(ctx, err, httpResp)
		}
		out, err := responsesResult(res)
		if err == nil {
			emitWhole(out, emit)
		}
		return out, err
	}
	stream := ssestream.NewStream[streamEvent](ssestream.NewDecoder(httpResp), nil)
	defer stream.Close()

	// Each kept output item's place in Response.Output, by the server's
	// output index: responsesResult skips the kinds Troupe never asks for.
	place := map[int64]int{}
	kept := 0
	var final json.RawMessage
	finished := false
	done := map[int64]json.RawMessage{}
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "response.output_item.added":
			if keptOutput(itemType(ev.Item)) {
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
			final, finished = ev.Response, true
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
	if !finished {
		return nil, streamError(ctx, errCutShort)
	}
	res, err := decodeResponse(final)
	if err != nil {
		return nil, streamError(ctx, err)
	}
	if len(res.Output) == 0 && len(done) > 0 {
		// A server that leaves the final response's output empty: the
		// items as each was done.
		for _, i := range slices.Sorted(maps.Keys(done)) {
			it, err := decodeOutputItem(done[i])
			if err != nil {
				return nil, streamError(ctx, err)
			}
			res.Output = append(res.Output, it)
		}
	}
	return responsesResult(res)
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

// responsesHead is the JSON object of the params of req but its input,
// as openai-go encodes them.
func (m *responsesModel) responsesHead(req Request) ([]byte, error) {
	p, err := responsesParams(m.cfg, req)
	if err != nil {
		return nil, err
	}
	return p.MarshalJSON()
}

// responsesParams builds the request of one turn but its input, which
// responsesBody encodes.
func responsesParams(cfg Config, req Request) (responses.ResponseNewParams, error) {
	p := responses.ResponseNewParams{
		Model: modelName(cfg, req),
		Store: param.NewOpt(false),
	}
	if req.Instructions != "" {
		p.Instructions = param.NewOpt(req.Instructions)
	}
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

// responsesResult maps a response onto items, in the order the model
// produced them. Output kinds Troupe never asks for (hosted tools) are
// skipped.
func responsesResult(res *wireResponse) (*Response, error) {
	if res.Status == string(responses.ResponseStatusFailed) {
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
				Content: messageText(o.Content),
				ID:      o.ID,
			})
		case "function_call":
			out.Output = append(out.Output, agents.Item{
				Type:      agents.ItemFunctionCall,
				ID:        o.ID,
				CallID:    o.CallID,
				Name:      o.Name,
				Arguments: o.Arguments,
			})
		case "reasoning":
			parts := make([]string, 0, len(o.Summary))
			for _, s := range o.Summary {
				parts = append(parts, s.Text)
			}
			out.Output = append(out.Output, agents.Item{
				Type:             agents.ItemReasoning,
				ID:               o.ID,
				Summary:          strings.Join(parts, "\n\n"),
				EncryptedContent: o.EncryptedContent,
			})
		}
	}
	out.Model, out.FinishReason = res.Model, finishReason(res, out.Output)
	return out, nil
}

// finishReason maps a response's end onto the Chat Completions API's
// finish reasons: length or content_filter for an incomplete response
// (the Responses API's incomplete reasons), tool_calls when the model
// called a tool, else stop.
func finishReason(res *wireResponse, out []agents.Item) string {
	if res.Status == string(responses.ResponseStatusIncomplete) {
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
func messageText(content []wirePart) string {
	var text, refusal strings.Builder
	for _, c := range content {
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
func failedResponse(res *wireResponse) error {
	code := res.Error.Code
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
