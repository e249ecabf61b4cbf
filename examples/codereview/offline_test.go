package codereview_test

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/examples/codereview"
	"github.com/troupe-dev/troupe/internal/exampletest"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/model/scripted"
	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// TestOfflineFollowUps asks the offline scenario each documented
// follow-up of a review session in the README's words and in others a
// user would use: the rule for its intent answers, with what the message
// names (the file, the directory) in the answer.
func TestOfflineFollowUps(t *testing.T) {
	repo := exampletest.ReviewRepo(t)
	a := exampletest.NewAsker(t, codereview.Graph(), codereview.Scenario, map[string]string{codereview.VarRepo: repo})
	// After a review, the coordinator answered last; after a fix, the fixer.
	reviewed := []agents.Item{agents.UserMessage(codereview.DefaultRequest), agents.AssistantMessage(`{"report_path":"r.md","findings_path":"f.json","counts":{"info":0,"low":1,"medium":1,"high":1},"summary":"1 high"}`)}
	fixed := []agents.Item{agents.UserMessage("Now fix the finding in auth/login.go"), agents.AssistantMessage("--- .before\n+++ repo/auth/login.go\n")}
	coordinatorTools := []string{"review_security", "review_tests", "review_api_design", "write_report", "transfer_to_fixer"}
	fixerTools := []string{"exec_command", "load_skill"}
	flows := []struct {
		flow, agent string
		history     []agents.Item
		tools       []string
		rule        string
		says        map[string]string // message → what the answer must hold
	}{
		{"fix (the coordinator hands off)", "coordinator", reviewed, coordinatorTools, "codereview-coordinator-hands-off-fix", map[string]string{
			"Now fix the finding in auth/login.go":        "transfer_to_fixer",
			"now fix the finding and show the diff":       "transfer_to_fixer",
			"Please fix auth/login.go":                    "transfer_to_fixer",
			"can you repair the hard-coded password?":     "transfer_to_fixer",
			"Patch the high finding":                      "transfer_to_fixer",
			"resolve the security issue in login.go, ok?": "transfer_to_fixer",
		}},
		{"dismiss", "coordinator", reviewed, coordinatorTools, "codereview-coordinator-dismisses", map[string]string{
			"The credential in auth/login.go is a test fixture: dismiss it as a false positive.": "Dismissed the finding in auth/login.go as a false positive",
			"That's a false positive in auth/login.go":                                           "Dismissed the finding in auth/login.go as a false positive",
			"Ignore the finding in auth/login.go, it is only a fixture":                          "Dismissed the finding in auth/login.go as a false positive",
			"auth/login.go: not a real password, drop it":                                        "Dismissed the finding in auth/login.go as a false positive",
			"DON'T FIX auth/login.go, IT'S A FALSE ALARM":                                        "Dismissed the finding in auth/login.go as a false positive",
			"that one is a false positive":                                                       "name its file",
		}},
		{"fix (the fixer, asked again)", "fixer", fixed, fixerTools, "codereview-fixer-fixes", map[string]string{
			"now fix the finding and show the diff": `n='';`,
			"Fix auth/login.go too":                 `n='auth/login.go';`,
			"please repair login.go.":               `n='login.go';`,
			"Correct the finding in auth/login.go":  `n='auth/login.go';`,
		}},
		{"fix with a named skill", "fixer", fixed, fixerTools, "codereview-fixer-loads-named-skill", map[string]string{
			"Now fix the finding in auth/login.go with $review-go": `"review-go"`,
			"use $review-security and fix auth/login.go":           `"review-security"`,
		}},
		{"show", "fixer", fixed, fixerTools, "codereview-fixer-shows-file", map[string]string{
			"Show auth/login.go":              "cat repo/auth/login.go",
			"show me auth/login.go":           "cat repo/auth/login.go",
			"What's in auth/login.go now?":    "cat repo/auth/login.go",
			"cat auth/login.go":               "cat repo/auth/login.go",
			"let me see auth/login.go please": "cat repo/auth/login.go",
		}},
		{"clean", "fixer", fixed, fixerTools, "codereview-fixer-cleans", map[string]string{
			"Clean build/":               "rm -rf repo/build/ &&",
			"clean up build/":            "rm -rf repo/build/ &&",
			"remove the build directory": "rm -rf repo/build &&",
			"rm -rf build":               "rm -rf repo/build &&",
			"Please delete build/cache.": "rm -rf repo/build/cache &&",
			"wipe out the build folder":  "rm -rf repo/build &&",
		}},
	}
	for _, f := range flows {
		for msg, want := range f.says {
			t.Run(f.flow+"/"+msg, func(t *testing.T) {
				input := append(append([]agents.Item(nil), f.history...), agents.UserMessage(msg))
				rule, resp, err := a.Ask(f.agent, input, f.tools...)
				if err != nil {
					t.Fatalf("%q to the %s: %v", msg, f.agent, err)
				}
				if rule != f.rule {
					t.Errorf("%q to the %s: rule %s answered, want %s", msg, f.agent, rule, f.rule)
				}
				if got := answerText(resp); !strings.Contains(got, want) {
					t.Errorf("%q to the %s: the answer %s lacks %q", msg, f.agent, got, want)
				}
			})
		}
	}

	// What no flow means finds no rule, and says so.
	for _, msg := range []string{"what's the weather like in Paris?", "thanks!"} {
		_, _, err := a.Ask("fixer", append(append([]agents.Item(nil), fixed...), agents.UserMessage(msg)), fixerTools...)
		if _, ok := model.ScenarioNoMatch(err); !ok {
			t.Errorf("%q to the fixer: %v, want the scenario's no-match", msg, err)
		}
	}
}

