package memory_test

import (
	"path/filepath"
	"testing"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/workflows/workflowstest"
)

// TestReplayMemoryHistories replays checked-in histories of a session of
// an agent with memory (its turns' rollouts and the final signal, under
// troupe.memory-rollouts) and of its scope's memory workflow (phases,
// batching, idle end), recorded by e2e's TestMemorySessionEndToEnd with
// -histories, and of a session forked with memory and of its fork
// (troupe.memory-fork: the copy of the scope), recorded by
// TestMemoryForkEndToEnd: a change of their commands fails here and must
// be versioned.
func TestReplayMemoryHistories(t *testing.T) {
	sets, err := filepath.Glob("testdata/memory-histories/*/index.json")
	if err != nil || len(sets) == 0 {
		t.Fatalf("no recorded memory histories: %v", err)
	}
	g := agents.MustGraph("memsession", "m", &agents.Agent{Name: "m", Instructions: "memtest: remembers", Memory: &agents.MemoryConfig{Scope: "replayed"}})
	for _, set := range sets {
		dir := filepath.Dir(set)
		for file, id := range workflowstest.ReadIndex(t, dir) {
			t.Run(filepath.Base(dir)+"/"+file, func(t *testing.T) {
				if err := workflowstest.Replay(t, filepath.Join(dir, file), id, g); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}
