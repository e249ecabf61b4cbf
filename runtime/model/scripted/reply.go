package scripted

// This file picks the rule that answers a conversation and renders its
// answer, independent of the API that will carry it.

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Error codes of the rejections that are the scenario's doing rather than the
// request's. They come in the code field of a 400 invalid_request_error.
const (
	// CodeNoMatch: no rule of the scenario matches the request. The
	// error's param names the scenario file to add a rule to (see
	// Rule.Source), when the rules know theirs.
	CodeNoMatch = "scripted_no_match"
	// CodeUnknownTool: the matching rule answers with a call to a tool that
	// the request does not offer, or that its tool_choice rules out.
	CodeUnknownTool = "scripted_unknown_tool"
	// CodeTemplateError: a template of the matching rule failed, or call
	// arguments given as a template did not render to a JSON object.
	CodeTemplateError = "scripted_template_error"
)

// reply is a rendered answer: either a message (text) or function calls.
type reply struct {
	rule   *rule
	turn   int
	digest []byte
	text   string // the message, when calls is empty
	calls  []renderedCall

	inputTokens, outputTokens int
}

type renderedCall struct {
	callID, name, arguments string
}

// answer finds the first rule matching c and renders its answer.
func answer(rules []*rule, c *conversation) (*reply, *apiError) {
	var r *rule
	for _, cand := range rules {
		if cand.matches(c) {
			r = cand
			break
		}
	}
	if r == nil {
		return nil, noMatch(rules, c)
	}
	for _, call := range r.calls {
		if !c.offers(call.name) {
			return nil, &apiError{status: 400, code: CodeUnknownTool, msg: fmt.Sprintf(
				"scripted: rule %q answers turn %d with a call to tool %q, but the request does not offer it "+
					"(offered: [%s]); a real model cannot call a tool it was not given.",
				r.Name, c.turn(), call.name, strings.Join(c.tools, ", "))}
		}
		if why := c.toolChoiceForbids(call.name); why != "" {
			return nil, &apiError{status: 400, code: CodeUnknownTool, msg: fmt.Sprintf(
				"scripted: rule %q answers turn %d with a call to tool %q, but %s; a real model would not call it.",
				r.Name, c.turn(), call.name, why)}
		}
	}
	rep := &reply{rule: r, turn: c.turn(), digest: c.digest()}
	data := TemplateData{
		Instructions: c.instructions,
		User:         c.firstUser(),
		LastUser:     c.lastUser(),
		LastInput:    c.lastInput(),
		LastOutput:   c.lastOutput(),
		Outputs:      c.outputsSinceLastTurn(),
		Turn:         rep.turn,
	}
	templateErr := func(err error) *apiError {
		return &apiError{status: 400, code: CodeTemplateError,
			msg: fmt.Sprintf("scripted: rule %q: %v", r.Name, err)}
	}
	outChars := 0
	switch {
	case r.text != nil:
		text, err := execTemplate(r.text, data)
		if err != nil {
			return nil, templateErr(err)
		}
		rep.text = text
		outChars = len(text)
	case r.json != nil:
		v, err := r.json.render(data)
		if err != nil {
			return nil, templateErr(err)
		}
		b, err := marshal(v)
		if err != nil {
			return nil, templateErr(err)
		}
		rep.text = string(b)
		outChars = len(b)
	default:
		for i, call := range r.calls {
			data.CallIndex = i
			args, err := renderArguments(call, data)
			if err != nil {
				return nil, templateErr(fmt.Errorf("respond.calls[%d].arguments: %w", i, err))
			}
			rep.calls = append(rep.calls, renderedCall{
				callID:    id(rep.digest, "call_", "call|"+strconv.Itoa(i), 24),
				name:      call.name,
				arguments: args,
			})
			outChars += len(call.name) + len(args)
		}
	}
	rep.inputTokens = tokens(c.inputChars())
	rep.outputTokens = tokens(outChars)
	return rep, nil
}

func renderArguments(call compiledCall, data TemplateData) (string, error) {
	switch {
	case call.rawArgs != nil:
		s, err := execTemplate(call.rawArgs, data)
		if err != nil {
			return "", err
		}
		if jsonKind(json.RawMessage(s)) != "an object" || !json.Valid([]byte(s)) {
			return "", fmt.Errorf("rendered to %q, which is not a JSON object", truncate(s, 200))
		}
		return s, nil
	case call.arguments != nil:
		v, err := call.arguments.render(data)
		if err != nil {
			return "", err
		}
		b, err := marshal(v)
		return string(b), err
	default:
		return "{}", nil
	}
}

// tokens approximates a token count as a quarter of the characters.
func tokens(chars int) int { return (chars + 3) / 4 }

// noMatch explains, for the scenario's author, which request found no
// rule, and where to add one: its param is the source of the rules written
// for the request's agent (those whose instructions condition the request
// meets), else of every rule, sources joined by ", "; or null when the
// rules have no source.
func noMatch(rules []*rule, c *conversation) *apiError {
	where := "the scenario"
	src := ruleSources(rules, func(r *rule) bool {
		return r.Match.Instructions != "" && strings.Contains(c.instructions, r.Match.Instructions)
	})
	if src == "" {
		src = ruleSources(rules, func(*rule) bool { return true })
	}
	if src != "" {
		where = src
	}
	return &apiError{status: 400, code: CodeNoMatch, param: src, msg: fmt.Sprintf(
		"scripted: no rule matches this %s request: turn %d, instructions %q, last input %q, first user message %q, "+
			"tools [%s], output schema %v. Add a rule for it to %s.",
		c.api, c.turn(), truncate(c.instructions, 80), truncate(c.lastInput(), 200), truncate(c.firstUser(), 80),
		strings.Join(c.tools, ", "), c.hasOutputSchema, where)}
}

// ruleSources joins the distinct sources of the rules that keep holds
// for, in the rules' order.
func ruleSources(rules []*rule, keep func(*rule) bool) string {
	var srcs []string
	for _, r := range rules {
		if r.Source != "" && keep(r) && !slices.Contains(srcs, r.Source) {
			srcs = append(srcs, r.Source)
		}
	}
	return strings.Join(srcs, ", ")
}

// truncate shortens s to at most n runes, marking the cut with "...".
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "..."
}
