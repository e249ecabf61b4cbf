package workflows

import (
	"context"
	"testing"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/capabilities/skills"
	"github.com/troupe-dev/troupe/capabilities/skills/skillstest"
	"github.com/troupe-dev/troupe/memory"
	"github.com/troupe-dev/troupe/runtime/blob"
)

// The memory scope's lister of learnt skills passes the suite of every
// skills.Learnt, on a real blob store; it lists the scope of the call
// (the run context's), not the agent's default.
func TestMemoryLearntConformance(t *testing.T) {
	skillstest.RunLearnt(t, func(t *testing.T, rc agents.RunContext) (skills.Learnt, func(skillstest.Tree)) {
		ctx := context.Background()
		store, err := blob.Open(ctx, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		agent := &agents.Agent{Name: rc.Agent, Memory: &agents.MemoryConfig{Scope: "not-the-call-scope"}}
		return memoryLearnt{store: store, agent: agent}, func(tree skillstest.Tree) {
			if _, err := store.DeletePrefix(ctx, memory.Key(rc.MemoryScope, memory.SkillsDir)); err != nil {
				t.Fatal(err)
			}
			for p, f := range tree {
				if err := store.Put(ctx, memory.Key(rc.MemoryScope, memory.SkillsDir+p), []byte(f.Content)); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}
