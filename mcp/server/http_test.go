package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/examples/dealdesk"
)

// httpSession speaks streamable HTTP to a test server by hand.
type httpSession struct {
	t       *testing.T
	url, id string
}

func openHTTPSession(t *testing.T, url string) *httpSession {
	t.Helper()
	s := &httpSession{t: t, url: url}
	resp, _ := s.send(http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`, nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, resp.Header.Get("Mcp-Session-Id"))
	}
	s.id = resp.Header.Get("Mcp-Session-Id")
	if resp, _ := s.send(http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %d", resp.StatusCode)
	}
	return s
}

// send sends a request of the session and returns the response with its
// body (the data of an event stream, or the JSON), read to the end.
func (s *httpSession) send(method, body string, edit func(*http.Request)) (*http.Response, []byte) {
	s.t.Helper()
	req, err := http.NewRequest(method, s.url, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s.id != "" {
		req.Header.Set("Mcp-Session-Id", s.id)
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	}
	if edit != nil {
		edit(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp, raw
	}
	var data bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			data.WriteString(d)
		}
	}
	return resp, data.Bytes()
}

// TestHTTPBigRequestIDs: over HTTP, JSON-RPC ids that a float64 cannot
// tell apart are two requests: cancelling 2^53+1 cancels neither 2^53 nor
// another request.
func TestHTTPBigRequestIDs(t *testing.T) {
	s, f := newFakeServer(t, nil, dealdesk.Graph())
	srv := httptest.NewServer(s.HTTPHandler(HTTPOptions{}))
	defer srv.Close()
	sess := openHTTPSession(t, srv.URL+Path)
	call := func(id string) string {
		_, body := sess.send(http.MethodPost, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"dealdesk_coordinator","arguments":{"input":"deal `+id+`"}}}`, nil)
		var resp struct {
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal(body, &resp); err != nil || resp.Result == nil {
			t.Fatalf("tools/call %s: %s (%v)", id, body, err)
		}
		text, _ := resultText(t, resp.Result)
		return text
	}
	if resp, _ := sess.send(http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9007199254740993}}`, nil); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/cancelled: %d", resp.StatusCode)
	}
	if text := call("9007199254740992"); strings.Contains(text, "cancelled") || len(f.started()) != 1 {
		t.Errorf("request 2^53 answered %q, starts %v: want its run started", text, f.started())
	}
	if text := call("9007199254740993"); !strings.Contains(text, "no run was started") || len(f.started()) != 1 {
		t.Errorf("request 2^53+1 answered %q, starts %v: want it cancelled", text, f.started())
	}
}

// TestHTTPDeleteReleases: a DELETE releases the calls of its session only
// when go-sdk will close that session: not for a Host of another origin
// (DNS rebinding), nor for a session go-sdk does not know.
func TestHTTPDeleteReleases(t *testing.T) {
	s, _ := newFakeServer(t, nil, dealdesk.Graph())
	srv := httptest.NewServer(s.HTTPHandler(HTTPOptions{}))
	defer srv.Close()
	sess := openHTTPSession(t, srv.URL+Path)
	cl, waiting := s.calls.add(context.Background(), callKey{sess.id, "n:2"})
	defer s.calls.remove(cl, false)
	stranger := &httpSession{t: t, url: sess.url, id: "not-a-session"}
	clStranger, waitingStranger := s.calls.add(context.Background(), callKey{stranger.id, "n:2"})
	defer s.calls.remove(clStranger, false)

	tests := []struct {
		name     string
		s        *httpSession
		edit     func(*http.Request)
		status   int
		released bool
	}{
		{"Host of another origin", sess, func(r *http.Request) { r.Host = "evil.example" }, http.StatusForbidden, false},
		{"unknown session", stranger, nil, http.StatusNotFound, false},
		{"the session", sess, nil, http.StatusNoContent, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if resp, _ := tc.s.send(http.MethodDelete, "", tc.edit); resp.StatusCode != tc.status {
				t.Errorf("DELETE: %d, want %d", resp.StatusCode, tc.status)
			}
			if released := waiting.Err() != nil || waitingStranger.Err() != nil; released != tc.released {
				t.Errorf("calls released = %v, want %v", released, tc.released)
			}
		})
	}
}
