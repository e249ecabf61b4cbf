package scripted

// This file holds the rate limits a Server can keep, as a provider does
// (429 with Retry-After past them), and the counts of what it saw, so
// tests can tell whether their clients kept within the limits.

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
)

// Limits are the rate limits of a Server (WithLimits) over its model
// requests (Responses and Chat Completions), whatever model they name. A
// zero field limits nothing.
//
// Past a limit the server answers as OpenAI does: 429 with
// {"error":{"type":"requests","code":"rate_limit_exceeded",...}}, a
// message saying when to try again, and the headers retry-after-ms,
// Retry-After (whole seconds, rounded up), x-ratelimit-limit-requests,
// x-ratelimit-remaining-requests and x-ratelimit-reset-requests. A request
// turned away is not matched against the scenario and is not recorded
// in Calls.
type Limits struct {
	// MaxConcurrent bounds the requests in flight at once; one more is
	// answered 429 with a retry-after-ms of ConcurrencyRetryAfter.
	MaxConcurrent int
	// Requests bounds the requests that start in any window of Per; one
	// more is answered 429, asked to wait until the oldest of them leaves
	// the window.
	Requests int
	// Per is the window of Requests, and of Stats.MaxInWindow; the
	// default is one second.
	Per time.Duration
}

// ConcurrencyRetryAfter is the wait a Server asks of a request it turns
// away for Limits.MaxConcurrent: a provider cannot know when a call in
// flight ends.
const ConcurrencyRetryAfter = 250 * time.Millisecond

func (l Limits) window() time.Duration {
	if l.Per <= 0 {
		return time.Second
	}
	return l.Per
}

// WithLimits makes the Server keep l (see Limits).
func WithLimits(l Limits) Option {
	return func(s *Server) { s.limits = l }
}

// Stats count the model requests a Server saw, each as it arrived, those
// it turned away included, so that a test asserts that its clients never
// went past a limit (PeakConcurrent ≤ MaxConcurrent, MaxInWindow ≤
// Requests) whether or not the server enforces it.
type Stats struct {
	// Requests counts the model requests that arrived.
	Requests int
	// RateLimited counts those answered 429 for a limit.
	RateLimited int
	// PeakConcurrent is the most requests in flight at once, each one
	// counted as it arrived: the requests being answered then, plus it.
	PeakConcurrent int
	// MaxInWindow is the most requests that arrived in any window of
	// Limits.Per (one second when unset).
	MaxInWindow int
}

// Throttle records one request the Server turned away for its limits.
type Throttle struct {
	// At is when the request arrived.
	At time.Time
	// RetryAfter is the wait the answer asked for.
	RetryAfter time.Duration
	// Limit is what was reached: "concurrent" or "requests".
	Limit string
}

// Stats returns the counts of the model requests seen so far.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Throttles returns the requests turned away for the Server's limits, in
// the order they arrived.
func (s *Server) Throttles() []Throttle {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Throttle(nil), s.throttles...)
}

// admit counts a model request arriving at now and decides whether the
// limits let it in. It returns the func that ends the request's count in
// flight (to call once answered), or the answer that turns it away and
// the headers to send with it.
func (s *Server) admit(now time.Time) (done func(), turned *apiError, header http.Header) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.limits.window()
	s.stats.Requests++
	s.stats.PeakConcurrent = max(s.stats.PeakConcurrent, s.running+1)
	s.arrived = append(dropBefore(s.arrived, now.Add(-w)), now)
	s.stats.MaxInWindow = max(s.stats.MaxInWindow, len(s.arrived))
	s.admitted = dropBefore(s.admitted, now.Add(-w))

	var wait time.Duration
	var what string
	switch l := s.limits; {
	case l.Requests > 0 && len(s.admitted) >= l.Requests:
		wait, what = s.admitted[len(s.admitted)-l.Requests].Add(w).Sub(now), "requests"
	case l.MaxConcurrent > 0 && s.running >= l.MaxConcurrent:
		wait, what = ConcurrencyRetryAfter, "concurrent"
	}
	if what != "" {
		wait = max(wait, time.Millisecond)
		s.stats.RateLimited++
		s.throttles = append(s.throttles, Throttle{At: now, RetryAfter: wait, Limit: what})
		return nil, rateLimited(s.limits, what, wait), rateLimitHeaders(s.limits, len(s.admitted), wait)
	}
	s.admitted = append(s.admitted, now)
	s.running++
	return func() {
		s.mu.Lock()
		s.running--
		s.mu.Unlock()
	}, nil, nil
}

// dropBefore drops the times before t from the front of ts, which is in
// order.
func dropBefore(ts []time.Time, t time.Time) []time.Time {
	i := 0
	for i < len(ts) && !ts[i].After(t) {
		i++
	}
	return ts[i:]
}

// rateLimited is the 429 answer past a limit, in OpenAI's words.
func rateLimited(l Limits, what string, wait time.Duration) *apiError {
	var msg string
	if what == "requests" {
		msg = fmt.Sprintf("Rate limit reached on requests per %s: Limit %d, Used %d, Requested 1. Please try again in %s.",
			l.window(), l.Requests, l.Requests, wait.Round(time.Millisecond))
	} else {
		msg = fmt.Sprintf("Rate limit reached on concurrent requests: Limit %d, Used %d, Requested 1. Please try again in %s.",
			l.MaxConcurrent, l.MaxConcurrent, wait.Round(time.Millisecond))
	}
	return &apiError{status: http.StatusTooManyRequests, typ: "requests", code: "rate_limit_exceeded", msg: msg}
}

func rateLimitHeaders(l Limits, used int, wait time.Duration) http.Header {
	h := http.Header{}
	h.Set("retry-after-ms", strconv.FormatInt(wait.Milliseconds(), 10))
	h.Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
	if l.Requests > 0 {
		h.Set("x-ratelimit-limit-requests", strconv.Itoa(l.Requests))
		h.Set("x-ratelimit-remaining-requests", strconv.Itoa(max(l.Requests-used, 0)))
		h.Set("x-ratelimit-reset-requests", wait.Round(time.Millisecond).String())
	}
	return h
}

// endingWriter carries the func that ends a request's count in flight to
// the writes of its answer, which call it (ending) before the last piece.
type endingWriter struct {
	http.ResponseWriter
	end func()
}

// Flush passes a flush on, so streams stay streamed.
func (w *endingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// ending ends the count in flight of the request w answers, before its
// last piece is written.
func ending(w http.ResponseWriter) {
	if ew, ok := w.(*endingWriter); ok {
		ew.end()
	}
}
