package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/capabilities/skills"
	"github.com/troupe-dev/troupe/capabilities/skills/skillstest"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
)

// learntBackends are the stores memory skills are tested on: mem://,
// whose listing gives each blob's MD5, and file://, whose listing gives
// sizes and times only.
var learntBackends = []string{"mem", "file"}

func openLearntStore(t *testing.T, backend string) *blob.Store {
	t.Helper()
	url := "mem://"
	if backend == "file" {
		url = t.TempDir()
	}
	store, err := blob.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

// The memory scope's lister of learnt skills passes the suite of every
// skills.Learnt, on a real blob store; it lists the scope of the call
// (the run context's), not the agent's default.
func TestMemoryLearntConformance(t *testing.T) {
	for _, backend := range learntBackends {
		t.Run(backend, func(t *testing.T) {
			skillstest.RunLearnt(t, func(t *testing.T, rc agents.RunContext) (skills.Learnt, func(skillstest.Tree)) {
				ctx := context.Background()
				store := openLearntStore(t, backend)
				agent := &agents.Agent{Name: rc.Agent, Memory: &agents.MemoryConfig{Scope: "not-the-call-scope"}}
				return memoryLearnt{store: store, agent: agent}, func(tree skillstest.Tree) {
					if _, err := store.DeletePrefix(ctx, Key(rc.MemoryScope, SkillsDir)); err != nil {
						t.Fatal(err)
					}
					for p, f := range tree {
						if err := store.Put(ctx, Key(rc.MemoryScope, SkillsDir+p), []byte(f.Content)); err != nil {
							t.Fatal(err)
						}
					}
				}
			})
		})
	}
}

// countingLearnt counts what a skills.Learnt is asked for: listings, the
// files opened, the skills reported.
type countingLearnt struct {
	skills.Learnt
	mu      sync.Mutex
	lists   int
	opened  map[string]int
	skipped []error
}

func (c *countingLearnt) List(ctx context.Context) ([]skills.LearntFile, error) {
	files, err := c.Learnt.List(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lists++
	for i, f := range files {
		open, p := f.Open, f.Path
		files[i].Open = func(ctx context.Context) (r io.ReadCloser, err error) {
			c.mu.Lock()
			if c.opened == nil {
				c.opened = map[string]int{}
			}
			c.opened[p]++
			c.mu.Unlock()
			return open(ctx)
		}
	}
	return files, err
}

func (c *countingLearnt) Skipped(ctx context.Context, err error) {
	c.mu.Lock()
	c.skipped = append(c.skipped, err)
	c.mu.Unlock()
	c.Learnt.Skipped(ctx, err)
}

// reads returns the files opened and the listings since the last call.
func (c *countingLearnt) reads() (map[string]int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	opened, lists := c.opened, c.lists
	c.opened, c.lists = nil, 0
	return opened, lists
}

// phase2Answer is a model that gives phase 2's answer.
type phase2Answer struct{ answer string }

func (m phase2Answer) Respond(context.Context, model.Request) (*model.Response, error) {
	return &model.Response{Output: []agents.Item{agents.AssistantMessage(m.answer)}}, nil
}

// A model call whose memory skills have not changed costs one listing of
// the scope's skills and no read; one after a new generation reads the
// SKILL.md files it changed; the index never reads a skill's other files,
// and read_skill reads the skill it asks for, then fails it with the
// reason when it breaks a rule, logged once.
func TestMemorySkillIndexCached(t *testing.T) {
	for _, backend := range learntBackends {
		t.Run(backend, func(t *testing.T) {
			ctx := context.Background()
			store := openLearntStore(t, backend)
			text, err := skills.New(ctx, skills.Config{Mode: skills.Text})
			if err != nil {
				t.Fatal(err)
			}
			agent := &agents.Agent{Name: "helper", Instructions: "helper: answers", Capabilities: []agents.Capability{text},
				Memory: &agents.MemoryConfig{Scope: "team", Mode: agents.MemoryReadOnly}}
			phase2, _ := json.Marshal(Phase2Result{Handbook: "## deploys\n- roll back fast", Summary: "- roll back fast", Skills: []Skill{
				{Name: "rollback", SkillMD: skillstest.SkillFile("rollback", "Rolls a deploy back.", "Revert, then redeploy.\n")},
				{Name: "skill-03", SkillMD: skillstest.SkillFile("skill-03", "Does thing 3, better.", "Do it well.\n")},
			}})
			room := &Consolidation{Store: store, Model: phase2Answer{string(phase2)}, Learnt: skills.NewLearntCache(0)}
			var want []string
			put := func(p, data string) {
				t.Helper()
				if err := store.Put(ctx, Key("team", p), []byte(data)); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 30 {
				name := fmt.Sprintf("skill-%02d", i)
				put(SkillPath(name), skillstest.SkillFile(name, fmt.Sprintf("Does thing %d.", i), "Do it.\n"))
				put(SkillsDir+name+"/scripts/run.sh", "#!/bin/sh\necho "+name+"\n")
				want = append(want, fmt.Sprintf("- %s: Does thing %d. (learnt from earlier work)\n", name, i))
			}
			// A skill with a file over the limit of one (1 MiB): in the
			// index, as its SKILL.md says it, and failing when read.
			put(SkillPath("bulky"), skillstest.SkillFile("bulky", "Carries a big file.", "Read data.bin.\n"))
			put(SkillsDir+"bulky/data.bin", strings.Repeat("x", 1<<20+1))
			rm := RawMemory{RolloutID: "r1", Lines: 1, Slug: "deploys", Updated: time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC), Text: "- roll back fast"}
			put(RawMemoryPath("r1"), string(rm.Encode()))

			// The agent's capability as the worker binds it, its lister
			// counted.
			learnt := room.learntOf(agent)
			if backend == "file" {
				// The files are settled (see learntSettled) an hour on.
				learnt.now = func() time.Time { return time.Now().Add(time.Hour) }
			}
			counted := &countingLearnt{Learnt: learnt}
			caps, ok := skills.WithLearnt(agent.Capabilities, counted, skills.SharedCache(room.Learnt))
			if !ok {
				t.Fatal("not bound")
			}
			c := caps[0].(*skills.Capability)

			// Model calls and tool calls run in activities, whose log is
			// logs.
			var logs bytes.Buffer
			var suite testsuite.WorkflowTestSuite
			suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))))
			env := suite.NewTestActivityEnvironment()
			env.RegisterActivityWithOptions(func(ctx context.Context) (string, error) {
				return c.DynamicInstructions(ctx, agents.RunContext{Agent: "helper", MemoryScope: "team"})
			}, activity.RegisterOptions{Name: "index"})
			env.RegisterActivityWithOptions(func(ctx context.Context, args string) (string, error) {
				return c.Tools()[0].(*agents.FunctionTool).Call(ctx, args)
			}, activity.RegisterOptions{Name: "read"})
			call := func(name string, args ...any) (string, error) {
				t.Helper()
				v, err := env.ExecuteActivity(name, args...)
				if err != nil {
					return "", err
				}
				var out string
				if err := v.Get(&out); err != nil {
					t.Fatal(err)
				}
				return out, nil
			}
			index := func() string {
				t.Helper()
				in, err := call("index")
				if err != nil {
					t.Fatal(err)
				}
				return in
			}
			reads := func(when string, lists int, want ...string) {
				t.Helper()
				opened, n := counted.reads()
				if got := slices.Sorted(maps.Keys(opened)); !slices.Equal(got, slices.Sorted(slices.Values(want))) || n != lists {
					t.Errorf("%s: read %v in %d listing(s), want %v in %d", when, opened, n, want, lists)
				}
				for p, n := range opened {
					if n != 1 {
						t.Errorf("%s: read %s %d times", when, p, n)
					}
				}
			}
			var skillFiles []string
			for i := range 30 {
				skillFiles = append(skillFiles, fmt.Sprintf("skill-%02d/SKILL.md", i))
			}

			in := index()
			if !strings.Contains(in, strings.Join(want, "")) || !strings.Contains(in, "- bulky: Carries a big file. (learnt") {
				t.Fatalf("the index lacks learnt skills:\n%s", in)
			}
			reads("the first model call", 1, append(skillFiles, "bulky/SKILL.md")...)
			for range 2 {
				if again := index(); again != in {
					t.Errorf("the index changed with the skills as they were:\n%s", again)
				}
			}
			reads("two model calls more, no new generation", 2)

			// Phase 2 writes a generation: a new skill, and skill-03
			// rewritten.
			out, err := room.MemoryPhase2(ctx, MemoryPhase2Input{Scope: "team", Settings: MemorySettings{Phase2Model: "m", Newest: 8, Phase2Turns: 1}})
			if err != nil || out == nil || strings.Join(out.Skills, ",") != "rollback,skill-03" {
				t.Fatalf("phase 2 = %+v, %v; want rollback and skill-03 written", out, err)
			}
			in = index()
			for _, w := range []string{"- rollback: Rolls a deploy back. (learnt", "- skill-03: Does thing 3, better. (learnt", want[4]} {
				if !strings.Contains(in, w) {
					t.Errorf("after the new generation, the index lacks %q:\n%s", w, in)
				}
			}
			if strings.Contains(in, want[3]) {
				t.Errorf("after the new generation, the index holds skill-03 as it was:\n%s", in)
			}
			reads("the model call after the new generation", 1, "rollback/SKILL.md", "skill-03/SKILL.md")
			index()
			reads("the model call after that", 1)

			// read_skill reads the one skill it asks for, all of it.
			if out, err := call("read", `{"name":"skill-07","path":"scripts/run.sh"}`); err != nil || out != "#!/bin/sh\necho skill-07\n" {
				t.Errorf("read_skill skill-07 = %q, %v", out, err)
			}
			reads("read_skill skill-07", 1, "skill-07/SKILL.md", "skill-07/scripts/run.sh")
			for i := range 2 {
				_, err := call("read", `{"name":"bulky"}`)
				if err == nil || !strings.Contains(err.Error(), "skill bulky") || !strings.Contains(err.Error(), "over 1048576 bytes") {
					t.Errorf("read_skill bulky, time %d: %v; want it over the limit of a file", i+1, err)
				}
			}
			if n := len(counted.skipped); n != 1 || !errors.Is(counted.skipped[0], skills.ErrTooLarge) {
				t.Errorf("reported %v, want bulky once", counted.skipped)
			}
			if n := strings.Count(logs.String(), "memory skill not offered"); n != 1 {
				t.Errorf("bulky logged %d times, want once:\n%s", n, logs.String())
			}
		})
	}
}