// answerText is what a model answer says: its messages' text and its
// calls' names and arguments.
func answerText(resp *model.Response) string {
	var b strings.Builder
	for _, it := range resp.Output {
		b.WriteString(it.Content + it.Name + it.Arguments + "\n")
	}
	return b.String()
}

// TestOfflineFix runs the fixer offline on the review repository, asked
// in the words users use, the issue's "now fix the finding and show the
// diff" (no file named: the fixer finds the changed file with the
// hard-coded string) among them: each run ends with the diff.
func TestOfflineFix(t *testing.T) {
	repo := exampletest.ReviewRepo(t)
	for _, msg := range []string{
		"Now fix the finding in auth/login.go",
		"now fix the finding and show the diff",
		"please repair login.go",
		"Patch it and show me what changed",
	} {
		t.Run(msg, func(t *testing.T) {
			e, _, _ := env(t, repo)
			e.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "codereview", Agent: "fixer", Input: msg,
				Vars: map[string]string{codereview.VarRepo: repo, codereview.VarOut: filepath.Join(t.TempDir(), "out")}})
			if err := e.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			var res troupe.RunResult
			if err := e.GetWorkflowResult(&res); err != nil {
				t.Fatal(err)
			}
			diff, err := agents.Decode[string](res.Output)
			if err != nil {
				t.Fatal(err)
			}
			if want := "+\tpassword := os.Getenv(\"APP_SECRET\")"; !strings.Contains(diff, want) {
				t.Errorf("the fixer answered %s; want the diff with %q", diff, want)
			}
		})
	}
}

// TestOfflineNoMatch runs the fixer offline on a message the scenario has
// no rule for: the run fails with troupe.ScenarioNoMatch, which says what
// to do, not with a model error, and after one request (not retried).
func TestOfflineNoMatch(t *testing.T) {
	repo := exampletest.ReviewRepo(t)
	var log bytes.Buffer
	e, _, _ := exampletest.Env(t, codereview.Graph(), codereview.Scenario, sandbox.Policy{AllowedRoots: []string{repo}}, scripted.WithLog(&log))
	e.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "codereview", Agent: "fixer", Input: "what's the weather like in Paris?",
		Vars: map[string]string{codereview.VarRepo: repo}})
	err := e.GetWorkflowError()
	if typ := troupe.ErrorType(err); typ != troupe.ErrScenarioNoMatch {
		t.Fatalf("the run ended with %v (type %q), want %s", err, typ, troupe.ErrScenarioNoMatch)
	}
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || !ae.NonRetryable() {
		t.Errorf("the failure %v is retryable", err)
	}
	if want := "the offline scenario has no answer for this message; set OPENAI_API_KEY or add a rule to "; !strings.HasPrefix(ae.Message(), want) {
		t.Errorf("the failure says %q, want it to start %q", ae.Message(), want)
	}
	if n := strings.Count(log.String(), "no rule matches"); n != 1 {
		t.Errorf("the scenario was asked %d times, want once:\n%s", n, log.String())
	}
}
