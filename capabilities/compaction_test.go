package capabilities

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/agents"
)

// turn is one model turn that calls tools, and the tools' outputs.
func turn(id string, calls int, outputSize int) []agents.Item {
	items := []agents.Item{{Type: agents.ItemReasoning, ID: "rs_" + id, EncryptedContent: "enc"}}
	for c := range calls {
		items = append(items, agents.FunctionCall(fmt.Sprintf("%s.%d", id, c), "exec_command", `{"cmd":"ls"}`))
	}
	for c := range calls {
		items = append(items, agents.FunctionCallOutput(fmt.Sprintf("%s.%d", id, c), strings.Repeat("o", outputSize)))
	}
	return items
}

// transcript is a system message, the task, the turns, and a final answer.
func transcript(turns ...[]agents.Item) []agents.Item {
	items := []agents.Item{
		{Type: agents.ItemMessage, Role: agents.RoleSystem, Content: "sys"},
		agents.UserMessage("the task"),
	}
	for _, t := range turns {
		items = append(items, t...)
	}
	return items
}

func turns(n, calls, size int) [][]agents.Item {
	var out [][]agents.Item
	for i := range n {
		out = append(out, turn(fmt.Sprint(i), calls, size))
	}
	return out
}

func flat(ts [][]agents.Item) []agents.Item {
	var out []agents.Item
	for _, t := range ts {
		out = append(out, t...)
	}
	return out
}

func note(n int) agents.Item { return agents.UserMessage(fmt.Sprintf(noteText, n)) }

func TestCompactionTrim(t *testing.T) {
	tests := []struct {
		name string
		cfg  CompactionConfig
		in   []agents.Item
		want []agents.Item // nil: the input, unchanged
	}{
		{
			name: "under the limits nothing changes",
			cfg:  CompactionConfig{},
			in:   transcript(turns(10, 2, 100)...),
		},
		{
			name: "negative limits turn trimming off",
			cfg:  CompactionConfig{MaxItems: -1, MaxBytes: -1, KeepLast: 1},
			in:   transcript(turns(500, 1, 1000)...),
		},
		{
			name: "too many items: keep the task and the last turns",
			cfg:  CompactionConfig{MaxItems: 12, KeepLast: 6},
			in:   transcript(turns(5, 1, 10)...), // 2 + 5*3 items
			// The cut 6 items from the end falls on a turn boundary.
			want: append(transcript(), append([]agents.Item{note(9)}, append(turn("3", 1, 10), turn("4", 1, 10)...)...)...),
		},
		{
			name: "a cut that would orphan outputs moves to the next turn",
			cfg:  CompactionConfig{MaxItems: 12, KeepLast: 7},
			in:   transcript(turns(5, 1, 10)...),
			want: append(transcript(), append([]agents.Item{note(9)}, append(turn("3", 1, 10), turn("4", 1, 10)...)...)...),
		},
		{
			name: "parallel calls stay with their outputs",
			cfg:  CompactionConfig{MaxItems: 10, KeepLast: 4},
			in:   transcript(turns(3, 3, 10)...), // turns of 7 items
			want: append(transcript(), append([]agents.Item{note(14)}, turn("2", 3, 10)...)...),
		},
		{
			name: "too many bytes: drop turns until the rest fits",
			cfg:  CompactionConfig{MaxBytes: 3000, KeepLast: 100},
			in:   transcript(turns(6, 1, 1000)...),
			want: append(transcript(), append([]agents.Item{note(12)}, append(turn("4", 1, 1000), turn("5", 1, 1000)...)...)...),
		},
		{
			name: "the latest turn is kept whatever its size",
			cfg:  CompactionConfig{MaxBytes: 1000},
			in:   transcript(turn("0", 1, 10), turn("1", 2, 5000)),
			want: append(transcript(), append([]agents.Item{note(3)}, turn("1", 2, 5000)...)...),
		},
		{
			name: "a final answer starts a turn",
			cfg:  CompactionConfig{MaxItems: 8, KeepLast: 3},
			in: append(transcript(turns(2, 1, 10)...),
				agents.AssistantMessage("done"), agents.UserMessage("now this"), agents.AssistantMessage("ok")),
			want: append(transcript(), note(6), agents.AssistantMessage("done"), agents.UserMessage("now this"), agents.AssistantMessage("ok")),
		},
		{
			name: "an earlier note's count carries over",
			cfg:  CompactionConfig{MaxItems: 10, KeepLast: 3},
			in:   append(append(transcript(), note(40)), flat(turns(3, 1, 10))...),
			// Dropped: the note (standing for 40) and turns 0 and 1.
			want: append(transcript(), append([]agents.Item{note(46)}, turn("2", 1, 10)...)...),
		},
		{
			name: "no user message: nothing is pinned",
			cfg:  CompactionConfig{MaxItems: 5, KeepLast: 3},
			in:   append(turn("0", 1, 10), turn("1", 1, 10)...),
			want: append([]agents.Item{note(3)}, turn("1", 1, 10)...),
		},
		{
			name: "an orphan output in the kept part is dropped",
			cfg:  CompactionConfig{MaxItems: 6, KeepLast: 4},
			in: append(transcript(turn("0", 1, 10)),
				agents.UserMessage("next"), agents.FunctionCallOutput("ghost", "?"), agents.AssistantMessage("a")),
			want: append(transcript(), note(3), agents.UserMessage("next"), agents.AssistantMessage("a")),
		},
		{
			name: "images count as tokens, not as their bytes",
			cfg:  CompactionConfig{},
			in: transcript(
				[]agents.Item{agents.FunctionCall("c", "view_image", `{"path":"x.png"}`)},
				[]agents.Item{agents.FunctionCallOutput("c", string(must(ImageOutput{ImageURL: "data:image/png;base64," + strings.Repeat("A", 2<<20)}.MarshalJSON())))},
			),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]agents.Item(nil), tt.in...)
			got := Compaction(tt.cfg).(agents.Compactor).Trim(in)
			if !reflect.DeepEqual(in, tt.in) {
				t.Fatalf("Trim modified its input")
			}
			want := tt.want
			if want == nil {
				want = tt.in
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Trim:\n got %s\nwant %s", describe(got), describe(want))
			}
			checkTurns(t, got)
		})
	}
}

