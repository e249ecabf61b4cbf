package memory_test

import (
	"fmt"
	"time"

	"github.com/troupe-dev/troupe/memory"
)

// Phase 1 turns a rollout into a raw memory and a summary, keyed by the
// rollout's id; phase 2 diffs the newest raw memories against the last
// selection.
func Example() {
	at := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	data, _, _, _ := memory.AppendLine(nil, memory.Line{Seq: 1, Workflow: "session-1", Input: "Always run go vet before review.", Outcome: memory.OutcomeAnswered, Ended: at})
	lines, _ := memory.ParseLines(data)
	_ = memory.Phase1Input("session-1", lines, 16<<10) // the model's input

	res, err := memory.ParsePhase1(`{"rollout_slug":"go-review-prefs","rollout_summary":"The user set review rules.","raw_memory":"- run go vet before a review"}`)
	if err != nil {
		fmt.Println(err)
		return
	}
	rawPath, raw, summaryPath, _, _ := memory.Phase1Files("session-1", len(lines), at, res)
	fmt.Println(memory.Key("reviews", rawPath))
	fmt.Println(memory.Key("reviews", summaryPath))

	m, _ := memory.ParseRawMemory(raw)
	changes := memory.Diff(memory.Selection{Version: 1}, memory.Newest([]memory.RawMemory{m}, 32))
	fmt.Println(len(changes.Added), "added,", len(changes.Removed), "removed")

	_, err = memory.ParsePhase1(`{"rollout_slug":"Go Review"}`)
	fmt.Println(err)
	// Output:
	// memory/reviews/memories/raw_memories/session-1.md
	// memory/reviews/memories/rollout_summaries/session-1_go-review-prefs.md
	// 1 added, 0 removed
	// memory phase 1 answer: wrong fields (rollout_summary): missing field
}
