package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/workflowstest"
)

// flakyModel fails its first fails calls as an unreachable server does,
// then answers.
type flakyModel struct {
	fails int32
	calls atomic.Int32
}

func (m *flakyModel) Respond(context.Context, model.Request) (*model.Response, error) {
	if n := m.calls.Add(1); n <= m.fails {
		return nil, fmt.Errorf("model: Post %q: %w", "http://127.0.0.1:9/v1/responses", errors.New("dial tcp 127.0.0.1:9: connect: connection refused"))
	}
	return &model.Response{Output: []agents.Item{agents.AssistantMessage("back")}}, nil
}

// A model that cannot be reached is never silent: each retry is an event
// that says why and when the next attempt comes; a model that comes back
// within the attempts lets the agent go on, and one that does not fails it
// with troupe.ModelUnavailable after the last attempt.
func TestModelRetriesAreEvents(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fails   int32
		retries int
		ok      bool
	}{
		{"back after two failures", 2, 2, true},
		{"dead", 1000, 9, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := workflowstest.NewEnv()
			m := &flakyModel{fails: tc.fails}
			err := runOneAgent(t, env, m)
			if tc.ok != (err == nil) {
				t.Fatalf("agent error = %v, want ok %v", err, tc.ok)
			}
			if !tc.ok && (troupe.ErrorType(err) != troupe.ErrModelRetryable || !strings.Contains(err.Error(), "connection refused after 10 attempts")) {
				t.Errorf("error %v of type %q, want %s saying why, after 10 attempts", err, troupe.ErrorType(err), troupe.ErrModelRetryable)
			}
			if got, want := int(m.calls.Load()), tc.retries+1; got != want {
				t.Errorf("%d model calls, want %d", got, want)
			}
			var retries []string
			for _, e := range workflowstest.Recorded(t, env, 0) {
				if e.Kind == troupe.EventModelRetry {
					retries = append(retries, e.Detail)
				}
			}
			if len(retries) != tc.retries {
				t.Fatalf("%d retry events, want %d: %q", len(retries), tc.retries, retries)
			}
			want := []string{"model unreachable: dial tcp 127.0.0.1:9: connect: connection refused; retry 2 of 10 in 1s",
				"model unreachable: dial tcp 127.0.0.1:9: connect: connection refused; retry 3 of 10 in 2s"}
			for i, w := range want {
				if retries[i] != w {
					t.Errorf("retry event %d = %q, want %q", i, retries[i], w)
				}
			}
			if !tc.ok && !strings.HasSuffix(retries[len(retries)-1], "retry 10 of 10 in 1m0s") {
				t.Errorf("last retry event = %q", retries[len(retries)-1])
			}
		})
	}
}

// The real model client against a port where nothing listens: the agent
// fails after the last attempt with troupe.ModelUnavailable and the one
// line `troupe run` prints, naming the URL and the root cause; each retry
// event says the model is unreachable and why.
func TestDeadModelIsNamed(t *testing.T) {
	env := workflowstest.NewEnv()
	m, err := model.New(model.Config{APIKey: "test", BaseURL: "http://127.0.0.1:9/v1"})
	if err != nil {
		t.Fatal(err)
	}
	err = runOneAgent(t, env, m)
	const unreachable = "model unreachable at http://127.0.0.1:9/v1/responses (connection refused)"
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != troupe.ErrModelRetryable || ae.Message() != unreachable+" after 10 attempts" {
		t.Fatalf("agent error %v; want %s saying %q", err, troupe.ErrModelRetryable, unreachable+" after 10 attempts")
	}
	events := workflowstest.Recorded(t, env, 0)
	retries := 0
	for _, e := range events {
		if e.Kind == troupe.EventModelRetry {
			retries++
			if !strings.HasPrefix(e.Detail, "model unreachable: connection refused; retry ") {
				t.Errorf("retry event %q; want it to say the model is unreachable and why", e.Detail)
			}
		}
	}
	if retries != 9 {
		t.Errorf("%d retry events, want 9", retries)
	}
	// The failed event tells the cause, not the chain of errors that
	// carried it.
	if last := events[len(events)-1]; last.Kind != troupe.EventFailed || last.Detail != troupe.ErrModelRetryable+": "+unreachable+" after 10 attempts" {
		t.Errorf("last event %+v; want the failure, typed, with its cause", last)
	}
}

// runOneAgent runs the one agent of a one-agent graph on env with model m,
// and returns how it ended.
func runOneAgent(t *testing.T, env *testsuite.TestWorkflowEnvironment, m model.Model) error {
	t.Helper()
	g := agents.MustGraph("one", "a", &agents.Agent{Name: "a", Instructions: "a"})
	if _, err := workflowstest.Serve(env, workflows.Config{Graphs: []*agents.Graph{g}, Model: m}); err != nil {
		t.Fatal(err)
	}
	env.ExecuteWorkflow(troupe.AgentWorkflowName, troupe.AgentInput{Graph: "one", Agent: "a", RunID: "run", Pending: []agents.Item{agents.UserMessage("hi")}})
	return env.GetWorkflowError()
}
