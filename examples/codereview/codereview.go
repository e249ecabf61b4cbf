// Package codereview is Troupe's code-review example: a coordinator fans a
// change out to three reviewers (security, tests, API design), each a
// sandbox agent called as an agent-as-tool, all in parallel, and writes
// what they found as a Markdown report and a JSON findings file.
//
// A run reads three run variables (the flags of `troupe run`):
//
//   - "repo": the repository, a local path or a URL go-git can clone,
//     or "blob:KEY", a repository a client sent through the blob store
//     (package gitbundle; `troupe run --repo PATH` sends one when the run
//     goes to workers that may not see PATH), unpacked on each host that
//     reads it.
//   - "ref": what to review, as a user means it (see ParseRange): HEAD,
//     the default, is the last commit; a single revision R (HEAD~1, a
//     commit, a branch or tag) the change from R to HEAD, so HEAD~1 is
//     the last commit's change and HEAD~3 the last three's (a branch
//     ahead of HEAD: its commits since it left HEAD's history); a range
//     "A..B" the patch between A and B, "A...B" from their merge base to
//     B. The report and the summary say which commits were reviewed.
//   - "out": the host directory the report goes to. Default ".".
//
// The run goes:
//
//  1. The coordinator's instructions check the variables first (a local
//     repository is opened and the ref resolved), so a bad --repo or
//     --ref fails the run before anything fans out. It then calls
//     review_security, review_tests and review_api_design in one turn;
//     each starts a reviewer's child workflow, and the three run in
//     parallel.
//  2. Each reviewer's sandbox is provisioned from a manifest computed for
//     the run (Sandbox.ManifestFor): the repository's work tree at the
//     reviewed commit under repo/ (a git_repo entry, cloned on the host
//     with go-git, so the sandbox needs neither git nor network) and the
//     patch under change.diff (computed on the host with go-git, see
//     Diff). The reviewer reads them with exec_command and returns typed
//     Findings; its sandbox is stopped when it ends. A reviewer that
//     fails (its sandbox denied, say) reaches the coordinator as a tool
//     error, which the report names.
//  3. The coordinator calls write_report with the Markdown report and the
//     merged findings; the tool validates the findings and writes
//     codereview-report.md and codereview-findings.json into "out" on the
//     worker's host, refusing to write outside it.
//  4. The coordinator's final output is a typed Summary: both paths, the
//     counts by severity and the commits reviewed ("abc1234..def5678
//     (2 commits)", which write_report also writes under the report's
//     title).
//
// Scenario is the offline script for the scripted model: with no
// OPENAI_API_KEY, `troupe run --graph codereview --repo PATH --ref REF
// "Review this change"` runs the whole flow on any repository, the
// reviewers' answers quoting what their commands printed. For a URL, set
// the variable with `--var repo=URL`: the --repo flag is a host path.
package codereview

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/capabilities"
	"github.com/troupe-dev/troupe/capabilities/skills"
	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/gitbundle"
)

// Scenario is the offline scenario of the graph, for the scripted model.
//
//go:embed scenario.yaml
var Scenario []byte

// The run variables the graph reads.
const (
	VarRepo = "repo"
	VarRef  = "ref"
	VarOut  = "out"
)

// Severities of a finding, lowest first.
const (
	SeverityInfo   = "info"
	SeverityLow    = "low"
	SeverityMedium = "medium"
	SeverityHigh   = "high"
)

// Workspace paths of a reviewer's sandbox.
const (
	// RepoDir holds the work tree of the reviewed commit.
	RepoDir = "repo"
	// DiffFile holds the patch under review.
	DiffFile = "change.diff"
)

// Finding is one observation of a reviewer.
type Finding struct {
	// File is the path in the repository, as in the diff.
	File string `json:"file" jsonschema:"description=Path of the file in the repository (as in the diff; without the repo/ prefix)."`
	// Line is the 1-based line in the reviewed version of File; 0 means
	// the whole file.
	Line int `json:"line" jsonschema:"description=1-based line in the reviewed version of the file; 0 for the whole file."`
	// Severity is info, low, medium or high.
	Severity string `json:"severity" jsonschema:"enum=info,enum=low,enum=medium,enum=high"`
	// Message says what is wrong and what to do about it.
	Message string `json:"message"`
}

// Findings is a reviewer's typed output.
type Findings struct {
	// Reviewer names the review: security, tests or api_design.
	Reviewer string `json:"reviewer"`
	// Findings may be empty when the reviewer found nothing.
	Findings []Finding `json:"findings"`
}

