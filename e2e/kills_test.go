package e2e

// The kill campaign of issue 23: the shipped examples' sessions (the deal
// desk and the code review, on their offline scenarios) survive kill -9s
// of their worker at random moments with identical outputs. Each session
// runs twice, on a worker process of its own (spawnWorker, on bwrap):
// first undisturbed, for the reference outputs, then with the worker
// SIGKILLed and started again on the same host as a plan says. Every
// turn's record and the files it wrote must be the reference's, no turn
// may fail, no sandbox may be lost, and the session must still take a
// turn, stop and leave no workspace behind.
//
// TestExamplesSurviveKills is the campaign: envKills kills per example
// (make crash sets 20), at random, from envKillSeed (printed, so a
// failure can be replayed). It is skipped unless envKills is set.
// TestExamplesSurviveKillsShort is its short, fixed version, in the
// suite.

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/examples/codereview"
	"github.com/troupe-dev/troupe/examples/dealdesk"
	"github.com/troupe-dev/troupe/internal/exampletest"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/model/scripted"
)

const (
	// envKills is how many times TestExamplesSurviveKills kills each
	// example's worker; unset, the test is skipped.
	envKills = "TROUPE_E2E_KILLS"
	// envKillSeed seeds the campaign's plan (a uint64); unset, the clock
	// does. The test prints the seed it used.
	envKillSeed = "TROUPE_E2E_KILL_SEED"
)

// killCampaignBound bounds a whole session, kills and restarts included:
// a hang detector, not a measurement (a kill during a model call, a
// local activity, costs the workflow task timeout, 10 s).
const killCampaignBound = 20 * time.Minute

// exampleSession is a shipped example as a user lives it in a session.
type exampleSession struct {
	graph    string
	scenario []byte
	messages []string
	// setup returns the session's vars, the host directory its sandboxes
	// may copy from ("" for none), and the directory its turns write
	// files to ("" for none); it is called once, so both runs share them.
	setup func(t *testing.T) (vars map[string]string, allow, out string)
}

var exampleSessions = []exampleSession{
	{graph: "dealdesk", scenario: dealdesk.Scenario, messages: []string{
		"Review the Acme Corp deal: a 3-year, 5000-seat renewal at 35% off list, net-90, go-live in 3 weeks.",
		"What if the discount were 25%?",
		"How about 20% off?",
	}, setup: func(*testing.T) (map[string]string, string, string) { return nil, "", "" }},
	{graph: "codereview", scenario: codereview.Scenario, messages: []string{
		codereview.DefaultRequest,
		"Now fix the finding in auth/login.go and show the diff",
		"Show auth/login.go",
	}, setup: func(t *testing.T) (map[string]string, string, string) {
		repo := exampletest.ReviewRepo(t)
		out := filepath.Join(t.TempDir(), "review")
		return map[string]string{codereview.VarRepo: repo, codereview.VarRef: "HEAD", codereview.VarOut: out}, repo, out
	}},
}

// kill is one kill -9 of the worker in turn (0-based): once the model
// has answered after requests since the turn's message was sent, and
// jitter later.
type kill struct {
	turn, after int
	jitter      time.Duration
}

func (k kill) String() string {
	return fmt.Sprintf("turn %d, after %d model answers + %v", k.turn+1, k.after, k.jitter)
}

// killPlan draws n kills over the turns of a session whose reference
// turns took calls model answers each: a turn at random, a point among
// its answers (from before the first to after the last) and up to half a
// second more. Each turn's kills are in the order they happen.
func killPlan(rng *rand.Rand, n int, calls []int) [][]kill {
	plan := make([][]kill, len(calls))
	for range n {
		turn := rng.IntN(len(calls))
		k := kill{turn: turn, after: rng.IntN(calls[turn] + 1), jitter: time.Duration(rng.IntN(500)) * time.Millisecond}
		plan[turn] = append(plan[turn], k)
	}
	for _, ks := range plan {
		slices.SortFunc(ks, func(a, b kill) int {
			if a.after != b.after {
				return a.after - b.after
			}
			return int(a.jitter - b.jitter)
		})
	}
	return plan
}

// turnOutput is what a user gets from a turn: its record's answer and
// the files the example wrote for it.
type turnOutput struct {
	Outcome, Agent, Path, Output, Error string
	ModelTurns                          int
	Files                               string
}

// sessionRun is what one run of an example's session gave.
type sessionRun struct {
	outputs []turnOutput
	// calls counts the model answers of each turn; rules, the answers of
	// each scenario rule over the whole session.
	calls []int
	rules map[string]int
	// kills counts the kills done, and midTurn those done while a turn
	// was under way (the others fell between turns); cut counts the
	// model calls a kill cut off.
	kills, midTurn, cut int
}

