package handoff_test

import (
	"context"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/handoff"
)

func history() []agents.Item {
	return []agents.Item{
		agents.UserMessage("refund please"),
		agents.FunctionCall("1", "lookup", `{"order":7}`),
		agents.FunctionCallOutput("1", "order 7: shipped"),
		agents.AssistantMessage("Let me transfer you."),
		agents.FunctionCall("2", "transfer_to_refunds", "{}"),
		agents.FunctionCallOutput("2", `{"assistant":"refunds"}`),
	}
}

func TestFilters(t *testing.T) {
	tests := []struct {
		name   string
		filter agents.InputFilter
		want   []agents.ItemType
		check  func(t *testing.T, out []agents.Item)
	}{
		{"remove tool calls", handoff.RemoveToolCalls, []agents.ItemType{agents.ItemMessage, agents.ItemMessage}, nil},
		{"keep last 4 never orphans an output", handoff.KeepLast(4),
			[]agents.ItemType{agents.ItemMessage, agents.ItemFunctionCall, agents.ItemFunctionCallOutput}, nil},
		{"nest", handoff.Nest, []agents.ItemType{agents.ItemMessage}, func(t *testing.T, out []agents.Item) {
			if !strings.Contains(out[0].Content, "order 7: shipped") || !strings.Contains(out[0].Content, "user: refund please") {
				t.Errorf("nested = %q", out[0].Content)
			}
		}},
		{"chain", handoff.Chain(handoff.RemoveToolCalls, handoff.KeepLast(1)), []agents.ItemType{agents.ItemMessage}, func(t *testing.T, out []agents.Item) {
			if out[0].Content != "Let me transfer you." {
				t.Errorf("kept %q", out[0].Content)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := tc.filter(context.Background(), agents.HandoffInput{History: history()})
			if err != nil {
				t.Fatal(err)
			}
			var got []agents.ItemType
			for _, it := range out.History {
				got = append(got, it.Type)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("types = %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("types = %v, want %v", got, tc.want)
				}
			}
			if tc.check != nil {
				tc.check(t, out.History)
			}
		})
	}
}
