// This file maps a Request onto Chat Completions and its answer back onto
// agents.Items. Chat Completions has no items, only messages, so the
// transcript is regrouped: the function calls of one model turn become the
// tool_calls of one assistant message, each function call output becomes a
// tool message, and reasoning items, which the protocol cannot carry, are
// dropped. Tool messages hold text only, so the images of function call
// outputs travel in one user message right after the turn's tool messages.

package model

import (
	"context"
	"net/http"

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

// Respond implements Model.
func (m *chatModel) Respond(ctx context.Context, req Request) (*Response, error) {
	params, err := chatParams(m.cfg, req)
	if err != nil {
		return nil, err
	}
	var httpResp *http.Response
	res, err := m.svc.New(ctx, params, option.WithResponseInto(&httpResp))
	if err != nil {
		return nil, apiError(ctx, err, httpResp)
	}
	return chatResult(res)
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

// chatResult maps the first choice of a completion onto items: the
// assistant's text, when there is any, then one function call per tool
// call.
func chatResult(res *openai.ChatCompletion) (*Response, error) {
	if len(res.Choices) == 0 {
		return nil, &APIError{Message: "chat completion " + res.ID + " has no choices"}
	}
	out := &Response{
		ID: res.ID,
		Usage: Usage{
			Requests:     1,
			InputTokens:  int(res.Usage.PromptTokens),
			OutputTokens: int(res.Usage.CompletionTokens),
			TotalTokens:  int(res.Usage.TotalTokens),
		},
	}
	msg := res.Choices[0].Message
	text := msg.Content
	if text == "" {
		text = msg.Refusal
	}
	if text != "" {
		out.Output = append(out.Output, agents.AssistantMessage(text))
	}
	for _, tc := range msg.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			continue // custom tools are never offered
		}
		out.Output = append(out.Output, agents.FunctionCall(tc.ID, tc.Function.Name, tc.Function.Arguments))
	}
	return out, nil
}