// TestExamplesSurviveKills is the campaign (make crash): each shipped
// example's session, its worker killed envKills times at random.
func TestExamplesSurviveKills(t *testing.T) {
	n, err := strconv.Atoi(os.Getenv(envKills))
	if err != nil || n <= 0 {
		t.Skipf("the kill campaign runs with %s=N (make crash)", envKills)
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(envKillSeed); s != "" {
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", envKillSeed, s, err)
		}
	}
	t.Logf("kill campaign: %d kills per example, seed %d (replay: %s=%d %s=%d make crash)", n, seed, envKills, n, envKillSeed, seed)
	parallelLong(t)
	for i, ex := range exampleSessions {
		t.Run(ex.graph, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			surviveKills(t, ex, func(calls []int) [][]kill { return killPlan(rng, n, calls) })
		})
	}
}

// TestExamplesSurviveKillsShort is the campaign's short version, in the
// suite: each example's session with its worker killed at fixed points
// (as triage hands off, among the reviewers' model calls and sandbox
// commands, early in a follow-up; the code review's fix among them).
func TestExamplesSurviveKillsShort(t *testing.T) {
	parallel(t)
	plans := map[string][][]kill{
		"dealdesk":   {{{0, 1, 0}, {0, 4, 50 * time.Millisecond}}, {{1, 1, 0}}, nil},
		"codereview": {{{0, 3, 0}}, {{1, 2, 100 * time.Millisecond}}, nil},
	}
	for _, ex := range exampleSessions {
		t.Run(ex.graph, func(t *testing.T) {
			surviveKills(t, ex, func([]int) [][]kill { return plans[ex.graph] })
		})
	}
}

// surviveKills runs ex's session undisturbed, then again with the kills
// plan draws from the reference's model answers per turn, and checks that
// the second run gave what the first did.
func surviveKills(t *testing.T, ex exampleSession, plan func(calls []int) [][]kill) {
	c := dial(t)
	vars, allow, out := ex.setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), killCampaignBound)
	defer cancel()
	logs, err := os.CreateTemp("", "troupe-kills-"+ex.graph+"-*.log")
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	t.Cleanup(func() {
		if !t.Failed() {
			os.Remove(logs.Name())
		}
	})
	t.Logf("the workers' logs: %s", logs.Name())

	ref := runExampleSession(ctx, t, c, ex, vars, allow, out, nil, logs)
	if t.Failed() {
		t.Fatal("the undisturbed session failed")
	}
	kills := plan(ref.calls)
	for _, ks := range kills {
		for _, k := range ks {
			t.Logf("kill planned: %v", k)
		}
	}
	got := runExampleSession(ctx, t, c, ex, vars, allow, out, kills, logs)
	t.Logf("%s: %d kills done (%d during a turn, %d model calls cut off), %d turns; model answers per turn %v, undisturbed %v",
		ex.graph, got.kills, got.midTurn, got.cut, len(got.outputs), got.calls, ref.calls)
	for rule, n := range got.rules {
		if n != ref.rules[rule] {
			t.Logf("rule %s answered %d times, %d undisturbed (a call made again after a kill, or background memory work not yet done)", rule, n, ref.rules[rule])
		}
	}
	for i := range ex.messages {
		if i >= len(got.outputs) {
			break
		}
		if got.outputs[i] != ref.outputs[i] {
			t.Errorf("turn %d (%q) gave\n%+v\nundisturbed\n%+v", i+1, ex.messages[i], got.outputs[i], ref.outputs[i])
		}
	}
}