// checkTurns checks the invariants every trimmed transcript keeps.
func checkTurns(t *testing.T, items []agents.Item) {
	t.Helper()
	calls, outputs := map[string]bool{}, map[string]bool{}
	for i, it := range items {
		switch it.Type {
		case agents.ItemFunctionCall:
			calls[it.CallID] = true
		case agents.ItemFunctionCallOutput:
			if !calls[it.CallID] {
				t.Errorf("item %d: output of %s comes without its call", i, it.CallID)
			}
			outputs[it.CallID] = true
		case agents.ItemReasoning:
			if i+1 == len(items) || !fromModel(items[i+1]) {
				t.Errorf("item %d: a reasoning item not followed by its turn", i)
			}
		}
	}
	for id := range calls {
		if !outputs[id] {
			t.Errorf("call %s has no output", id)
		}
	}
}

// TestCompactionTrimMany trims transcripts of every length and checks the
// invariants and the bounds.
func TestCompactionTrimMany(t *testing.T) {
	c := Compaction(CompactionConfig{MaxItems: 30, KeepLast: 10}).(agents.Compactor)
	var items []agents.Item
	items = append(items, agents.UserMessage("task"))
	for i := range 60 {
		items = append(items, turn(fmt.Sprint(i), 1+i%3, 10)...)
		if i%7 == 0 {
			items = append(items, agents.AssistantMessage("progress"), agents.UserMessage("go on"))
		}
		got := c.Trim(items)
		checkTurns(t, got)
		if got[0].Content != "task" {
			t.Fatalf("after %d turns, the task is gone", i)
		}
		if len(items) > 30 && len(got) > 30 {
			t.Errorf("after %d turns: %d items kept", i, len(got))
		}
	}
}

func describe(items []agents.Item) string {
	var parts []string
	for _, it := range items {
		switch it.Type {
		case agents.ItemMessage:
			parts = append(parts, it.Role+":"+it.Content[:min(len(it.Content), 30)])
		case agents.ItemFunctionCall:
			parts = append(parts, "call:"+it.CallID)
		case agents.ItemFunctionCallOutput:
			parts = append(parts, "out:"+it.CallID)
		case agents.ItemReasoning:
			parts = append(parts, "rs:"+it.ID)
		}
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
