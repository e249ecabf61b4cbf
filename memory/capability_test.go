package memory_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/capabilities"
	_ "github.com/troupe-dev/troupe/internal/binarychecksum" // no executable hashed in workflow code
	"github.com/troupe-dev/troupe/memory"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/local"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/workflowstest"
)

// capEnv is a test environment for the memory capability: a real blob
// store in a temporary directory, a real local sandbox backend, the
// graph g and the model fn. The scope's workflow is not started (the
// test environment has no client for SignalWithStart): the signal
// activity is the one stand-in.
type capEnv struct {
	env    *testsuite.TestWorkflowEnvironment
	store  *blob.Store
	runner *workflows.Runner
	mu     sync.Mutex
	// instructions are those of the model's calls, by agent.
	instructions map[string][]string
}

func newCapEnv(t *testing.T, g *agents.Graph, fn func(c *capEnv, req model.Request) []agents.Item) *capEnv {
	t.Helper()
	store, err := blob.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	lc, err := local.New(local.Config{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	c := &capEnv{env: workflowstest.NewEnv(), store: store, instructions: map[string][]string{}}
	m := &workflowstest.FuncModel{Func: func(req model.Request) []agents.Item {
		c.mu.Lock()
		name, _, _ := strings.Cut(req.Instructions, ":")
		c.instructions[name] = append(c.instructions[name], req.Instructions)
		c.mu.Unlock()
		return fn(c, req)
	}}
	r, err := workflows.NewRunner(workflows.Config{Graphs: []*agents.Graph{g}, Model: m, Store: store,
		Sandboxes: map[string]sandbox.Client{"local": lc}, SandboxIdleTimeout: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	r.Register(c.env)
	c.runner = r
	c.env.RegisterActivityWithOptions(func(context.Context, memory.MemorySignalInput) error { return nil },
		activity.RegisterOptions{Name: memory.MemorySignalActivityName})
	return c
}

func (c *capEnv) put(t *testing.T, scope, path, data string) {
	t.Helper()
	if err := c.store.Put(context.Background(), memory.Key(scope, path), []byte(data)); err != nil {
		t.Fatal(err)
	}
}

// get is a scope's file, "" when it does not exist.
func (c *capEnv) get(t *testing.T, scope, path string) string {
	t.Helper()
	return scopeFile(t, c.store, scope, path)
}

func (c *capEnv) run(t *testing.T, graph, input string) {
	t.Helper()
	c.env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: graph, Input: input})
	if err := c.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
}

// seed gives scope a consolidated memory: summary, handbook, a rollout
// summary, a skill, and the working files workspaces must not get.
func (c *capEnv) seed(t *testing.T, scope string) {
	t.Helper()
	c.put(t, scope, memory.SummaryPath, "The user wants discounts above 30% escalated.\n")
	c.put(t, scope, memory.HandbookPath, "# Handbook\n- discount: escalate above 30%\n- style: terse answers\n")
	c.put(t, scope, memory.RolloutSummaryPath("s1", "acme-deal"), "Reviewed the Acme deal.\n")
	c.put(t, scope, memory.SkillPath("price-review"), "---\nname: price-review\ndescription: How to review a deal's pricing.\n---\nCheck the discount first.\n")
	c.put(t, scope, memory.RawMemoryPath("s1"), "raw: secret working note\n")
	c.put(t, scope, memory.SelectionPath, `{"selected":[]}`)
	c.put(t, scope, memory.RolloutPath("s1"), `{"seq":1}`+"\n")
}

// execOut is the output part of an exec_command result.
func execOut(output string) string {
	_, out, _ := strings.Cut(output, "Output:\n")
	return strings.TrimSpace(out)
}

// A sandbox agent that reads memory finds its scope's files in its
// workspace before its first command: summary, handbook, rollout
// summaries and skills, not the raw memories, the selection or the
// rollouts; bounded; and its instructions list the memory skills.
func TestMemoryMaterialisedIntoWorkspace(t *testing.T) {
	g := agents.MustGraph("ws", "coder", &agents.Agent{Name: "coder", Instructions: "coder: reads memory", Sandbox: &agents.Sandbox{},
		Memory: &agents.MemoryConfig{Scope: "team"}})
	var listing string
	c := newCapEnv(t, g, func(c *capEnv, req model.Request) []agents.Item {
		if last := workflowstest.LastItem(req); last.Type == agents.ItemFunctionCallOutput {
			listing = execOut(last.Output)
			return []agents.Item{agents.AssistantMessage("done")}
		}
		return []agents.Item{workflowstest.Shell("c1", "find memories sessions -type f 2>/dev/null | sort; cat memories/memory_summary.md")}
	})
	c.seed(t, "team")
	// Three large rollout summaries: together over the workspace's bound.
	big := strings.Repeat("x", memory.MaxWorkspaceBytes/3)
	for _, id := range []string{"s2", "s3", "s4"} {
		c.put(t, "team", memory.RolloutSummaryPath(id, "big"), big)
	}
	c.run(t, "ws", "look at your memory")
	for _, want := range []string{"memories/MEMORY.md", "memories/memory_summary.md", "memories/rollout_summaries/s1_acme-deal.md",
		"memories/skills/price-review/SKILL.md", "escalated"} {
		if !strings.Contains(listing, want) {
			t.Errorf("the workspace lacks %s:\n%s", want, listing)
		}
	}
	for _, absent := range []string{"raw_memories", "phase_two_selection", "sessions/", "s4_big.md"} {
		if strings.Contains(listing, absent) {
			t.Errorf("the workspace has %s, which it must not (working file, or over the bound):\n%s", absent, listing)
		}
	}
	if !strings.Contains(listing, "s2_big.md") {
		t.Errorf("the bound left out more than it had to:\n%s", listing)
	}
	if keys, _, err := c.store.List(context.Background(), "memory-workspaces/", 0); err != nil || len(keys) != 0 {
		t.Errorf("materialisation records left after the sandbox stopped: %v %v", keys, err)
	}
	ins := strings.Join(c.instructions["coder"], "\n")
	for _, want := range []string{"escalated", "price-review (memories/skills/price-review/SKILL.md): How to review a deal's pricing.", "apply_patch"} {
		if !strings.Contains(ins, want) {
			t.Errorf("instructions lack %q:\n%s", want, ins)
		}
	}
}

// The agent's edits of its workspace's memory go back to the scope at the
// end of its turn; a handbook that consolidation rewrote meanwhile is not
// clobbered; a symlink is never followed back; read-only agents write
// nothing.
func TestMemoryLiveUpdate(t *testing.T) {
	for _, tc := range []struct {
		name       string
		mode       agents.MemoryMode
		concurrent bool
	}{
		{name: "written back", mode: agents.MemoryReadWrite},
		{name: "a concurrent phase 2 stands", mode: agents.MemoryReadWrite, concurrent: true},
		{name: "read-only writes nothing", mode: agents.MemoryReadOnly},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := agents.MustGraph("lu", "coder", &agents.Agent{Name: "coder", Instructions: "coder: fixes memory", Sandbox: &agents.Sandbox{},
				Memory: &agents.MemoryConfig{Scope: "team", Mode: tc.mode}})
			const phase2 = "# Handbook\n- consolidated meanwhile\n"
			var out string
			c := newCapEnv(t, g, func(c *capEnv, req model.Request) []agents.Item {
				last := workflowstest.LastItem(req)
				switch {
				case last.Type == agents.ItemMessage:
					// The workspace is provisioned, memory materialised.
					return []agents.Item{workflowstest.Shell("c0", "cat memories/MEMORY.md")}
				case last.CallID == "c1":
					out = last.Output
					return []agents.Item{agents.AssistantMessage("fixed")}
				}
				if tc.concurrent {
					// Phase 2 rewrites the handbook after the workspace got it.
					c.put(t, "team", memory.HandbookPath, phase2)
				}
				return []agents.Item{workflowstest.Shell("c1", "echo '- discount: escalate above 25% (user, today)' >> memories/MEMORY.md && "+
					"mkdir -p memories/rollout_summaries && echo evil > memories/rollout_summaries/s9_evil.md && "+
					"echo host > ../outside.md; ln -sf /etc/hostname memories/memory_summary.md && echo edited")}
			})
			c.seed(t, "team")
			summary := c.get(t, "team", memory.SummaryPath)
			c.run(t, "lu", "fix the discount rule")
			if !strings.Contains(out, "edited") {
				t.Fatalf("the command failed: %s", out)
			}
			handbook := c.get(t, "team", memory.HandbookPath)
			switch {
			case tc.concurrent:
				if handbook != phase2 {
					t.Errorf("the consolidated handbook was clobbered:\n%s", handbook)
				}
			case tc.mode == agents.MemoryReadOnly:
				if strings.Contains(handbook, "25%") {
					t.Errorf("a read-only agent's edit was written back:\n%s", handbook)
				}
			default:
				if !strings.Contains(handbook, "- discount: escalate above 30%") || !strings.Contains(handbook, "escalate above 25% (user, today)") {
					t.Errorf("the edit was not written back:\n%s", handbook)
				}
			}
			if got := c.get(t, "team", memory.SummaryPath); got != summary {
				t.Errorf("a symlinked summary was written back: %q", got)
			}
			if got := c.get(t, "team", memory.RolloutSummaryPath("s9", "evil")); got != "" {
				t.Errorf("a file other than the handbook and summary was written back: %q", got)
			}
		})
	}
}

