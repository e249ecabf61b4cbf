package e2e

// A host of scripts/cluster.sh's cluster killed whole while a session's
// sandbox lives there: the code review's fixer, a session agent whose
// bwrap sandbox the session keeps across turns. Once while the session
// idles between turns, once while the fixer's command runs. Behind
// TROUPE_E2E_CLUSTER (make cluster-test).

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/troupe-dev/troupe"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/examples/codereview"
	"github.com/troupe-dev/troupe/internal/exampletest"
	"github.com/troupe-dev/troupe/runtime"
)

// sessionLossRules are the fixer's answers to a loss: a command lost with
// its host is run again (it shows the file the fix changed, and whether
// the file the lost command wrote is there), and a message saying
// HOSTLOSS-TURN makes it run a command that edits the fixed file, writes
// a file and hangs until its host is killed.
const sessionLossRules = `
rules:
  - name: fixer-reads-again
    match: {instructions: "code-review fixer", last_input: "sandbox was lost while running this call"}
    respond: {calls: [{name: exec_command, arguments: {cmd: "echo --file--; cat repo/auth/login.go; ls hostloss-turn.txt 2>&1; true"}}]}
  - name: fixer-hangs
    match: {instructions: "code-review fixer", last_input: "HOSTLOSS-TURN"}
    respond: {calls: [{name: exec_command, arguments: {cmd: "echo started > hostloss-turn.txt && sed -i s/APP_SECRET/LOST_EDIT/ repo/auth/login.go && sleep 600", yield_time_ms: 120000}}]}
`

