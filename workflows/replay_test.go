package workflows_test

import (
	"cmp"
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/examples/codereview"
	"github.com/troupe-dev/troupe/examples/dealdesk"
	"github.com/troupe-dev/troupe/internal/testgraphs"
	"github.com/troupe-dev/troupe/workflows/workflowstest"
)

// TestReplayHistories replays checked-in histories of a real deal-desk run,
// and in newer sets of an agent using an MCP server's tools (recorded by
// the e2e package with -histories), against today's workflow code. A change of workflow code that alters what the workflows do in
// history fails here, and must be versioned (workflow.GetVersion). A change
// of the deal-desk graph itself (its agents and tools) changes the histories
// too: then record a new set with the command in e2e/histories_test.go.
func TestReplayHistories(t *testing.T) {
	sets, err := filepath.Glob("testdata/histories/*/index.json")
	if err != nil || len(sets) == 0 {
		t.Fatalf("no recorded histories: %v", err)
	}
	for _, set := range sets {
		t.Run(filepath.Base(filepath.Dir(set)), func(t *testing.T) { replaySet(t, filepath.Dir(set)) })
	}
}

func replaySet(t *testing.T, dir string, graphs ...*agents.Graph) {
	index := workflowstest.ReadIndex(t, dir)
	files := slices.Sorted(maps.Keys(index))
	if len(files) < 3 {
		t.Fatalf("%d histories, want at least 3 (a session and its turns; a deal-desk run has 5 workflows; a rate-limited run has 2, and its limiter 1)", len(files))
	}
	if graphs == nil {
		graphs = []*agents.Graph{dealdesk.Graph(), codereview.Graph(), mcpReplayGraph(), notesReplayGraph(), measureReplayGraph(), testgraphs.Gate(func() string { return os.DevNull }), testgraphs.Recreate("local"), tickerReplayGraph()}
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			if err := workflowstest.Replay(t, filepath.Join(dir, f), index[f], graphs...); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// pinnedSet is the first set of histories whose runs keep their graph.
const pinnedSet = "testdata/histories/v3-pinned-graph"

// TestReplayEditedGraph: runs that keep their graph replay, workflow by
// workflow, on a worker redeployed with an edited deal-desk graph (an
// input filter gained, an agent tool lost).
func TestReplayEditedGraph(t *testing.T) {
	replaySet(t, pinnedSet, testgraphs.EditedDealDesk(), mcpReplayGraph())
}

// TestReplayCatchesDrift: histories that today's code must not replay
// fail, so the replay tests would catch a change of what the workflows do.
// Runs from before pinning depend on the graph served; the fixtures in
// testdata/histories-must-fail are real histories with one thing changed.
func TestReplayCatchesDrift(t *testing.T) {
	const before, mustFail = "testdata/histories/v2-agent-task-timeout-mcp", "testdata/histories-must-fail"
	today := []*agents.Graph{dealdesk.Graph(), codereview.Graph(), mcpReplayGraph()}
	for _, tc := range []struct {
		set, file string
		graphs    []*agents.Graph
		why       string
		want      string // in the replay's error; default "nondeterministic"
	}{
		{before, "dealdesk.json", []*agents.Graph{testgraphs.EditedDealDesk()}, "a run from before pinning, on a graph that gained an input filter", ""},
		{before, "dealdesk-1-coordinator.json", []*agents.Graph{testgraphs.EditedDealDesk()}, "a run from before pinning, on a graph that lost an agent tool", ""},
		{mustFail, "version-renamed.json", today, "the change id of the pinning version renamed", ""},
		{mustFail, "child-type-renamed.json", today, "the first agent-tool child of the coordinator started as another workflow type", ""},
		{mustFail, "carry-next-shifted.json", today, "a continued orchestrator whose carried chain is one agent further on than its history", ""},
		// Without the page's marker, the replayed run ends otherwise than
		// its history says: the replayer's last check catches it.
		{mustFail, "event-page-dropped.json", today, "an agent that continued as new after the event-pages version without saving its page",
			"doesn't return the same result as the last event"},
		{mustFail, "session-fork-type-changed.json", today, "a session whose fork started as another workflow type", ""},
		// A tool guardrail agent's check, replayed without the marker
		// that precedes it, cannot decide: the agent fails at once
		// rather than start the guardrail agent's workflow.
		{mustFail, "tool-guardrail-agents-version-renamed.json", today, "an agent whose tool guardrail agent ran after a marker of another change id", ""},
		// Replayed without its marker, the agent asks its root by signal
		// where it asked by update, from a local activity: the SDK's
		// nondeterminism error (TMPRL1100) names the local activity's
		// marker it cannot match. (The roots' troupe.budget-loans
		// changes no command of theirs, only what they put in their
		// agents' inputs and count, so no replay can tell it renamed.)
		{mustFail, "budget-asks-version-renamed.json", today, "an agent tool that asked its root by update, its budget-asks version renamed", "TMPRL1100"},
		// A coordinator failed by its reviewers' refused sandboxes, whose
		// marker says a version this code does not know. (Renaming the
		// marker instead replays without error: the coordinator then
		// answers the refusals and waits on its next model call, which
		// the history never had, and the replayer does not check a run
		// that has not ended. Runs from before the change replay as they
		// were: v12-source-not-allowed-before, recorded on d952abc.)
		{mustFail, "source-not-allowed-version-bumped.json", today, "a coordinator whose source-not-allowed marker has version 2", "TMPRL1100"},
		// A manager that removed sessions, its remove-session marker
		// renamed: replayed, it takes the removals as a manager from
		// before removals did (ignored), and schedules none of the
		// activities its history has: the SDK finds no activity for the
		// completion its history records (TMPRL1100).
		{mustFail, "remove-session-version-renamed.json", today, "a session manager whose remove-session marker has another change id", "TMPRL1100"},
		// A session whose pause, switch and idle suspensions met a file
		// its snapshots refused (v13-snapshot-refused), replayed without
		// its snapshot-before-stop marker: its pause answers at once and
		// its sandbox is stopped, as before the change, and the SDK
		// (TMPRL1100) finds no activity where the history has the
		// snapshot's. (Runs from before the change replay as they were:
		// v13-snapshot-refused-before, recorded on cb609cf.)
		{mustFail, "snapshot-before-stop-version-renamed.json", today, "a session whose snapshot-before-stop marker is renamed", "TMPRL1100"},
		// Its manager, replayed without its command-outcome marker, does
		// not wait for the session's word of the pause that failed: it
		// answers the pause where its history waits on a timer.
		{mustFail, "command-outcome-version-renamed.json", today, "a manager whose command-outcome marker is renamed", ""},
		// A reviewer whose worker died while it stopped its sandbox
		// (v14-stop-retry), replayed without its stop-retry marker:
		// it takes the stop as failed, as before the change, and
		// schedules no second stop: the SDK (TMPRL1100) finds no
		// activity for the one its history records. (Runs from before
		// the change replay as they were: v14-stop-retry-before.)
		{mustFail, "stop-retry-version-renamed.json", today, "a reviewer whose sandbox-stop-retry marker is renamed", "TMPRL1100"},
		// A session that waited for its last news to reach its manager
		// before it continued as new (v14-news-before-continue), whose
		// marker says a version this code does not know. (Renaming the
		// marker instead replays without error: the session then
		// continues as new at once, and the history's next command is
		// that continue-as-new too. Runs from before the change replay
		// as they were: every earlier set's sessions.)
		{mustFail, "news-before-continue-version-bumped.json", today, "a session whose news-before-continue marker has version 2", "TMPRL1100"},
		// An agent whose first sandbox command reached a worker of
		// another store and was sent on to its store's queue
		// (v15-sandbox-reroute), replayed without its sandbox-reroute
		// marker: it takes the misroute as the call's failure, as
		// before the change, and schedules no second call: the SDK
		// (TMPRL1100) finds no activity for the one its history sends
		// on to the store's queue.
		{mustFail, "sandbox-reroute-version-renamed.json", []*agents.Graph{testgraphs.Recreate("local")}, "an agent whose sandbox-reroute marker is renamed", "TMPRL1100"},
		// A session that took a host as gone and then as back, when an
		// agent of its restored the sandbox there (v16-host-back),
		// replayed without its host-back marker: it keeps the host as
		// gone, as before the change, and its last pause sends no
		// snapshot there: the SDK (TMPRL1100) finds no activity for the
		// one its history records.
		// A run whose model answered 429 with a wait (v16-rate-limits),
		// replayed without its model-retry-events marker: it leaves the
		// retries to the SDK, as before the change, and schedules no
		// timer for the wait its history records.
		{mustFail, "model-retry-events-version-renamed.json", []*agents.Graph{tickerReplayGraph()}, "a rate-limited agent whose model-retry-events marker is renamed", ""},
		{mustFail, "host-back-version-renamed.json", []*agents.Graph{notesReplayGraph()}, "a session whose host-back marker is renamed", "TMPRL1100"},
		// An agent whose model call checked its calls for its tool
		// guardrail (v17-prechecks), its prechecks marker at a version
		// this code does not know. (Renaming the marker instead replays
		// without error: the gates take the checks a recorded model call
		// returned whatever the marker says, so the replayed agent issues
		// the commands its history has; the marker decides only whether a
		// new model call is asked to check.)
		{mustFail, "prechecks-version-bumped.json", today, "an agent whose prechecks marker has version 2", "TMPRL1100"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			err := workflowstest.Replay(t, filepath.Join(tc.set, tc.file), workflowstest.ReadIndex(t, tc.set)[tc.file], tc.graphs...)
			want := cmp.Or(tc.want, "nondeterministic")
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("%s: replay = %.300v, want an error with %q", tc.why, err, want)
			}
		})
	}
	// Every must-fail fixture is in the table above, with why it must fail.
	for f := range workflowstest.ReadIndex(t, mustFail) {
		if !slices.Contains([]string{"version-renamed.json", "child-type-renamed.json", "carry-next-shifted.json", "event-page-dropped.json", "session-fork-type-changed.json",
			"tool-guardrail-agents-version-renamed.json", "budget-asks-version-renamed.json", "source-not-allowed-version-bumped.json",
			"remove-session-version-renamed.json", "snapshot-before-stop-version-renamed.json", "command-outcome-version-renamed.json",
			"stop-retry-version-renamed.json", "news-before-continue-version-bumped.json", "sandbox-reroute-version-renamed.json",
			"host-back-version-renamed.json", "model-retry-events-version-renamed.json", "prechecks-version-bumped.json"}, f) {
			t.Errorf("fixture %s/%s is not checked", mustFail, f)
		}
	}
}

