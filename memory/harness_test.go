package memory_test

// The harness of the tests that run memory through a worker's stories (a
// run, a session, a sandbox agent: capability_test.go, wiring_test.go,
// skills_test.go, replay_test.go): a stand-in model and test environments.
// They mirror package workflows' own test helpers, which a test of
// another package cannot import.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/capabilities/skills"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/local"
	"github.com/troupe-dev/troupe/workflows"
)

// turnFunc answers a model request in tests: the model is the one part
// that is stood in for.
type turnFunc func(req model.Request) []agents.Item

type funcModel struct {
	mu    sync.Mutex
	fn    turnFunc
	calls map[string]int
}

func (m *funcModel) Respond(_ context.Context, req model.Request) (*model.Response, error) {
	m.mu.Lock()
	m.calls[firstWord(req.Instructions)]++
	m.mu.Unlock()
	return &model.Response{Output: m.fn(req), Usage: model.Usage{Requests: 1, InputTokens: 10, OutputTokens: 5, TotalTokens: 15}}, nil
}

func firstWord(s string) string { w, _, _ := strings.Cut(s, " "); return w }

func lastItem(req model.Request) agents.Item { return req.Input[len(req.Input)-1] }

func call(id, name, args string) agents.Item { return agents.FunctionCall(id, name, args) }

// lastUser is the last thing the user said in req.
func lastUser(req model.Request) string {
	var user string
	for _, it := range req.Input {
		if it.Type == agents.ItemMessage && it.Role == "user" {
			user = it.Content
		}
	}
	return user
}

// quietEnv is a test workflow environment that logs errors only.
//
// The test environment runs activities in the workflow's goroutine, so
// its deadlock detector (a second by default) would time real activities
// (a sandbox command, say) on a loaded machine; here it is a minute.
// Workflow code that blocks is caught by workflowcheck (make lint).
func quietEnv() *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))))
	env := s.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute})
	return env
}