// A plain agent reads its memory through memory_search and memory_read,
// bounded to the memory files.
func TestMemoryToolsForPlainAgents(t *testing.T) {
	g := agents.MustGraph("plain", "p", &agents.Agent{Name: "p", Instructions: "p: plain", Memory: &agents.MemoryConfig{Scope: "team", Mode: agents.MemoryReadOnly}})
	var tools []string
	var outs []string
	c := newCapEnv(t, g, func(c *capEnv, req model.Request) []agents.Item {
		if tools == nil {
			for _, s := range req.Tools {
				tools = append(tools, s.Name)
			}
		}
		last := workflowstest.LastItem(req)
		if last.Type == agents.ItemFunctionCallOutput {
			outs = append(outs, last.Output)
		}
		switch len(outs) {
		case 0:
			return []agents.Item{workflowstest.Call("s", memory.MemorySearchTool, `{"query":"DISCOUNT escalate"}`)}
		case 1:
			return []agents.Item{workflowstest.Call("r", memory.MemoryReadTool, `{"path":"memories/skills/price-review/SKILL.md"}`)}
		case 2:
			return []agents.Item{workflowstest.Call("x", memory.MemoryReadTool, `{"path":"memories/raw_memories/s1.md"}`)}
		case 3:
			return []agents.Item{workflowstest.Call("y", memory.MemoryReadTool, `{"path":"memories/../sessions/s1.jsonl"}`)}
		}
		return []agents.Item{agents.AssistantMessage("ok")}
	})
	c.seed(t, "team")
	c.run(t, "plain", "what do you remember?")
	if got := strings.Join(tools, ","); got != "memory_search,memory_read" {
		t.Errorf("tools = %s", got)
	}
	if len(outs) != 4 {
		t.Fatalf("outputs: %q", outs)
	}
	if outs[0] != "2: - discount: escalate above 30%\n" {
		t.Errorf("memory_search = %q", outs[0])
	}
	if !strings.Contains(outs[1], "Check the discount first.") {
		t.Errorf("memory_read of a skill = %q", outs[1])
	}
	for _, o := range outs[2:] {
		if strings.Contains(o, "secret") || strings.Contains(o, "seq") || !strings.Contains(o, "not a memory file") {
			t.Errorf("memory_read outside the memory files = %q", o)
		}
	}
	if ins := strings.Join(c.instructions["p"], "\n"); !strings.Contains(ins, "memory_search") || !strings.Contains(ins, "memory_read memories/skills/price-review/SKILL.md") {
		t.Errorf("instructions do not point to the tools:\n%s", ins)
	}
}

