package model_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/model/scripted"
)

// RetryDelay reads the wait from the headers providers send, in order of
// precision.
func TestRetryDelay(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		header map[string]string
		want   time.Duration
	}{
		{"none", nil, 0},
		{"retry-after-ms first", map[string]string{"retry-after-ms": "1500", "Retry-After": "9"}, 1500 * time.Millisecond},
		{"Retry-After seconds", map[string]string{"Retry-After": "2"}, 2 * time.Second},
		{"Retry-After fraction", map[string]string{"Retry-After": "0.25"}, 250 * time.Millisecond},
		{"Retry-After date", map[string]string{"Retry-After": now.Add(30 * time.Second).Format(http.TimeFormat)}, 30 * time.Second},
		{"Retry-After date past", map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, 0},
		{"Retry-After garbage", map[string]string{"Retry-After": "soon"}, 0},
		{"negative ms ignored", map[string]string{"retry-after-ms": "-5", "Retry-After": "1"}, time.Second},
		{"reset of the spent kind", map[string]string{"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "120ms",
			"x-ratelimit-remaining-tokens": "5000", "x-ratelimit-reset-tokens": "6m0s"}, 120 * time.Millisecond},
		{"tokens spent", map[string]string{"x-ratelimit-remaining-requests": "10", "x-ratelimit-reset-requests": "1s",
			"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "1m30.5s"}, 90500 * time.Millisecond},
		{"resets without remaining: the latest", map[string]string{"x-ratelimit-reset-requests": "1s", "x-ratelimit-reset-tokens": "3s"}, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tc.header {
				h.Set(k, v)
			}
			if got := model.RetryDelay(h, now); got != tc.want {
				t.Errorf("RetryDelay = %s, want %s", got, tc.want)
			}
		})
	}
}

// Past the scripted server's rate limit, the client gets a rate-limited
// APIError carrying the wait the server asked for, on both APIs.
func TestScriptedRateLimitReachesTheClient(t *testing.T) {
	for _, api := range []model.API{model.APIResponses, model.APIChat} {
		t.Run(string(api), func(t *testing.T) {
			sc, err := scripted.ParseScenario([]byte(`rules: [{name: hi, respond: {text: "hello"}}]`))
			if err != nil {
				t.Fatal(err)
			}
			srv := scripted.New(sc, scripted.WithLimits(scripted.Limits{Requests: 1, Per: 10 * time.Second}))
			url, err := srv.Start("")
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			m, err := model.New(model.Config{APIKey: "k", BaseURL: url, API: api})
			if err != nil {
				t.Fatal(err)
			}
			req := model.Request{Input: []agents.Item{agents.UserMessage("hi")}}
			if _, err := m.Respond(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			_, err = m.Respond(context.Background(), req)
			wait, ok := model.RateLimited(err)
			if !ok || !model.IsRetryable(err) {
				t.Fatalf("second call: %v; want a retryable rate limit", err)
			}
			if wait <= 9*time.Second || wait > 10*time.Second {
				t.Errorf("wait %s; want the rest of the 10s window", wait)
			}
			st := srv.Stats()
			if st.Requests != 2 || st.RateLimited != 1 || st.MaxInWindow != 2 || st.PeakConcurrent != 1 {
				t.Errorf("stats %+v; want 2 requests, 1 rate-limited, 2 in the window, 1 at once", st)
			}
		})
	}
}
