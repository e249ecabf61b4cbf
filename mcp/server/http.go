package server

// This file serves the MCP streamable HTTP transport at /mcp: go-sdk's
// handler behind DNS-rebinding protection and an optional bearer token,
// with the request ids of tools/call stamped into _meta and the calls of a
// deleted session released before go-sdk closes it.

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Path is where HTTPHandler serves MCP; other paths are 404.
const Path = "/mcp"

// HTTPOptions configures HTTPHandler.
type HTTPOptions struct {
	// Stateless serves every request with a fresh session: no
	// Mcp-Session-Id, no server-to-client stream outside a request. A
	// client's notifications/cancelled then arrives with no session to
	// find its call by and cancels nothing, and only an idempotency key
	// makes a retried call join its first run.
	Stateless bool
	// Token, when set, is the bearer token every request must carry
	// ("Authorization: Bearer TOKEN"); other requests get 401 with a
	// WWW-Authenticate challenge. It is compared in constant time.
	Token string
}

// HTTPHandler returns the streamable HTTP transport of the server, at
// Path. Requests that arrive on a loopback address with a Host that is
// not loopback are refused (403), against DNS rebinding.
func (s *Server) HTTPHandler(opts HTTPOptions) http.Handler {
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.sdk },
		&mcp.StreamableHTTPOptions{Stateless: opts.Stateless, Logger: s.log})
	var h http.Handler = &stamping{next: sdk, server: s, stateless: opts.Stateless}
	// go-sdk checks the Host too, but after stamping has acted on the
	// request (a DELETE releases calls): check it first.
	h = loopbackHost(h)
	if opts.Token != "" {
		h = bearer(opts.Token, h)
	}
	mux := http.NewServeMux()
	mux.Handle(Path, h)
	return mux
}

// stamping copies tools/call request ids into _meta (stateful mode: in
// stateless mode they scope nothing), and releases a session's calls when
// the client deletes it: go-sdk's Close waits for the calls in flight,
// which would otherwise wait for their runs. The release comes before
// go-sdk's handler runs (after it would be too late), so it happens only
// for a session that exists; the Host was checked before (loopbackHost).
//
// go-sdk holds a request (see held) while it serves the POST that carried
// it. (When the client drops that POST, go-sdk may hold the request
// longer; its cancellation then reaches interceptCancel only, which still
// cancels the run of a tools/call.)
type stamping struct {
	next      http.Handler
	server    *Server
	stateless bool
	held      held
}

func (h *stamping) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.stateless {
		h.next.ServeHTTP(w, r)
		return
	}
	switch r.Method {
	case http.MethodDelete:
		if id := r.Header.Get("Mcp-Session-Id"); id != "" && h.server.hasSession(id) {
			h.server.calls.releaseSession(id, errDisconnected)
		}
	case http.MethodPost:
		if r.Body == nil {
			break
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, mcp.DefaultMaxRequestBodyBytes))
		r.Body.Close()
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				http.Error(w, fmt.Sprintf("request body exceeds %d bytes", tooBig.Limit), http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "failed to read body", http.StatusBadRequest)
			return
		}
		session := r.Header.Get("Mcp-Session-Id")
		var requests []string
		body, requests = stampBody(body, func(stamp string) bool { return h.held.has(callKey{session, stamp}) })
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		if session != "" {
			for _, req := range requests {
				h.held.hold(callKey{session, req})
			}
			defer func() {
				for _, req := range requests {
					h.held.release(callKey{session, req})
				}
			}()
		}
	}
	h.next.ServeHTTP(w, r)
}

// hasSession reports whether go-sdk has a session with id.
func (s *Server) hasSession(id string) bool {
	for ss := range s.sdk.Sessions() {
		if ss.ID() == id {
			return true
		}
	}
	return false
}

// loopbackHost refuses (403) requests that arrive on a loopback address
// with a Host that is not loopback: a page of another origin reaching a
// local server by DNS rebinding. It is go-sdk's check, made before ours.
func loopbackHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && local != nil &&
			isLoopback(local.String()) && !isLoopback(r.Host) {
			http.Error(w, fmt.Sprintf("Forbidden: invalid Host header %q", r.Host), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// isLoopback reports whether a host, or host:port, is localhost or a
// loopback IP.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// bearer lets requests with the token through and answers the others 401.
func bearer(token string, next http.Handler) http.Handler {
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, got, found := strings.Cut(r.Header.Get("Authorization"), " ")
		sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
		// Hashes have one length, so the comparison's time says nothing
		// about the token's.
		if !found || !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			challenge := `Bearer realm="troupe"`
			if found {
				challenge += `, error="invalid_token"`
			}
			w.Header().Set("WWW-Authenticate", challenge)
			http.Error(w, "401 unauthorized: this MCP server wants Authorization: Bearer <token>", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