// Two agents with a Dir each keep separate memories: each finds its own
// scope's files under memories/<dir>/, and its edits go to its own scope.
func TestMemoryLayouts(t *testing.T) {
	mk := func(name, scope, next string) *agents.Agent {
		a := &agents.Agent{Name: name, Instructions: name + ": keeps notes", Sandbox: &agents.Sandbox{},
			Memory: &agents.MemoryConfig{Scope: scope, Dir: name}}
		if next != "" {
			a.Handoffs = []agents.Handoff{agents.HandoffTo(next)}
		}
		return a
	}
	g := agents.MustGraph("two", "a", mk("a", "scope-a", "b"), mk("b", "scope-b", ""))
	seen := map[string]string{}
	c := newCapEnv(t, g, func(c *capEnv, req model.Request) []agents.Item {
		name, _, _ := strings.Cut(req.Instructions, ":")
		last := workflowstest.LastItem(req)
		switch {
		case last.Type == agents.ItemFunctionCallOutput && strings.HasPrefix(last.CallID, name):
			seen[name] = execOut(last.Output)
			if name == "a" {
				return []agents.Item{workflowstest.Call("h", "transfer_to_b", "{}")}
			}
			return []agents.Item{agents.AssistantMessage("done")}
		}
		return []agents.Item{workflowstest.Shell(name+"1", fmt.Sprintf("find memories -type f | sort; cat memories/%s/MEMORY.md; echo '- note of %s' >> memories/%s/MEMORY.md", name, name, name))}
	})
	c.put(t, "scope-a", memory.HandbookPath, "- lesson of scope a\n")
	c.put(t, "scope-b", memory.HandbookPath, "- lesson of scope b\n")
	c.run(t, "two", "take notes")
	for _, tc := range []struct{ agent, own, other string }{{"a", "a", "b"}, {"b", "b", "a"}} {
		if !strings.Contains(seen[tc.agent], "memories/"+tc.own+"/MEMORY.md") || !strings.Contains(seen[tc.agent], "lesson of scope "+tc.own) ||
			strings.Contains(seen[tc.agent], "memories/"+tc.other+"/") || strings.Contains(seen[tc.agent], "memories/MEMORY.md") {
			t.Errorf("agent %s's workspace:\n%s", tc.agent, seen[tc.agent])
		}
		got := c.get(t, "scope-"+tc.own, memory.HandbookPath)
		if !strings.Contains(got, "- note of "+tc.own) || strings.Contains(got, "note of "+tc.other) {
			t.Errorf("scope-%s's handbook: %q", tc.own, got)
		}
	}
}