// TestClusterSessionHostLoss: a code-review session reviews a change
// (turn 1) and hands the fix to the fixer (turn 2), whose sandbox the
// session keeps on some host; that host is killed whole.
//   - idle: between turns. The next turn's command finds the sandbox lost
//     (one host timeout), runs again in the workspace restored from the
//     snapshot taken after turn 2, and shows the fix.
//   - turn: while the fixer's command of turn 3 runs (it edited the file
//     and wrote another). The command is lost, the workspace restored from
//     the same snapshot: the fix is there, the lost command's edits not.
//
// Each: the turn is answered, the sandbox restored on another host, no
// rule of the model answered twice (nothing finished done again), and
// after restart-host and the session's stop no workspace of it is left
// on any host.
func TestClusterSessionHostLoss(t *testing.T) {
	r := startCluster(t, sessionLossRules)
	repo := serveRepo(t)
	cl, err := troupeclient.New(troupeclient.Config{Temporal: r.c, TaskQueue: troupe.DefaultTaskQueue, DataConverter: r.codec.DataConverter()})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		// during is the third message, sent after the kill (idle) or
		// before it (turn).
		during string
		idle   bool
	}{
		{name: "idle", during: "Show auth/login.go", idle: true},
		{name: "turn", during: "HOSTLOSS-TURN: check auth/login.go"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // a hang detector
			defer cancel()
			baseline := clusterWorkspaces(t, r)
			before := ruleCounts(r)
			s, _, err := cl.CreateSession(ctx, troupeclient.SessionInput{Graph: "codereview", Vars: map[string]string{
				codereview.VarRepo: repo, codereview.VarRef: "HEAD", codereview.VarOut: "/mnt/host/review-" + tc.name}})
			if err != nil {
				t.Fatal(err)
			}
			send := func(msg string) *runtime.TurnRecord {
				t.Helper()
				res, err := s.Send(ctx, msg, true)
				if err != nil {
					t.Fatalf("%q: %v", msg, err)
				}
				if res.Record == nil || res.Record.Outcome != runtime.TurnAnswered {
					t.Fatalf("%q: %+v", msg, res.Record)
				}
				return res.Record
			}
			send(codereview.DefaultRequest)
			if rec := send("Now fix the finding in auth/login.go and show the diff"); !strings.Contains(string(rec.Output), `APP_SECRET`) {
				t.Fatalf("the fix: %s", rec.Output)
			}
			host := fixerHost(t, r, s.ID())

			var killed time.Time
			var rec *runtime.TurnRecord
			if tc.idle {
				killed = time.Now()
				r.cluster(t, "kill-host", strings.TrimPrefix(host, "troupe-h"))
				rec = send(tc.during)
			} else {
				done := make(chan struct{})
				var sendErr error
				go func() {
					defer close(done)
					var res troupeclient.SendResult
					res, sendErr = s.Send(ctx, tc.during, true)
					rec = res.Record
				}()
				// The hanging command runs: its activity started, on the
				// fixer's host.
				on := ""
				for on == "" {
					if ctx.Err() != nil || closed(done) {
						t.Fatalf("the hanging command never started (%v)", sendErr)
					}
					time.Sleep(200 * time.Millisecond)
					if ruleCounts(r)["fixer-hangs"] > before["fixer-hangs"] {
						on = sandboxToolHost(ctx, r)
					}
				}
				if on != host {
					t.Fatalf("the fixer's command runs on %s, its sandbox was provisioned on %s", on, host)
				}
				killed = time.Now()
				r.cluster(t, "kill-host", strings.TrimPrefix(host, "troupe-h"))
				<-done
				if sendErr != nil {
					t.Fatalf("%q: %v", tc.during, sendErr)
				}
				if rec == nil || rec.Outcome != runtime.TurnAnswered {
					t.Fatalf("%q: %+v", tc.during, rec)
				}
			}

			// Files as of the last snapshot (after turn 2): the fix, not
			// the original nor what the lost command did.
			out := string(rec.Output)
			if !strings.Contains(out, `os.Getenv(\"APP_SECRET\")`) || strings.Contains(out, "hunter2") || strings.Contains(out, "LOST_EDIT") {
				t.Errorf("after the loss the fixer shows %s: want auth/login.go as fixed in turn 2", out)
			}
			if !tc.idle && !strings.Contains(out, "No such file") {
				t.Errorf("after the loss the fixer shows %s: want no hostloss-turn.txt (written after the last snapshot)", out)
			}

			// The fixer's events: the sandbox lost once, restored once,
			// elsewhere; the first of them after the kill is the loss.
			var next time.Duration
			kinds := map[string]int{}
			for _, e := range runEvents(t, r.c, s.ID()) {
				if e.Agent != "fixer" || !e.Time.After(killed) {
					continue
				}
				kinds[e.Kind]++
				if strings.HasPrefix(e.Kind, "sandbox_") && next == 0 {
					next = e.Time.Sub(killed)
					if e.Kind != troupe.EventSandboxLost {
						t.Errorf("the fixer's first sandbox event after the kill is %s (%s), want sandbox_lost", e.Kind, e.Detail)
					}
				}
				if e.Kind == troupe.EventSandboxRestored && strings.Contains(e.Detail, host+" ") {
					t.Errorf("restored on the dead host: %s", e.Detail)
				}
			}
			if kinds[troupe.EventSandboxLost] != 1 || kinds[troupe.EventSandboxRestored] != 1 || kinds[troupe.EventSandboxCallRetry] != 0 {
				t.Errorf("the fixer's events after the kill: %v; want the sandbox lost once and restored once, no call run again on the dead host", kinds)
			}

			// Nothing finished was done again: no rule answered twice in
			// this session (the memory pipeline's rules answer once per
			// rollout: not the session's work), the lost command run
			// again once.
			after := ruleCounts(r)
			for rule, n := range after {
				if d := n - before[rule]; d > 1 && !strings.HasPrefix(rule, "codereview-memory-") {
					t.Errorf("rule %s answered %d times in this session, want once at most", rule, d)
				}
			}
			if d := after["fixer-reads-again"] - before["fixer-reads-again"]; d != 1 {
				t.Errorf("the lost command was run again %d times, want once", d)
			}

			// The host comes back and reaps what it held; the session
			// stops its sandbox: nothing of the session is left.
			if tc.idle {
				r.cluster(t, "restart-host", strings.TrimPrefix(host, "troupe-h"))
				waitNoWorkspaces(t, r, baseline, host)
				if _, err := s.Command(ctx, troupeclient.SessionCommand{Op: troupe.CommandStop}); err != nil {
					t.Fatal(err)
				}
			} else {
				if _, err := s.Command(ctx, troupeclient.SessionCommand{Op: troupe.CommandStop}); err != nil {
					t.Fatal(err)
				}
				r.cluster(t, "restart-host", strings.TrimPrefix(host, "troupe-h"))
			}
			if end, err := s.Result(ctx); err != nil || end.Status != runtime.SessionStopped {
				t.Errorf("the session ended %+v (%v), want stopped", end, err)
			}
			waitNoWorkspaces(t, r, baseline, "")
			t.Logf("%s: host %s killed while the session %s; the fixer's next sandbox event %s after the kill",
				tc.name, host, map[bool]string{true: "idled", false: "ran the fixer's command"}[tc.idle], next.Round(100*time.Millisecond))
		})
	}
}

