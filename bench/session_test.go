package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/capabilities"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/model/scripted"
	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/local"
	"github.com/troupe-dev/troupe/workflows"
)

// The session benchmarks' graph: a talker whose context is trimmed (so a
// late turn's model request is the size of an early one's, and the
// benchmark compares the runtime's cost of a turn), and a keeper with a
// sandbox that runs the command the message names.
const sessionGraphName = "bench-sessions"

func sessionGraph() *agents.Graph {
	return agents.MustGraph(sessionGraphName, "talker",
		&agents.Agent{Name: "talker", Instructions: "bench talker",
			Capabilities: []agents.Capability{capabilities.Compaction(capabilities.CompactionConfig{MaxItems: 20, KeepLast: 10})}},
		&agents.Agent{Name: "keeper", Instructions: "bench keeper", Sandbox: &agents.Sandbox{Backend: "local"}},
		&agents.Agent{Name: "guard", Instructions: "bench guard", Sandbox: &agents.Sandbox{Backend: "local"},
			Approvals: []agents.Approval{capabilities.CommandApproval(func(cmd string) bool { return !capabilities.ReadOnlyCommand(cmd) })}},
	)
}

func sessionScenario(b *testing.B) *scripted.Scenario {
	b.Helper()
	sc := &scripted.Scenario{Rules: []scripted.Rule{
		{Name: "talk", Match: scripted.Match{Instructions: "bench talker"}, Respond: scripted.Respond{Text: "heard"}},
		{Name: "guard-looks", Match: scripted.Match{Instructions: "bench guard", Turn: 1},
			Respond: scripted.Respond{Calls: []scripted.ToolCall{{Name: "exec_command", Arguments: map[string]any{"cmd": "ls -la"}}}}},
		{Name: "guard-removes", Match: scripted.Match{Instructions: "bench guard", Turn: 2},
			Respond: scripted.Respond{Calls: []scripted.ToolCall{{Name: "exec_command", Arguments: map[string]any{"cmd": "rm -rf build"}}}}},
		{Name: "guard-done", Match: scripted.Match{Instructions: "bench guard", Turn: 3}, Respond: scripted.Respond{Text: "done"}},
		{Name: "kept", Match: scripted.Match{Instructions: "bench keeper", LastInput: "(?m)^--ran--$"}, Respond: scripted.Respond{Text: "ran"}},
		{Name: "keep", Match: scripted.Match{Instructions: "bench keeper", LastInput: "^run: "},
			Respond: scripted.Respond{Calls: []scripted.ToolCall{{Name: "exec_command", Arguments: map[string]any{"cmd": "{{match .LastUser `^run: (.*)`}}; echo --ran--"}}}}},
	}}
	if err := sc.Validate(); err != nil {
		b.Fatal(err)
	}
	return sc
}

