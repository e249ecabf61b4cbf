// This file maps a Request onto Chat Completions and its answer back onto
// agents.Items. Chat Completions has no items, only messages, so the
// transcript is regrouped: the function calls of one model turn become the
// tool_calls of one assistant message, each function call output becomes a
// tool message, and reasoning items, which the protocol cannot carry, are
// dropped. Tool messages hold text only, so the images of function call
// outputs travel in one user message right after the turn's tool messages.
// Answers are streamed, so the turn's text reaches WithDeltas as it is
// generated.

package model

import (
	"context"
	"net/http"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/troupe-dev/troupe/agents"
)

// chatModel is the Model over POST /chat/completions.
type chatModel struct {
	cfg Config
	svc openai.ChatCompletionService
}

// Respond implements Model. It streams the answer (stream: true, with
// stream_options.include_usage so that the last chunk counts the tokens),
// hands each piece of text to the context's WithDeltas func as it
// arrives, and assembles the chunks into what a non-streamed call returns.
func (m *chatModel) Respond(ctx context.Context, req Request) (*Response, error) {
	params, err := chatParams(m.cfg, req)
	if err != nil {
		return nil, err
	}
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: param.NewOpt(true)}
	var httpResp *http.Response
	stream := m.svc.NewStreaming(ctx, params, option.WithResponseInto(&httpResp))
	defer stream.Close()
	if err := stream.Err(); err != nil {
		return nil, apiError(ctx, err, httpResp)
	}
	emit := deltasOf(ctx)
	if wholeJSON(httpResp) {
		var res openai.ChatCompletion
		if err := decodeWhole(httpResp, &res); err != nil {
			return nil, apiError(ctx, err, httpResp)
		}
		out, err := chatResult(&res)
		if err == nil {
			emitWhole(out, emit)
		}
		return out, err
	}

	var a chatAnswer
	finished := false
	for stream.Next() {
		ch := stream.Current()
		if a.id == "" {
			a.id = ch.ID
		}
		if a.model == "" {
			a.model = ch.Model
		}
		if ch.JSON.Usage.Valid() {
			a.usage = ch.Usage
		}
		for _, c := range ch.Choices {
			if c.Index != 0 {
				continue // Only the first choice is asked for.
			}
			a.choices = true
			d := c.Delta
			if d.Content != "" {
				a.text.WriteString(d.Content)
				emit(Delta{Item: 0, Text: d.Content})
			}
			a.refusal.WriteString(d.Refusal)
			for _, tc := range d.ToolCalls {
				a.call(tc)
			}
			if c.FinishReason != "" {
				finished, a.finish = true, c.FinishReason
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, streamError(ctx, err)
	}
	if a.choices && !finished {
		return nil, streamError(ctx, errCutShort)
	}
	return a.result()
}

// chatAnswer is a streamed completion's first choice, assembled from its
// chunks.
type chatAnswer struct {
	id, model     string
	finish        string
	choices       bool // a chunk held the first choice
	text, refusal strings.Builder
	calls         []chatCall
	usage         openai.CompletionUsage
}

// chatCall is a tool call of an answer.
type chatCall struct {
	id, typ, name string
	args          strings.Builder
}

// call adds a chunk's piece of a tool call: the first piece of a call
// names it; those that follow carry its arguments.
func (a *chatAnswer) call(tc openai.ChatCompletionChunkChoiceDeltaToolCall) {
	i := int(tc.Index)
	if i < 0 || i > 1024 {
		return // Not a call a model makes.
	}
	for len(a.calls) <= i {
		a.calls = append(a.calls, chatCall{})
	}
	c := &a.calls[i]
	if c.id == "" {
		c.id = tc.ID
	}
	if c.typ == "" {
		c.typ = tc.Type
	}
	c.name += tc.Function.Name
	c.args.WriteString(tc.Function.Arguments)
}

// result maps the assembled answer onto items, as chatResult does.
func (a *chatAnswer) result() (*Response, error) {
	if !a.choices {
		return nil, &APIError{Message: "chat completion " + a.id + " has no choices"}
	}
	calls := make([]chatToolCall, 0, len(a.calls))
	for i := range a.calls {
		c := &a.calls[i]
		calls = append(calls, chatToolCall{id: c.id, typ: c.typ, name: c.name, args: c.args.String()})
	}
	out := chatOutput(a.id, a.text.String(), a.refusal.String(), calls, a.usage)
	out.Model, out.FinishReason = a.model, a.finish
	return out, nil
}

// chatParams builds the request body of one turn.
func chatParams(cfg Config, req Request) (openai.ChatCompletionNewParams, error) {
	p := openai.ChatCompletionNewParams{Model: modelName(cfg, req)}
	if req.Instructions != "" {
		p.Messages = append(p.Messages, openai.SystemMessage(req.Instructions))
	}
	msgs, err := chatMessages(req.Input)
	if err != nil {
		return p, err
	}
	p.Messages = append(p.Messages, msgs...)

	for _, t := range req.Tools {
		params, err := jsonObject(t.Parameters, emptyParameters(t.Strict))
		if err != nil {
			return p, invalid("tool %q: parameters are not a JSON object: %v", t.Name, err)
		}
		fn := shared.FunctionDefinitionParam{Name: t.Name, Parameters: params}
		if t.Description != "" {
			fn.Description = param.NewOpt(t.Description)
		}
		// strict is left out unless asked for: some OpenAI-compatible servers
		// reject the field.
		if t.Strict {
			fn.Strict = param.NewOpt(true)
		}
		p.Tools = append(p.Tools, openai.ChatCompletionToolUnionParam{
			OfFunction: &openai.ChatCompletionFunctionToolParam{Function: fn},
		})
	}

	if out := req.Output; out != nil {
		schema, err := jsonObject(out.Schema, nil)
		if err != nil || schema == nil {
			return p, invalid("output %q: schema is not a JSON object", out.Name)
		}
		js := shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: outputName(out), Schema: schema}
		if out.Strict {
			js.Strict = param.NewOpt(true)
		}
		p.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{
			OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{JSONSchema: js},
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
		p.MaxCompletionTokens = param.NewOpt(int64(*s.MaxTokens))
	}
	// OpenAI rejects tool_choice and parallel_tool_calls without tools.
	if len(req.Tools) > 0 {
		if s.ParallelToolCalls != nil {
			p.ParallelToolCalls = param.NewOpt(*s.ParallelToolCalls)
		}
		switch s.ToolChoice {
		case "":
		case "auto", "required", "none":
			p.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: param.NewOpt(s.ToolChoice)}
		default:
			p.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{
				OfFunctionToolChoice: &openai.ChatCompletionNamedToolChoiceParam{
					Function: openai.ChatCompletionNamedToolChoiceFunctionParam{Name: s.ToolChoice},
				},
			}
		}
	}
	return p, nil
}