// localEnv is a test environment serving g with model m, a mem:// store
// and the local sandbox backend under the root it returns, the sandboxes
// idle 5 minutes before they suspend; tweak, when set, changes the
// runner's config.
func localEnv(t *testing.T, g *agents.Graph, m model.Model, tweak func(*workflows.Config)) (*testsuite.TestWorkflowEnvironment, string) {
	t.Helper()
	env := quietEnv()
	root := t.TempDir()
	lc, err := local.New(local.Config{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	store, _ := blob.Open(context.Background(), "mem://")
	cfg := workflows.Config{Graphs: []*agents.Graph{g}, Model: m, Store: store,
		Sandboxes: map[string]sandbox.Client{"local": lc}, SandboxIdleTimeout: 5 * time.Minute}
	if tweak != nil {
		tweak(&cfg)
	}
	r, err := workflows.NewRunner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.Register(env)
	return env, root
}

// updateCall is an update's outcome, as a test's callbacks saw it.
type updateCall struct {
	mu       sync.Mutex
	accepted bool
	done     bool
	err      error
	value    any
}

// decode decodes the update's result into v.
func (u *updateCall) decode(t *testing.T, v any) {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if ev, ok := u.value.(converter.EncodedValue); ok {
		if err := ev.Get(v); err != nil {
			t.Fatal(err)
		}
		return
	}
	data, err := json.Marshal(u.value)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatal(err)
	}
}

// sendUpdate sends env's session an update and returns what will hold its
// outcome.
func sendUpdate(env *testsuite.TestWorkflowEnvironment, name string, arg any) *updateCall {
	u := &updateCall{}
	env.UpdateWorkflow(name, "", &testsuite.TestUpdateCallback{
		OnAccept: func() { u.mu.Lock(); u.accepted = true; u.mu.Unlock() },
		OnReject: func(err error) { u.mu.Lock(); u.err, u.done = err, true; u.mu.Unlock() },
		OnComplete: func(v any, err error) {
			u.mu.Lock()
			u.value, u.err, u.done = v, err, true
			u.mu.Unlock()
		},
	}, arg)
	return u
}

// asked numbers the updates askSession sends, whose ids must differ.
var asked int

// askSession sends session id a message from a test callback and returns
// what will hold the answer.
func askSession(t *testing.T, env *testsuite.TestWorkflowEnvironment, id, text string) *updateCall {
	u := &updateCall{}
	asked++
	err := env.UpdateWorkflowByID(id, troupe.SendUpdate, fmt.Sprintf("ask-%d", asked), &testsuite.TestUpdateCallback{
		OnAccept: func() { u.mu.Lock(); u.accepted = true; u.mu.Unlock() },
		OnReject: func(err error) { u.mu.Lock(); u.err, u.done = err, true; u.mu.Unlock() },
		OnComplete: func(v any, err error) {
			u.mu.Lock()
			u.value, u.err, u.done = v, err, true
			u.mu.Unlock()
		},
	}, troupe.SendInput{Message: text, Wait: true})
	if err != nil {
		t.Errorf("send to %s: %v", id, err)
	}
	return u
}

// output is a waited-for turn's answer.
func output(t *testing.T, u *updateCall) string {
	t.Helper()
	var r troupe.SendResult
	u.decode(t, &r)
	if r.Record == nil {
		t.Fatalf("no answer: %+v, err %v", r, u.err)
	}
	return string(r.Record.Output)
}

// kinds counts the events of each kind.
func kinds(evs []troupe.Event) map[string]int {
	n := map[string]int{}
	for _, e := range evs {
		n[e.Kind]++
	}
	return n
}

func shell(id, cmd string) agents.Item {
	args, _ := json.Marshal(map[string]any{"cmd": cmd, "workdir": nil, "yield_time_ms": nil, "max_output_tokens": nil})
	return call(id, "exec_command", string(args))
}

// scriptedCoder answers each user message "run: CMD" by running CMD in
// its sandbox, then with the command's output; "history?" with what the
// user said so far; any other message with "ok".
func scriptedCoder(req model.Request) []agents.Item {
	last := lastItem(req)
	if last.Type == agents.ItemFunctionCallOutput {
		_, out, _ := strings.Cut(last.Output, "Output:\n")
		return []agents.Item{agents.AssistantMessage("out: " + strings.TrimSpace(out))}
	}
	if cmd, ok := strings.CutPrefix(last.Content, "run: "); ok {
		return []agents.Item{shell(fmt.Sprintf("c%d", len(req.Input)), cmd)}
	}
	if last.Content == "history?" {
		var said []string
		for _, it := range req.Input {
			if it.Type == agents.ItemMessage && it.Role == "user" {
				said = append(said, it.Content)
			}
		}
		return []agents.Item{agents.AssistantMessage(strings.Join(said, " | "))}
	}
	return []agents.Item{agents.AssistantMessage("ok")}
}

var reviewSkills = skills.Inline{{
	Name: "review-go", Description: "Reviews Go code for common mistakes.",
	Instructions: "Run scripts/vet.sh from the skill's folder and report what it prints.\n",
	Files:        []skills.File{{Path: "scripts/vet.sh", Content: "echo vet: all clear\n", Executable: true}},
}}

// slowAgents stands in for the agents of a session's turns: each answers
// "re: MESSAGE" after two seconds of workflow time, and inputs records the
// messages in the order the agents got them.
func slowAgents(env *testsuite.TestWorkflowEnvironment, inputs *[]string) {
	env.OnWorkflow(troupe.AgentWorkflowName, mock.Anything, mock.Anything).Return(
		func(ctx workflow.Context, in workflows.AgentWorkflowInput) (*troupe.AgentResult, error) {
			msg := in.Pending[len(in.Pending)-1].Content
			*inputs = append(*inputs, msg)
			if err := workflow.Sleep(ctx, 2*time.Second); err != nil {
				return nil, err
			}
			out, _ := json.Marshal("re: " + msg)
			return &troupe.AgentResult{Agent: in.Agent, Output: out, Transcript: in.Transcript, Turns: 1}, nil
		})
}
