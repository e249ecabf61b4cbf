package scripted

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// A server with limits turns away, as OpenAI does, a request past its
// calls at once and one past its starts per window, and counts every
// request as it arrives, those turned away included.
func TestLimits(t *testing.T) {
	sc, err := ParseScenario([]byte(`rules: [{name: slow, match: {last_input: slow}, respond: {text: "ok", delay_ms: 300}}, {name: fast, respond: {text: "ok"}}]`))
	if err != nil {
		t.Fatal(err)
	}
	send := func(s *Server, url, text string) *http.Response {
		body := `{"model":"m","input":"` + text + `"}`
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/responses", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer k")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	t.Run("concurrent", func(t *testing.T) {
		s := New(sc, WithLimits(Limits{MaxConcurrent: 2}))
		hs := httptest.NewServer(s)
		defer hs.Close()
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() { send(s, hs.URL, "slow").Body.Close() })
		}
		for s.InFlight("slow") < 2 {
			time.Sleep(5 * time.Millisecond)
		}
		res := send(s, hs.URL, "fast")
		defer res.Body.Close()
		var body struct {
			Error struct{ Type, Code, Message string }
		}
		_ = json.NewDecoder(res.Body).Decode(&body)
		if res.StatusCode != 429 || body.Error.Code != "rate_limit_exceeded" || body.Error.Type != "requests" ||
			res.Header.Get("retry-after-ms") != "250" || res.Header.Get("Retry-After") != "1" {
			t.Errorf("third call: %d %+v %v; want 429 rate_limit_exceeded, retry-after-ms 250", res.StatusCode, body.Error, res.Header)
		}
		wg.Wait()
		// Room again once the two are answered.
		if res := send(s, hs.URL, "fast"); res.StatusCode != 200 {
			t.Errorf("after the two: %d, want 200", res.StatusCode)
		}
		st := s.Stats()
		if st.Requests != 4 || st.RateLimited != 1 || st.PeakConcurrent != 3 {
			t.Errorf("stats %+v; want 4 requests, 1 rate-limited, 3 at once seen", st)
		}
		if th := s.Throttles(); len(th) != 1 || th[0].Limit != "concurrent" {
			t.Errorf("throttles %+v", th)
		}
	})
	t.Run("requests per window", func(t *testing.T) {
		s := New(sc, WithLimits(Limits{Requests: 3, Per: time.Minute}))
		hs := httptest.NewServer(s)
		defer hs.Close()
		var codes []int
		for range 5 {
			res := send(s, hs.URL, "fast")
			res.Body.Close()
			codes = append(codes, res.StatusCode)
			if res.StatusCode == 429 && (res.Header.Get("x-ratelimit-limit-requests") != "3" || res.Header.Get("x-ratelimit-remaining-requests") != "0") {
				t.Errorf("429 headers %v", res.Header)
			}
		}
		if want := []int{200, 200, 200, 429, 429}; !equal(codes, want) {
			t.Errorf("codes %v, want %v", codes, want)
		}
		st := s.Stats()
		if st.MaxInWindow != 5 || st.RateLimited != 2 || st.PeakConcurrent != 1 {
			t.Errorf("stats %+v; want 5 in the window, 2 rate-limited, 1 at once", st)
		}
		if th := s.Throttles(); len(th) != 2 || th[0].RetryAfter <= 59*time.Second || th[0].RetryAfter > time.Minute {
			t.Errorf("throttles %+v; want waits of about a minute", th)
		}
	})
	t.Run("counts without limits", func(t *testing.T) {
		s := New(sc)
		hs := httptest.NewServer(s)
		defer hs.Close()
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() { send(s, hs.URL, "slow").Body.Close() })
		}
		wg.Wait()
		if st := s.Stats(); st.Requests != 3 || st.RateLimited != 0 || st.PeakConcurrent != 3 || st.MaxInWindow != 3 {
			t.Errorf("stats %+v; want 3 at once, 3 in the window, none turned away", st)
		}
	})
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
