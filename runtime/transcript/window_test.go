package transcript_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"testing"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/capabilities"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/transcript"
)

// TestTranscriptWindow runs an agent's transcript through many turns of a
// windowing compactor, the way the model activity does (LoadView, Window,
// Append), and holds what the model is shown each turn against a
// reference kept in memory: the last trim's output followed by every item
// since. The view loaded from the blob store must equal it item for item,
// from a warm cache and from a cold one (another worker), stay bounded,
// keep every call paired, and count what it dropped.
func TestTranscriptWindow(t *testing.T) {
	tests := []struct {
		name  string
		cfg   capabilities.CompactionConfig
		turns int
	}{
		{"items", capabilities.CompactionConfig{MaxItems: 20, KeepLast: 6}, 120},
		{"bytes", capabilities.CompactionConfig{MaxItems: -1, MaxBytes: 3000, KeepLast: 50}, 120},
		{"keep one turn", capabilities.CompactionConfig{MaxItems: 8, KeepLast: 1}, 60},
	}
	notePattern := regexp.MustCompile(`^\[Context trimmed: (\d+) earlier items`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			store, err := blob.Open(ctx, "mem://")
			if err != nil {
				t.Fatal(err)
			}
			wc := capabilities.Compaction(tt.cfg).(agents.WindowCompactor)
			ts := transcript.NewTranscripts(store)
			ref := runtime.TranscriptRef{Key: "transcripts/run/agent"}
			pending := []agents.Item{agents.UserMessage("the task")}
			var want []agents.Item // what the model saw last, then what came since
			total, trims := 0, 0
			for turn := 1; turn <= tt.turns; turn++ {
				want = append(want, pending...)
				total += len(pending)
				items, at, err := ts.LoadView(ctx, ref, pending)
				if err != nil {
					t.Fatalf("turn %d: %v", turn, err)
				}
				if d := diff(items, want); d != "" {
					t.Fatalf("turn %d: the view is not what the model saw since the last trim: %s", turn, d)
				}
				if turn%7 == 0 {
					cold, _, err := transcript.NewTranscripts(store).LoadView(ctx, ref, pending)
					if err != nil || diff(cold, items) != "" {
						t.Fatalf("turn %d: another worker loads another view: %v %s", turn, err, diff(cold, items))
					}
				}
				if len(items) != len(agents.PairCalls(items)) {
					t.Fatalf("turn %d: the view holds a call or an output without its pair: %s", turn, describeItems(items))
				}
				out, head, from, trimmed := wc.Window(items)
				if !trimmed {
					if d := diff(out, wc.Trim(items)); d != "" {
						t.Fatalf("turn %d: Window and Trim disagree: %s", turn, d)
					}
				} else {
					trims++
					view, err := runtime.Window(at, head, from, out[len(head)].Content)
					if err != nil {
						t.Fatalf("turn %d: %v", turn, err)
					}
					m := notePattern.FindStringSubmatch(view.Note)
					if m == nil {
						t.Fatalf("turn %d: the note is %q", turn, view.Note)
					}
					if n, _ := strconv.Atoi(m[1]); n != total-(len(out)-1) {
						t.Errorf("turn %d: the note counts %d dropped items; %d of %d are not shown", turn, n, total-(len(out)-1), total)
					}
					ref.View = view
					want = out
				}
				if max := tt.cfg.MaxItems; max > 0 && len(out) > max {
					t.Fatalf("turn %d: the model is shown %d items, more than %d", turn, len(out), max)
				}
				// The model answers: a call a turn, two every fifth turn,
				// a reasoning item before every third turn's calls. The
				// turn's segment is its pending items and the answer.
				var answer []agents.Item
				if turn%3 == 0 {
					answer = append(answer, agents.Item{Type: agents.ItemReasoning, ID: fmt.Sprintf("rs_%d", turn), Summary: "thinking"})
				}
				var next []agents.Item
				for c := 0; c < 1+turn%5/4; c++ {
					id := fmt.Sprintf("call_%d_%d", turn, c)
					answer = append(answer, agents.Item{Type: agents.ItemFunctionCall, CallID: id, Name: "noop", Arguments: `{"turn":"` + strconv.Itoa(turn) + `"}`})
					next = append(next, agents.FunctionCallOutput(id, fmt.Sprintf("ok %d, output to fill the context: %0100d", turn, 0)))
				}
				view := ref.View
				if ref, err = ts.Append(ctx, ref, append(append([]agents.Item(nil), pending...), answer...)); err != nil {
					t.Fatal(err)
				}
				ref.View = view
				want = append(want, answer...)
				total += len(answer)
				pending = next
			}
			if trims < 3 {
				t.Errorf("%d trims in %d turns; the test means to trim often", trims, tt.turns)
			}
		})
	}
}

// diff describes how two item lists differ, or is empty when they match.
func diff(got, want []agents.Item) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d items, want %d:\n got %s\nwant %s", len(got), len(want), describeItems(got), describeItems(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Type != w.Type || g.Role != w.Role || g.Content != w.Content || g.CallID != w.CallID || g.Output != w.Output || g.ID != w.ID {
			return fmt.Sprintf("item %d is %s, want %s", i, describeItems(got[i:i+1]), describeItems(want[i:i+1]))
		}
	}
	return ""
}

func describeItems(items []agents.Item) string {
	s := ""
	for _, it := range items {
		switch it.Type {
		case agents.ItemFunctionCall:
			s += " call(" + it.CallID + ")"
		case agents.ItemFunctionCallOutput:
			s += " out(" + it.CallID + ")"
		case agents.ItemReasoning:
			s += " reason(" + it.ID + ")"
		default:
			s += " " + it.Role + "(" + fmt.Sprintf("%.20s", it.Content) + ")"
		}
	}
	return s
}
