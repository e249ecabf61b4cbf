package cli

import (
	"strings"
	"testing"

	"github.com/troupe-dev/troupe"
)

// TestEventPrinterStreamsTurns: a turn's deltas print on the turn's line
// as they come, its model_turn ends that line (adding what the text did
// not show, such as tool calls), and any other event starts a line of its
// own.
func TestEventPrinterStreamsTurns(t *testing.T) {
	delta := func(wf, agent string, turn int, text string) troupe.Event {
		return troupe.Event{Kind: troupe.EventTextDelta, WorkflowID: wf, Agent: agent, Turn: turn, Detail: text}
	}
	turn := func(wf, agent string, n int, detail string) troupe.Event {
		return troupe.Event{Kind: troupe.EventTurn, WorkflowID: wf, Agent: agent, Turn: n, Detail: detail}
	}
	tests := []struct {
		name   string
		events []troupe.Event
		want   string
	}{
		{
			name: "a streamed answer is one line",
			events: []troupe.Event{
				delta("r/0-a", "a", 1, "Hello, "), delta("r/0-a", "a", 1, "world."),
				turn("r/0-a", "a", 1, "Hello, world."),
				{Kind: troupe.EventFinal, WorkflowID: "r/0-a", Agent: "a", Turn: 1},
			},
			want: "  [a] turn 1: Hello, world.\n  [a] final output\n",
		},
		{
			name: "a session turn's end and a run's failure print once, as their agent's",
			events: []troupe.Event{
				{Kind: troupe.EventFinal, WorkflowID: "s/t1/0-a", Agent: "a", Turn: 1},
				{Kind: troupe.EventFinal, WorkflowID: "s", Agent: "a", Turn: 1},
				{Kind: troupe.EventFailed, WorkflowID: "r/0-b", Agent: "b", Detail: "boom"},
				{Kind: troupe.EventFailed, WorkflowID: "r", Detail: "agent b failed: boom"},
				{Kind: troupe.EventFailed, WorkflowID: "s", Agent: "b", Turn: 2, Detail: "boom"},
			},
			want: "  [a] final output\n  [b] failed: boom\n",
		},
		{
			name: "a long answer ends its line once",
			events: []troupe.Event{
				delta("r/0-a", "a", 2, strings.Repeat("x", 150)), delta("r/0-a", "a", 2, strings.Repeat("y", 150)),
				turn("r/0-a", "a", 2, strings.Repeat("x", 150)+strings.Repeat("y", 50)+"…"),
			},
			want: "  [a] turn 2: " + strings.Repeat("x", 150) + strings.Repeat("y", 150) + "\n",
		},
		{
			name: "text then tool calls says the calls",
			events: []troupe.Event{
				delta("r/0-a", "a", 1, "Let me look."),
				turn("r/0-a", "a", 1, "2 tool call(s)"),
				{Kind: troupe.EventToolCalled, WorkflowID: "r/0-a", Agent: "a", Tool: "get", Detail: "{}"},
			},
			want: "  [a] turn 1: Let me look.\n  [a] turn 1: 2 tool call(s)\n  [a] → get {}\n",
		},
		{
			name: "two agents streaming at once take turns on their own lines",
			events: []troupe.Event{
				delta("r/0-a/t1.0/0-w1", "w1", 1, "one "),
				delta("r/0-a/t1.1/0-w2", "w2", 1, "two "),
				delta("r/0-a/t1.0/0-w1", "w1", 1, "more"),
				turn("r/0-a/t1.0/0-w1", "w1", 1, "one more"),
				turn("r/0-a/t1.1/0-w2", "w2", 1, "two "),
			},
			want: "  [w1] turn 1: one \n  [w2] turn 1: two \n  [w1] turn 1 …more\n",
		},
		{
			name:   "a turn without deltas prints as before",
			events: []troupe.Event{turn("r/0-a", "a", 1, "Hi.")},
			want:   "  [a] turn 1: Hi.\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			p := newEventPrinter(&b)
			for _, e := range tt.events {
				p.event(e)
			}
			p.endLine()
			if b.String() != tt.want {
				t.Errorf("printed\n%q\nwant\n%q", b.String(), tt.want)
			}
		})
	}
}