// runExampleSession runs ex's session on a worker process of its own (a
// bwrap host; its log to logs), killing it as plan says (nil: never) and
// starting another on the same host after each kill, and returns what
// each turn gave. It fails t if a turn fails, a sandbox is lost, or the
// session does not stop cleanly after its turns.
func runExampleSession(ctx context.Context, t *testing.T, c client.Client, ex exampleSession, vars map[string]string, allow, out string, plan [][]kill, logs io.Writer) sessionRun {
	t.Helper()
	sc, err := scripted.ParseScenario(ex.scenario)
	if err != nil {
		t.Fatal(err)
	}
	// A model takes its time: kills land during model calls too, not
	// only between them.
	for i := range sc.Rules {
		sc.Rules[i].Respond.DelayMS = max(sc.Rules[i].Respond.DelayMS, 100)
	}
	srv, url := serveScenario(t, sc)
	if out != "" {
		if err := os.RemoveAll(out); err != nil {
			t.Fatal(err)
		}
	}
	blobDir, queue := t.TempDir(), fmt.Sprintf("kills-%s-%d-%d", ex.graph, os.Getpid(), queues.Add(1))
	env := []string{envBackend + "=bwrap"}
	if allow != "" {
		env = append(env, envAllowRoot+"="+allow)
	}
	worker := spawnWorkerTo(t, logs, url, blobDir, queue, env...)
	cl, err := troupeclient.New(troupeclient.Config{Temporal: c, TaskQueue: queue})
	if err != nil {
		t.Fatal(err)
	}
	s, _, err := cl.CreateSession(ctx, troupeclient.SessionInput{Graph: ex.graph, Vars: vars})
	if err != nil {
		t.Fatal(err)
	}
	run := sessionRun{rules: map[string]int{}}
	for i, msg := range ex.messages {
		base := answered(srv)
		done := make(chan struct{})
		var res troupeclient.SendResult
		var sendErr error
		go func() {
			defer close(done)
			// The message's id makes the send one request however often
			// the SDK sends it again while no worker answers.
			res, sendErr = s.Send(ctx, msg, true, troupeclient.WithMessageID(fmt.Sprintf("%s-m%d", s.ID(), i+1)))
		}()
		var ks []kill
		if plan != nil {
			ks = plan[i]
		}
		for _, k := range ks {
			for answered(srv)-base < k.after && !closed(done) && ctx.Err() == nil {
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(k.jitter)
			if err := worker.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = worker.Wait()
			run.kills++
			if !closed(done) {
				run.midTurn++
			}
			fmt.Fprintf(logs, "=== kill %d: %v (the turn %s)\n", run.kills, k, map[bool]string{true: "had ended", false: "was under way"}[closed(done)])
			worker = spawnWorkerTo(t, logs, url, blobDir, queue, env...)
		}
		<-done
		run.calls = append(run.calls, answered(srv)-base)
		if sendErr != nil {
			t.Errorf("turn %d (%q): %v", i+1, msg, sendErr)
			return run
		}
		rec := res.Record
		if rec.Outcome != runtime.TurnAnswered {
			t.Errorf("turn %d (%q): %s: %s (%s)", i+1, msg, rec.Outcome, rec.Error, rec.ErrorType)
		}
		run.outputs = append(run.outputs, turnOutput{Outcome: rec.Outcome, Agent: rec.Agent, Path: strings.Join(rec.Path, ">"),
			Output: string(rec.Output), Error: rec.Error, ModelTurns: rec.ModelTurns, Files: filesIn(t, out)})
	}
	for _, call := range srv.Calls() {
		if call.Canceled {
			run.cut++
		} else {
			run.rules[call.Rule]++
		}
	}

	// Nothing was lost on the way, and the session is still whole.
	evs := runEvents(t, c, s.ID())
	kinds := countKinds(evs)
	t.Logf("%s session's events: %v", ex.graph, kinds)
	if kinds[troupe.EventSandboxLost] != 0 || kinds[troupe.EventSandboxRestored] != 0 {
		t.Errorf("sandbox events %v: want none lost or restored (the worker died, never its host)", kinds)
	}
	for _, e := range evs {
		if e.Kind == troupe.EventSandboxStopped && strings.Contains(e.Detail, "stop failed") {
			t.Errorf("%s's sandbox: %s", e.Agent, e.Detail)
		}
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Turns != len(ex.messages) {
		t.Errorf("the session counts %d turns, want %d", info.Turns, len(ex.messages))
	}
	for _, r := range info.Recent {
		if r.Outcome != runtime.TurnAnswered {
			t.Errorf("the session's turn %s: %s: %s", r.Turn, r.Outcome, r.Error)
		}
	}
	if _, err := s.Command(ctx, troupeclient.SessionCommand{Op: troupe.CommandStop}); err != nil {
		t.Fatal(err)
	}
	if end, err := s.Result(ctx); err != nil || end.Status != runtime.SessionStopped {
		t.Errorf("the session ended %+v (%v), want stopped", end, err)
	}
	if left := dirEntries(t, blobDir+"-bwrap"); len(left) != 0 {
		t.Errorf("workspaces left after the session stopped: %v", left)
	}
	return run
}

// answered counts the model answers srv sent in full.
func answered(srv *scripted.Server) int {
	n := 0
	for _, call := range srv.Calls() {
		if !call.Canceled {
			n++
		}
	}
	return n
}

func closed(done chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// filesIn lists the files under dir with their contents, in order of
// path ("" when dir is "").
func filesIn(t *testing.T, dir string) string {
	t.Helper()
	if dir == "" {
		return ""
	}
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		fmt.Fprintf(&b, "== %s\n%s\n", strings.TrimPrefix(p, dir), data)
		return err
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return b.String()
}