// serveRepo serves a repository of exampletest.ReviewRepo over git's
// smart HTTP (git http-backend) on every address of the root namespace,
// and returns its URL on the bridge: a repository every host reaches.
func serveRepo(t *testing.T) string {
	t.Helper()
	backend := "/usr/lib/git-core/git-http-backend"
	if _, err := os.Stat(backend); err != nil {
		t.Fatalf("no git http-backend at %s (Debian's git, which scripts/setup.sh installs): %v", backend, err)
	}
	dir := exampletest.ReviewRepo(t)
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: &cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + filepath.Dir(dir), "GIT_HTTP_EXPORT_ALL=1"}}}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return fmt.Sprintf("http://%s:%d/%s/.git", clusterBridge, ln.Addr().(*net.TCPAddr).Port, filepath.Base(dir))
}

// fixerHost is the host of the fixer's sandbox in the session, from the
// last event that provisioned or restored it.
func fixerHost(t *testing.T, r *clusterRig, session string) string {
	t.Helper()
	host := ""
	for _, e := range runEvents(t, r.c, session) {
		if m := provisionedOn.FindStringSubmatch(e.Detail); e.Agent == "fixer" && m != nil &&
			(e.Kind == troupe.EventSandboxProvisioned || e.Kind == troupe.EventSandboxRestored) {
			host = m[1]
		}
	}
	if host == "" {
		t.Fatal("the fixer's sandbox was never provisioned")
	}
	return host
}

// sandboxToolHost is the host of the worker running a sandbox tool call
// of an open workflow, or "".
func sandboxToolHost(ctx context.Context, r *clusterRig) string {
	resp, err := r.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: "ExecutionStatus = 'Running'"})
	if err != nil {
		return ""
	}
	for _, w := range resp.GetExecutions() {
		d, err := r.c.DescribeWorkflowExecution(ctx, w.GetExecution().GetWorkflowId(), "")
		if err != nil {
			continue
		}
		for _, a := range d.GetPendingActivities() {
			if a.GetActivityType().GetName() == "troupe.SandboxTool" && a.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED {
				if m := clusterHost.FindStringSubmatch(a.GetLastWorkerIdentity()); m != nil {
					return m[1]
				}
			}
		}
	}
	return ""
}

// clusterWorkspaces lists the workspaces (bwrap's with their disk images,
// docker's) on every host's disk, a dead host's included, and the
// containers of each docker host's own dockerd, as host/name.
func clusterWorkspaces(t *testing.T, r *clusterRig) []string {
	t.Helper()
	var all []string
	for _, pattern := range []string{"*/*", "bwrap/.disks/*"} {
		found, _ := filepath.Glob(filepath.Join(r.state, "disks", "h*", "home", "sandboxes", pattern))
		dead, _ := filepath.Glob(filepath.Join(r.state, "disks", "h*.dead", "home", "sandboxes", pattern))
		for _, p := range append(found, dead...) {
			rel, _ := filepath.Rel(filepath.Join(r.state, "disks"), p)
			h, _, _ := strings.Cut(rel, string(filepath.Separator))
			if name := filepath.Base(p); !strings.HasPrefix(name, ".") || pattern != "*/*" {
				all = append(all, "troupe-"+strings.TrimSuffix(h, ".dead")+"/"+strings.TrimPrefix(rel, h+string(filepath.Separator)))
			}
		}
	}
	socks, _ := filepath.Glob(filepath.Join(r.state, "disks", "h*", "docker", "docker.sock"))
	for _, sock := range socks {
		h := "troupe-" + filepath.Base(filepath.Dir(filepath.Dir(sock)))
		out, err := exec.Command("docker", "-H", "unix://"+sock, "ps", "-a", "--format", "{{.Names}}").Output()
		if err != nil {
			continue // Its host is down: its containers are counted when it is back.
		}
		for _, name := range strings.Fields(string(out)) {
			all = append(all, h+"/container:"+name)
		}
	}
	slices.Sort(all)
	return all
}

// waitNoWorkspaces waits until no workspace but baseline's is left on
// host ("" for every host); it fails t after two minutes (a reaper runs
// at a worker's start).
func waitNoWorkspaces(t *testing.T, r *clusterRig, baseline []string, host string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var left []string
		for _, w := range clusterWorkspaces(t, r) {
			if !slices.Contains(baseline, w) && (host == "" || strings.HasPrefix(w, host+"/")) {
				left = append(left, w)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("left on the hosts: %v", left)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
