package workflows_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	_ "github.com/troupe-dev/troupe/internal/binarychecksum" // no executable hashed in workflow code
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/workflowstest"
)

// bigMessage is a message far past what one Temporal payload takes, which
// no preview holds whole: every line differs.
func bigMessage() string {
	var b strings.Builder
	for i := 0; b.Len() <= 3*troupe.MessageInline; i++ {
		fmt.Fprintf(&b, "line %d of the big message\n", i)
	}
	return b.String()
}

// bigEnv serves an agent whose model and blocking input guardrail record
// the user's message they saw, with the big message stored as a client
// stores it; it returns what they saw.
func bigEnv(t *testing.T, msg string) (env *testsuite.TestWorkflowEnvironment, saw func() (model, guard []string)) {
	t.Helper()
	var mu sync.Mutex
	var models, guards []string
	m := &workflowstest.FuncModel{Func: func(req model.Request) []agents.Item {
		user := workflowstest.LastUser(req)
		mu.Lock()
		models = append(models, user)
		mu.Unlock()
		return []agents.Item{agents.AssistantMessage(fmt.Sprintf("got %d bytes", len(user)))}
	}}
	g := agents.MustGraph("big", "a", &agents.Agent{Name: "a", Instructions: "a: reads", InputGuardrails: []agents.InputGuardrail{{
		Name: "size", Blocking: true,
		Func: func(_ context.Context, _ agents.RunContext, input string) (agents.GuardrailVerdict, error) {
			mu.Lock()
			guards = append(guards, input)
			mu.Unlock()
			return agents.Pass(), nil
		},
	}}})
	store := workflowstest.MemStore(t)
	ref := troupe.NewMessageRef("big-1", msg)
	if err := store.Put(context.Background(), ref.Key, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	env = workflowstest.NewRunnerEnv(t, workflows.Config{Graphs: []*agents.Graph{g}, Model: m, Store: store})
	return env, func() ([]string, []string) {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), models...), append([]string(nil), guards...)
	}
}

// A message stored apart (troupe.MessageRef) reaches the model and the
// input guardrails whole, in a session (SendRefUpdate) and in a run
// (RunInput.InputRef); the session's record and events hold its preview.
func TestMessageByReference(t *testing.T) {
	msg := bigMessage()
	ref := troupe.NewMessageRef("big-1", msg)
	check := func(t *testing.T, models, guards []string) {
		t.Helper()
		if len(models) != 1 || models[0] != msg {
			t.Errorf("the model saw %d messages (%v bytes), want the big message (%d bytes) once", len(models), lens(models), len(msg))
		}
		if len(guards) != 1 || guards[0] != msg {
			t.Errorf("the input guardrail saw %v bytes, want the big message (%d bytes) once", lens(guards), len(msg))
		}
	}
	t.Run("session", func(t *testing.T) {
		env, saw := bigEnv(t, msg)
		var sent *workflowstest.Update
		env.RegisterDelayedCallback(func() {
			sent = workflowstest.SendUpdate(env, troupe.SendRefUpdate, troupe.SendInput{Ref: &ref, Wait: true})
		}, time.Second)
		env.RegisterDelayedCallback(func() {
			workflowstest.SendUpdate(env, troupe.CommandUpdate, troupe.SessionCommand{Op: troupe.CommandStop})
		}, time.Minute)
		env.ExecuteWorkflow(troupe.SessionWorkflowName, troupe.SessionInput{Graph: "big", Agent: "a"})
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		var res troupe.SendResult
		sent.Decode(t, &res)
		want := fmt.Sprintf(`"got %d bytes"`, len(msg))
		if res.Record == nil || res.Record.Outcome != runtime.TurnAnswered || string(res.Record.Output) != want {
			t.Fatalf("the turn ended %+v, want answered %s", res.Record, want)
		}
		if res.Record.Message != ref.Preview || len(res.Record.Message) > 250 {
			t.Errorf("the turn's record holds %d bytes of the message, want its preview", len(res.Record.Message))
		}
		models, guards := saw()
		check(t, models, guards)
	})
	t.Run("run", func(t *testing.T) {
		env, saw := bigEnv(t, msg)
		env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "big", Input: ref.Preview, InputRef: &ref})
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		models, guards := saw()
		check(t, models, guards)
	})
}

func lens(ss []string) []int {
	var out []int
	for _, s := range ss {
		out = append(out, len(s))
	}
	return out
}