// A listing cut at its bound is logged once while it stays as it is.
func TestMemorySkillListingBoundLoggedOnce(t *testing.T) {
	ctx := context.Background()
	store := openLearntStore(t, "mem")
	for i := range MaxWorkspaceFiles + 1 {
		if err := store.Put(ctx, Key("team", fmt.Sprintf("%sskill-%03d/SKILL.md", SkillsDir, i)), []byte("---\n")); err != nil {
			t.Fatal(err)
		}
	}
	m := memoryLearnt{store: store, agent: &agents.Agent{Name: "helper", Memory: &agents.MemoryConfig{Scope: "team"}}, cache: skills.NewLearntCache(0)}
	var logs bytes.Buffer
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivityWithOptions(func(ctx context.Context) (int, error) {
		files, err := m.List(ctx)
		return len(files), err
	}, activity.RegisterOptions{Name: "list"})
	list := func() {
		t.Helper()
		v, err := env.ExecuteActivity("list")
		var n int
		if err == nil {
			err = v.Get(&n)
		}
		if err != nil || n != MaxWorkspaceFiles {
			t.Fatalf("listed %d files (%v), want %d", n, err, MaxWorkspaceFiles)
		}
	}
	const warning = "memory skills past the listing's bound are not offered"
	list()
	list()
	if n := strings.Count(logs.String(), warning); n != 1 {
		t.Errorf("two listings: the bound logged %d times, want once:\n%s", n, logs.String())
	}
	// A file of the listing rewritten: a new version of it, logged again.
	if err := store.Put(ctx, Key("team", SkillsDir+"skill-000/SKILL.md"), []byte("---\nname: skill-000\n")); err != nil {
		t.Fatal(err)
	}
	list()
	if n := strings.Count(logs.String(), warning); n != 2 {
		t.Errorf("after a change: the bound logged %d times, want twice:\n%s", n, logs.String())
	}
}

