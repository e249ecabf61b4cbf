package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/runtime/devserver"
)

// The cases of TestCommandErrors: what is wrong when a command runs.
const (
	caseNoServer  = "no server"       // TEMPORAL_ADDRESS names a port nothing listens on
	caseBadFlag   = "bad flag"        // --no-such-flag
	caseNoWorker  = "no worker"       // nothing serves task queue troupe
	caseUnknownID = "unknown id"      // the id names nothing on the server
	caseStopped   = "stopped session" // the id names a session that was stopped
)

// rawTemporal are fragments of the Temporal SDK's and server's own error
// text, which no troupe command prints.
var rawTemporal = []string{
	"workflow not found for ID", "already completed", "(type:", "retryable:", "context deadline exceeded",
	"rpc error", "serviceerror", "workflow execution error", "WorkflowExecutionError", "unknown queryType",
	"KnownQueryTypes", "failed reaching server",
}

// TestCommandErrors runs every troupe subcommand that talks to Temporal,
// and the others' flags, in each of the cases above, on one embedded
// server: each ends in time with the exit status and error type the table
// says, one line on stderr without raw Temporal text and, with --json, a
// document {"error": {"type", "message"}} on stdout. A cell with no type
// is a command that does its work in that case (exit 0).
//
// A subcommand added to troupe gets a row here; ID stands for the case's
// session or run id.
func TestCommandErrors(t *testing.T) {
	type row struct {
		args []string
		// json is whether the command takes --json.
		json bool
		// want maps a case to the error type the command ends with; a
		// case missing from want is one the command is not run in (it
		// would serve for ever, say), "" one in which it succeeds.
		want map[string]string
	}
	// byDefault are the types of a command on a session or run id.
	byDefault := func(unknown, stopped string) map[string]string {
		return map[string]string{caseNoServer: troupe.ErrNoServer, caseBadFlag: troupe.ErrUsage, caseNoWorker: troupe.ErrNoWorker,
			caseUnknownID: unknown, caseStopped: stopped}
	}
	with := func(m map[string]string, c, typ string) map[string]string {
		m[c] = typ
		return m
	}
	without := func(m map[string]string, c string) map[string]string {
		delete(m, c)
		return m
	}
	rows := []row{
		{args: []string{"sessions", "new", "g"}, json: true, want: byDefault("", "")},
		// FRESH is the case's session id, but for an unknown id one of its
		// own: the session this row makes must not be what the rows
		// beside it (in parallel) take for unknown.
		{args: []string{"sessions", "new", "g", "--id", "FRESH"}, json: true, want: byDefault("", troupe.ErrBadCommand)},
		{args: []string{"sessions", "ls"}, json: true, want: with(byDefault("", ""), caseNoWorker, "")},
		{args: []string{"sessions", "show", "ID"}, json: true, want: byDefault(troupe.ErrUnknownSession, "")},
		{args: []string{"sessions", "send", "ID", "hello"}, json: true, want: byDefault(troupe.ErrUnknownSession, troupe.ErrSessionStopped)},
		{args: []string{"sessions", "send", "--no-wait", "ID", "hello"}, json: true, want: byDefault(troupe.ErrUnknownSession, troupe.ErrSessionStopped)},
		{args: []string{"sessions", "fork", "ID"}, json: true, want: byDefault(troupe.ErrUnknownSession, troupe.ErrSessionStopped)},
		{args: []string{"sessions", "budget", "ID"}, json: true, want: byDefault(troupe.ErrUnknownSession, "")},
		{args: []string{"sessions", "budget", "ID", "cost=1"}, json: true, want: byDefault(troupe.ErrUnknownSession, troupe.ErrSessionStopped)},
		{args: []string{"sessions", "switch", "ID", "local"}, json: true, want: byDefault(troupe.ErrUnknownSession, troupe.ErrSessionStopped)},
		{args: []string{"sessions", "pause", "ID"}, json: true, want: byDefault(troupe.ErrUnknownSession, troupe.ErrSessionStopped)},
		{args: []string{"sessions", "resume", "ID"}, json: true, want: byDefault(troupe.ErrUnknownSession, troupe.ErrSessionStopped)},
		{args: []string{"sessions", "stop", "ID"}, json: true, want: byDefault(troupe.ErrUnknownSession, troupe.ErrSessionStopped)},
		{args: []string{"sessions", "rename", "ID", "x"}, json: true, want: byDefault(troupe.ErrUnknownSession, troupe.ErrSessionStopped)},
		{args: []string{"sessions", "policy", "ID", "reject"}, json: true, want: byDefault(troupe.ErrUnknownSession, troupe.ErrSessionStopped)},
		// rm needs no worker, and removes what the other rows of its case
		// use: it runs where it removes nothing. (Its --json results,
		// which say which ids were not found, are e2e's TestCLISessionsRm.)
		{args: []string{"sessions", "rm", "ID"}, want: map[string]string{caseNoServer: troupe.ErrNoServer, caseBadFlag: troupe.ErrUsage, caseUnknownID: troupe.ErrUnknownSession}},
		{args: []string{"runs", "ls"}, json: true, want: map[string]string{caseNoServer: troupe.ErrNoServer, caseBadFlag: troupe.ErrUsage, caseNoWorker: "", caseUnknownID: ""}},
		{args: []string{"runs", "show", "RUN"}, json: true, want: with(byDefault(troupe.ErrNoRun, troupe.ErrNotRun), caseNoWorker, "")},
		{args: []string{"runs", "follow", "RUN"}, json: true, want: byDefault(troupe.ErrNoRun, troupe.ErrNotRun)},
		{args: []string{"runs", "cancel", "RUN"}, json: true, want: with(byDefault(troupe.ErrNoRun, troupe.ErrNotRun), caseNoWorker, "")},
		{args: []string{"runs", "terminate", "RUN"}, json: true, want: without(byDefault(troupe.ErrNoRun, troupe.ErrNotRun), caseNoWorker)},
		{args: []string{"runs", "resume", "RUN"}, json: true, want: without(byDefault(troupe.ErrNoRun, troupe.ErrNotRun), caseNoWorker)},
		{args: []string{"runs", "approvals", "RUN"}, json: true, want: byDefault(troupe.ErrNotFound, "")},
		{args: []string{"runs", "approve", "RUN", "call-1"}, json: true, want: byDefault(troupe.ErrNotFound, troupe.ErrRunClosed)},
		{args: []string{"runs", "reject", "RUN", "call-1"}, json: true, want: byDefault(troupe.ErrNotFound, troupe.ErrRunClosed)},
		{args: []string{"run", "--task-queue", "troupe", "hello"}, json: true, want: map[string]string{caseNoServer: troupe.ErrNoServer, caseBadFlag: troupe.ErrUsage, caseNoWorker: troupe.ErrNoWorker}},
		// Against a Temporal server it is only a client, --task-queue or
		// not: it never becomes a worker of the shared queue by itself.
		{args: []string{"run", "hello"}, json: true, want: map[string]string{caseNoServer: troupe.ErrNoServer, caseBadFlag: troupe.ErrUsage, caseNoWorker: troupe.ErrNoWorker}},
		{args: []string{"chat", "--session", "ID"}, want: byDefault(troupe.ErrUnknownSession, troupe.ErrUsage)},
		{args: []string{"worker"}, want: map[string]string{caseNoServer: troupe.ErrNoServer, caseBadFlag: troupe.ErrUsage}},
		{args: []string{"mcp", "serve", "--task-queue", "troupe"}, want: map[string]string{caseNoServer: troupe.ErrNoServer, caseBadFlag: troupe.ErrUsage}},
		{args: []string{"dev"}, want: map[string]string{caseBadFlag: troupe.ErrUsage}},
		{args: []string{"model", "serve"}, want: map[string]string{caseBadFlag: troupe.ErrUsage}},
		{args: []string{"sandbox", "image", "build"}, want: map[string]string{caseBadFlag: troupe.ErrUsage}},
	}

	srv, err := devserver.Start(context.Background(), devserver.Config{InMemory: true, UIPort: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	t.Setenv("TROUPE_HOME", t.TempDir())
	t.Setenv("TEMPORAL_NAMESPACE", srv.Namespace())
	// A model the worker never calls: no turn runs here.
	t.Setenv("OPENAI_API_KEY", "test")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
	graphs := []Graph{{Graph: agents.MustGraph("g", "a", &agents.Agent{Name: "a", Instructions: "Answer."})}}

	// run runs the rows in case c, on session id and run id.
	run := func(t *testing.T, c, id, runID string) {
		for _, r := range rows {
			typ, ok := r.want[c]
			if !ok {
				continue
			}
			args := make([]string, 0, len(r.args)+2)
			fresh := id
			if c == caseUnknownID {
				fresh = id + "-fresh"
			}
			for _, a := range r.args {
				args = append(args, strings.NewReplacer("FRESH", fresh, "ID", id, "RUN", runID).Replace(a))
			}
			if c == caseBadFlag {
				args = append(args, "--no-such-flag")
			}
			if r.json {
				args = append(args, "--json")
			}
			t.Run(strings.Join(r.args, " "), func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				var stdout, stderr bytes.Buffer
				code, info := execute(ctx, Command(graphs, &stdout, &stderr), args)
				if ctx.Err() != nil {
					t.Fatalf("troupe %s did not end in 30 s; stderr:\n%s", strings.Join(args, " "), stderr.String())
				}
				t.Logf("exit %d: %s", code, info.Message)
				if typ == "" {
					if code != 0 {
						t.Errorf("troupe %s: exit %d, want 0; stderr:\n%s", strings.Join(args, " "), code, stderr.String())
					}
					return
				}
				if info.Type != typ {
					t.Errorf("troupe %s: error of type %s, want %s: %s", strings.Join(args, " "), info.Type, typ, info.Message)
				}
				checkFailure(t, args, code, stdout.String(), stderr.String(), typ, r.json)
			})
		}
	}

	t.Run(caseNoServer, func(t *testing.T) {
		t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
		run(t, caseNoServer, "session-g-1", "run-1")
	})
	t.Setenv("TEMPORAL_ADDRESS", srv.FrontendAddress())
	t.Run(caseBadFlag, func(t *testing.T) { run(t, caseBadFlag, "session-g-1", "run-1") })

	// A session and a run whose worker is gone: their workflows, on task
	// queue troupe, which nothing serves.
	c, err := client.Dial(client.Options{HostPort: srv.FrontendAddress(), Namespace: srv.Namespace(), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "session-g-1", TaskQueue: troupe.DefaultTaskQueue}, troupe.SessionWorkflowName,
		troupe.SessionInput{Graph: "g", Name: "acme"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "run-1", TaskQueue: troupe.DefaultTaskQueue}, troupe.OrchestratorWorkflowName,
		troupe.RunInput{Graph: "g", Input: "hello"}); err != nil {
		t.Fatal(err)
	}
	t.Run(caseNoWorker, func(t *testing.T) { run(t, caseNoWorker, "session-g-1", "run-1") })

	// Without a worker, sessions ls lists the sessions the server
	// recorded.
	t.Run("sessions ls without a worker", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		code := Execute(ctx, Command(graphs, &stdout, &stderr), []string{"sessions", "ls", "--json"})
		var list []troupeclient.SessionEntry
		if err := json.Unmarshal(stdout.Bytes(), &list); code != 0 || err != nil {
			t.Fatalf("exit %d, stdout %q (%v); stderr:\n%s", code, stdout.String(), err, stderr.String())
		}
		if len(list) != 1 || list[0].ID != "session-g-1" || list[0].Graph != "g" || list[0].Name != "acme" || list[0].Status != unservedStatus {
			t.Errorf("sessions ls without a worker listed %+v", list)
		}
		if !strings.Contains(stderr.String(), "no worker serves task queue troupe") {
			t.Errorf("sessions ls without a worker does not say so:\n%s", stderr.String())
		}
	})
	for _, id := range []string{"session-g-1", "run-1"} {
		if err := c.TerminateWorkflow(ctx, id, "", "the test is past it"); err != nil {
			t.Fatal(err)
		}
	}

	// With --wait, a command waits for a worker, says so, and goes on
	// once one serves the queue: the worker starts once it waits.
	pr, pw := io.Pipe()
	waited := make(chan int, 1)
	var waitOut bytes.Buffer
	go func() {
		defer pw.Close()
		waited <- Execute(ctx, Command(graphs, &waitOut, pw), []string{"sessions", "ls", "--wait"})
	}()
	sc := bufio.NewScanner(pr)
	for sc.Scan() && !strings.Contains(sc.Text(), "waiting for one") {
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()

	// A worker, and a session it stops.
	stop, err := startWorker(context.Background(), c, nil, srv.Namespace(), workerOptions{taskQueue: troupe.DefaultTaskQueue, sandbox: "local"}, graphs, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if code := <-waited; code != 0 || strings.TrimSpace(waitOut.String()) != "no sessions" {
		t.Errorf("sessions ls --wait: exit %d, stdout %q once a worker started", code, waitOut.String())
	}
	cl, err := troupeclient.New(troupeclient.Config{Temporal: c})
	if err != nil {
		t.Fatal(err)
	}
	s, _, err := cl.CreateSession(context.Background(), troupeclient.SessionInput{Graph: "g"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Command(context.Background(), troupeclient.SessionCommand{Op: troupe.CommandStop}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Result(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Run(caseUnknownID, func(t *testing.T) { run(t, caseUnknownID, "session-g-nosuch", "run-nosuch") })
	t.Run(caseStopped, func(t *testing.T) { run(t, caseStopped, s.ID(), s.ID()) })
}

// checkFailure checks how a troupe command (args) failed: exit status 1,
// one line on stderr, "troupe: " and the message, free of raw Temporal
// text, and with --json the document of an error of type typ on stdout.
func checkFailure(t *testing.T, args []string, code int, stdout, stderr, typ string, asJSON bool) {
	t.Helper()
	cmdline := "troupe " + strings.Join(args, " ")
	if code != 1 {
		t.Errorf("%s: exit %d, want 1; stderr:\n%s", cmdline, code, stderr)
	}
	line := strings.TrimSuffix(stderr, "\n")
	if i := strings.LastIndexByte(line, '\n'); i >= 0 {
		// Lines before the error say what the command did (a worker's
		// start, say); the error is the last, and only one.
		line = line[i+1:]
	}
	if !strings.HasPrefix(line, "troupe: ") {
		t.Errorf("%s: stderr does not end with one line \"troupe: …\":\n%s", cmdline, stderr)
	}
	if !strings.Contains(line, typ) {
		t.Errorf("%s: the error line does not name its type %s: %s", cmdline, typ, line)
	}
	for _, raw := range rawTemporal {
		if strings.Contains(line, raw) {
			t.Errorf("%s: the error holds Temporal's own text %q: %s", cmdline, raw, line)
		}
	}
	if !asJSON {
		return
	}
	var doc struct {
		Error *FailureInfo `json:"error"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil || doc.Error == nil {
		t.Errorf("%s: stdout is not an error document (%v):\n%s", cmdline, err, stdout)
		return
	}
	if doc.Error.Type != typ || doc.Error.Message == "" {
		t.Errorf("%s: error %+v, want type %s; stderr:\n%s", cmdline, *doc.Error, typ, stderr)
	}
	for _, raw := range rawTemporal {
		if strings.Contains(doc.Error.Message, raw) {
			t.Errorf("%s: the --json error holds Temporal's own text %q: %s", cmdline, raw, doc.Error.Message)
		}
	}
}

// TestIdleHome: without TEMPORAL_ADDRESS, and with no troupe command
// running the server of TROUPE_HOME, no worker can serve anything: a
// command that needs one says so at once, without starting the server.
func TestIdleHome(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TROUPE_HOME", dir)
	t.Setenv("TEMPORAL_ADDRESS", "")
	graphs := []Graph{{Graph: agents.MustGraph("g", "a", &agents.Agent{Name: "a", Instructions: "Answer."})}}
	for _, args := range [][]string{
		{"sessions", "new", "g", "--json"},
		{"sessions", "send", "session-g-1", "hello", "--json"},
		{"sessions", "stop", "session-g-1", "--json"},
		{"runs", "approvals", "run-1", "--json"},
		{"chat"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code, info := execute(context.Background(), Command(graphs, &stdout, &stderr), args)
			if info.Type != troupe.ErrNoWorker || !strings.Contains(info.Message, "start one with `troupe dev`") {
				t.Errorf("error %+v, want %s saying to start troupe dev", info, troupe.ErrNoWorker)
			}
			checkFailure(t, args, code, stdout.String(), stderr.String(), troupe.ErrNoWorker, args[len(args)-1] == "--json")
			if _, err := os.Stat(filepath.Join(dir, devserver.DBFile)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the command started the home's server (its database: %v)", err)
			}
		})
	}
}

// TestPermissionDenied: a call the server refuses for want of an API key
// (the JWT authorizer's PermissionDenied) is troupe.PermissionDenied,
// naming the server's reason and TEMPORAL_API_KEY, with no raw gRPC text.
func TestPermissionDenied(t *testing.T) {
	err := &ranError{fmt.Errorf("list runs: %w", serviceerror.NewPermissionDenied("Request unauthorized.", ""))}
	info := describeError(err)
	if info.Type != troupe.ErrPermissionDenied || !strings.Contains(info.Message, "Request unauthorized") || !strings.Contains(info.Message, "TEMPORAL_API_KEY") {
		t.Errorf("%+v: want %s naming the reason and TEMPORAL_API_KEY", info, troupe.ErrPermissionDenied)
	}
	for _, raw := range rawTemporal {
		if strings.Contains(info.Message, raw) {
			t.Errorf("%q holds raw Temporal text %q", info.Message, raw)
		}
	}
}
