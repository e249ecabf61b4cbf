package workflows_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/workflowstest"
)

// answers is a model that fails with its errors in turn, then answers.
type answers struct {
	mu    sync.Mutex
	errs  []error
	calls int
}

func (m *answers) Respond(context.Context, model.Request) (*model.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	if len(m.errs) > 0 {
		err := m.errs[0]
		if len(m.errs) > 1 || !errors.Is(err, errForever) {
			m.errs = m.errs[1:]
		}
		return nil, err
	}
	return &model.Response{Output: []agents.Item{agents.AssistantMessage("done")}}, nil
}

// errForever, last in a script, repeats the error before it.
var errForever = errors.New("forever")

type forever struct{ error }

func (f forever) Is(target error) bool { return target == errForever }

func (f forever) Unwrap() error { return f.error }

func tooMany(wait time.Duration) error {
	return &model.APIError{StatusCode: 429, Type: "requests", Code: "rate_limit_exceeded", Message: "Rate limit reached", RetryAfter: wait}
}

func serverError() error { return &model.APIError{StatusCode: 503, Message: "overloaded"} }

func repeat(n int, err error) []error {
	out := make([]error, n)
	for i := range out {
		out[i] = err
	}
	return out
}

// A model that answers 429 is waited out as long as it asks (Retry-After,
// else a backoff), each wait an event, without spending the attempts a
// failing model gets: 15 rate limits and then 9 server errors (one short
// of the 10 attempts) still end in an answer. A model that stays
// rate-limited past the run's bound fails the agent with
// troupe.ModelRateLimited, saying for how long; a spent quota is not
// waited for.
func TestModelRateLimits(t *testing.T) {
	for _, tc := range []struct {
		name       string
		errs       []error
		wait       time.Duration // Config.ModelRateLimitWait
		ok         bool
		errType    string
		errHas     string
		timers     []time.Duration // the first ones, in order
		rateEvents int
	}{
		{name: "Retry-After honoured, attempts intact", errs: append(repeat(15, tooMany(3*time.Second)), repeat(9, serverError())...),
			ok: true, timers: []time.Duration{3 * time.Second, 3 * time.Second}, rateEvents: 15},
		{name: "no Retry-After: a backoff", errs: repeat(3, tooMany(0)), ok: true,
			timers: []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}, rateEvents: 3},
		{name: "rate-limited for good", errs: []error{tooMany(time.Minute), forever{tooMany(time.Minute)}}, wait: 10 * time.Minute,
			errType: troupe.ErrModelRateLimited, errHas: "model rate-limited for 10m0s (11 times), past the run's bound of 10m0s", rateEvents: 10},
		{name: "quota spent", errs: []error{&model.APIError{StatusCode: 429, Type: "insufficient_quota", Code: model.CodeInsufficientQuota, Message: "You exceeded your current quota"}},
			errType: troupe.ErrModel, errHas: "You exceeded your current quota"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := workflowstest.NewEnv()
			var mu sync.Mutex
			var timers []time.Duration
			env.SetOnTimerScheduledListener(func(_ string, d time.Duration) {
				mu.Lock()
				timers = append(timers, d)
				mu.Unlock()
			})
			m := &answers{errs: tc.errs}
			g := agents.MustGraph("one", "a", &agents.Agent{Name: "a", Instructions: "a"})
			if _, err := workflowstest.Serve(env, workflows.Config{Graphs: []*agents.Graph{g}, Model: m, ModelRateLimitWait: tc.wait}); err != nil {
				t.Fatal(err)
			}
			env.ExecuteWorkflow(troupe.AgentWorkflowName, troupe.AgentInput{Graph: "one", Agent: "a", RunID: "run", Pending: []agents.Item{agents.UserMessage("hi")}})
			err := env.GetWorkflowError()
			if tc.ok != (err == nil) {
				t.Fatalf("agent error = %v, want ok %v", err, tc.ok)
			}
			if !tc.ok {
				var ae *temporal.ApplicationError
				if !errors.As(err, &ae) || ae.Type() != tc.errType || !strings.Contains(ae.Message(), tc.errHas) {
					t.Fatalf("agent error %v (type %q); want %s saying %q", err, troupe.ErrorType(err), tc.errType, tc.errHas)
				}
			}
			var rate []string
			for _, e := range workflowstest.Recorded(t, env, 0) {
				if e.Kind == troupe.EventModelRetry && strings.HasPrefix(e.Detail, "model rate-limited: ") {
					rate = append(rate, e.Detail)
				}
			}
			if len(rate) != tc.rateEvents {
				t.Fatalf("%d rate-limit events, want %d: %q", len(rate), tc.rateEvents, rate)
			}
			if len(rate) > 0 && !strings.Contains(rate[0], "do not count against the 10 attempts") {
				t.Errorf("rate-limit event %q does not say it spends no attempt", rate[0])
			}
			mu.Lock()
			defer mu.Unlock()
			if len(timers) < len(tc.timers) {
				t.Fatalf("timers %v, want %v first", timers, tc.timers)
			}
			for i, d := range tc.timers {
				if timers[i] != d {
					t.Errorf("timer %d = %s, want %s (all: %v)", i, timers[i], d, timers)
				}
			}
		})
	}
}