// Counts are findings by severity.
type Counts struct {
	Info   int `json:"info"`
	Low    int `json:"low"`
	Medium int `json:"medium"`
	High   int `json:"high"`
}

// Summary is the coordinator's typed output.
type Summary struct {
	// ReportPath and FindingsPath are where write_report wrote.
	ReportPath   string `json:"report_path"`
	FindingsPath string `json:"findings_path"`
	// Counts are all findings by severity.
	Counts Counts `json:"counts"`
	// Reviewed names the commits reviewed, as write_report returned
	// them: "abc1234..def5678 (2 commits)".
	Reviewed string `json:"reviewed" jsonschema:"description=The commits reviewed, as write_report returned them (e.g. abc1234..def5678 (2 commits)); empty when no review ran."`
	// Summary is the verdict in a few sentences.
	Summary string `json:"summary"`
}

// ReviewerWorkspace is the reviewers' Sandbox.ManifestFor: the
// repository at the reviewed commit under RepoDir and the patch as
// DiffFile. The diff is computed once per run and shared by its reviewers.
func ReviewerWorkspace(ctx context.Context, rc agents.RunContext) (sandbox.Manifest, error) {
	source, ch, err := runChange(ctx, rc)
	if err != nil {
		return sandbox.Manifest{}, err
	}
	return sandbox.Manifest{Entries: []sandbox.Entry{
		// The resolved commit, not the ref: every reviewer sees the tree
		// the diff was computed against.
		{Kind: sandbox.EntryGitRepo, Path: RepoDir, Source: source, Ref: ch.To},
		{Kind: sandbox.EntryFile, Path: DiffFile, Content: ch.Patch},
	}}, nil
}

// runChange is the change a run reviews and the repository it is in,
// computed once per run (see changeCache).
func runChange(ctx context.Context, rc agents.RunContext) (source string, ch *Change, err error) {
	repo := rc.Vars[VarRepo]
	if repo == "" {
		return "", nil, fmt.Errorf("codereview: the run variable %q is not set (troupe run --repo PATH)", VarRepo)
	}
	if repo, err = resolveRepo(ctx, repo); err != nil {
		return "", nil, err
	}
	if source, err = Source(repo); err != nil {
		return "", nil, err
	}
	ref := rc.Vars[VarRef]
	compute := func() (*Change, error) { return Diff(ctx, source, ref) }
	if rc.RunID != "" {
		ch, err = changes.get(rc.RunID+"\x00"+source+"\x00"+ref, compute)
	} else {
		ch, err = compute()
	}
	return source, ch, err
}

const workspaceNote = " Your workspace holds the change under review: " + DiffFile + " is its unified diff " +
	"(\"+++ b/PATH\" lines name the changed files) and " + RepoDir + "/ is the repository at the reviewed commit. " +
	"Read them with exec_command (cat, head, sed -n, grep -n). Report each finding with the file path as in the diff " +
	"(without the " + RepoDir + "/ prefix), its 1-based line in the reviewed version (0 for the whole file), a severity " +
	"(info, low, medium, high) and a message that says what to change. Set reviewer to "

func reviewer(name, focus string) *agents.Agent {
	return &agents.Agent{
		Name:         name + "_reviewer",
		Instructions: "You are the code-review " + name + " reviewer. " + focus + workspaceNote + fmt.Sprintf("%q.", name),
		Sandbox:      &agents.Sandbox{ManifestFor: ReviewerWorkspace},
		Capabilities: withSkills(skills.Eager),
		Output:       agents.MustOutput[Findings](),
		// A reviewer reads: anything else it runs waits for a human.
		Approvals: []agents.Approval{ReviewerApproval},
		// Every finding names its file (see FindingsHaveFiles).
		OutputGuardrails: []agents.OutputGuardrail{FindingsHaveFiles},
	}
}

// ReviewerApproval makes a reviewer's commands wait for a human's
// approval, unless they only read (capabilities.ReadOnlyCommand).
var ReviewerApproval = capabilities.CommandApproval(func(cmd string) bool { return !capabilities.ReadOnlyCommand(cmd) })

// FixerApproval makes the fixer's recursive removals (rm -r, rm -rf)
// wait for a human's approval; its edits go ahead, as the user asked
// for them.
var FixerApproval = capabilities.CommandApproval(func(cmd string) bool { return recursiveRemoval.MatchString(cmd) })

var recursiveRemoval = regexp.MustCompile(`\brm\s+(-[a-zA-Z]*[rR]|--recursive)`)