// A worker refuses a graph whose memory cannot work, naming the agent and
// what is missing.
func TestMemoryGraphValidation(t *testing.T) {
	sb := func(mode agents.MemoryMode, dir string, caps ...agents.Capability) *agents.Agent {
		return &agents.Agent{Name: "coder", Sandbox: &agents.Sandbox{}, Capabilities: append([]agents.Capability{}, caps...),
			Memory: &agents.MemoryConfig{Scope: "team", Mode: mode, Dir: dir}}
	}
	for _, tc := range []struct {
		name  string
		agent *agents.Agent
		want  string // "" for accepted
	}{
		{"read-write with shell and filesystem", sb(agents.MemoryReadWrite, "", capabilities.Shell(), capabilities.Filesystem()), ""},
		{"default capabilities", &agents.Agent{Name: "coder", Sandbox: &agents.Sandbox{}, Memory: &agents.MemoryConfig{Scope: "team"}}, ""},
		{"read-write without shell", sb(agents.MemoryReadWrite, "", capabilities.Filesystem()), "agent coder: memory mode \"read-write\" reads memory in the sandbox, which needs the shell capability (tool exec_command)"},
		{"read-only without shell", sb(agents.MemoryReadOnly, ""), "agent coder: memory mode \"read-only\" reads memory in the sandbox, which needs the shell capability (tool exec_command)"},
		{"read-write without filesystem", sb(agents.MemoryReadWrite, "", capabilities.Shell()), "agent coder: memory mode read-write updates memory live in the sandbox, which needs the filesystem capability (tool apply_patch)"},
		{"read-only with shell only", sb(agents.MemoryReadOnly, "", capabilities.Shell()), ""},
		{"generate-only needs nothing", sb(agents.MemoryGenerateOnly, ""), ""},
		{"plain agent", &agents.Agent{Name: "coder", Memory: &agents.MemoryConfig{Scope: "team"}}, ""},
		{"bad dir", sb(agents.MemoryReadOnly, "../x", capabilities.Shell()), "agent coder: memory: bad name: memory dir \"../x\""},
		{"dir of the scope's own", sb(agents.MemoryReadOnly, "skills", capabilities.Shell()), "is a folder of the scope's own"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, _ := blob.Open(context.Background(), "mem://")
			_, err := workflows.NewRunner(workflows.Config{Graphs: []*agents.Graph{agents.MustGraph("g", "coder", tc.agent)},
				Model: &workflowstest.FuncModel{}, Store: store})
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// A fork of a session starts with its memory copy-on-write: from the fork
// on, the fork's edits and consolidations change its own scope only, and
// its source's change the source's only; each side's instructions read
// its own summary, and each side's rollouts go to its own scope.
func TestMemoryForkIndependent(t *testing.T) {
	g := agents.MustGraph("code", "coder", &agents.Agent{Name: "coder", Instructions: "coder: remembers", Sandbox: &agents.Sandbox{},
		Memory: &agents.MemoryConfig{Scope: "team"}})
	var mu sync.Mutex
	ins := map[string]string{}
	m := &workflowstest.FuncModel{Func: func(req model.Request) []agents.Item {
		mu.Lock()
		ins[workflowstest.LastUser(req)] = req.Instructions
		mu.Unlock()
		return workflowstest.ScriptedCoder(req)
	}}
	store, err := blob.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	env, _ := workflowstest.LocalEnv(t, g, m, func(c *workflows.Config) { c.Store = store })
	env.RegisterActivityWithOptions(func(context.Context, memory.MemorySignalInput) error { return nil },
		activity.RegisterOptions{Name: memory.MemorySignalActivityName})
	c := &capEnv{store: store}
	c.put(t, "team", memory.SummaryPath, "base summary\n")
	c.put(t, "team", memory.HandbookPath, "- base lesson\n")
	fork := memory.ForkScope("team", "branch")

	var first, forked, src, branch *workflowstest.Update
	env.RegisterDelayedCallback(func() {
		workflowstest.SendUpdate(env, troupe.CreateSessionUpdate, troupe.CreateSessionInput{ID: "src", Session: troupe.SessionInput{Graph: "code"}})
	}, time.Second)
	env.RegisterDelayedCallback(func() { first = workflowstest.AskSession(t, env, "src", "run: cat memories/MEMORY.md") }, 2*time.Second)
	env.RegisterDelayedCallback(func() {
		forked = workflowstest.SendUpdate(env, troupe.ForkUpdate, troupe.ForkInput{ID: "src", NewID: "branch"})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		src = workflowstest.AskSession(t, env, "src", "run: echo '- src lesson' >> memories/MEMORY.md && echo edited")
		branch = workflowstest.AskSession(t, env, "branch", "run: echo '- branch lesson' >> memories/MEMORY.md && echo edited")
	}, 2*time.Minute)
	env.RegisterDelayedCallback(func() {
		// The source's consolidation runs after the fork.
		c.put(t, "team", memory.SummaryPath, "source summary v2\n")
		workflowstest.AskSession(t, env, "src", "hello from src")
		workflowstest.AskSession(t, env, "branch", "hello from branch")
	}, 3*time.Minute)
	env.RegisterDelayedCallback(func() {
		for _, id := range []string{"src", "branch"} {
			workflowstest.SendUpdate(env, troupe.LifecycleUpdate, troupe.LifecycleInput{ID: id, Command: troupe.SessionCommand{Op: troupe.CommandStop}})
		}
	}, time.Hour)
	env.RegisterDelayedCallback(env.CancelWorkflow, 2*time.Hour)
	env.ExecuteWorkflow(troupe.SessionManagerWorkflowName, troupe.ManagerInput{})

	if got := first.Output(t); !strings.Contains(got, "base lesson") {
		t.Fatalf("the session's workspace lacks its memory: %s", got)
	}
	if forked.Err() != nil {
		t.Fatalf("fork: %v", forked.Err())
	}
	if a, b := src.Output(t), branch.Output(t); !strings.Contains(a, "edited") || !strings.Contains(b, "edited") {
		t.Fatalf("edits: %s, %s", a, b)
	}
	if got := c.get(t, "team", memory.HandbookPath); !strings.Contains(got, "src lesson") || strings.Contains(got, "branch lesson") {
		t.Errorf("the source's handbook: %q, want its own edit only", got)
	}
	if got := c.get(t, fork, memory.HandbookPath); !strings.Contains(got, "base lesson") || !strings.Contains(got, "branch lesson") || strings.Contains(got, "src lesson") {
		t.Errorf("the fork's handbook: %q, want the source's at the fork plus its own edit", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := ins["hello from src"]; !strings.Contains(got, "source summary v2") {
		t.Errorf("the source's instructions after its consolidation:\n%s", got)
	}
	if got := ins["hello from branch"]; !strings.Contains(got, "base summary") || strings.Contains(got, "v2") {
		t.Errorf("the fork's instructions:\n%s", got)
	}
	if c.get(t, fork, memory.RolloutPath("branch")) == "" || c.get(t, "team", memory.RolloutPath("branch")) != "" {
		t.Errorf("the fork's rollout is not in its own scope")
	}
	if c.get(t, fork, memory.RolloutPath("src")) != "" {
		t.Errorf("the source's rollout was copied to the fork's scope")
	}
}