// A listed file's version names its content: by its MD5 where the store
// gives one, else by its size and time once that time is past a file
// system clock's grain (learntSettled); before, it has none, and is read
// whenever it is needed.
func TestMemorySkillVersion(t *testing.T) {
	now := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	old, recent := now.Add(-time.Hour), now.Add(-learntSettled/2)
	k := "memory/team/memories/skills/x/SKILL.md"
	for _, tc := range []struct {
		name string
		a, b blob.Object
		same bool // a and b have one version
		none bool // b has none
	}{
		{name: "md5, rewritten alike", a: blob.Object{Key: k, Size: 3, ModTime: old, MD5: []byte{1}}, b: blob.Object{Key: k, Size: 3, ModTime: recent, MD5: []byte{1}}, same: true},
		{name: "md5, rewritten otherwise", a: blob.Object{Key: k, Size: 3, ModTime: old, MD5: []byte{1}}, b: blob.Object{Key: k, Size: 3, ModTime: old, MD5: []byte{2}}},
		{name: "md5, another key", a: blob.Object{Key: k, Size: 3, MD5: []byte{1}}, b: blob.Object{Key: k + "x", Size: 3, MD5: []byte{1}}},
		{name: "time, settled", a: blob.Object{Key: k, Size: 3, ModTime: old}, b: blob.Object{Key: k, Size: 3, ModTime: old}, same: true},
		{name: "time, another size", a: blob.Object{Key: k, Size: 3, ModTime: old}, b: blob.Object{Key: k, Size: 4, ModTime: old}},
		{name: "time, rewritten", a: blob.Object{Key: k, Size: 3, ModTime: old}, b: blob.Object{Key: k, Size: 3, ModTime: old.Add(time.Millisecond)}},
		{name: "time, too recent", a: blob.Object{Key: k, Size: 3, ModTime: old}, b: blob.Object{Key: k, Size: 3, ModTime: recent}, none: true},
	} {
		va, vb := learntVersion(tc.a, now), learntVersion(tc.b, now)
		if va == "" || (vb == "") != tc.none || (va == vb) != tc.same {
			t.Errorf("%s: versions %q and %q", tc.name, va, vb)
		}
	}
}