// Skills are the example's skills bundle: review-security (how a
// security review goes here, with the pattern file its grep reads) and
// review-go (how to fix a Go finding). The reviewers get them eagerly
// (under .agents/skills/ before their first command); the fixer loads one
// when a request calls for it (load_skill), as when the user names
// $review-go.
//
//go:embed skills
var Skills embed.FS

// MemoryScope is the coordinator's memory scope: what the user taught it
// (a finding dismissed as a false positive) is remembered by later
// reviews.
const MemoryScope = "codereview"

// withSkills is a sandbox agent's default capabilities and the skills
// bundle in mode.
func withSkills(mode skills.Mode) []agents.Capability {
	c, err := skills.New(context.Background(), skills.Config{Sources: []skills.Source{skills.FS{FS: Skills, Dir: "skills"}}, Mode: mode})
	if err != nil {
		panic(fmt.Sprintf("codereview: the skills bundle: %v", err)) // Embedded and tested: a build fault.
	}
	return append(capabilities.Default(), c)
}

// coordinatorInstructions checks the run's variables before anything fans
// out, so a missing --repo, a wrong path or a bad ref fails the run at
// once with a clear error (an instructions error is not retried) rather
// than in three sandboxes. A local repository is opened and the ref
// resolved; a URL is left to the reviewers, who clone it once per run.
func coordinatorInstructions(ctx context.Context, rc agents.RunContext) (string, error) {
	repo, ref, out := rc.Vars[VarRepo], rc.Vars[VarRef], rc.Vars[VarOut]
	if repo == "" {
		return "", fmt.Errorf("codereview: the run variable %q is not set (troupe run --repo PATH)", VarRepo)
	}
	if ref == "" {
		ref = "HEAD"
	}
	if out == "" {
		out = "."
	}
	if err := checkLocal(ctx, repo, ref); err != nil {
		return "", err
	}
	if _, sent := gitbundle.KeyOf(repo); sent {
		repo = "the repository the user sent" // Its key means nothing to the model.
	}
	return fmt.Sprintf("You are the code-review coordinator for the repository %s at %s (report directory %s). "+
		"Call review_security, review_tests and review_api_design in parallel, in one turn, passing on the user's request. "+
		"Then call write_report once: markdown is a report with one section per reviewer that lists every finding "+
		"with its file, line, severity and message (and says so when a review failed); findings_json is all reviewers' "+
		"findings merged into one JSON array. Finally answer with the paths, counts and commits reviewed that write_report "+
		"returned and a short summary of the verdict. When the user later asks to fix a finding, hand off to the fixer.", repo, ref, out), nil
}

// checkLocal resolves ref in repo when repo is a local path, or one the
// client sent through the blob store.
func checkLocal(ctx context.Context, repo, ref string) error {
	r, err := ParseRange(ref)
	if err != nil {
		return err
	}
	if repo, err = resolveRepo(ctx, repo); err != nil {
		return err
	}
	source, err := Source(repo)
	if err != nil {
		return err
	}
	if !filepath.IsAbs(source) {
		return nil // A URL: cloning it here, every turn, would cost too much.
	}
	g, _, err := openRepo(ctx, source)
	if err != nil {
		return err
	}
	for _, rev := range []string{r.From, r.To} {
		if rev == "" {
			continue
		}
		if _, err := commitAt(g, rev, false); err != nil {
			return err
		}
	}
	return nil
}

// resolveRepo is repo as a path or URL: a repository the client sent
// through the blob store ("blob:KEY", see package gitbundle) is the path
// of its copy on this worker's host, unpacked once per host.
func resolveRepo(ctx context.Context, repo string) (string, error) {
	path, err := gitbundle.Resolve(ctx, repo)
	if err != nil {
		return "", fmt.Errorf("codereview: the repository the client sent: %w", err)
	}
	return path, nil
}

// DefaultRequest is the input of a review that asks for nothing in
// particular: a full review.
const DefaultRequest = "Review this change."

// ReviewRequest is the input of the code-review pipeline as an MCP tool.
type ReviewRequest struct {
	// Repo is the repository: a path on the worker's host (under its
	// allowed roots) or a URL go-git can clone.
	Repo string `json:"repo" jsonschema:"description=The repository: a path on the server's host or a URL git can clone."`
	// Ref is what to review, as the run variable "ref"; empty means HEAD.
	Ref *string `json:"ref,omitempty" jsonschema_description:"What to review: HEAD (the default) is the last commit; a single revision R (HEAD~1, a commit, a branch or tag) is the change from R to HEAD; or a range A..B or A...B."`
	// Request is passed on to the reviewers.
	Request *string `json:"request,omitempty" jsonschema:"description=What to look at in particular; default: a full review."`
}