// sessionWorker starts a Troupe worker for the session graph, with local
// sandboxes under roots (one backend per root: "local", "local2", ...), and
// returns a session client of its queue.
func sessionWorker(b *testing.B, tweak func(*workflows.Config), roots ...string) (*troupeclient.Client, *scripted.Server) {
	b.Helper()
	c := temporalClient(b)
	srv := scripted.New(sessionScenario(b))
	url, err := srv.Start("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	m, err := model.New(model.Config{APIKey: "bench", BaseURL: url, API: model.APIResponses})
	if err != nil {
		b.Fatal(err)
	}
	store, err := blob.Open(context.Background(), b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	queue := fmt.Sprintf("bench-%d", queues.Add(1))
	cfg := workflows.Config{Graphs: []*agents.Graph{sessionGraph()}, Model: m, Store: store, Host: queue, Sandboxes: map[string]sandbox.Client{}}
	for i, root := range roots {
		lc, err := local.New(local.Config{Root: root})
		if err != nil {
			b.Fatal(err)
		}
		name := "local"
		if i > 0 {
			name += strconv.Itoa(i + 1)
		}
		cfg.Sandboxes[name] = lc
	}
	if tweak != nil {
		tweak(&cfg)
	}
	r, err := workflows.NewRunner(cfg)
	if err != nil {
		b.Fatal(err)
	}
	// Both of a Runner's workers: the sandbox activities go to its host
	// queue.
	stop, err := r.StartWorkers(c, queue, workerOptions())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(stop)
	cl, err := troupeclient.New(troupeclient.Config{Temporal: c, TaskQueue: queue})
	if err != nil {
		b.Fatal(err)
	}
	return cl, srv
}

// BenchmarkSessionTurns measures a session's turns at turn 10 against
// turns at 1,000: each turn is a message and its answer (Session.Send
// waiting for the turn), the talker's context trimmed so the model's
// request does not grow. The sessions continue as new on the worker's
// bound along the way.
//
// Two sessions of one worker take the measured turns in alternation: an
// old one, first driven (untimed) to turn 1,000, and a young one, driven
// to turn 10. Whatever else loads the machine then weighs on both alike,
// so the ratio measures the session's age and not the machine's mood.
//
// Reported: early-ms/turn (turns 10–59 of the young session),
// late-ms/turn (turns 1,000–1,049 of the old one) and late-ratio, the
// one over the other (goal ≤ 1.2). TROUPE_BENCH_SESSION_BOUND, when set,
// is the worker's ContinueAfterEvents.
func BenchmarkSessionTurns(b *testing.B) {
	const early, late, window = 10, 1000, 50
	cl, _ := sessionWorker(b, func(cfg *workflows.Config) {
		if n, err := strconv.Atoi(os.Getenv("TROUPE_BENCH_SESSION_BOUND")); err == nil {
			cfg.ContinueAfterEvents = n
		}
	})
	ctx := context.Background()
	send := func(s *troupeclient.Session, turn int) time.Duration {
		began := time.Now()
		res, err := s.Send(ctx, "hello "+strconv.Itoa(turn), true)
		took := time.Since(began)
		if err != nil || res.Record == nil || string(res.Record.Output) != `"heard"` {
			b.Fatalf("turn %d: %+v, %v", turn, res, err)
		}
		return took
	}
	create := func(turns int) *troupeclient.Session {
		s, _, err := cl.CreateSession(ctx, troupeclient.SessionInput{Graph: sessionGraphName})
		if err != nil {
			b.Fatal(err)
		}
		for turn := 1; turn < turns; turn++ {
			send(s, turn)
		}
		return s
	}
	var earlySum, lateSum time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		old, young := create(late), create(early)
		b.StartTimer()
		for k := 0; k < window; k++ {
			lateSum += send(old, late+k)
			earlySum += send(young, early+k)
		}
		for _, s := range []*troupeclient.Session{old, young} {
			if _, err := s.Command(ctx, troupeclient.SessionCommand{Op: troupe.CommandStop}); err != nil {
				b.Fatal(err)
			}
		}
	}
	n := float64(b.N * window)
	b.ReportMetric(ms(earlySum)/n, "early-ms/turn")
	b.ReportMetric(ms(lateSum)/n, "late-ms/turn")
	b.ReportMetric(float64(lateSum)/float64(earlySum), "late-ratio")
}

// idleSessions is how many sessions BenchmarkIdleSessions keeps idle:
// TROUPE_BENCH_IDLE_SESSIONS, else 1,000.
func idleSessions() int {
	if n, err := strconv.Atoi(os.Getenv("TROUPE_BENCH_IDLE_SESSIONS")); err == nil && n > 0 {
		return n
	}
	return 1000
}

// BenchmarkIdleSessions keeps idleSessions() sessions idle on one worker,
// each having used its sandbox once (a command that writes a file), with a
// 2 s sandbox idle timeout, and measures what they cost once idle: the
// process's RSS (server, worker and model server share it) against the
// RSS before the sessions, the live sandboxes left after the idle timeout
// (must be 0: the workspaces on disk under the local backend's root), and
// the server's SQLite database size against its size before. Then it
// wakes one session with a command: cold (its workspace restored from its
// snapshot), and again at once, warm (the sandbox live): the time from the
// message to the turn's first tool result, and their ratio.
//
// Reported: sessions, rss-MB, rss-before-MB, live-sandboxes, db-MB,
// db-before-MB, rss-KB/session, heap-KB/session (the Go heap in use after
// a GC, which RSS holds with what the GC has not given back yet) and
// db-KB/session (the growth over the sessions; goal for RSS < 50 KB),
// cold-wake-ms, warm-wake-ms,
// cold-ratio (goal ≤ 2).
//
// TROUPE_BENCH_IDLE_SESSIONS=10000 runs it at 10,000 (many minutes: each
// session runs a turn with a command in its sandbox first).
func BenchmarkIdleSessions(b *testing.B) {
	n := idleSessions()
	root := b.TempDir()
	cl, _ := sessionWorker(b, func(cfg *workflows.Config) { cfg.SandboxIdleTimeout = 2 * time.Second }, root)
	ctx := context.Background()
	rssBefore, heapBefore := memory()
	dbBefore := dbSize(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sessions := make([]*troupeclient.Session, n)
		var wg sync.WaitGroup
		errs := make(chan error, n)
		sem := make(chan struct{}, 64) // 64 clients at once
		for j := range sessions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				s, _, err := cl.CreateSession(ctx, troupeclient.SessionInput{Graph: sessionGraphName, Agent: "keeper"})
				if err == nil {
					sessions[j] = s
					var res troupe.SendResult
					if res, err = s.Send(ctx, "run: echo kept > f.txt", true); err == nil && string(res.Record.Output) != `"ran"` {
						err = fmt.Errorf("session %s answered %+v", s.ID(), res.Record)
					}
				}
				if err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		// Every sandbox suspends after its idle timeout.
		deadline := time.Now().Add(5 * time.Minute)
		for len(liveWorkspaces(b, root)) > 0 && time.Now().Before(deadline) {
			time.Sleep(500 * time.Millisecond)
		}
		b.StopTimer()
		rss, heap := memory()
		b.ReportMetric(float64(n), "sessions")
		b.ReportMetric(rss, "rss-MB")
		b.ReportMetric(rssBefore, "rss-before-MB")
		b.ReportMetric(float64(len(liveWorkspaces(b, root))), "live-sandboxes")
		db := dbSize(b)
		b.ReportMetric(db, "db-MB")
		b.ReportMetric(dbBefore, "db-before-MB")
		b.ReportMetric((rss-rssBefore)*1024/float64(n), "rss-KB/session")
		b.ReportMetric((heap-heapBefore)*1024/float64(n), "heap-KB/session")
		b.ReportMetric((db-dbBefore)*1024/float64(n), "db-KB/session")
		cold := wake(b, sessions[n/2], "cat f.txt")
		warm := wake(b, sessions[n/2], "cat f.txt")
		b.ReportMetric(ms(cold), "cold-wake-ms")
		b.ReportMetric(ms(warm), "warm-wake-ms")
		b.ReportMetric(float64(cold)/float64(warm), "cold-ratio")
		b.StartTimer()
	}
}

// wake sends s "run: CMD" and returns the time until the turn's first
// tool result.
func wake(b *testing.B, s *troupeclient.Session, cmd string) time.Duration {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	info, err := s.Info(ctx)
	if err != nil {
		b.Fatal(err)
	}
	first := make(chan time.Time, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.FollowFrom(ctx, troupeclient.Cursor{s.ID(): info.NextEvent - 1}, func(e troupeclient.Event) {
			if e.Kind == troupe.EventToolResult {
				select {
				case first <- time.Now():
				default:
				}
			}
		})
	}()
	began := time.Now()
	if _, err := s.Send(ctx, "run: "+cmd, true); err != nil {
		b.Fatal(err)
	}
	var at time.Time
	select {
	case at = <-first:
	case <-time.After(time.Minute):
		b.Fatal("no tool result within a minute")
	}
	cancel()
	<-done
	return at.Sub(began)
}

// liveWorkspaces are the sandbox workspaces on disk under a local
// backend's root.
func liveWorkspaces(b *testing.B, root string) []string {
	b.Helper()
	entries, err := os.ReadDir(root)
	if err != nil {
		b.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && e.Name()[0] != '.' {
			out = append(out, e.Name())
		}
	}
	return out
}

// BenchmarkForkSwitch measures, for a session whose keeper's workspace
// holds about 100 MB (a 60 MB random file, incompressible, and a 40 MB
// text file), Session.Fork (a fresh snapshot of the live workspace, the
// fork started) and Session.SwitchBackend to a second local root followed
// by a command there (snapshot, stop, restore on the new backend), against
// the command line archiving the same workspace: tar -C DIR -cf - . |
// zstd -q -o FILE.
//
// Reported: workspace-MB, fork-s, switch-s, tar-zstd-s, fork-ratio and
// switch-ratio (each over tar-zstd-s).
func BenchmarkForkSwitch(b *testing.B) {
	for _, tool := range []string{"tar", "zstd"} {
		if _, err := exec.LookPath(tool); err != nil {
			b.Fatalf("%s is missing (scripts/setup.sh installs it): %v", tool, err)
		}
	}
	root, root2 := b.TempDir(), b.TempDir()
	cl, _ := sessionWorker(b, func(cfg *workflows.Config) { cfg.SandboxIdleTimeout = time.Hour }, root, root2)
	ctx := context.Background()
	var forkSum, switchSum, tarSum time.Duration
	var workspaceMB float64
	for i := 0; i < b.N; i++ {
		s, _, err := cl.CreateSession(ctx, troupeclient.SessionInput{Graph: sessionGraphName, Agent: "keeper"})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Send(ctx, "run: head -c 62914560 /dev/urandom > random.bin && yes 'a line of text in a log file, over and over' | head -c 41943040 > log.txt", true); err != nil {
			b.Fatal(err)
		}
		live := liveWorkspaces(b, root)
		if len(live) != 1 {
			b.Fatalf("workspaces %v, want the keeper's", live)
		}
		dir := filepath.Join(root, live[0])
		workspaceMB = dirMB(b, dir)

		began := time.Now()
		fork, _, err := s.Fork(ctx, "")
		if err != nil {
			b.Fatal(err)
		}
		forkSum += time.Since(began)

		began = time.Now()
		if _, err := s.SwitchBackend(ctx, "local2"); err != nil {
			b.Fatal(err)
		}
		if res, err := s.Send(ctx, "run: ls -l random.bin", true); err != nil || string(res.Record.Output) != `"ran"` {
			b.Fatalf("after the switch: %+v, %v", res, err)
		}
		switchSum += time.Since(began)
		if len(liveWorkspaces(b, root2)) != 1 {
			b.Fatalf("workspaces on the second backend: %v", liveWorkspaces(b, root2))
		}

		// The baseline archives the same tree (now in its snapshot; the
		// fork restores from it): restored here from the second backend.
		moved := filepath.Join(root2, liveWorkspaces(b, root2)[0])
		began = time.Now()
		out := filepath.Join(b.TempDir(), "w.tar.zst")
		if msg, err := exec.Command("sh", "-c", fmt.Sprintf("tar -C %q -cf - . | zstd -q -o %q", moved, out)).CombinedOutput(); err != nil {
			b.Fatalf("tar | zstd: %v: %s", err, msg)
		}
		tarSum += time.Since(began)
		for _, x := range []*troupeclient.Session{s, fork} {
			if _, err := x.Command(ctx, troupeclient.SessionCommand{Op: troupe.CommandStop}); err != nil {
				b.Fatal(err)
			}
		}
	}
	n := float64(b.N)
	b.ReportMetric(workspaceMB, "workspace-MB")
	b.ReportMetric(forkSum.Seconds()/n, "fork-s")
	b.ReportMetric(switchSum.Seconds()/n, "switch-s")
	b.ReportMetric(tarSum.Seconds()/n, "tar-zstd-s")
	b.ReportMetric(float64(forkSum)/float64(tarSum), "fork-ratio")
	b.ReportMetric(float64(switchSum)/float64(tarSum), "switch-ratio")
}

// dirMB is the size of the regular files under dir, in MB.
func dirMB(b *testing.B, dir string) float64 {
	b.Helper()
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			total += info.Size()
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return float64(total) / (1 << 20)
}

// dbSize is the size of the bench server's SQLite files, in MB (0 for an
// in-memory server).
func dbSize(b *testing.B) float64 {
	b.Helper()
	if serverDir == "" {
		return 0
	}
	matches, _ := filepath.Glob(filepath.Join(serverDir, "*"))
	slices.Sort(matches)
	var total int64
	for _, m := range matches {
		if info, err := os.Stat(m); err == nil && info.Mode().IsRegular() {
			total += info.Size()
		}
	}
	return float64(total) / (1 << 20)
}
