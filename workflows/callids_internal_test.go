package workflows

import (
	"slices"
	"testing"

	"github.com/troupe-dev/troupe/agents"
)

func TestUniqueCallIDs(t *testing.T) {
	for _, tc := range []struct {
		name string
		ids  []string
		want []string
	}{
		{"distinct", []string{"a", "b"}, []string{"a", "b"}},
		{"empty", []string{"", ""}, []string{"call_1", "call_2"}},
		{"repeated", []string{"a", "a", "a"}, []string{"a", "call_2", "call_3"}},
		{"a new id taken", []string{"x", "x", "call_2"}, []string{"x", "call_2_2", "call_2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			items := []agents.Item{agents.AssistantMessage("thinking aloud")}
			for _, id := range tc.ids {
				items = append(items, agents.FunctionCall(id, "lookup", "{}"))
			}
			uniqueCallIDs(items)
			var got []string
			for _, it := range items[1:] {
				got = append(got, it.CallID)
			}
			if !slices.Equal(got, tc.want) || items[0].CallID != "" {
				t.Errorf("call ids %q, want %q", got, tc.want)
			}
		})
	}
}
