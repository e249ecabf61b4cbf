package handoff

// Ready input filters for handoffs: rewrites of the history an agent
// passes to the agent it hands off to. Filters run in the handoff
// activity, so they may be any Go code.

import (
	"context"
	"fmt"
	"strings"

	"github.com/troupe-dev/troupe/agents"
)

// RemoveToolCalls drops every function call and function call output, so
// the target sees only the messages of the conversation.
func RemoveToolCalls(_ context.Context, in agents.HandoffInput) (agents.HandoffInput, error) {
	out := make([]agents.Item, 0, len(in.History))
	for _, it := range in.History {
		if it.Type == agents.ItemFunctionCall || it.Type == agents.ItemFunctionCallOutput {
			continue
		}
		out = append(out, it)
	}
	return agents.HandoffInput{History: out}, nil
}

// KeepLast keeps only the last n items of the history, moving the cut
// forward so that no function call output is kept without its call.
func KeepLast(n int) agents.InputFilter {
	return func(_ context.Context, in agents.HandoffInput) (agents.HandoffInput, error) {
		h := in.History
		if len(h) <= n {
			return in, nil
		}
		h = h[len(h)-n:]
		for len(h) > 0 && h[0].Type == agents.ItemFunctionCallOutput {
			h = h[1:]
		}
		return agents.HandoffInput{History: h}, nil
	}
}

// Nest collapses the history into one user message that quotes it as a
// transcript, so the target starts fresh with the whole story in view.
func Nest(_ context.Context, in agents.HandoffInput) (agents.HandoffInput, error) {
	var b strings.Builder
	b.WriteString("For context, here is the conversation so far between the user and the previous agent:\n<conversation>\n")
	for _, it := range in.History {
		switch it.Type {
		case agents.ItemMessage:
			fmt.Fprintf(&b, "%s: %s\n", it.Role, it.Content)
		case agents.ItemFunctionCall:
			fmt.Fprintf(&b, "tool call %s(%s)\n", it.Name, it.Arguments)
		case agents.ItemFunctionCallOutput:
			fmt.Fprintf(&b, "tool result: %s\n", it.Output)
		}
	}
	b.WriteString("</conversation>")
	return agents.HandoffInput{History: []agents.Item{agents.UserMessage(b.String())}}, nil
}

// Chain applies filters in order.
func Chain(filters ...agents.InputFilter) agents.InputFilter {
	return func(ctx context.Context, in agents.HandoffInput) (agents.HandoffInput, error) {
		var err error
		for _, f := range filters {
			if in, err = f(ctx, in); err != nil {
				return in, err
			}
		}
		return in, nil
	}
}