// chatMessages maps a transcript onto chat messages.
//
// Chat Completions wants every tool call of a turn on one assistant
// message, followed by one tool message per call, so consecutive
// function_call items are gathered onto one assistant message, the one
// holding the turn's text when that message directly precedes them.
// Reasoning items are skipped without breaking that adjacency: they belong
// to the same model turn as the items around them.
func chatMessages(items []agents.Item) ([]openai.ChatCompletionMessageParamUnion, error) {
	var out []openai.ChatCompletionMessageParamUnion
	// open is the assistant message that the next function call joins, or
	// nil when the last message sent is not from the model.
	var open *openai.ChatCompletionAssistantMessageParam
	// images are the image parts of the tool messages just sent; they go
	// in a user message once the run of tool messages ends.
	var images []openai.ChatCompletionContentPartUnionParam
	flush := func() {
		if len(images) > 0 {
			out = append(out, openai.UserMessage(images))
			images = nil
		}
	}
	for i, it := range items {
		if it.Type != agents.ItemFunctionCallOutput {
			flush()
		}
		switch it.Type {
		case agents.ItemMessage:
			open = nil
			if it.ContentRef != "" {
				return nil, invalid("input item %d: message is still a reference (%s); resolve it before calling the model", i, it.ContentRef)
			}
			switch it.Role {
			case agents.RoleUser:
				out = append(out, openai.UserMessage(it.Content))
			case agents.RoleSystem:
				out = append(out, openai.SystemMessage(it.Content))
			case agents.RoleDeveloper:
				out = append(out, openai.DeveloperMessage(it.Content))
			case agents.RoleAssistant:
				msg := openai.AssistantMessage(it.Content)
				open = msg.OfAssistant
				out = append(out, msg)
			default:
				return nil, invalid("input item %d: message role %q", i, it.Role)
			}

		case agents.ItemFunctionCall:
			if open == nil {
				open = &openai.ChatCompletionAssistantMessageParam{}
				out = append(out, openai.ChatCompletionMessageParamUnion{OfAssistant: open})
			}
			open.ToolCalls = append(open.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
					ID: it.CallID,
					Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{
						Name:      it.Name,
						Arguments: it.Arguments,
					},
				},
			})

		case agents.ItemFunctionCallOutput:
			open = nil
			if it.OutputRef != "" && it.Output == "" {
				return nil, invalid("input item %d: output of call %q is still a reference (%s); resolve it before calling the model", i, it.CallID, it.OutputRef)
			}
			out = append(out, openai.ToolMessage(it.Output, it.CallID))
			if len(it.Images) > 0 {
				images = append(images, openai.TextContentPart("Images returned by tool call "+it.CallID+":"))
				for _, url := range it.Images {
					images = append(images, openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: url}))
				}
			}

		case agents.ItemReasoning:
			// Not expressible in Chat Completions.

		default:
			return nil, invalid("input item %d: unknown type %q", i, it.Type)
		}
	}
	flush()
	return out, nil
}