// mcpReplayGraph has the shape of e2e's MCP test graph (TestMCPToolsEndToEnd
// over stdio): what its workflow code reads of the agent (the server's name
// and timeout, the turn limit) is the same; the command is never run.
// notesReplayGraph is the e2e package's notes graph, whose session
// histories (v8-failed-turn-workspace) replay here.
func notesReplayGraph() *agents.Graph {
	return agents.MustGraph("notes", "notekeeper",
		&agents.Agent{Name: "notekeeper", Instructions: "session notekeeper", Sandbox: &agents.Sandbox{Backend: "local"}})
}

// measureReplayGraph is the e2e package's measure graph (a session of it
// took messages by reference: v14-message-refs).
func measureReplayGraph() *agents.Graph {
	return agents.MustGraph("measure", "measurer", &agents.Agent{Name: "measurer", Instructions: "measure what you are given"})
}

// tickerReplayGraph is the e2e package's ticker graph, whose runs met a
// model that rate-limits (v16-rate-limits).
func tickerReplayGraph() *agents.Graph {
	tick := agents.MustFunctionTool("tick", "Does nothing.", func(_ context.Context, a struct {
		N string `json:"n"`
	}) (string, error) {
		return "tock " + a.N, nil
	})
	return agents.MustGraph("ticker", "ticker", &agents.Agent{Name: "ticker", Instructions: "ticker", Tools: []agents.Tool{tick}})
}

func mcpReplayGraph() *agents.Graph {
	return agents.MustGraph("mcp_stdio", "user", &agents.Agent{Name: "user", Instructions: "mcp user", MaxTurns: 5,
		MCPServers: []*agents.MCPServer{{Name: "everything", Prefix: "ev_", Command: []string{"mcp-server-everything", "stdio"}}}})
}
