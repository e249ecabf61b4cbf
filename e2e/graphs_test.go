package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/capabilities"
	"github.com/troupe-dev/troupe/internal/testgraphs"
)

type part struct {
	Part string `json:"part"`
}

type verdict struct {
	Risk string `json:"risk" jsonschema:"enum=low,enum=medium,enum=high"`
	Note string `json:"note"`
}

type bigArgs struct {
	N string `json:"n"`
}

// testGraphs are the graphs the end-to-end tests run, besides dealdesk.
func testGraphs() []*agents.Graph {
	chain := agents.MustGraph("chain", "a",
		&agents.Agent{Name: "a", Instructions: "chain agent a", Handoffs: []agents.Handoff{agents.HandoffTo("b")}},
		&agents.Agent{Name: "b", Instructions: "chain agent b", Handoffs: []agents.Handoff{agents.HandoffTo("c")}},
		&agents.Agent{Name: "c", Instructions: "chain agent c"},
	)
	fanOut := func(name, kind string) *agents.Graph {
		var tools []agents.Tool
		var workers []*agents.Agent
		for i := 1; i <= 4; i++ {
			w := fmt.Sprintf("w%d", i)
			k := kind
			if kind == "crash" && i <= 2 {
				k = "fast" // two finish before the crash, two are in flight
			}
			tools = append(tools, agents.AsTool(w+"_agent", w, "Works on a part."))
			workers = append(workers, &agents.Agent{Name: w + "_agent", Instructions: "fan worker " + k, Output: agents.MustOutput[part]()})
		}
		all := append([]*agents.Agent{{Name: "boss", Instructions: "fan boss", Tools: tools}}, workers...)
		return agents.MustGraph(name, "boss", all...)
	}
	tick := agents.MustFunctionTool("tick", "Does nothing.", func(_ context.Context, a bigArgs) (string, error) {
		return "tock " + a.N, nil
	})
	big := agents.MustFunctionTool("big", "Returns 10 KB.", func(_ context.Context, a bigArgs) (string, error) {
		return "turn " + a.N + " " + strings.Repeat("x", 10*1024), nil
	})
	dump := agents.MustFunctionTool("dump", "Returns 200 KB.", func(_ context.Context, a bigArgs) (string, error) {
		return "dump " + a.N + " " + strings.Repeat("y", 200*1024), nil
	})
	return []*agents.Graph{
		chain,
		// idem: a function tool whose worker is killed mid-call, one
		// idempotent and one not (idempotency_test.go).
		agents.MustGraph("idem", "payer", &agents.Agent{Name: "payer", Instructions: "idem payer",
			Tools: []agents.Tool{effectTool("charge"), effectTool("file_ticket", agents.NotIdempotent())}}),
		// chatter: a session's agent whose every turn calls a tool that
		// returns 200 KB, its context trimmed (session_test.go).
		agents.MustGraph("chatter", "chatter", &agents.Agent{Name: "chatter", Instructions: "session chatter", Tools: []agents.Tool{dump}, MaxTurns: 5,
			Capabilities: []agents.Capability{capabilities.Compaction(capabilities.CompactionConfig{MaxItems: 4, KeepLast: 2})}}),
		fanOut("fan", "slow"),
		fanOut("crash", "crash"),
		agents.MustGraph("fix", "fixer", &agents.Agent{Name: "fixer", Instructions: "fix agent", Output: agents.MustOutput[verdict]()}),
		agents.MustGraph("long", "looper", &agents.Agent{Name: "looper", Instructions: "long agent", Tools: []agents.Tool{big}, MaxTurns: 301}),
		agents.MustGraph("bounce", "bouncer", &agents.Agent{Name: "bouncer", Instructions: "bounce agent", Handoffs: []agents.Handoff{agents.HandoffTo("bouncer")}}),
		agents.MustGraph("stream", "streamer", &agents.Agent{Name: "streamer", Instructions: "stream agent"}),
		agents.MustGraph("watch", "watcher", &agents.Agent{Name: "watcher", Instructions: "watch agent", Tools: []agents.Tool{tick}}),
		agents.MustGraph("marathon", "runner", &agents.Agent{Name: "runner", Instructions: "marathon agent", Tools: []agents.Tool{tick}, MaxTurns: marathonMaxTurns + 1,
			Capabilities: []agents.Capability{capabilities.Compaction(capabilities.CompactionConfig{MaxItems: marathonWindow, KeepLast: marathonWindow / 2})}}),
	}
}

// sandboxGraphs are the graphs of the sandbox fault tests; fault and
// recreate run on the named backend.
func sandboxGraphs(backend string) []*agents.Graph {
	return []*agents.Graph{
		agents.MustGraph("idle", "keeper",
			&agents.Agent{Name: "keeper", Instructions: "idle keeper", Sandbox: &agents.Sandbox{},
				Tools: []agents.Tool{agents.AsTool("sleeper", "sleeper", "Waits.")}},
			&agents.Agent{Name: "sleeper", Instructions: "idle sleeper"}),
		// notes: a session's sandbox agent that keeps notes in its
		// workspace across turns (session_test.go).
		agents.MustGraph("notes", "notekeeper",
			&agents.Agent{Name: "notekeeper", Instructions: "session notekeeper", Sandbox: &agents.Sandbox{Backend: backend}}),
		agents.MustGraph("fault", "survivor",
			&agents.Agent{Name: "survivor", Instructions: "fault survivor", Sandbox: &agents.Sandbox{Backend: backend}}),
		// rerun: the worker dies during a command, the host lives
		// (crash_test.go).
		agents.MustGraph("rerun", "rerunner",
			&agents.Agent{Name: "rerunner", Instructions: "rerun survivor", Sandbox: &agents.Sandbox{Backend: backend}}),
		testgraphs.Recreate(backend),
		// phases: a fan-out to two sandboxed agents (crashphase_test.go).
		agents.MustGraph("phases", "boss",
			&agents.Agent{Name: "boss", Instructions: "phase boss", Tools: []agents.Tool{
				agents.AsTool("left_part", "left", "Writes a part."), agents.AsTool("right_part", "right", "Writes a part.")}},
			&agents.Agent{Name: "left_part", Instructions: "phase worker", Sandbox: &agents.Sandbox{Backend: backend}},
			&agents.Agent{Name: "right_part", Instructions: "phase worker", Sandbox: &agents.Sandbox{Backend: backend}}),
	}
}

// effectTool is a tool with an effect: each run of a call appends the
// call's idempotency key to name.log in the run's directory (its var
// "dir"), then, while the file hang is there, waits (for the test to
// kill its worker).
func effectTool(name string, opts ...agents.ToolOption) *agents.FunctionTool {
	return agents.MustFunctionTool(name, "Has an effect.", func(ctx context.Context, _ struct{}) (string, error) {
		rc, _ := agents.RunContextFrom(ctx)
		key := agents.IdempotencyKey(ctx)
		f, err := os.OpenFile(filepath.Join(rc.Vars["dir"], name+".log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return "", err
		}
		_, werr := f.WriteString(key + "\n")
		if err := errors.Join(werr, f.Close()); err != nil {
			return "", err
		}
		if _, err := os.Stat(filepath.Join(rc.Vars["dir"], "hang")); err == nil {
			<-ctx.Done()
			return "", ctx.Err()
		}
		return name + " done " + key, nil
	}, opts...)
}
