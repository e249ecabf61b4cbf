package e2e

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe"
)

// TestBudgetCLI: budgets where users look, as a user sees them, on the
// server of a TROUPE_HOME that `troupe dev` serves with the offline deal
// desk:
//
//  1. `troupe run --budget model_calls=3` of the runaway fan-out exits 1
//     with the usage and cost per agent, the budget, how to give a run
//     more, and a one-line error; no SDK noise.
//  2. A session started with --budget model_calls=1 has its first turn
//     stopped by the budget and refuses the next message, each saying
//     which limit is reached and how to raise it.
//  3. `troupe chat` on it shows the spent budget in its header and the
//     stopped turn; a message is refused, saying /budget raises it.
//     `troupe sessions budget` raises it, the header follows, and the next
//     message is answered. /budget shows the spending per agent; /budget
//     off lifts the budget.
func TestBudgetCLI(t *testing.T) {
	parallel(t)
	home := t.TempDir()
	port := strconv.Itoa(freePort(t))
	dev := startTroupe(t, "dev", []string{"TROUPE_HOME=" + home}, "troupe: dev server up", "dev", "--port", port, "--ui-port", "-1")

	// 1. A run its budget stops.
	run := startCLI(t, home, "run", "--graph", "dealdesk", "--budget", "model_calls=3", "Review every deal in the pipeline")
	if code := run.wait(t); code != 1 {
		t.Errorf("troupe run of the runaway: exit %d, want 1", code)
	}
	stderr := run.errText()
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^  \[\w+_reviewer\] ✗ .*refused.*\(3 of 3 model calls\)$`),
		regexp.MustCompile(`(?m)^usage: 3 model calls, \d+ tokens \(\d+ in, \d+ out\), \$0\.\d+$`),
		regexp.MustCompile(`(?m)^  agent +calls +tokens in +tokens out +cost$`),
		regexp.MustCompile(`(?m)^  triage +1 +\d+ +\d+ +\$0\.\d+$`),
		regexp.MustCompile(`(?m)^  coordinator +1 +\d+ +\d+ +\$0\.\d+$`),
		regexp.MustCompile(`(?m)^  total +3 +\d+ +\d+ +\$0\.\d+$`),
		regexp.MustCompile(`(?m)^budget model_calls=3: 3 of 3 model calls \(none left\)$`),
		regexp.MustCompile(`(?m)^a run with more: troupe run --budget model_calls=N \.\.\. \(N the new limit; --budget off runs with none\)$`),
		regexp.MustCompile(`(?m)^troupe: the run stopped: troupe\.BudgetExceeded: .*\(3 of 3 model calls\)\n\z`),
	} {
		if !want.MatchString(stderr) {
			t.Errorf("troupe run's stderr lacks %s:\n%s", want, stderr)
		}
	}
	// What the run prints once it has ended holds no SDK noise.
	end := stderr[max(strings.Index(stderr, "\nusage: "), 0):]
	for _, noise := range []string{"level=", "WorkflowExecutionError", "workflow execution error", "goroutine", "runID", "retryable"} {
		if strings.Contains(end, noise) {
			t.Errorf("the end of troupe run's stderr holds %q:\n%s", noise, end)
		}
	}

	// 2. A session its budget stops.
	id := strings.TrimSpace(runCLI(t, home, "sessions", "new", "dealdesk", "--budget", "model_calls=1"))
	hint := "troupe sessions budget " + id + " model_calls=N raises it (N the new limit), troupe sessions budget " + id + " off lifts it [" + troupe.ErrBudgetExceeded + "]\n"
	send := startCLI(t, home, "sessions", "send", id, "Review the Acme Corp deal")
	if code := send.wait(t); code != 1 || !strings.HasSuffix(send.errText(), "troupe: turn t1 stopped: session "+id+"'s budget is spent (1 of 1 model calls): "+hint) {
		t.Errorf("the turn the budget stops: exit %d, stderr:\n%s", code, send.errText())
	}
	send = startCLI(t, home, "sessions", "send", id, "Review the Acme Corp deal")
	if code := send.wait(t); code != 1 || !strings.HasSuffix(send.errText(), "troupe: message refused: session "+id+"'s budget is spent (1 of 1 model calls): "+hint) {
		t.Errorf("a message to a spent session: exit %d, stderr:\n%s", code, send.errText())
	}

	// 3. The chat.
	chat := startChat(t, dev, []string{"TROUPE_HOME=" + home}, "--session", id)
	chat.waitFor("the spent session", func(s string) bool {
		return strings.Contains(header(s), ", 1 of 1 calls · budget spent · ") &&
			strings.Contains(s, "✗ turn t1 stopped: the session's budget is spent (1 of 1 model calls): /budget model_calls=N raises it")
	})
	chat.enter("Review the Acme Corp deal")
	chat.waitFor("the refusal", func(s string) bool {
		return strings.Contains(s, "✗ message refused: the session's budget is spent (1 of 1 model calls): /budget model_calls=N raises it (N the new limit), /budget off lifts it")
	})
	raised := runCLI(t, home, "sessions", "budget", id, "model_calls=10,cost=0.5")
	if want := regexp.MustCompile(`^session ` + id + `: budget cost=0\.5 model_calls=10: \$0\.\d+ of \$0\.50 \(\$0\.\d+ left\), 1 of 10 model calls \(9 left\)\n`); !want.MatchString(raised) {
		t.Errorf("troupe sessions budget printed\n%s", raised)
	}
	chat.waitFor("the raised budget", func(s string) bool {
		return regexp.MustCompile(` · \$0\.\d+ of \$0\.50, 1 of 10 calls\b`).MatchString(header(s)) && strings.Contains(s, "· budget changed: model_calls=10,cost=0.5")
	})
	chat.enter("Review the Acme Corp deal")
	chat.waitFor("the answer", func(s string) bool {
		return strings.Contains(s, `"decision": "approve_with_conditions"`) && strings.Contains(header(s), " · 2 turns · ") &&
			regexp.MustCompile(` · \$0\.\d+ of \$0\.50, 8 of 10 calls\b`).MatchString(header(s))
	})
	chat.enter("/budget")
	chat.waitFor("the budget per agent", func(s string) bool {
		return regexp.MustCompile(`(?m)^· budget cost=0\.5 model_calls=10: \$0\.\d+ of \$0\.50 \(\$0\.\d+ left\), 8 of 10 model calls \(2 left\)\n` +
			`  usage: 8 model calls, \d+ tokens \(\d+ in, \d+ out\), \$0\.\d+\n` +
			`    agent +calls +tokens in +tokens out +cost\n` +
			`(    \w+ +2 +\d+ +\d+ +\$0\.\d+\n){4}` + // triage, coordinator, the reviewers in their order
			`    total +8 `).MatchString(s)
	})
	chat.enter("/budget off")
	chat.waitFor("no budget", func(s string) bool {
		return strings.Contains(s, "· budget off\n") && regexp.MustCompile(` · \d+ tokens · \$0\.\d+( · |$)`).MatchString(header(s))
	})
	chat.enter("/done")
	chat.waitFor("the chat's exit", func(s string) bool { return strings.Contains(s, "chat exited: 0") })
	runCLI(t, home, "sessions", "stop", id)
}