// chatResult maps the first choice of a completion onto items, as
// chatOutput does.
func chatResult(res *openai.ChatCompletion) (*Response, error) {
	if len(res.Choices) == 0 {
		return nil, &APIError{Message: "chat completion " + res.ID + " has no choices"}
	}
	msg := res.Choices[0].Message
	calls := make([]chatToolCall, 0, len(msg.ToolCalls))
	for _, tc := range msg.ToolCalls {
		calls = append(calls, chatToolCall{id: tc.ID, typ: tc.Type, name: tc.Function.Name, args: tc.Function.Arguments})
	}
	out := chatOutput(res.ID, msg.Content, msg.Refusal, calls, res.Usage)
	out.Model, out.FinishReason = res.Model, res.Choices[0].FinishReason
	return out, nil
}

// chatToolCall is a tool call of an answer, streamed or not.
type chatToolCall struct {
	id, typ, name, args string
}

// chatOutput maps an answer onto items: the assistant's text (or its
// refusal, when there is no text), when there is any, then one function
// call per tool call.
func chatOutput(id, text, refusal string, calls []chatToolCall, usage openai.CompletionUsage) *Response {
	out := &Response{
		ID: id,
		Usage: Usage{
			Requests:          1,
			InputTokens:       int(usage.PromptTokens),
			CachedInputTokens: int(usage.PromptTokensDetails.CachedTokens),
			OutputTokens:      int(usage.CompletionTokens),
			TotalTokens:       int(usage.TotalTokens),
		},
	}
	if text == "" {
		text = refusal
	}
	if text != "" {
		out.Output = append(out.Output, agents.AssistantMessage(text))
	}
	for _, tc := range calls {
		if tc.typ != "" && tc.typ != "function" {
			continue // custom tools are never offered
		}
		out.Output = append(out.Output, agents.FunctionCall(tc.id, tc.name, tc.args))
	}
	return out
}