// ReportDir is where a review started through the MCP tool writes its
// report: a directory of the user's cache directory (not a shared
// temporary one) named by a digest of the request, so a retried call
// writes to the same place (and starts no second run) and different
// requests never share one. A caller does not choose where on the host
// the report is written.
func ReportDir(r ReviewRequest) string {
	h := sha256.New()
	for _, s := range []*string{&r.Repo, r.Ref, r.Request} {
		v := ""
		if s != nil {
			v = *s
		}
		fmt.Fprintf(h, "%d:%s;", len(v), v)
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = filepath.Join(os.TempDir(), fmt.Sprintf("troupe-%d", os.Getuid()))
	}
	return filepath.Join(base, "troupe", "codereview", hex.EncodeToString(h.Sum(nil))[:16])
}

// checkRequestRepo admits what an MCP client may name as the repository:
// an absolute path on the host (the worker's sandbox policy decides
// whether reviewers may copy it) or an https URL, cloned without
// credentials. Other URLs (ssh, scp-like, git, file) would clone with the
// host's identity or reach past the policy.
func checkRequestRepo(repo string) error {
	switch {
	case filepath.IsAbs(repo):
		return nil
	case strings.HasPrefix(repo, "https://"):
		if u, err := url.Parse(repo); err == nil && u.User == nil && u.Host != "" {
			return nil
		}
	}
	return fmt.Errorf("codereview: repo %q must be an absolute path on the server's host or an https URL without credentials", repo)
}

// exposure offers the coordinator as the MCP tool codereview_coordinator.
var exposure = func() *agents.Exposure {
	e, err := agents.ExposeAs("", "Reviews a git change with three sandboxed reviewers in parallel (security, tests, API design) "+
		"and writes a Markdown report and a JSON findings file; returns their paths, the counts by severity and a verdict.",
		func(r ReviewRequest) (agents.ExposedRun, error) {
			if err := checkRequestRepo(r.Repo); err != nil {
				return agents.ExposedRun{}, err
			}
			run := agents.ExposedRun{Input: DefaultRequest, Vars: map[string]string{VarRepo: r.Repo, VarOut: ReportDir(r)}}
			if r.Ref != nil && *r.Ref != "" {
				run.Vars[VarRef] = *r.Ref
			}
			if r.Request != nil && *r.Request != "" {
				run.Input = *r.Request
			}
			return run, nil
		})
	if err != nil {
		panic(err)
	}
	return e
}()

// Graph returns the code-review graph; its entry agent is coordinator.
func Graph() *agents.Graph {
	return agents.MustGraph("codereview", "coordinator",
		&agents.Agent{
			Name:                "coordinator",
			DynamicInstructions: coordinatorInstructions,
			Expose:              exposure,
			Tools: []agents.Tool{
				agents.AsTool("security_reviewer", "review_security", "Reviews the change for security problems: secrets, injection, unsafe input handling."),
				agents.AsTool("tests_reviewer", "review_tests", "Reviews whether the change is covered by tests."),
				agents.AsTool("api_design_reviewer", "review_api_design", "Reviews the change's exported API: naming, documentation, compatibility."),
				WriteReportTool,
			},
			// In a session, a follow-up that asks for a fix goes to the
			// fixer, whose workspace the session keeps.
			Handoffs: []agents.Handoff{agents.HandoffTo("fixer")},
			Output:   agents.MustOutput[Summary](),
			Memory:   &agents.MemoryConfig{Scope: MemoryScope},
		},
		&agents.Agent{
			Name: "fixer",
			Instructions: "You are the code-review fixer. You fix the findings the user asks you to fix, in the repository under " + RepoDir +
				"/ in your workspace, and show what you changed as a unified diff (keep a copy of a file before you change it, then diff -u the copy " +
				"and the file). Your workspace stays yours for the whole conversation, so later requests build on your earlier changes.",
			Sandbox:      &agents.Sandbox{ManifestFor: ReviewerWorkspace},
			Capabilities: withSkills(skills.Lazy),
			Approvals:    []agents.Approval{FixerApproval},
		},
		reviewer("security", "Look for hard-coded credentials, injection, unsafe handling of input, and secrets in logs."),
		reviewer("tests", "Check that each changed source file has its behaviour covered by a test in the change or in the repository."),
		reviewer("api_design", "Check the exported API the change adds or alters: doc comments, naming, and compatibility for existing callers."),
	)
}
