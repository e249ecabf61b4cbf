package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/cli"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/cmd/troupe/graphs"
	"github.com/troupe-dev/troupe/examples/codereview"
	"github.com/troupe-dev/troupe/internal/exampletest"
	"github.com/troupe-dev/troupe/mcp/server"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/local"
	"github.com/troupe-dev/troupe/workflows"
)

// runEvents reads the events of a finished run and of every workflow it
// started, through the events query, each workflow's in order. (Follow
// stops following an agent at its final output, so it can miss the
// sandbox_stopped event the agent records after it.)
func runEvents(t *testing.T, c client.Client, runID string) []troupe.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ids, known := []string{runID}, map[string]bool{runID: true}
	var all []troupe.Event
	for i := 0; i < len(ids); i++ {
		resp, err := c.QueryWorkflow(ctx, ids[i], "", troupe.EventsQuery, 0)
		if err != nil {
			t.Fatalf("events of %s: %v", ids[i], err)
		}
		var evs []troupe.Event
		if err := resp.Get(&evs); err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.Child != "" && !known[e.Child] {
				known[e.Child] = true
				ids = append(ids, e.Child)
			}
		}
		all = append(all, evs...)
	}
	return all
}

// emptyDirs fails unless each root holds nothing but dot files (a
// backend's own state, such as bwrap's .bwrap-etc) once the run is over:
// no sandbox workspace outlived its workflow.
func emptyDirs(t *testing.T, roots ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for _, root := range roots {
		for {
			entries, err := os.ReadDir(root)
			if err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			var left []string
			for _, e := range entries {
				if !strings.HasPrefix(e.Name(), ".") {
					left = append(left, e.Name())
				}
			}
			if len(left) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("left under %s: %v", root, left)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// TestCodeReview runs the code-review graph through a worker on both
// APIs: three sandboxed reviewers in parallel over a repository the test
// creates, then the report on the host.
func TestCodeReview(t *testing.T) {
	parallel(t)
	c := dial(t)
	repo := exampletest.ReviewRepo(t)
	for _, tc := range []struct {
		api model.API
		ref string
	}{{model.APIResponses, "HEAD"}, {model.APIChat, "HEAD~1..HEAD"}} {
		t.Run(string(tc.api), func(t *testing.T) {
			ms, url := modelServer(t)
			sandboxes := t.TempDir()
			queue := startWorker(t, c, url, tc.api, func(cfg *workflows.Config) {
				lc, err := local.New(local.Config{Root: sandboxes, Policy: sandbox.Policy{AllowedRoots: []string{repo}}})
				if err != nil {
					t.Fatal(err)
				}
				cfg.Sandboxes = map[string]sandbox.Client{local.Backend: lc}
			})
			out := filepath.Join(t.TempDir(), "review")
			run, err := troupeclient.StartRun(context.Background(), c, queue, troupe.RunInput{
				Graph: "codereview", Input: "Review this change",
				Vars: map[string]string{codereview.VarRepo: repo, codereview.VarRef: tc.ref, codereview.VarOut: out},
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var res troupe.RunResult
			if err := run.Get(ctx, &res); err != nil {
				t.Fatal(err)
			}
			exampletest.CheckReview(t, res.Output, out)
			if res.Agent != "coordinator" || res.Turns != 3 || res.Usage.Requests != 9 {
				t.Errorf("agent %s, turns %d (want 3), requests %d (want 9)", res.Agent, res.Turns, res.Usage.Requests)
			}
			for _, rule := range []string{"codereview-security-reviews", "codereview-tests-reviews", "codereview-api-design-reviews", "codereview-coordinator-writes-report"} {
				if ms.Requests(rule) != 1 {
					t.Errorf("rule %s answered %d times, want 1", rule, ms.Requests(rule))
				}
			}
			events := runEvents(t, c, run.GetID())
			kinds := map[string]int{}
			sandboxAgents := map[string]bool{}
			for _, e := range events {
				kinds[e.Kind]++
				if e.Kind == troupe.EventSandboxProvisioned {
					sandboxAgents[e.Agent] = true
				}
			}
			for kind, want := range map[string]int{
				troupe.EventAgentToolStarted: 3, troupe.EventAgentToolFinished: 3,
				troupe.EventSandboxProvisioned: 3, troupe.EventSandboxStopped: 3,
				// Three exec_command calls, and write_report.
				troupe.EventToolCalled: 4, troupe.EventToolResult: 4,
			} {
				if kinds[kind] != want {
					t.Errorf("%d %s events, want %d (all: %v)", kinds[kind], kind, want, kinds)
				}
			}
			for _, a := range []string{"security_reviewer", "tests_reviewer", "api_design_reviewer"} {
				if !sandboxAgents[a] {
					t.Errorf("no sandbox provisioned for %s (got %v)", a, sandboxAgents)
				}
			}
			// The coordinator started all three reviewers before any finished:
			// they ran in parallel.
			started := 0
			for _, e := range events {
				if e.Agent != "coordinator" {
					continue
				}
				switch e.Kind {
				case troupe.EventAgentToolStarted:
					started++
				case troupe.EventAgentToolFinished:
					if started != 3 {
						t.Errorf("a reviewer finished when %d of 3 had started", started)
					}
				}
			}
			emptyDirs(t, sandboxes)
		})
	}
}

// TestCodeReviewCLI runs `troupe run --graph codereview` as a user does,
// offline, with the sandbox backend the CLI picks (bwrap when installed).
// It asks for --ref HEAD~1 on a repository of two commits, which means
// the change from HEAD~1 to HEAD: the last commit's, which the summary
// names.
func TestCodeReviewCLI(t *testing.T) {
	// Not parallel: it sets the environment the CLI or the store reads (t.Setenv).
	repo := exampletest.ReviewRepo(t)
	home := t.TempDir()
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("TEMPORAL_ADDRESS", temporalAddr)
	t.Setenv("TROUPE_HOME", home)
	out := filepath.Join(t.TempDir(), "review")
	// The graphs as cmd/troupe serves them; no input, so the graph's
	// default request (a full review).
	var stdout, stderr bytes.Buffer
	cmd := cli.Command(graphs.Served(), &stdout, &stderr)
	cmd.SetArgs([]string{"run", "--worker", "--graph", "codereview", "--repo", repo, "--ref", "HEAD~1", "--out", out, "--json"})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("troupe run: %v\nstderr:\n%s", err, stderr.String())
	}
	var res troupe.RunResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("stdout is not a run result: %v\n%s", err, stdout.String())
	}
	exampletest.CheckReview(t, res.Output, out)
	g, err := git.PlainOpen(repo)
	if err != nil {
		t.Fatal(err)
	}
	first, err := g.ResolveRevision("HEAD~1")
	if err != nil {
		t.Fatal(err)
	}
	last, err := g.ResolveRevision("HEAD")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := agents.Decode[codereview.Summary](res.Output)
	if want := first.String()[:7] + ".." + last.String()[:7] + " (1 commit)"; err != nil || sum.Reviewed != want {
		t.Errorf("summary %+v, %v; want it to say it reviewed %s", sum, err, want)
	}
	progress := stderr.String()
	for _, want := range []string{"⇉ review_security", "⇉ review_tests", "⇉ review_api_design", "→ exec_command", "→ write_report", "[coordinator] final output"} {
		if !strings.Contains(progress, want) {
			t.Errorf("progress lacks %q:\n%s", want, progress)
		}
	}
	// Progress may miss some "sandbox stopped" lines (see runEvents); the
	// empty sandbox roots below show that all three were stopped.
	if n := strings.Count(progress, "sandbox provisioned"); n != 3 {
		t.Errorf("%d sandboxes provisioned, want 3:\n%s", n, progress)
	}
	// The backends' roots, not the store's identity file beside them.
	entries, err := filepath.Glob(filepath.Join(home, "sandboxes", "*"))
	if err != nil {
		t.Fatal(err)
	}
	var backends []string
	for _, e := range entries {
		if fi, err := os.Stat(e); err == nil && fi.IsDir() {
			backends = append(backends, e)
		}
	}
	if len(backends) == 0 {
		t.Errorf("no sandbox backend roots under %s: %v", filepath.Join(home, "sandboxes"), entries)
	}
	emptyDirs(t, backends...)
}

// TestOfflineNoMatchCLI runs `troupe run` offline on a message the
// shipped scenario has no rule for (the fixer asked about the weather):
// the run fails at once with troupe.ScenarioNoMatch, which says what to
// do and names the scenario file, not with a model error.
func TestOfflineNoMatchCLI(t *testing.T) {
	repo := exampletest.ReviewRepo(t)
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("TEMPORAL_ADDRESS", temporalAddr)
	t.Setenv("TROUPE_HOME", t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd := cli.Command(graphs.Served(), &stdout, &stderr)
	cmd.SetArgs([]string{"run", "--worker", "--graph", "codereview", "--agent", "fixer", "--repo", repo, "--sandbox", "local", "what's the weather like in Paris?"})
	err := cmd.ExecuteContext(context.Background())
	if err == nil {
		t.Fatalf("troupe run succeeded:\n%s", stdout.String())
	}
	want := "troupe.ScenarioNoMatch: the offline scenario has no answer for this message; set OPENAI_API_KEY or add a rule to examples/codereview/scenario.yaml"
	if !strings.Contains(stderr.String()+err.Error(), want) {
		t.Errorf("troupe run: %v; want %q in:\n%s", err, want, stderr.String())
	}
	if strings.Contains(stderr.String(), "troupe.ModelError") || strings.Contains(stderr.String(), "retry") {
		t.Errorf("the no-match was told as a model failure, or retried:\n%s", stderr.String())
	}
}

// TestCodeReviewSandboxDenied runs the review on a worker whose sandbox
// policy does not allow the repository: no reviewer gets a sandbox, and
// the run fails with troupe.SourceNotAllowed naming the repository and how
// to allow it, rather than completing with every review failed. With
// -histories, its workflows' histories are a replay fixture (go test ./e2e
// -run TestCodeReviewSandboxDenied -histories
// ../workflows/testdata/histories/v12-source-not-allowed).
func TestCodeReviewSandboxDenied(t *testing.T) {
	parallel(t)
	c := dial(t)
	repo := exampletest.ReviewRepo(t)
	_, url := modelServer(t)
	sandboxes := t.TempDir()
	queue := startWorker(t, c, url, model.APIResponses, func(cfg *workflows.Config) {
		lc, err := local.New(local.Config{Root: sandboxes}) // The zero Policy allows no host source.
		if err != nil {
			t.Fatal(err)
		}
		cfg.Sandboxes = map[string]sandbox.Client{local.Backend: lc}
	})
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run, err := troupeclient.StartRun(ctx, c, queue, troupe.RunInput{Graph: "codereview", Input: "Review this change",
		Vars: map[string]string{codereview.VarRepo: repo, codereview.VarOut: out}})
	if err != nil {
		t.Fatal(err)
	}
	err = run.Get(ctx, nil)
	if troupe.ErrorType(err) != troupe.ErrSourceNotAllowed || !strings.Contains(err.Error(), repo) || !strings.Contains(err.Error(), "--allow-root") {
		t.Errorf("run on a worker that does not allow the repository: %v; want %s naming %s and --allow-root", err, troupe.ErrSourceNotAllowed, repo)
	}
	if _, err := os.Stat(filepath.Join(out, codereview.ReportFile)); err == nil {
		t.Errorf("a report was written for a review that could not run")
	}
	ids := map[string]bool{}
	for _, e := range runEvents(t, c, run.GetID()) {
		ids[e.WorkflowID] = true
		if e.Kind == troupe.EventSandboxProvisioned {
			t.Errorf("a sandbox was provisioned: %+v", e)
		}
	}
	emptyDirs(t, sandboxes)
	if *historiesDir != "" {
		saveHistories(t, c, ids, *historiesDir, "codereview")
	}
}

// TestCodeReviewMCP calls the code-review pipeline as the MCP tool
// codereview_coordinator, with its typed input: the repository and ref
// become the run's variables, the report goes to the request's own
// directory, and the Summary comes back as structuredContent.
func TestCodeReviewMCP(t *testing.T) {
	parallel(t)
	c := dial(t)
	repo := exampletest.ReviewRepo(t)
	_, url := modelServer(t)
	queue := startWorker(t, c, url, model.APIResponses, func(cfg *workflows.Config) {
		lc, err := local.New(local.Config{Root: t.TempDir(), Policy: sandbox.Policy{AllowedRoots: []string{repo}}})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Sandboxes = map[string]sandbox.Client{local.Backend: lc}
	})
	s, err := server.New(server.Config{Client: c, TaskQueue: queue, Graphs: []*agents.Graph{codereview.Graph()}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.HTTPHandler(server.HTTPOptions{}))
	t.Cleanup(func() { s.Close(); srv.Close() })
	ref := "HEAD~1..HEAD"
	out := codereview.ReportDir(codereview.ReviewRequest{Repo: repo, Ref: &ref})
	t.Cleanup(func() { os.RemoveAll(out) })
	mcp := newRawMCP(t, srv.URL+server.Path, "")
	mcp.initialize()
	res := mcp.call(2, "codereview_coordinator", map[string]any{"repo": repo, "ref": ref}, nil)
	if res.IsError {
		t.Fatalf("codereview_coordinator: %s", res.text())
	}
	exampletest.CheckReview(t, res.StructuredContent, out)
	d, err := c.DescribeWorkflowExecution(t.Context(), res.runID(), "")
	if err != nil {
		t.Fatal(err)
	}
	if typ := d.GetWorkflowExecutionInfo().GetType().GetName(); typ != troupe.OrchestratorWorkflowName {
		t.Errorf("run %s is a %s", res.runID(), typ)
	}
}

// TestCodeReviewSendsRepo runs `troupe run --graph codereview --repo PATH`
// from a client whose PATH the worker cannot see: the client runs in a
// mount namespace of its own (unshare), with the repository on a tmpfs
// only it sees, where the worker sees an empty directory. The client
// sends the repository through the workers' blob store, and the run
// completes with the reviews of the change, the worker's sandboxes
// copying from its own spool (the only root its policy allows). A path
// that is no repository, and workers that keep their blobs in another
// store, are refused at the client in one line, before any run starts.
func TestCodeReviewSendsRepo(t *testing.T) {
	parallel(t)
	if out, err := exec.Command("unshare", "--map-root-user", "--mount", "true").CombinedOutput(); err != nil {
		t.Fatalf("no mount namespace for the client (unshare, from util-linux: %v: %s)", err, out)
	}
	c := dial(t)
	_, url := modelServer(t)
	blobs, repos, sandboxes := t.TempDir(), t.TempDir(), t.TempDir()
	queue := startWorker(t, c, url, model.APIResponses, func(cfg *workflows.Config) {
		store, err := blob.Open(context.Background(), blobs)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		lc, err := local.New(local.Config{Root: sandboxes, Policy: sandbox.Policy{AllowedRoots: []string{repos}}})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Store, cfg.RepoDir, cfg.Sandboxes = store, repos, map[string]sandbox.Client{local.Backend: lc}
	})
	// A worker on another queue that says it keeps its blobs elsewhere.
	elsewhere := fmt.Sprintf("e2e-elsewhere-%d", queues.Add(1))
	other := newRunner(t, url, model.APIResponses, elsewhere, nil)
	stop, err := other.StartWorkers(c, elsewhere, worker.Options{Identity: "1@far-host troupe model=scripted blob=s3://other-bucket#0a1b2c3d"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)

	client := func(t *testing.T, namespace bool, args ...string) (string, string, error) {
		t.Helper()
		cmd, env := troupeCommand(t, args...)
		if namespace {
			// The repository, on a tmpfs over hidden that only the client
			// sees; then the client itself.
			script := `mount -t tmpfs tmpfs "$1" && cp -a "$2/." "$1/" && exec "$3"`
			cmd = exec.Command("unshare", "--map-root-user", "--mount", "sh", "-c", script, "sh", args[len(args)-1], exampletest.ReviewRepo(t), os.Args[0])
		}
		cmd.Env = append(os.Environ(), env, "TEMPORAL_ADDRESS="+temporalAddr, "TROUPE_HOME="+t.TempDir(), "TROUPE_BLOB_URL="+blobs, "OPENAI_API_KEY=")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang detector
		defer cancel()
		go func() {
			<-ctx.Done()
			if cmd.Process != nil {
				cmd.Process.Kill()
			}
		}()
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}

	t.Run("sent", func(t *testing.T) {
		hidden, out := t.TempDir(), filepath.Join(t.TempDir(), "review")
		stdout, stderr, err := client(t, true, "run", "--task-queue", queue, "--graph", "codereview", "--out", out, "--json", "--repo", hidden)
		if err != nil {
			t.Fatalf("troupe run: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
		}
		if !strings.Contains(stderr, "sent the repository --repo "+hidden) {
			t.Errorf("stderr does not say the repository was sent:\n%s", stderr)
		}
		var res troupe.RunResult
		if err := json.Unmarshal([]byte(stdout), &res); err != nil {
			t.Fatalf("stdout: %v\n%s", err, stdout)
		}
		exampletest.CheckReview(t, res.Output, out)
		if entries, err := os.ReadDir(hidden); err != nil || len(entries) != 0 {
			t.Errorf("the worker saw %d entries in %s (%v); want none: the test proves nothing", len(entries), hidden, err)
		}
		if entries, _ := os.ReadDir(repos); len(entries) != 1 {
			t.Errorf("the worker's spool holds %d repositories, want 1", len(entries))
		}
		emptyDirs(t, sandboxes)
	})
	for _, tc := range []struct {
		name, queue string
		repo        func(t testing.TB) string
		want        string
	}{
		{"not-a-repository", queue, func(t testing.TB) string { return t.TempDir() }, "is not a git repository"},
		{"another-store", elsewhere, exampletest.ReviewRepo, "keeps its blobs in s3://other-bucket"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, err := client(t, false, "run", "--task-queue", tc.queue, "--graph", "codereview", "--repo", tc.repo(t))
			if err == nil {
				t.Fatalf("troupe run succeeded:\n%s\n%s", stdout, stderr)
			}
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], tc.want) || !strings.Contains(lines[0], "--worker") {
				t.Errorf("stderr: %q; want one line that says %q and what to do", stderr, tc.want)
			}
			if strings.Contains(stderr, "▶ run") {
				t.Errorf("a run started: %s", stderr)
			}
		})
	}
}

// TestCodeReviewSessionSendsRepo: `troupe sessions new codereview --var
// repo=PATH` with a repository only the client sees (on a tmpfs in the
// client's own mount namespace) sends it to the workers through their
// blob store, under the session: the session's review reads it, and the
// worker never sees the client's disk. Before, the session kept the path,
// which the workers' sandboxes could not open.
func TestCodeReviewSessionSendsRepo(t *testing.T) {
	parallel(t)
	if out, err := exec.Command("unshare", "--map-root-user", "--mount", "true").CombinedOutput(); err != nil {
		t.Fatalf("no mount namespace for the client (unshare, from util-linux: %v: %s)", err, out)
	}
	home := t.TempDir()
	port := strconv.Itoa(freePort(t))
	dev := startCLI(t, home, "dev", "--port", port, "--ui-port", "-1")
	dev.waitLine(t, regexp.MustCompile(`^troupe: dev server up`))

	hidden, out := t.TempDir(), filepath.Join(t.TempDir(), "review")
	cmd, env := troupeCommand(t, "sessions", "new", "codereview", "--var", "repo="+hidden, "--var", "out="+out)
	// The repository, on a tmpfs over hidden that only the client sees;
	// then the client itself.
	script := `mount -t tmpfs tmpfs "$1" && cp -a "$2/." "$1/" && exec "$3"`
	cmd = exec.Command("unshare", "--map-root-user", "--mount", "sh", "-c", script, "sh", hidden, exampletest.ReviewRepo(t), os.Args[0])
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "TEMPORAL_") })
	cmd.Env = append(cmd.Env, env, "TROUPE_HOME="+home, "OPENAI_API_KEY=", "TEMPORAL_CONFIG_FILE="+filepath.Join(home, "no-temporal.toml"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := runWithin(cmd, 2*time.Minute); err != nil {
		t.Fatalf("troupe sessions new: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stderr.String(), "sent the repository --repo "+hidden) {
		t.Errorf("stderr does not say the repository was sent:\n%s", stderr.String())
	}
	id := strings.TrimSpace(stdout.String())
	var rec troupeclient.TurnRecord
	if err := json.Unmarshal([]byte(runCLI(t, home, "sessions", "send", id, "Review this change", "--json")), &rec); err != nil {
		t.Fatal(err)
	}
	exampletest.CheckReview(t, rec.Output, out)
	if entries, err := os.ReadDir(hidden); err != nil || len(entries) != 0 {
		t.Errorf("the worker saw %d entries in %s (%v); want none: the test proves nothing", len(entries), hidden, err)
	}
}

// TestChatSendsRepo: `troupe chat --graph codereview --var repo=PATH`
// with a repository only the chat sees (on a tmpfs in its own mount
// namespace), then /new: the session the chat creates names the
// repository by reference in the workers' blob store, and its review
// reads it; the worker (`troupe dev`) never sees the chat's disk. Before,
// /new gave the session the path, which the workers' sandboxes could not
// open.
func TestChatSendsRepo(t *testing.T) {
	parallel(t)
	needUnshare(t)
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is not installed (scripts/setup.sh installs it)")
	}
	home := t.TempDir()
	dev, _, cl := devWithClient(t, home)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // a hang detector
	defer cancel()

	hidden, out := t.TempDir(), filepath.Join(t.TempDir(), "review")
	chat := startTerminalWrapped(t, dev, aloneWithRepo(hidden, exampletest.ReviewRepo(t)), []string{"TROUPE_HOME=" + home},
		"chat", "--graph", "codereview", "--var", "repo="+hidden, "--var", "out="+out)
	chat.waitFor("the chat", func(s string) bool { return strings.Contains(s, "no session open") })
	chat.enter("/new")
	screen := chat.waitFor("the new session", func(s string) bool {
		return strings.HasPrefix(shownSession(s), "session-codereview-") && strings.Contains(header(s), "· idle ·")
	})
	s := cl.Session(shownSession(screen))
	in, err := s.Input(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ref := in.Vars[codereview.VarRepo]; !strings.HasPrefix(ref, "blob:inputs/"+s.ID()+"/") {
		t.Errorf("the session's repo is %q, want a reference under its inputs in the blob store", ref)
	}
	rec, err := s.Ask(ctx, "Review this change", nil)
	if err != nil {
		t.Fatal(err)
	}
	exampletest.CheckReview(t, rec.Output, out)
	if entries, err := os.ReadDir(hidden); err != nil || len(entries) != 0 {
		t.Errorf("the worker saw %d entries in %s (%v); want none: the test proves nothing", len(entries), hidden, err)
	}
}

// TestCodeReviewMCPSendsRepo: `troupe mcp serve --task-queue Q` on a host
// whose disk the workers of Q cannot see (the server runs in a mount
// namespace of its own, with the repository on a tmpfs only it sees)
// sends the repository that a call of codereview_coordinator names, and
// one of its session tool, to the workers through their blob store, under
// the run and under the session: both reviews read it, the worker's
// sandboxes copying from its own spool (the only root its policy allows).
// A retried session call finds its session and sends nothing again. A
// path that is no repository is refused in one line, and nothing starts.
// Before, the server passed the path, which the workers could not open.
func TestCodeReviewMCPSendsRepo(t *testing.T) {
	parallel(t)
	needUnshare(t)
	c := dial(t)
	_, url := modelServer(t)
	blobs, repos, sandboxes := t.TempDir(), t.TempDir(), t.TempDir()
	queue := startWorker(t, c, url, model.APIResponses, func(cfg *workflows.Config) {
		store, err := blob.Open(context.Background(), blobs)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		lc, err := local.New(local.Config{Root: sandboxes, Policy: sandbox.Policy{AllowedRoots: []string{repos}}})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Store, cfg.RepoDir, cfg.Sandboxes = store, repos, map[string]sandbox.Client{local.Backend: lc}
	})
	hidden := t.TempDir()
	env := []string{"TEMPORAL_ADDRESS=" + temporalAddr, "TROUPE_HOME=" + t.TempDir(), "TROUPE_BLOB_URL=" + blobs, "OPENAI_API_KEY="}
	mcpServe := startTroupeWrapped(t, "mcp serve", aloneWithRepo(hidden, exampletest.ReviewRepo(t)), env, "serving MCP at ",
		"mcp", "serve", "--http", "127.0.0.1:0", "--task-queue", queue, "--graph", "codereview")
	m := regexp.MustCompile(`serving MCP at (\S+)`).FindStringSubmatch(mcpServe.log.String())
	if m == nil {
		t.Fatalf("troupe mcp serve does not say where it listens:\n%s", mcpServe.log.String())
	}
	mcp := newRawMCP(t, m[1], "")
	mcp.initialize()
	sent := func() int { return strings.Count(mcpServe.log.String(), "sent the repository --repo "+hidden) }
	cl, err := troupeclient.New(troupeclient.Config{Temporal: c, TaskQueue: queue})
	if err != nil {
		t.Fatal(err)
	}

	// A run.
	out := codereview.ReportDir(codereview.ReviewRequest{Repo: hidden})
	t.Cleanup(func() { os.RemoveAll(out) })
	res := mcp.call(2, "codereview_coordinator", map[string]any{"repo": hidden}, nil)
	if res.IsError {
		t.Fatalf("codereview_coordinator: %s\ntroupe mcp serve:\n%s", res.text(), mcpServe.log.String())
	}
	exampletest.CheckReview(t, res.StructuredContent, out)
	if n := sent(); n != 1 {
		t.Errorf("troupe mcp serve said %d times that it sent the repository, want once:\n%s", n, mcpServe.log.String())
	}

	// A session, whose report goes elsewhere (another ref, the same
	// change); the call again (a retry) answers from the same session.
	ref := "HEAD"
	out = codereview.ReportDir(codereview.ReviewRequest{Repo: hidden, Ref: &ref})
	t.Cleanup(func() { os.RemoveAll(out) })
	args := map[string]any{"message": "Review this change", "start": map[string]any{"repo": hidden, "ref": ref}}
	var first string
	for i := range 2 {
		res = mcp.call(3, "codereview_coordinator_session", args, nil)
		if res.IsError {
			t.Fatalf("codereview_coordinator_session (call %d): %s\ntroupe mcp serve:\n%s", i+1, res.text(), mcpServe.log.String())
		}
		var reply struct {
			SessionID string          `json:"session_id"`
			Turn      int             `json:"turn"`
			Reply     json.RawMessage `json:"reply"`
		}
		if err := json.Unmarshal(res.StructuredContent, &reply); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = reply.SessionID
			exampletest.CheckReview(t, reply.Reply, out)
			in, err := cl.Session(first).Input(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if r := in.Vars[codereview.VarRepo]; !strings.HasPrefix(r, "blob:inputs/"+first+"/") {
				t.Errorf("the session's repo is %q, want a reference under its inputs in the blob store", r)
			}
		} else if reply.SessionID != first || reply.Turn != 1 {
			t.Errorf("the retried call answered from session %s, turn %d; want %s, turn 1", reply.SessionID, reply.Turn, first)
		}
	}
	if n := sent(); n != 2 {
		t.Errorf("troupe mcp serve said %d times that it sent the repository, want twice (the run, the session):\n%s", n, mcpServe.log.String())
	}
	if entries, err := os.ReadDir(hidden); err != nil || len(entries) != 0 {
		t.Errorf("the worker saw %d entries in %s (%v); want none: the test proves nothing", len(entries), hidden, err)
	}
	if entries, _ := os.ReadDir(repos); len(entries) != 1 {
		t.Errorf("the worker's spool holds %d repositories, want 1 (one bundle, sent twice)", len(entries))
	}

	// A path that is no repository.
	notRepo := t.TempDir()
	res = mcp.call(4, "codereview_coordinator", map[string]any{"repo": notRepo}, nil)
	if text := res.text(); !res.IsError || strings.Contains(text, "\n") || !strings.Contains(text, notRepo+" is not a git repository") ||
		!strings.Contains(text, "https URL") || res.runID() != "" {
		t.Errorf("a call on a directory that is no repository: %+v; want one line that says so and what to do, and no run", res)
	}
}

// needUnshare fails t when this host gives no mount namespace to a
// process of the test's user (aloneWithRepo needs one).
func needUnshare(t *testing.T) {
	t.Helper()
	if out, err := exec.Command("unshare", "--map-root-user", "--mount", "true").CombinedOutput(); err != nil {
		t.Fatalf("no mount namespace for the client (unshare, from util-linux: %v: %s)", err, out)
	}
}

// aloneWithRepo rewrites cmd to run in a mount namespace of its own
// (unshare), where a tmpfs over hidden holds a copy of the repository
// repo: a path that cmd sees as a repository, and every other process as
// an empty directory.
func aloneWithRepo(hidden, repo string) func(*exec.Cmd) {
	return func(cmd *exec.Cmd) {
		script := `mount -t tmpfs tmpfs "$1" && cp -a "$2/." "$1/" && exec "$3"`
		path, err := exec.LookPath("unshare")
		if err != nil {
			path = "unshare" // the start says so
		}
		cmd.Args = []string{"unshare", "--map-root-user", "--mount", "sh", "-c", script, "sh", hidden, repo, cmd.Path}
		cmd.Path = path
	}
}

// runWithin runs cmd, killing it after d (a hang detector).
func runWithin(cmd *exec.Cmd, d time.Duration) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	timer := time.AfterFunc(d, func() { cmd.Process.Kill() })
	defer timer.Stop()
	return cmd.Wait()
}
